"""SignDS on Flower: :class:`SignDSStrategy` (ServerApp) and :class:`SignDSMod` (ClientApp).

The client mod wraps any ClientApp whose train function returns the locally trained model
as an ArrayRecord of numpy arrays. It turns the update (trained − received weights,
flattened in the ArrayRecord's key order) into one fl-signds report and replies with **only**
the report's wire bytes (fl-signds' versioned wire format, ``Report::encode`` in Rust) and
the client's example count n_i — the weights, and every other metric the wrapped app
returned, are dropped unless ``forward_metrics`` names them. The reply's metrics carry the
privacy the report spent this round and the client's running total.

The strategy is Flower's FedAvg with SignDS aggregation: it broadcasts fl-signds' step-size
state (r_est, phase) in the train config, validates every report with fl-signds' server
(a malformed or mismatched report is rejected and counted, never applied), applies
w' = w + g·Σ n_i s_i 1[j ∈ J_i]/Σ n_i and moves the r_est state machine.

Privacy (docs/proofs/fl-signds/selection.md and magrr.md): one report is
(ε + ε_RR)-LDP for any two updates of the reporting client in that round, with the
*realised* ε and ε_RR that fl-signds computes (each at most the requested value). Across
rounds basic composition applies: after T reports a client has spent T·(ε + ε_RR), the
running total in the metrics. Not covered: n_i (sent in the clear, as upstream's SignDS
does), any metric listed in ``forward_metrics``, and the fact of participating.
"""

from logging import INFO, WARNING

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, MessageType, MetricRecord, RecordDict
from flwr.common import log
from flwr.serverapp.strategy import FedAvg

from fl_privacy import ldp as _ldp
from fl_privacy import signds as _signds
from fl_privacy.flower._records import (
    client_weight,
    error_reply,
    flatten,
    message_category,
    same_layout,
    single_record,
    unflatten,
)

__all__ = [
    "CONFIG_DIMENSION",
    "CONFIG_OUTPUT_DIMENSION",
    "CONFIG_PHASE",
    "CONFIG_R_EST",
    "METRIC_EPSILON",
    "METRIC_EPSILON_TOTAL",
    "METRIC_REPORT_BYTES",
    "REPORT_KEY",
    "REPORT_RECORD",
    "SignDSMod",
    "SignDSStrategy",
]

#: Train-config keys the strategy sends: fl-signds' broadcast and the law's d and h.
CONFIG_R_EST = "signds-r-est"
CONFIG_PHASE = "signds-phase"
CONFIG_DIMENSION = "signds-dimension"
CONFIG_OUTPUT_DIMENSION = "signds-output-dimension"
#: The reply's ConfigRecord name and the key of the report's wire bytes in it.
REPORT_RECORD = "signds"
REPORT_KEY = "report"
#: Reply metrics: ε + ε_RR of this round's report, the client's running total, report size.
METRIC_EPSILON = "signds-epsilon"
METRIC_EPSILON_TOTAL = "signds-epsilon-total"
METRIC_REPORT_BYTES = "signds-report-bytes"
#: Where the mod keeps its running total in the ClientApp's Context.state.
STATE_RECORD = "fl-privacy-signds"

#: The keyword parameters that fix a client's law (fl_privacy.signds' names).
_LAW_PARAMS = ("top_k_fraction", "epsilon", "threshold_ratio", "output_dimension",
               "magrr_epsilon", "profile")


def _check_params(params, allowed, who):
    unknown = set(params) - set(allowed)
    if unknown:
        raise TypeError("%s: unknown SignDS parameters %s (allowed: %s)"
                        % (who, sorted(unknown), sorted(allowed)))


class SignDSMod:
    """A ClientApp mod that uploads a SignDS report instead of the trained model.

    Keyword parameters are fl_privacy.signds.Client's (``top_k_fraction``, ``epsilon``,
    ``threshold_ratio``, ``output_dimension``, ``magrr_epsilon``, ``profile``; omitted ones
    keep upstream's defaults): the client decides what it spends; the mod refuses to
    answer (error reply) when the server's law (d, h) differs from its own.

    ``epsilon_budget``: when set, the mod refuses a round whose report would take the
    running total above it. ``forward_metrics``: names of the wrapped app's metrics to
    send along (outside the privacy claim); by default only ``num-examples`` is sent.
    ``rng``: None (OS randomness, the only choice for real data), an
    ``fl_privacy.ldp.SeededRng``, or a callable ``rng(context)`` returning one (seeded
    experiments and tests only).
    """

    def __init__(self, *, epsilon_budget=None, forward_metrics=(), weighted_by_key="num-examples",
                 rng=None, **params):
        _check_params(params, _LAW_PARAMS, "SignDSMod")
        if epsilon_budget is not None:
            epsilon_budget = float(epsilon_budget)
            if not epsilon_budget > 0 or not np.isfinite(epsilon_budget):
                raise ValueError("epsilon_budget must be a finite number > 0, got %r" % epsilon_budget)
        if rng is not None and not (isinstance(rng, _ldp.SeededRng) or callable(rng)):
            raise TypeError("rng must be None, a SeededRng or a callable(context) -> SeededRng")
        self._params = dict(params)
        self._budget = epsilon_budget
        self._forward = tuple(forward_metrics)
        self._weight_key = weighted_by_key
        self._rng = rng
        self._clients = {}

    def _client(self, dimension):
        if dimension not in self._clients:
            self._clients[dimension] = _signds.Client(dimension, **self._params)
        return self._clients[dimension]

    def __call__(self, msg, ctxt, call_next):
        if message_category(msg) != MessageType.TRAIN:
            return call_next(msg, ctxt)
        try:
            _, global_record = single_record(msg.content, ArrayRecord, "the train message")
            _, config = single_record(msg.content, ConfigRecord, "the train message")
            missing = [k for k in (CONFIG_R_EST, CONFIG_PHASE, CONFIG_DIMENSION, CONFIG_OUTPUT_DIMENSION)
                       if k not in config]
            if missing:
                raise ValueError("the train config lacks %s: SignDSMod needs SignDSStrategy on the "
                                 "server" % missing)
            global_flat, layout = flatten(global_record)
            client = self._client(global_flat.size)
            dimension, _, output_dimension, _ = client.law
            if (int(config[CONFIG_DIMENSION]), int(config[CONFIG_OUTPUT_DIMENSION])) != (
                    dimension, output_dimension):
                raise ValueError(
                    "the server's SignDS law (d = %s, h = %s) differs from this client's "
                    "(d = %d, h = %d): use the same SignDS parameters on both sides"
                    % (config[CONFIG_DIMENSION], config[CONFIG_OUTPUT_DIMENSION], dimension,
                       output_dimension))
            broadcast = _signds.Broadcast(float(config[CONFIG_R_EST]), str(config[CONFIG_PHASE]))
        except (TypeError, ValueError) as e:
            return error_reply(msg, "SignDSMod: %s" % e)

        spent, rounds = _read_state(ctxt)
        per_round = sum(client.privacy)
        if self._budget is not None and spent + per_round > self._budget:
            return error_reply(
                msg, "SignDSMod: privacy budget exhausted: %.6g spent over %d rounds, one more "
                     "report costs %.6g, budget %.6g" % (spent, rounds, per_round, self._budget))

        out = call_next(msg, ctxt)
        if out.has_error():
            return out
        try:
            _, local_record = single_record(out.content, ArrayRecord, "the ClientApp's reply")
            local_flat, local_layout = flatten(local_record)
            if not same_layout(layout, local_layout):
                raise ValueError("the ClientApp's reply must return the model it received "
                                 "(same keys, shapes and dtypes)")
            _, metrics = single_record(out.content, MetricRecord, "the ClientApp's reply")
            weight = client_weight(metrics, self._weight_key)
            forwarded = {}
            for name in self._forward:
                if name not in metrics:
                    raise ValueError("forward_metrics names %r, which the reply lacks" % name)
                forwarded[name] = metrics[name]
            update = local_flat - global_flat
            report = client.encode(update, broadcast, rng=self._rng_for(ctxt))
        except (TypeError, ValueError) as e:
            return error_reply(msg, "SignDSMod: %s" % e)

        total = spent + report.epsilon
        _write_state(ctxt, total, rounds + 1)
        reply_metrics = dict(forwarded)
        reply_metrics.update({
            self._weight_key: weight,
            METRIC_EPSILON: float(report.epsilon),
            METRIC_EPSILON_TOTAL: float(total),
            METRIC_REPORT_BYTES: len(report.data),
        })
        out.content = RecordDict({
            REPORT_RECORD: ConfigRecord({REPORT_KEY: report.data}),
            "metrics": MetricRecord(reply_metrics),
        })
        return out

    def _rng_for(self, ctxt):
        if self._rng is None or isinstance(self._rng, _ldp.SeededRng):
            return self._rng
        return self._rng(ctxt)


def _read_state(ctxt):
    record = ctxt.state.get(STATE_RECORD)
    if record is None:
        return 0.0, 0
    return float(record["epsilon-total"]), int(record["rounds"])


def _write_state(ctxt, total, rounds):
    ctxt.state[STATE_RECORD] = MetricRecord({"epsilon-total": float(total), "rounds": int(rounds)})


class SignDSStrategy(FedAvg):
    """Flower's FedAvg with SignDS aggregation on fl-signds' server.

    ``expected_clients`` is fl-signds' N_exp (reports expected per round; None: the
    number of nodes sampled in the first round). ``step_rule`` is "code" (g = 3·N_exp·r_est,
    upstream's code) or "docs" (2·N_exp·r_est). The SignDS keyword parameters are
    fl_privacy.signds.Server's, and must be the clients' (the strategy sends d and h and the
    mod checks them). FedAvg's sampling and key options are accepted as keywords; training
    replies must come from :class:`SignDSMod`. Evaluation is FedAvg's.

    :attr:`epsilon_per_round` is fl-signds' realised ε + ε_RR of one report under these
    parameters (``signds-epsilon-round`` in the round's metrics). Each client spends what its
    own mod's parameters say (they fix the same h, but ε_RR may differ): the metrics also
    give the largest per-round ε (``signds-epsilon-reported-max``) and running total
    (``signds-epsilon-total-max``) that the accepted clients reported.
    """

    def __init__(self, *, expected_clients=None, step_rule="code", fraction_train=1.0,
                 fraction_evaluate=1.0, min_train_nodes=2, min_evaluate_nodes=2,
                 min_available_nodes=2, weighted_by_key="num-examples", arrayrecord_key="arrays",
                 configrecord_key="config", evaluate_metrics_aggr_fn=None, **params):
        _check_params(params, _LAW_PARAMS + ("global_learning_rate",), "SignDSStrategy")
        super().__init__(
            fraction_train=fraction_train,
            fraction_evaluate=fraction_evaluate,
            min_train_nodes=min_train_nodes,
            min_evaluate_nodes=min_evaluate_nodes,
            min_available_nodes=min_available_nodes,
            weighted_by_key=weighted_by_key,
            arrayrecord_key=arrayrecord_key,
            configrecord_key=configrecord_key,
            evaluate_metrics_aggr_fn=evaluate_metrics_aggr_fn,
        )
        if expected_clients is not None:
            expected_clients = float(expected_clients)
            if not (np.isfinite(expected_clients) and expected_clients > 0):
                raise ValueError("expected_clients must be finite and > 0, got %r" % expected_clients)
        if step_rule not in ("code", "docs"):
            raise ValueError('step_rule must be "code" or "docs", got %r' % (step_rule,))
        self._params = dict(params)
        self._law_params = {k: v for k, v in params.items() if k in _LAW_PARAMS}
        self._expected = expected_clients
        self._step_rule = step_rule
        self._server = None
        self._client_law = None
        self._global = None
        self._layout = None
        self.epsilon_per_round = None

    def summary(self):
        super().summary()
        log(INFO, "\t└──> SignDS: %s, N_exp %s, step rule %s", self._params or "upstream defaults",
            self._expected if self._expected is not None else "(first round's sample)", self._step_rule)

    @property
    def server(self):
        """The fl_privacy.signds.Server (None before the first round)."""
        return self._server

    def _ensure_server(self, dimension, grid):
        if self._server is not None:
            if dimension != self._client_law[0]:
                raise ValueError("the global model has %d weights, the SignDS server was built for %d"
                                 % (dimension, self._client_law[0]))
            return
        expected = self._expected
        if expected is None:
            nodes = len(list(grid.get_node_ids()))
            expected = float(max(int(nodes * self.fraction_train), self.min_train_nodes))
        self._server = _signds.Server(dimension, expected, self._step_rule, **self._params)
        probe = _signds.Client(dimension, **self._law_params)
        self._client_law = probe.law
        self.epsilon_per_round = float(sum(probe.privacy))
        self._expected = expected

    def configure_train(self, server_round, arrays, config, grid):
        flat, layout = flatten(arrays)
        self._ensure_server(flat.size, grid)
        self._global, self._layout = flat, layout
        broadcast = self._server.broadcast()
        config[CONFIG_R_EST] = float(broadcast.r_est)
        config[CONFIG_PHASE] = broadcast.phase
        config[CONFIG_DIMENSION] = int(self._client_law[0])
        config[CONFIG_OUTPUT_DIMENSION] = int(self._client_law[2])
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round, replies):
        if self._server is None:
            raise RuntimeError("aggregate_train before configure_train")
        valid, failed = self._check_and_log_replies(list(replies), is_train=True, validate=False)
        round_ = self._server.begin_round()
        rejected = len(failed)
        totals, spent, sizes = [], [], []
        for msg in valid:
            try:
                data, weight, metrics = _read_report(msg.content, self.weighted_by_key)
                round_.ingest(data, weight)
            except (TypeError, ValueError, OverflowError) as e:
                rejected += 1
                log(WARNING, "SignDSStrategy: rejected the report of node %s: %s",
                    msg.metadata.src_node_id, e)
                continue
            sizes.append(len(data))
            if METRIC_EPSILON_TOTAL in metrics:
                totals.append(float(metrics[METRIC_EPSILON_TOTAL]))
            if METRIC_EPSILON in metrics:
                spent.append(float(metrics[METRIC_EPSILON]))
        weights = self._global.copy()
        summary = self._server.finish_round(round_, weights)
        arrays = unflatten(weights, self._layout)
        record = {
            "signds-accepted": int(summary.accepted),
            "signds-rejected": int(rejected),
            "signds-step": float(summary.step),
            "signds-r-est": float(summary.next.r_est),
            "signds-shrink-phase": int(summary.next.phase == "shrink"),
            "signds-epsilon-round": float(self.epsilon_per_round),
        }
        if spent:
            record["signds-epsilon-reported-max"] = max(spent)
        if totals:
            record["signds-epsilon-total-max"] = max(totals)
        if sizes:
            record[METRIC_REPORT_BYTES] = float(np.mean(sizes))
        return arrays, MetricRecord(record)


def _read_report(content, weight_key):
    """(report bytes, n_i, metrics) of one SignDSMod reply."""
    if REPORT_RECORD not in content.config_records:
        raise ValueError("the reply has no %r ConfigRecord: is SignDSMod installed on the client?"
                         % REPORT_RECORD)
    data = content.config_records[REPORT_RECORD].get(REPORT_KEY)
    if not isinstance(data, bytes):
        raise TypeError("the report must be bytes, got %s" % type(data).__name__)
    _, metrics = single_record(content, MetricRecord, "the reply")
    return data, client_weight(metrics, weight_key), metrics
