"""Laplace-protected inference results on Flower (MindSpore Federated's "LDP on inference
results"): :class:`LaplaceEvalMod` on the ClientApp, :func:`clustering_metrics` on the
ServerApp.

The wrapped ClientApp's evaluate function returns, in its MetricRecord, one probability
vector (``key``, default ``"probabilities"``: e.g. the mean of the model's softmax outputs
over the client's evaluation samples, as upstream's client sends). The mod replaces it by
fl-ldp's exact lattice Laplace release of it (``fl_privacy.ldp.Laplace``) before the reply
leaves, and drops everything else the app returned except the example count and the
metrics named in ``forward_metrics``. It fails closed: a missing vector is an error reply
with a fixed text, and a vector whose values are invalid (negative, NaN, a sum above
1 + τ) is replaced by the uniform vector before the release (a refusal there would tell
the server, one bit per message, that the data made the values invalid); the reason, which
may quote the vector, stays in the client's log — never an upload of raw data (upstream uploads the raw vector when its checks
fail). Other messages (train, query) are answered only through an inner fl_privacy mod
(SignDSMod) or where the user named their category in ``allow_unprotected``.

The server labels each noisy vector by its argmax and computes the Calinski–Harabasz and
mean silhouette scores of that clustering with fl-stats (``fl_stats::cluster``, the same
scores as scikit-learn's), as MindSpore's server does.

Privacy (docs/proofs/fl-ldp/laplace-lattice.md): with the default ``calibration="simplex"``
one released vector is ε_r-LDP for any two probability vectors (non-negative, sum ≤ 1 + τ,
so L1 sensitivity Δ = 2(1 + τ)), ε_r ≤ ε the realised value that fl-ldp reports and the
mod sends as ``laplace-epsilon``. ``calibration="mindspore"`` uses upstream's scale
b ≈ 1/ε, which is 2ε-LDP (upstream assumed Δ = 1); the reported ε is then 2ε. One vector per
client and evaluation round; rounds compose.
"""

from logging import WARNING

import numpy as np
from flwr.app import Message, MessageType, MetricRecord, RecordDict

from fl_privacy import _native
from fl_privacy import ldp as _ldp
from fl_privacy.flower._records import (
    REFUSED_APP,
    REFUSED_LEGACY,
    LEGACY_API,
    call_app,
    check_categories,
    client_weight,
    describe,
    guard,
    is_legacy,
    local_log,
    message_category,
    protected,
    refuse,
    single_record,
)

__all__ = ["METRIC_EPSILON", "LaplaceEvalMod", "cluster_scores", "clustering_metrics"]

#: The reply metric holding the realised ε of the released vector.
METRIC_EPSILON = "laplace-epsilon"


class LaplaceEvalMod:
    """A ClientApp mod that privatises the evaluate reply's probability vector.

    ``epsilon``, ``calibration``, ``tolerance`` and ``timing`` are fl_privacy.ldp.Laplace's
    (they are checked here, before any round). ``allow_unprotected``: message categories
    ("train", "query") whose replies the app may send as they are where no inner fl_privacy
    mod protects them (outside the privacy claim; default none: refused). ``rng`` as in
    SignDSMod: None (OS randomness) for real data; a SeededRng or callable(context) for tests.
    """

    def __init__(self, epsilon, *, key="probabilities", calibration="simplex", tolerance=1e-4,
                 timing="exact", forward_metrics=(), weighted_by_key="num-examples",
                 allow_unprotected=(), rng=None):
        self._options = dict(epsilon=epsilon, calibration=calibration, tolerance=tolerance,
                             timing=timing)
        # Validates ε, calibration, tolerance and timing now (ValueError naming the value).
        try:
            _ldp.Laplace(dimension=2, **self._options)
        except (TypeError, ValueError) as e:
            raise type(e)("LaplaceEvalMod: %s" % e) from None
        if rng is not None and not (isinstance(rng, _ldp.SeededRng) or callable(rng)):
            raise TypeError("LaplaceEvalMod: rng must be None, a SeededRng or a "
                            "callable(context) -> SeededRng")
        if not isinstance(key, str) or not isinstance(weighted_by_key, str):
            raise TypeError("LaplaceEvalMod: key and weighted_by_key must be str")
        if isinstance(forward_metrics, str) or not all(isinstance(m, str) for m in forward_metrics):
            raise TypeError("LaplaceEvalMod: forward_metrics must be a list of metric names (str)")
        self._key = key
        self._forward = tuple(forward_metrics)
        self._weight_key = weighted_by_key
        self._allow = check_categories("LaplaceEvalMod: allow_unprotected", allow_unprotected)
        self._rng = rng
        self._mechanisms = {}

    def _mechanism(self, dimension):
        if dimension not in self._mechanisms:
            self._mechanisms[dimension] = _ldp.Laplace(dimension=dimension, **self._options)
        return self._mechanisms[dimension]

    def __call__(self, msg, ctxt, call_next):
        if message_category(msg) != MessageType.EVALUATE:
            return guard(msg, ctxt, call_next, "LaplaceEvalMod", self._allow)
        if is_legacy(msg):
            return refuse(msg, REFUSED_LEGACY, "LaplaceEvalMod received a legacy evaluate "
                          "message: %s" % LEGACY_API)
        out, refusal = call_app(msg, ctxt, call_next, "LaplaceEvalMod")
        if refusal is not None:
            return refusal
        try:
            _, metrics = single_record(out.content, MetricRecord, "the ClientApp's evaluate reply")
            if self._key not in metrics:
                raise ValueError("the evaluate reply's MetricRecord has no %r (the probability "
                                 "vector to release)" % self._key)
            raw = metrics[self._key]
            if not isinstance(raw, list) or not raw:
                raise ValueError("%r must be a non-empty list of numbers" % self._key)
            reply = {}
            for name in self._forward:
                if name not in metrics:
                    raise ValueError("forward_metrics names %r, which the reply lacks" % name)
                reply[name] = metrics[name]
            if self._weight_key in metrics:
                reply[self._weight_key] = client_weight(metrics, self._weight_key)
            mechanism = self._mechanism(len(raw))
            rng = self._rng if self._rng is None or isinstance(self._rng, _ldp.SeededRng) else self._rng(ctxt)
        except Exception as e:  # noqa: BLE001 - no exception text may carry local data out
            return refuse(msg, REFUSED_APP, "LaplaceEvalMod: %s" % describe(e))
        try:
            release = mechanism.privatize(np.asarray(raw, dtype=np.float64), rng=rng)
        except Exception as e:  # noqa: BLE001
            # Values the data made invalid (negative, NaN, a sum above 1 + τ): refusing would
            # tell the server so, a bit per message it chooses. The release of the uniform
            # vector instead is as private as any release (ε for any two vectors).
            local_log(WARNING, "LaplaceEvalMod: %s; releasing the uniform vector instead"
                % describe(e))
            try:
                release = mechanism.privatize(np.full(len(raw), 1.0 / len(raw)), rng=rng)
            except Exception as e2:  # noqa: BLE001
                return refuse(msg, REFUSED_APP, "LaplaceEvalMod: %s" % describe(e2))
        reply[self._key] = [float(v) for v in release.output]
        reply[METRIC_EPSILON] = float(release.epsilon)
        return protected(Message(RecordDict({"metrics": MetricRecord(reply)}), reply_to=msg))


def cluster_scores(points):
    """(argmax labels, Calinski–Harabasz, silhouette) of an (n, k) array of points, by
    fl-stats. ValueError when fewer than 2 or more than n − 1 distinct labels occur, or a
    point is not finite."""
    array = np.asarray(points, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError("points must have shape (n, k), got %s" % (array.shape,))
    labels, ch, silhouette = _native.cluster_scores(np.ascontiguousarray(array.reshape(-1)),
                                                    array.shape[1])
    return np.asarray(labels, dtype=np.int64), ch, silhouette


def clustering_metrics(key="probabilities"):
    """An ``evaluate_metrics_aggr_fn`` for Flower strategies (FedAvg, SignDSStrategy): the
    clustering scores of the clients' noisy vectors (``calinski-harabasz``,
    ``silhouette``), the number of clients and of distinct labels, and the largest
    ``laplace-epsilon`` a client reported. When the labels do not form 2 to n − 1 clusters
    the scores are left out (they are undefined) and ``clusters`` says why."""

    def aggregate(records, weighted_by_key):
        points, eps = [], []
        for content in records:
            _, metrics = single_record(content, MetricRecord, "an evaluate reply")
            points.append(np.asarray(metrics[key], dtype=np.float64))
            if METRIC_EPSILON in metrics:
                eps.append(float(metrics[METRIC_EPSILON]))
        dims = {p.size for p in points}
        if len(dims) != 1:
            raise ValueError("the clients' %r vectors have different lengths %s" % (key, sorted(dims)))
        matrix = np.vstack(points)
        labels = np.argmax(matrix, axis=1)
        out = {"clients": len(points), "clusters": int(np.unique(labels).size)}
        if eps:
            out[METRIC_EPSILON] = max(eps)
        if 2 <= out["clusters"] <= len(points) - 1:
            _, ch, silhouette = cluster_scores(matrix)
            out["calinski-harabasz"] = float(ch)
            out["silhouette"] = float(silhouette)
        return MetricRecord(out)

    return aggregate
