"""SignDS (MindSpore Federated's sign-based dimension selection), on fl-signds.

A client turns its model update into a small report (the positions of a few important
coordinates, a random sign, one randomized-response bit about the update's magnitude);
the server aggregates the reports of a round into a step on the global weights and adapts
its step size::

    import numpy as np
    from fl_privacy import signds

    d = 1000
    client = signds.Client(d, top_k_fraction=0.2, epsilon=10.0)
    server = signds.Server(d, expected_clients=2, top_k_fraction=0.2, epsilon=10.0)
    round_ = server.begin_round()
    for update in np.random.default_rng(0).normal(size=(2, d)).astype(np.float32):
        report = client.encode(update, server.broadcast())
        round_.ingest(report.data, weight=100)
    weights = np.zeros(d, dtype=np.float32)
    summary = server.finish_round(round_, weights)      # weights updated in place

Parameters are upstream's YAML keys (``sign_k`` = ``top_k_fraction``, ``sign_eps`` =
``epsilon``, ``sign_thr_ratio`` = ``threshold_ratio``, ``sign_global_lr`` =
``global_learning_rate``, ``sign_dim_out`` = ``output_dimension``), validated with
upstream's domains; ``profile="mindspore"`` reproduces MindSpore's numbers.
"""

from typing import List, NamedTuple

import numpy as np

from fl_privacy import _checks, _native
from fl_privacy.ldp import _rng

__all__ = ["Broadcast", "Client", "ClientReport", "Round", "RoundSummary", "Server", "decode_report"]


class Broadcast(NamedTuple):
    """What the server sends each client before a round."""

    r_est: float = 1e-5
    phase: str = "growth"


class ClientReport(NamedTuple):
    """One client's report and the privacy it spent."""

    #: The report's wire bytes (what is uploaded).
    data: bytes
    #: The selected dimensions, sorted.
    indices: np.ndarray
    #: The random sign, +1 or -1.
    sign: int
    #: The MagRR bit.
    magrr_bit: bool
    #: ε + ε_RR: the report is (ε + ε_RR)-LDP for any two updates.
    epsilon: float
    #: ε of the dimension selection.
    selection_epsilon: float
    #: ε_RR of the MagRR bit.
    magrr_epsilon: float
    #: Non-fatal conditions (e.g. k·d <= 50).
    warnings: List[str]


class RoundSummary(NamedTuple):
    """What :meth:`Server.finish_round` did."""

    accepted: int
    total_weight: int
    step: float
    ones: int
    zeros: int
    transition: str
    next: Broadcast


def _params(kwargs):
    allowed = {"top_k_fraction", "epsilon", "threshold_ratio", "global_learning_rate",
               "output_dimension", "magrr_epsilon", "profile"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise TypeError("unknown SignDS parameters: %s (allowed: %s)" % (sorted(unknown), sorted(allowed)))
    return (
        _checks.optional_real("top_k_fraction", kwargs.get("top_k_fraction")),
        _checks.optional_real("epsilon", kwargs.get("epsilon")),
        _checks.optional_real("threshold_ratio", kwargs.get("threshold_ratio")),
        _checks.optional_real("global_learning_rate", kwargs.get("global_learning_rate")),
        _checks.optional_integer("output_dimension", kwargs.get("output_dimension"), 0, 2**32 - 1),
        _checks.optional_real("magrr_epsilon", kwargs.get("magrr_epsilon")),
        _checks.string("profile", kwargs.get("profile", "exact")),
    )


class Client:
    """A SignDS client for updates of ``dimension`` coordinates (keyword parameters as the
    module docs list; omitted ones keep upstream's defaults)."""

    def __init__(self, dimension, **params):
        self._native = _native.NativeSigndsClient(
            _checks.integer("dimension", dimension, 0, _checks.U64_MAX), _params(params)
        )

    @property
    def law(self):
        """(d, K = top-k count, h = output dimension, ν_th = threshold)."""
        return self._native.law()

    @property
    def privacy(self):
        """(selection ε, MagRR ε_RR) that every report of this client costs: realised values,
        each at most the requested one (docs/proofs/fl-signds/magrr.md: one report is
        (ε + ε_RR)-LDP for any two updates)."""
        return self._native.privacy()

    def encode(self, update, broadcast=Broadcast(), rng=None, feedback=None):
        """The report of one update (float32 array of the client's dimension).

        ``feedback``: None, or the client's error-feedback state, a writable 1-D float32
        numpy array of the client's dimension (start with zeros; keep it on the client for
        the whole run, it is private): the report is then made from update + state and the
        state keeps what the report did not credit (fl-signds' ``Client::encode_with_feedback``,
        the default of :class:`~fl_privacy.flower.SignDSMod`). Same privacy per report as
        without: ε + ε_RR for any two inputs. Updated in place only on success."""
        array = np.ascontiguousarray(np.asarray(update, dtype=np.float32).reshape(-1))
        if not isinstance(broadcast, Broadcast):
            broadcast = Broadcast(*broadcast)
        if feedback is not None:
            if not isinstance(feedback, np.ndarray) or feedback.dtype != np.float32 \
                    or feedback.ndim != 1 or not feedback.flags.c_contiguous \
                    or not feedback.flags.writeable:
                raise TypeError("feedback must be None or a writable, contiguous 1-D float32 "
                                "numpy array (the error-feedback state, updated in place)")
            if feedback.size != self.law[0]:
                raise ValueError("feedback has %d values; the client's dimension is %d"
                                 % (feedback.size, self.law[0]))
        data, indices, sign, bit, eps, eps_rr, warnings = self._native.encode(
            array, _checks.real("broadcast.r_est", broadcast.r_est),
            _checks.string("broadcast.phase", broadcast.phase), _rng(rng), feedback
        )
        return ClientReport(bytes(data), np.asarray(indices, dtype=np.int64), sign, bit,
                            eps + eps_rr, eps, eps_rr, warnings)


class Round:
    """The validated reports of one round (from :meth:`Server.begin_round`)."""

    def __init__(self, native):
        self._native = native

    def ingest(self, report, weight):
        """Validate and add a report (its bytes, or a :class:`ClientReport`) with the
        client's training-set size ``weight`` >= 1. A malformed report raises ValueError and
        changes nothing."""
        data = report.data if isinstance(report, ClientReport) else bytes(report)
        self._native.ingest(data, _checks.integer("weight", weight, 0, _checks.U64_MAX))

    @property
    def accepted(self):
        return self._native.accepted()

    @property
    def total_weight(self):
        return self._native.total_weight()


class Server:
    """The SignDS server of a model of ``dimension`` weights, expecting
    ``expected_clients`` reports per round.

    ``step_rule``: None (the profile's: "mean" for the default exact profile, "code" for
    ``profile="mindspore"``), "mean" (g = η·r_est with η = ``server_learning_rate``, default
    4; a round with too few MagRR bits leaves r_est unchanged), "code" (g = 3·N_exp·r_est,
    upstream's code, with its low-participation fallback) or "docs" (2·N_exp·r_est)."""

    def __init__(self, dimension, expected_clients, step_rule=None, server_learning_rate=None,
                 **params):
        self._native = _native.NativeSigndsServer(
            _checks.integer("dimension", dimension, 0, _checks.U64_MAX),
            _checks.real("expected_clients", expected_clients),
            None if step_rule is None else _checks.string("step_rule", step_rule),
            _checks.optional_real("server_learning_rate", server_learning_rate),
            _params(params)
        )

    @property
    def step_rule(self):
        """"mean", "code" or "docs"."""
        return self._native.step_rule()

    def broadcast(self):
        """What the next round's clients receive."""
        return Broadcast(*self._native.broadcast())

    @property
    def step(self):
        return self._native.step()

    def begin_round(self):
        return Round(self._native.begin_round())

    def finish_round(self, round_, weights):
        """Apply the round's aggregate to ``weights`` (a writable float32 array, updated in
        place) and advance the step-size state machine."""
        if not isinstance(weights, np.ndarray) or weights.dtype != np.float32 or weights.ndim != 1:
            raise TypeError("weights must be a 1-D float32 numpy array (updated in place)")
        accepted, total, step, ones, zeros, transition, r_est, phase = self._native.finish_round(
            round_._native, weights
        )
        return RoundSummary(accepted, total, step, ones, zeros, transition, Broadcast(r_est, phase))


def decode_report(data):
    """(dimension, indices, sign, MagRR bit) of a report's bytes; ValueError if malformed."""
    dimension, indices, sign, bit = _native.decode_signds_report(bytes(data))
    return dimension, np.asarray(indices, dtype=np.int64), sign, bit
