"""The ClientApp: local SGD on this node's partition of digits.

``train`` returns the trained model and the example count; with ``strategy = "signds"``
the SignDS mod replaces that reply by one SignDS report. ``evaluate`` returns the mean
softmax output over the node's rows (one probability vector), which the Laplace mod
privatises before it leaves (the server clusters the noisy vectors).
"""

import numpy as np
from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from digits_app import task
from fl_privacy import ldp
from fl_privacy.flower import LaplaceEvalMod, PrivateClientApp, SignDSMod

_MODS = {}


def _seeded(context, salt):
    """A per-node, per-round SeededRng when the run config sets seed > 0 (experiments);
    None (OS randomness) otherwise."""
    seed = int(context.run_config.get("seed", 0))
    if seed <= 0:
        return None
    record = context.state.get("fl-privacy-signds")
    rounds = int(record["rounds"]) if record is not None else 0
    node = int(context.node_config["partition-id"])
    return ldp.SeededRng((seed * 1_000_003 + node * 7_919 + rounds * 31 + salt) % 2**63)


def _signds_params(context):
    """The SignDS parameters of this run (SignDSMod's ``configure``): None for the
    non-private baseline (``strategy = "fedavg"``, whose training replies are sent as they
    are: named in ``allow_unprotected`` below) and for ``mistake = "no-signds-mod"`` (CI
    checks that SignDSStrategy then trains nothing and the run fails)."""
    cfg = context.run_config
    if cfg["strategy"] == "fedavg" or cfg.get("mistake", "") == "no-signds-mod":
        return None
    return {"top_k_fraction": float(cfg["top-k-fraction"]), "epsilon": float(cfg["epsilon"]),
            "error_feedback": bool(cfg.get("error-feedback", True))}


signds_mod = SignDSMod(configure=_signds_params, allow_unprotected=("train",),
                       rng=lambda ctx: _seeded(ctx, 1))


def laplace_mod(msg, context, call_next):
    """LaplaceEvalMod with the run config's laplace-epsilon."""
    key = ("laplace", float(context.run_config["laplace-epsilon"]), context.run_config["strategy"])
    if key not in _MODS:
        # Training replies are protected by SignDSMod (outside this mod) under SignDS, and
        # are the non-private baseline's raw models under FedAvg: named here, explicitly.
        allow = ("train",) if context.run_config["strategy"] == "fedavg" else ()
        _MODS[key] = LaplaceEvalMod(key[1], allow_unprotected=allow,
                                    rng=lambda ctx: _seeded(ctx, 2))
    return _MODS[key](msg, context, call_next)


app = PrivateClientApp(mods=[signds_mod, laplace_mod])


def _model(msg):
    arrays = msg.content["arrays"]
    return arrays["weight"].numpy(), arrays["bias"].numpy()


def _partition(context):
    cfg = context.run_config
    return task.load_partition(int(context.node_config["partition-id"]),
                               int(context.node_config["num-partitions"]),
                               str(cfg["split"]), int(cfg["data-seed"]),
                               hold_out=bool(cfg.get("keep-best", False)))


@app.train()
def train(msg, context):
    weights, bias = _model(msg)
    x, y = _partition(context)
    cfg = context.run_config
    server_round = int(msg.content["config"]["server-round"])
    node = int(context.node_config["partition-id"])
    rng = np.random.default_rng([int(cfg["data-seed"]), node, server_round])
    weights, bias, loss = task.train(weights, bias, x, y, int(cfg["local-epochs"]),
                                     float(cfg["local-lr"]), int(cfg["batch-size"]), rng)
    arrays = ArrayRecord({"weight": Array(weights), "bias": Array(bias)})
    metrics = MetricRecord({"num-examples": len(y), "train-loss": loss})
    return Message(RecordDict({"arrays": arrays, "metrics": metrics}), reply_to=msg)


@app.evaluate()
def evaluate(msg, context):
    weights, bias = _model(msg)
    x, y = _partition(context)
    mean_probabilities = task.probabilities(weights, bias, x).mean(axis=0)
    metrics = MetricRecord({"num-examples": len(y),
                            "probabilities": [float(p) for p in mean_probabilities]})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
