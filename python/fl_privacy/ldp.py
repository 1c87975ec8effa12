"""Local differential privacy over numpy arrays, on fl-ldp's exact mechanisms.

Every mechanism samples exactly from its law (exact coins, exact discrete Laplace, exact
categorical sampling: no floating-point inverse CDFs), over whole arrays at once, in
parallel with the GIL released, and every call returns a :class:`Release`: the output and
the privacy it actually gives, the **realised** ε (never above the request, except where a
compatibility option says so and reports it)::

    import numpy as np
    from fl_privacy import ldp

    rr = ldp.BinaryRandomizedResponse(epsilon=1.0)
    release = rr.randomize(np.random.default_rng(0).random(10**6) < 0.3)
    noisy, eps = release.output, release.epsilon      # eps <= 1.0

Randomness comes from the operating system (a fresh OS-seeded ChaCha20 per call). Tests,
audits and benchmarks may pass ``rng=SeededRng(seed)`` for reproducible draws: never use a
fixed seed to protect real data.
"""

from typing import NamedTuple, Optional

import numpy as np

from fl_privacy import _checks, _native

__all__ = [
    "BinaryRandomizedResponse",
    "EmbeddingDP",
    "ExponentialMechanism",
    "KaryRandomizedResponse",
    "LabelDP",
    "Laplace",
    "PrivacyClaim",
    "Release",
    "SeededRng",
]


class PrivacyClaim(NamedTuple):
    """What a mechanism guarantees: (epsilon, delta)-DP for ``neighbouring`` inputs."""

    #: The ε asked for.
    requested_epsilon: float
    #: The realised ε: an upper bound on the log-likelihood ratio of what is sampled.
    epsilon: float
    #: δ (0 for pure DP; positive only for the bounded-time Laplace sampler).
    delta: float
    #: What is protected (e.g. "any two inputs (local DP)").
    neighbouring: str


class Release(NamedTuple):
    """A mechanism's output and the privacy it gives."""

    #: The privatized array.
    output: np.ndarray
    #: The realised ε of this release (see :class:`PrivacyClaim`).
    epsilon: float
    #: The full claim.
    claim: PrivacyClaim


def _release(output, claim):
    claim = PrivacyClaim(*claim)
    return Release(output, claim.epsilon, claim)


class SeededRng:
    """A deterministic ChaCha20 stream for tests, audits and benchmarks.

    Each call that is given it draws a child stream from it, so successive calls differ
    and the same seed with the same calls gives the same outputs. **Never protect real data
    with a fixed seed**: without ``rng``, every call is seeded by the operating system.
    """

    def __init__(self, seed):
        self._native = _native.NativeSeededRng(_checks.integer("seed", seed, 0, _checks.U64_MAX))


def _rng(rng):
    if rng is None:
        return None
    if not isinstance(rng, SeededRng):
        raise TypeError("rng must be None (OS randomness) or a SeededRng, got %s" % type(rng))
    return rng._native


def _finite_number(name, value):
    """A number argument (int or float, not str or bool); the mechanisms reject NaN,
    infinities and out-of-range values with their own ValueError."""
    return _checks.real(name, value)


def _bits(bits):
    """A 0/1 array (bool or integer or float) as contiguous bools, and the input dtype."""
    array = np.asarray(bits)
    if array.dtype == np.bool_:
        return np.ascontiguousarray(array).reshape(-1), array
    if array.dtype.kind not in "biuf":
        raise TypeError("expected an array of bits (bool, or 0/1 numbers), got dtype %s" % array.dtype)
    bad = np.flatnonzero((array.reshape(-1) != 0) & (array.reshape(-1) != 1))
    if bad.size:
        raise ValueError(
            "bits must be 0 or 1: element %d (flat index) is %r" % (bad[0], array.reshape(-1)[bad[0]])
        )
    return np.ascontiguousarray(array.reshape(-1) != 0), array


class BinaryRandomizedResponse:
    """Binary randomized response: keep each bit with P = e^ε/(1 + e^ε), flip otherwise.

    ε-LDP for any two bits (realised ε ≤ ε: the flip probability is rounded up).
    """

    def __init__(self, epsilon):
        self._native = _native.NativeBinaryRr(_finite_number("epsilon", epsilon))

    @property
    def keep_probability(self):
        return self._native.keep_probability

    @property
    def flip_probability(self):
        return self._native.flip_probability

    @property
    def claim(self):
        return PrivacyClaim(*self._native.claim())

    def randomize(self, bits, rng=None):
        """Randomize every bit of an array of any shape; the output has its shape and dtype."""
        flat, array = _bits(bits)
        out = self._native.randomize(flat, _rng(rng)).reshape(array.shape)
        return _release(out.astype(array.dtype, copy=False), self._native.claim())

    def estimate_ones(self, reported_ones, total):
        """The de-biased number of true ones among ``total`` reports, and its variance."""
        return self._native.estimate_ones(
            _checks.integer("reported_ones", reported_ones, 0, _checks.U64_MAX),
            _checks.integer("total", total, 0, _checks.U64_MAX),
        )


class KaryRandomizedResponse:
    """k-ary randomized response over classes 0..k-1: keep with e^ε/(k-1+e^ε), each other
    class with 1/(k-1+e^ε). ε-LDP for any two classes."""

    def __init__(self, epsilon, k):
        self._native = _native.NativeKaryRr(
            _finite_number("epsilon", epsilon), _checks.integer("k", k, 0, _checks.U64_MAX)
        )

    @property
    def k(self):
        return self._native.categories

    @property
    def keep_probability(self):
        return self._native.keep_probability

    @property
    def other_probability(self):
        return self._native.other_probability

    @property
    def claim(self):
        return PrivacyClaim(*self._native.claim())

    def randomize(self, classes, rng=None):
        """Randomize an integer array of class indices (any shape)."""
        array = np.asarray(classes)
        if array.dtype.kind not in "iu":
            raise TypeError("classes must be integers in 0..k-1, got dtype %s" % array.dtype)
        if array.dtype.kind == "u" and array.size and array.max() > np.iinfo(np.int64).max:
            raise ValueError("classes must be integers in 0..k-1")
        flat = np.ascontiguousarray(array.reshape(-1), dtype=np.int64)
        out = self._native.randomize(flat, _rng(rng)).reshape(array.shape)
        return _release(out, self._native.claim())

    def randomize_one_hot(self, one_hot, rng=None):
        """Randomize a one-hot matrix of shape (n, k) (exactly one 1 per row)."""
        array = np.asarray(one_hot)
        if array.ndim != 2 or array.shape[1] != self.k:
            raise ValueError("expected a one-hot matrix of shape (n, %d), got %s" % (self.k, array.shape))
        flat = np.ascontiguousarray(array.reshape(-1), dtype=np.float64)
        out = self._native.randomize_one_hot(flat, _rng(rng)).reshape(array.shape)
        return _release(out.astype(array.dtype, copy=False), self._native.claim())


class EmbeddingDP:
    """MindSpore Federated's EmbeddingDP: quantise x > 0 to a bit, then randomized response
    at ε/2 per coordinate (P(1→1) = e^(ε/2)/(1+e^(ε/2)), P(0→1) = 1/(1+e^(ε/2))).

    ``epsilon=None`` quantises only (no privacy: the claim's ε is infinite). A release of an
    array of shape (..., D) reports the per-vector claim D·ε/2 for one embedding of
    dimension D (a row); ``coordinate_claim`` gives ε/2.
    """

    def __init__(self, epsilon=None):
        self._native = _native.NativeEmbeddingDp(
            None if epsilon is None else _finite_number("epsilon", epsilon)
        )

    @property
    def one_to_one_probability(self):
        return self._native.one_to_one_probability

    @property
    def zero_to_one_probability(self):
        return self._native.zero_to_one_probability

    @property
    def coordinate_claim(self):
        return PrivacyClaim(*self._native.claim())

    def vector_claim(self, dimension):
        return PrivacyClaim(
            *self._native.vector_claim(_checks.integer("dimension", dimension, 0, _checks.U64_MAX))
        )

    def privatize(self, embedding, rng=None):
        """0/1 bits (uint8) of the embedding's shape; NaN is an error."""
        array = np.asarray(embedding)
        if array.dtype.kind not in "biuf":
            raise TypeError("expected a float array, got dtype %s" % array.dtype)
        dtype = np.float32 if array.dtype == np.float32 else np.float64
        flat = np.ascontiguousarray(array.reshape(-1), dtype=dtype)
        out = self._native.privatize(flat, _rng(rng)).reshape(array.shape)
        dimension = array.shape[-1] if array.ndim else 1
        return _release(out, self._native.vector_claim(dimension))


class LabelDP:
    """MindSpore Federated's LabelDP: binary labels of shape (n,) or (n, 1) flip with
    1/(1+e^ε); one-hot labels of shape (n, k ≥ 2) go through k-ary randomized response.
    ε-label-DP. The output has the input's shape and dtype."""

    def __init__(self, epsilon):
        self._native = _native.NativeLabelDp(_finite_number("epsilon", epsilon))

    @property
    def flip_probability(self):
        return self._native.flip_probability

    def claim(self, shape):
        """The label-DP claim for labels of ``shape`` ((n,), (n, 1) or (n, k))."""
        shape = [_checks.integer("shape[%d]" % i, d, 0, _checks.U64_MAX)
                 for i, d in enumerate(shape)]
        return PrivacyClaim(*self._native.claim(shape))

    def privatize(self, labels, rng=None):
        array = np.asarray(labels)
        if array.dtype.kind not in "biuf":
            raise TypeError("labels must be numbers (0/1), got dtype %s" % array.dtype)
        flat = np.ascontiguousarray(array.reshape(-1), dtype=np.float64)
        shape = list(array.shape)
        out = self._native.privatize(flat, shape, _rng(rng)).reshape(array.shape)
        return _release(out.astype(array.dtype, copy=False), self._native.claim(shape))


class Laplace:
    """The Laplace mechanism on probability vectors (MindSpore's inference-result noise),
    with exact discrete Laplace noise on a lattice: ε-LDP per vector with the default
    ``calibration="simplex"`` (Δ = 2(1 + tolerance)); ``"mindspore"`` uses upstream's scale
    and reports the 2ε it realises; ``timing="bounded"`` samples in input-independent time
    for an (ε, δ) claim."""

    def __init__(self, epsilon, dimension, calibration="simplex", tolerance=1e-4,
                 granularity_exponent=None, timing="exact"):
        self._native = _native.NativeLaplace(
            _finite_number("epsilon", epsilon),
            _checks.integer("dimension", dimension, 0, _checks.U64_MAX),
            _checks.string("calibration", calibration),
            _finite_number("tolerance", tolerance),
            _checks.optional_integer("granularity_exponent", granularity_exponent,
                                     -(2**31), 2**31 - 1),
            _checks.string("timing", timing),
        )

    @property
    def dimension(self):
        return self._native.dimension

    @property
    def noise_scale(self):
        return self._native.noise_scale

    @property
    def spacing(self):
        return self._native.spacing

    @property
    def claim(self):
        return PrivacyClaim(*self._native.claim())

    def privatize(self, probabilities, rng=None):
        """Noisy vectors for an array of shape (dimension,) or (n, dimension)."""
        array = np.asarray(probabilities, dtype=np.float64)
        if array.ndim not in (1, 2) or array.shape[-1] != self.dimension:
            raise ValueError(
                "expected shape (%d,) or (n, %d), got %s" % (self.dimension, self.dimension, array.shape)
            )
        flat = np.ascontiguousarray(array.reshape(-1))
        out = self._native.privatize(flat, _rng(rng)).reshape(array.shape)
        return _release(out, self._native.claim())


class ExponentialMechanism:
    """The exponential mechanism over candidates with utilities u: P(i) ∝ exp(ε·u_i/(2Δu))
    (``form="standard"``) or exp(ε·u_i/Δu) (``"monotone"``), sampled exactly. ε-DP for
    utility vectors within Δu (``sensitivity``) of each other."""

    def __init__(self, epsilon, sensitivity, form="standard"):
        self._native = _native.NativeExponential(
            _finite_number("epsilon", epsilon), _finite_number("sensitivity", sensitivity),
            _checks.string("form", form),
        )

    @property
    def claim(self):
        return PrivacyClaim(*self._native.claim())

    def probabilities(self, utilities):
        """The exact selection probabilities."""
        return np.asarray(self._native.probabilities(_utilities(utilities, 1)))

    def select(self, utilities, rng=None):
        """One index per row: utilities of shape (m,) give one index, (n, m) give n."""
        array = np.asarray(utilities, dtype=np.float64)
        if array.ndim not in (1, 2):
            raise ValueError("utilities must have shape (m,) or (n, m), got %s" % (array.shape,))
        flat = np.ascontiguousarray(array.reshape(-1))
        out = self._native.select_rows(flat, array.shape[-1], _rng(rng))
        return _release(out[0] if array.ndim == 1 else out, self._native.claim())

    def sample(self, utilities, size, rng=None):
        """``size`` independent selections over the same utilities (an int64 array)."""
        size = _checks.integer("size", size, 0, _checks.U64_MAX)
        out = self._native.sample(_utilities(utilities, 1), size, _rng(rng))
        return _release(out, self._native.claim())


def _utilities(utilities, ndim):
    array = np.asarray(utilities, dtype=np.float64)
    if array.ndim != ndim:
        raise ValueError("utilities must be a 1-D array, got shape %s" % (array.shape,))
    return np.ascontiguousarray(array)
