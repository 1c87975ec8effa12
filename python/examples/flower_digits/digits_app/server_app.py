"""The ServerApp: SignDS (fl_privacy.flower.SignDSStrategy) or Flower's FedAvg, with
central evaluation of the global model on the digits test rows after every round, and
clustering scores of the clients' Laplace-protected probability vectors when clients
evaluate. With ``results-path`` set, writes the per-round record as JSON there."""

import json
import time

from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord
from flwr.serverapp import ServerApp
from flwr.serverapp.strategy import FedAvg

from digits_app import task
from fl_privacy.flower import SignDSStrategy, clustering_metrics

app = ServerApp()


def _strategy(cfg):
    common = dict(fraction_train=float(cfg["fraction-train"]),
                  fraction_evaluate=float(cfg["fraction-evaluate"]),
                  min_train_nodes=int(cfg["min-nodes"]), min_evaluate_nodes=int(cfg["min-nodes"]),
                  min_available_nodes=int(cfg["min-nodes"]),
                  evaluate_metrics_aggr_fn=clustering_metrics("probabilities"))
    if cfg["strategy"] == "signds":
        return SignDSStrategy(top_k_fraction=float(cfg["top-k-fraction"]),
                              epsilon=float(cfg["epsilon"]),
                              step_rule=str(cfg.get("step-rule", "")) or None, **common)
    if cfg["strategy"] == "fedavg":
        return FedAvg(**common)
    raise ValueError('strategy must be "signds" or "fedavg", got %r' % (cfg["strategy"],))


@app.main()
def main(grid, context):
    cfg = context.run_config
    strategy = _strategy(cfg)
    x_test, y_test = task.test_set()
    # keep-best: the server holds every tenth training row (clients train without them)
    # and keeps the global model that scores best on them. Post-processing of what the
    # clients released, with the server's own rows: no client's privacy changes.
    keep_best = bool(cfg.get("keep-best", False))
    x_val, y_val = task.validation_set()
    best = {"validation": -1.0}

    def central_evaluate(server_round, arrays):
        weights, bias = arrays["weight"].numpy(), arrays["bias"].numpy()
        accuracy, loss = task.evaluate(weights, bias, x_test, y_test)
        metrics = {"accuracy": accuracy, "loss": loss}
        if keep_best:
            validation, _ = task.evaluate(weights, bias, x_val, y_val)
            if validation > best["validation"]:
                best.update(validation=validation, round=server_round, accuracy=accuracy,
                            loss=loss, weights=weights.copy(), bias=bias.copy())
            metrics.update({"validation-accuracy": validation,
                            "best-round": int(best["round"]),
                            "best-accuracy": best["accuracy"], "best-loss": best["loss"]})
        return MetricRecord(metrics)

    weights, bias = task.initial_model()
    started = time.time()
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord({"weight": Array(weights), "bias": Array(bias)}),
        num_rounds=int(cfg["num-server-rounds"]),
        train_config=ConfigRecord(),
        evaluate_fn=central_evaluate,
    )
    path = str(cfg.get("results-path", ""))
    if path:
        record = {
            "strategy": cfg["strategy"],
            "config": dict(cfg),
            "nodes": len(list(grid.get_node_ids())),
            "seconds": time.time() - started,
            "central": {r: dict(m) for r, m in result.evaluate_metrics_serverapp.items()},
            "train": {r: dict(m) for r, m in result.train_metrics_clientapp.items()},
            "evaluate": {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()},
            "epsilon_per_round": getattr(strategy, "epsilon_per_round", None),
        }
        if keep_best:
            record["best"] = {k: best[k] for k in ("round", "validation", "accuracy", "loss")}
        with open(path, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
