"""Comparator rows for SignDS on the digits task: Flower's own DP at the same whole-run ε.

    python comparators.py [--seeds 5] [--rounds R] [--whole-run-epsilons 8,100,1500,10500]
                          [--delta 1e-5] [--clip C] [--sweep-epsilon 100]
                          [--sweep-multipliers 0.25,0.5,1,2] [--splits iid,non-iid] [--out DIR]
    python comparators.py --quick          # CI: 2 seeds x 10 rounds, small sweep

Runs, in this one process (no Ray, no Flower simulation: 50 nodes x 100 rounds x many seeds
is too slow there), the digits task of ``digits_app`` (same split, same model, the
ClientApp's local SGD with the app's run config: local-epochs, local-lr, batch-size, and the
ClientApp's per-node, per-round SGD seed) with every one of the 50 clients training in every
round, and three ways of aggregating:

* ``fedavg``: Flower's FedAvg without DP (weighted by num-examples, as ``FedAvg``).
* ``localdp``: Flower's ``LocalDpMod`` mechanism, by the functions the mod calls
  (``flwr.supercore.differential_privacy.compute_clip_model_update`` then
  ``add_localdp_gaussian_noise_to_params`` on Flower ``Parameters``): each client clips its
  update to L2 norm C and adds N(0, σ²) to every weight, σ = Δ·sqrt(2 ln(1.25/δ_r))/ε_r.
  The server then runs FedAvg on the noisy models. Local DP: each upload is protected
  from the server itself.
* ``central``: Flower's ``DifferentialPrivacyClientSideFixedClipping`` with its
  ``fixedclipping_mod``: clients clip (``compute_clip_model_update``), the server averages
  the clipped models uniformly (Flower's accounted mode requires equal client weights) and
  adds N(0, σ²) to every weight of the average with σ = ``compute_stdv(z, C, n)`` = z·C/n
  (``add_gaussian_noise_to_params``). Central DP on the aggregate (client-level,
  add/remove-one-client, fixed denominator n): the server sees every clipped update in
  the clear, so it must be trusted (or replaced by secure aggregation).

Whole-run calibration (every client takes part in every round: no sampling amplification):
both mechanisms are Gaussian mechanisms with noise multiplier z = σ / Δ per round (Δ the L2
sensitivity of what is released). T rounds compose in Rényi DP to ε_RDP(α) = T·α/(2 z²);
(ε, δ) = min over α of ε_RDP(α) + log((α-1)/α) - (log δ + log α)/(α-1) (Balle et al. 2020,
Thm. 21 / Canonne et al. 2020; the conversion dp-accounting uses). z is found by bisection so
that this equals the target whole-run ε at the given δ. The accountant is Flower's
``RdpAccountant`` (``flwr.supercore.privacy_accounting``, backed by Google's dp-accounting,
``pip install "flwr[dp]"``) with a fine order grid when importable, otherwise the same
formula in numpy (the JSON says which). For reference the exact ε of T composed Gaussians
(a single Gaussian with μ = sqrt(T)/z: Dong, Roth, Su 2019) is reported too.

* central: Δ = C/n of the mean (add/remove one client), Flower's noise_multiplier = z.
* localdp: local DP is about any two inputs of one client, so Δ = 2C (two clipped updates
  differ by at most 2C); σ = 2C·z. ``LocalDpMod`` takes a per-round (ε_r, δ_r) and a
  sensitivity, and uses the classic σ = Δ·sqrt(2 ln(1.25/δ_r))/ε_r (Dwork & Roth Thm. A.1),
  which is proven only for ε_r < 1. We pass Δ = 2C, δ_r = δ/T and the ε_r that makes
  Flower's σ equal 2C·z: that (ε_r, δ_r) is only Flower's label; the guarantee we state
  is the RDP one above. Both are in the JSON and the table.

Clip norm C: by default the median L2 norm of the clients' updates in round 1 of
non-private FedAvg (seed 1, IID and non-IID pooled), measured and printed, then fixed
across ε, splits and seeds. A sweep over C = m·median at one ε chooses by accuracy on a
validation split of the *training* data (every client keeps 4/5 of its rows and the rest
is pooled into a validation set); the test rows are not used for that choice.

Seeds: seed s sets the data split (``data-seed`` = s: IID shuffle / shard assignment and the
ClientApp's SGD order) and the DP noise (Flower's noise functions draw from numpy's global
generator, seeded with s at the start of each run).

Writes DIR/<method>-eps<E>-<split>.json (per-seed curves, calibration) per configuration,
DIR/sweep.json, DIR/summary.json and DIR/comparators.md. Exit status 0 on success.
"""

import argparse
import importlib.util
import json
import math
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

APP = Path(__file__).resolve().parent
sys.path.insert(0, str(APP))

from digits_app import task  # noqa: E402
from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays  # noqa: E402
from flwr.supercore.differential_privacy import (  # noqa: E402
    add_gaussian_noise_to_params,
    add_localdp_gaussian_noise_to_params,
    compute_clip_model_update,
    compute_stdv,
    get_norm,
)

NUM_CLIENTS = 50
SIGNDS_EPSILON_RR = 5.0
REPORT_ROUNDS = (10, 50, 100)
ORDERS = tuple(float(a) for a in np.unique(np.concatenate(
    [1.0 + np.logspace(-4, 0, 161), np.logspace(math.log10(2.0), 4, 161)])))


def _app_config():
    """The ClientApp's run config (pyproject.toml [tool.flwr.app.config])."""
    with open(APP / "pyproject.toml", "rb") as f:
        cfg = tomllib.load(f)["tool"]["flwr"]["app"]["config"]
    return {"rounds": int(cfg["num-server-rounds"]), "epochs": int(cfg["local-epochs"]),
            "lr": float(cfg["local-lr"]), "batch": int(cfg["batch-size"])}


APP_CONFIG = _app_config()


# ---------------------------------------------------------------- accounting

def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ValueError("%s must be a positive finite number, got %r" % (name, value))


def _check_delta(delta):
    _check_positive("delta", delta)
    if not delta < 1:
        raise ValueError("delta must be in (0, 1), got %r" % (delta,))


def _check_rounds(rounds):
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError("rounds must be a positive integer, got %r" % (rounds,))


def _flower_accountant():
    """Flower's RdpAccountant class and its config types, or None without dp-accounting."""
    try:
        from flwr.supercore.privacy_accounting import (GaussianPrivacyEvent, NeighboringRelation,
                                                        PrivacyConfig, SamplingMethod)
        from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant
    except ImportError:
        return None
    if importlib.util.find_spec("dp_accounting") is None:  # RdpAccountant's backend
        return None
    return RdpAccountant, PrivacyConfig, GaussianPrivacyEvent, NeighboringRelation, SamplingMethod


def rdp_epsilon_numpy(z, rounds, delta, orders=ORDERS):
    """(ε, best order): T Gaussians with noise multiplier z, RDP ε(α) = T·α/(2z²), converted
    with ε = ε(α) + log((α-1)/α) - (log δ + log α)/(α-1), minimised over the orders."""
    _check_positive("z", z)
    _check_rounds(rounds)
    _check_delta(delta)
    a = np.asarray(orders, dtype=float)
    eps = rounds * a / (2 * z * z) + np.log((a - 1) / a) - (math.log(delta) + np.log(a)) / (a - 1)
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(a[i])


def rdp_epsilon_flower(z, rounds, delta, orders=ORDERS):
    """The same with Flower's RdpAccountant (no amplification, add/remove one client);
    None when dp-accounting is not installed."""
    _check_positive("z", z)
    _check_rounds(rounds)
    _check_delta(delta)
    flwr = _flower_accountant()
    if flwr is None:
        return None
    rdp_accountant, config, event, relation, sampling = flwr
    accountant = rdp_accountant(config(target_delta=delta, population_size=NUM_CLIENTS,
                                       neighboring_relation=relation.ADD_OR_REMOVE_ONE,
                                       sampling_method=sampling.NO_AMPLIFICATION),
                                orders=orders)
    accountant.compose(event(noise_multiplier=z, sample_size=NUM_CLIENTS,
                             population_size=NUM_CLIENTS), count=rounds)
    spent = accountant.get_privacy_spent()
    return float(spent.epsilon), float(spent.optimal_order)


def whole_run_epsilon(z, rounds, delta):
    """(ε, order, backend name): Flower's accountant when available, else numpy."""
    flower = rdp_epsilon_flower(z, rounds, delta)
    if flower is not None:
        return flower[0], flower[1], "flwr.supercore.privacy_accounting.RdpAccountant"
    eps, order = rdp_epsilon_numpy(z, rounds, delta)
    return eps, order, "numpy RDP (same formula; dp-accounting not installed)"


def calibrate_z(target_epsilon, rounds, delta, tolerance=1e-6):
    """The smallest noise multiplier z (to relative `tolerance`) whose whole-run RDP ε at
    δ is <= target_epsilon; bisection on log z (ε decreases in z)."""
    _check_positive("target_epsilon", target_epsilon)
    _check_rounds(rounds)
    _check_delta(delta)
    _check_positive("tolerance", tolerance)
    lo, hi = 1e-4, 1e4
    if whole_run_epsilon(hi, rounds, delta)[0] > target_epsilon:
        raise ValueError("target ε %g is below what z = %g gives" % (target_epsilon, hi))
    if whole_run_epsilon(lo, rounds, delta)[0] <= target_epsilon:
        raise ValueError("target ε %g is above what z = %g gives" % (target_epsilon, lo))
    while hi / lo > 1 + tolerance:
        mid = math.sqrt(lo * hi)
        if whole_run_epsilon(mid, rounds, delta)[0] <= target_epsilon:
            hi = mid
        else:
            lo = mid
    return hi


def exact_gaussian_epsilon(z, rounds, delta):
    """The exact ε at δ of T composed Gaussians with multiplier z: one Gaussian with
    μ = sqrt(T)/z, δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2) (Dong, Roth, Su 2019, Cor. 2.13);
    solved for ε by bisection (for reference: tighter than the RDP bound)."""
    from scipy.special import log_ndtr, ndtr

    _check_positive("z", z)
    _check_rounds(rounds)
    _check_delta(delta)
    mu = math.sqrt(rounds) / z

    def delta_of(eps):
        return float(ndtr(-eps / mu + mu / 2) - math.exp(eps + log_ndtr(-eps / mu - mu / 2)))

    if delta_of(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while delta_of(hi) > delta:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if delta_of(mid) <= delta else (mid, hi)
    return hi


def localdp_flower_label(z, delta_r):
    """The ε_r to pass to LocalDpMod (with sensitivity Δ and δ_r) so that Flower's
    σ = Δ·sqrt(2 ln(1.25/δ_r))/ε_r equals Δ·z."""
    _check_positive("z", z)
    _check_delta(delta_r)
    return math.sqrt(2 * math.log(1.25 / delta_r)) / z


def calibration(method, target_epsilon, rounds, delta, clip):
    """Per-round parameters of `method` ("localdp" or "central") for the whole-run
    (target_epsilon, delta) over `rounds` rounds with clip norm `clip`."""
    if method not in ("localdp", "central"):
        raise ValueError('method must be "localdp" or "central", got %r' % (method,))
    _check_positive("clip", clip)
    z = calibrate_z(target_epsilon, rounds, delta)
    eps, order, backend = whole_run_epsilon(z, rounds, delta)
    out = {"target_epsilon": target_epsilon, "delta": delta, "rounds": rounds, "z": z,
           "rdp_epsilon": eps, "rdp_order": order, "accountant": backend,
           "rdp_epsilon_numpy": rdp_epsilon_numpy(z, rounds, delta)[0],
           "exact_gaussian_epsilon": exact_gaussian_epsilon(z, rounds, delta), "clip": clip}
    if method == "central":
        out.update({"dp_model": "central (trusted server; client-level, add/remove one client)",
                    "sensitivity": clip / NUM_CLIENTS, "noise_multiplier": z,
                    "sigma": compute_stdv(z, clip, NUM_CLIENTS)})
    else:
        delta_r = delta / rounds
        eps_r = localdp_flower_label(z, delta_r)
        sensitivity = 2 * clip
        sigma = sensitivity * math.sqrt(2 * math.log(1.25 / delta_r)) / eps_r
        if not math.isclose(sigma, sensitivity * z, rel_tol=1e-9):
            raise AssertionError("LocalDpMod σ %r != 2C·z %r" % (sigma, sensitivity * z))
        out.update({"dp_model": "local (each upload protected from the server; any two inputs)",
                    "sensitivity": sensitivity, "flower_epsilon_r": eps_r,
                    "flower_delta_r": delta_r, "sigma": sigma,
                    "flower_formula_proven": eps_r < 1})
    return out


# ---------------------------------------------------------------- the task

def partitions(split, seed, validation):
    """The 50 clients' (x, y); with `validation`, every client keeps rows not at positions
    4, 9, 14, ... of its partition and those rows are pooled into a validation set."""
    clients, held = [], []
    for node in range(NUM_CLIENTS):
        x, y = task.load_partition(node, NUM_CLIENTS, split, seed)
        if validation:
            keep = np.arange(len(y)) % 5 != 4
            held.append((x[~keep], y[~keep]))
            x, y = x[keep], y[keep]
        clients.append((x, y))
    if validation:
        return clients, (np.concatenate([h[0] for h in held]), np.concatenate([h[1] for h in held]))
    return clients, task.test_set()


def local_models(weights, bias, clients, seed, server_round):
    """Every client's model after the ClientApp's local SGD (same RNG as client_app.train)."""
    out = []
    for node, (x, y) in enumerate(clients):
        rng = np.random.default_rng([seed, node, server_round])
        w, b, _ = task.train(weights, bias, x, y, APP_CONFIG["epochs"], APP_CONFIG["lr"],
                             APP_CONFIG["batch"], rng)
        out.append((w, b))
    return out


def weighted_mean(models, weights):
    """FedAvg's aggregate_arrayrecords: Σ model_i · w_i/Σw (float32 like the arrays)."""
    total = float(sum(weights))
    w = sum(m[0] * (wi / total) for m, wi in zip(models, weights))
    b = sum(m[1] * (wi / total) for m, wi in zip(models, weights))
    return w, b


def aggregate(method, weights, bias, models, counts, params):
    """One round's new global model from the clients' models."""
    if method == "fedavg":
        return weighted_mean(models, counts)
    clip = params["clip"]
    clipped = []
    for w, b in models:
        arrays = [w.copy(), b.copy()]
        compute_clip_model_update(arrays, [weights, bias], clip)
        clipped.append(arrays)
    if method == "localdp":
        noisy = []
        for arrays in clipped:
            p = add_localdp_gaussian_noise_to_params(
                ndarrays_to_parameters(arrays), params["sensitivity"],
                params["flower_epsilon_r"], params["flower_delta_r"])
            noisy.append(tuple(parameters_to_ndarrays(p)))
        return weighted_mean(noisy, counts)
    if method == "central":
        w, b = weighted_mean(clipped, [1.0] * len(clipped))
        p = add_gaussian_noise_to_params(ndarrays_to_parameters([w, b]),
                                         params["noise_multiplier"], clip, NUM_CLIENTS)
        w, b = parameters_to_ndarrays(p)
        return w, b
    raise ValueError("unknown method %r" % (method,))


def run(method, split, seed, rounds, params=None, validation=False, measure_norms=False):
    """One run; returns per-round accuracy and loss on the test (or validation) rows, and,
    with measure_norms, the clients' update norms of round 1."""
    if method not in ("fedavg", "localdp", "central"):
        raise ValueError("unknown method %r" % (method,))
    _check_rounds(rounds)
    if method != "fedavg" and params is None:
        raise ValueError("%s needs its calibration params" % (method,))
    clients, (x_eval, y_eval) = partitions(split, seed, validation)
    counts = [len(y) for _, y in clients]
    np.random.seed(seed)  # Flower's noise functions draw from numpy's global generator
    weights, bias = task.initial_model()
    accuracy, loss, norms = [], [], None
    for server_round in range(1, rounds + 1):
        models = local_models(weights, bias, clients, seed, server_round)
        if measure_norms and server_round == 1:
            norms = [get_norm([w - weights, b - bias]) for w, b in models]
        weights, bias = aggregate(method, weights, bias, models, counts, params)
        weights, bias = weights.astype(np.float32), bias.astype(np.float32)
        a, l = task.evaluate(weights, bias, x_eval, y_eval)
        accuracy.append(a)
        loss.append(l)
    return {"accuracy": accuracy, "loss": loss, "update_norms_round1": norms}


# ---------------------------------------------------------------- driver

def _summary(runs, rounds):
    acc = np.array([r["accuracy"] for r in runs])
    loss = np.array([r["loss"] for r in runs])
    sd = (lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0)
    out = {"final_accuracy_mean": float(acc[:, -1].mean()), "final_accuracy_sd": sd(acc[:, -1]),
           "final_loss_mean": float(loss[:, -1].mean()), "final_loss_sd": sd(loss[:, -1]),
           "accuracy_at": {}}
    for r in REPORT_ROUNDS:
        if r <= rounds:
            out["accuracy_at"][str(r)] = [float(acc[:, r - 1].mean()), sd(acc[:, r - 1])]
    return out


def _csv(kind, parse, check):
    def convert(text):
        try:
            values = [parse(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError("not a comma-separated list of %s: %r" % (kind, text))
        if not values:
            raise argparse.ArgumentTypeError("empty list: %r" % (text,))
        for v in values:
            check(v)
        return values
    return convert


def _positive(kind):
    def check(v):
        if not (math.isfinite(v) and v > 0):
            raise argparse.ArgumentTypeError("%s must be positive and finite, got %r" % (kind, v))
    return check


def _float_arg(check):
    def convert(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError("not a number: %r" % (text,))
        check(v)
        return v
    return convert


def _int_arg(minimum):
    def convert(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("not an integer: %r" % (text,))
        if v < minimum:
            raise argparse.ArgumentTypeError("must be >= %d, got %d" % (minimum, v))
        return v
    return convert


def _delta_arg(text):
    v = _float_arg(_positive("delta"))(text)
    if v >= 1:
        raise argparse.ArgumentTypeError("delta must be in (0, 1), got %r" % (v,))
    return v


def _split(v):
    if v not in ("iid", "non-iid"):
        raise argparse.ArgumentTypeError('split must be "iid" or "non-iid", got %r' % (v,))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=_int_arg(1), default=5, help="seeds 1..N (default 5)")
    p.add_argument("--rounds", type=_int_arg(1), default=APP_CONFIG["rounds"])
    p.add_argument("--whole-run-epsilons", type=_csv("numbers", float, _positive("ε")),
                   default=[8.0, 100.0, 1500.0, 10500.0],
                   help="whole-run ε per client "
                        "(SignDS: 1500 = 100 x (10+5), 10500 = 100 x (100+5))")
    p.add_argument("--delta", type=_delta_arg, default=1e-5,
                   help="whole-run δ of the Gaussian rows")
    p.add_argument("--clip", type=_float_arg(_positive("clip")), default=None,
                   help="clip norm (default: median round-1 update norm of FedAvg, seed 1)")
    p.add_argument("--sweep-epsilon", type=_float_arg(_positive("sweep ε")), default=100.0)
    p.add_argument("--sweep-multipliers", type=_csv("numbers", float, _positive("multiplier")),
                   default=[0.25, 0.5, 1.0, 2.0])
    p.add_argument("--sweep-seeds", type=_int_arg(0), default=3, help="0: no sweep")
    p.add_argument("--splits", type=_csv("splits", str, _split), default=["iid", "non-iid"])
    p.add_argument("--out", type=Path, default=APP / "results" / "comparators")
    p.add_argument("--quick", action="store_true",
                   help="CI: 2 seeds x 10 rounds, ε 100 and 1500, sweep 1 seed x 2 multipliers")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.rounds, args.sweep_seeds = 2, 10, 1
        args.whole_run_epsilons = [100.0, 1500.0]
        args.sweep_multipliers = [0.5, 1.0]
    return args


def _fmt(mean, sd):
    return "%.3f ± %.3f" % (mean, sd)


def _eps_label(e):
    return ("%g" % e).replace(".", "p")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(1, args.seeds + 1))
    accountant = whole_run_epsilon(1.0, args.rounds, args.delta)[2]
    print("accountant: %s" % accountant, flush=True)

    # The clip norm: median round-1 update norm of non-private FedAvg (seed 1, both splits).
    norms = []
    for split in ("iid", "non-iid"):
        norms += run("fedavg", split, 1, 1, measure_norms=True)["update_norms_round1"]
    median_norm = float(np.median(norms))
    clip = args.clip if args.clip is not None else float("%.2g" % median_norm)
    print("round-1 FedAvg update norms (seed 1, 100 clients): min %.3f median %.3f max %.3f; "
          "clip C = %g%s" % (min(norms), median_norm, max(norms), clip,
                             " (--clip)" if args.clip is not None else " (median, 2 digits)"),
          flush=True)

    t0 = time.time()
    baseline = {}
    for split in args.splits:
        runs = [run("fedavg", split, s, args.rounds) for s in seeds]
        baseline[split] = runs
    one_run = (time.time() - t0) / (len(args.splits) * len(seeds))
    print("one %d-round run: %.2f s (FedAvg)" % (args.rounds, one_run), flush=True)

    mirror = mirror_check(baseline, args.rounds)
    print("mirror check against Flower's simulation: %s" % (mirror,), flush=True)

    rows = [{"method": "fedavg", "params": None,
             "splits": {sp: _summary(r, args.rounds) for sp, r in baseline.items()}}]
    _write(args.out / "fedavg.json", {"method": "fedavg", "dp_model": "none", "seeds": seeds,
                                      "rounds": args.rounds, "app_config": APP_CONFIG,
                                      "runs": baseline, "summary": rows[0]["splits"]})

    for method in ("localdp", "central"):
        for eps in args.whole_run_epsilons:
            params = calibration(method, eps, args.rounds, args.delta, clip)
            row = {"method": method, "params": params, "splits": {}}
            for split in args.splits:
                t1 = time.time()
                runs = [run(method, split, s, args.rounds, params) for s in seeds]
                row["splits"][split] = _summary(runs, args.rounds)
                _write(args.out / ("%s-eps%s-%s.json" % (method, _eps_label(eps), split)),
                       {"method": method, "split": split, "seeds": seeds, "rounds": args.rounds,
                        "app_config": APP_CONFIG, "calibration": params, "runs": runs,
                        "summary": row["splits"][split]})
                print("%-8s ε=%-7g z=%.4g σ=%.4g %-8s acc %s  (%.1f s)"
                      % (method, eps, params["z"], params["sigma"], split,
                         _fmt(row["splits"][split]["final_accuracy_mean"],
                              row["splits"][split]["final_accuracy_sd"]), time.time() - t1),
                      flush=True)
            rows.append(row)

    sweep = _sweep(args, clip)
    elapsed = time.time() - started
    summary = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
               "clip": clip, "median_update_norm_round1": median_norm,
               "update_norm_range_round1": [min(norms), max(norms)], "accountant": accountant,
               "mirror_check": mirror, "seconds_one_run": one_run, "seconds_total": elapsed,
               "rows": rows, "sweep": sweep}
    _write(args.out / "summary.json", summary)
    (args.out / "comparators.md").write_text(_markdown(summary, args))
    print("wrote %s (%.0f s in all)" % (args.out / "comparators.md", elapsed), flush=True)
    failures = checks(rows, args)
    if mirror is not None and not mirror["same"]:
        failures.append("FedAvg (non-IID, seed 1) differs from Flower's simulation: %s" % (mirror,))
    for f in failures:
        print("CHECK FAILED: " + f, flush=True)
    return 1 if failures else 0


def mirror_check(baseline, rounds):
    """This process's FedAvg (non-IID, seed 1) against the Flower simulation's
    results/fedavg.json (same app config, data-seed 1): per-round test accuracy must be
    equal and loss within 1e-5 (float32 summation order). None when not comparable."""
    path = APP / "results" / "fedavg.json"
    if "non-iid" not in baseline or not path.exists():
        return None
    record = json.loads(path.read_text())
    cfg = record["config"]
    if (cfg.get("split") != "non-iid" or int(cfg.get("data-seed", 0)) != 1
            or int(record["nodes"]) != NUM_CLIENTS or float(cfg.get("fraction-train", 0)) != 1.0
            or int(cfg["local-epochs"]) != APP_CONFIG["epochs"]
            or float(cfg["local-lr"]) != APP_CONFIG["lr"]
            or int(cfg["batch-size"]) != APP_CONFIG["batch"]):
        return None
    central = record["central"]
    mine = baseline["non-iid"][0]
    common = [r for r in range(1, rounds + 1) if str(r) in central]
    if not common:
        return None
    acc = max(abs(mine["accuracy"][r - 1] - central[str(r)]["accuracy"]) for r in common)
    loss = max(abs(mine["loss"][r - 1] - central[str(r)]["loss"]) for r in common)
    return {"file": path.name, "rounds": len(common), "max_accuracy_difference": acc,
            "max_loss_difference": loss, "same": acc == 0.0 and loss <= 1e-5}


def checks(rows, args):
    """What every run must show: each calibration reaches its target whole-run ε (relative
    1e-4) and not above it, and non-private FedAvg learns (final accuracy > 0.5 per split)."""
    failures = []
    for row in rows:
        p = row["params"]
        if p is not None and not (p["target_epsilon"] * (1 - 1e-4) <= p["rdp_epsilon"]
                                  <= p["target_epsilon"]):
            failures.append("%s: whole-run ε %r for target %r" % (row["method"], p["rdp_epsilon"],
                                                                 p["target_epsilon"]))
        if p is None:
            for split, s in row["splits"].items():
                if not s["final_accuracy_mean"] > 0.5:
                    failures.append("FedAvg %s final accuracy %.3f <= 0.5"
                                    % (split, s["final_accuracy_mean"]))
    return failures


def _sweep(args, clip):
    """Clip = m·C at one ε for both mechanisms, chosen on a validation split of the training
    rows (the test rows are not used)."""
    if args.sweep_seeds == 0:
        return None
    seeds = list(range(1, args.sweep_seeds + 1))
    out = {"epsilon": args.sweep_epsilon, "seeds": seeds, "selection": "validation accuracy "
           "(1/5 of every client's rows held out; clients train on the other 4/5)",
           "results": {}}
    for method in ("localdp", "central"):
        out["results"][method] = []
        for m in args.sweep_multipliers:
            params = calibration(method, args.sweep_epsilon, args.rounds, args.delta, m * clip)
            entry = {"clip": m * clip, "multiplier": m, "sigma": params["sigma"], "splits": {}}
            for split in args.splits:
                runs = [run(method, split, s, args.rounds, params, validation=True) for s in seeds]
                entry["splits"][split] = _summary(runs, args.rounds)
            entry["mean_validation_accuracy"] = float(np.mean(
                [entry["splits"][sp]["final_accuracy_mean"] for sp in args.splits]))
            print("sweep %-8s ε=%g C=%.3g validation acc %.3f"
                  % (method, args.sweep_epsilon, m * clip, entry["mean_validation_accuracy"]),
                  flush=True)
            out["results"][method].append(entry)
        best = max(out["results"][method], key=lambda e: e["mean_validation_accuracy"])
        out.setdefault("best", {})[method] = {"clip": best["clip"],
                                              "multiplier": best["multiplier"]}
        if best["multiplier"] != 1.0:
            # the chosen clip, evaluated on the test rows (reported, not used for the choice)
            params = calibration(method, args.sweep_epsilon, args.rounds, args.delta, best["clip"])
            out["best"][method]["test"] = {
                split: _summary([run(method, split, s, args.rounds, params)
                                 for s in range(1, args.seeds + 1)], args.rounds)
                for split in args.splits}
    return out


def _signds_rows(rounds_wanted):
    """SignDS's committed rows (results/signds-eps*.json) of `rounds_wanted` rounds."""
    rows = []
    for path in sorted((APP / "results").glob("signds-eps*.json")):
        record = json.loads(path.read_text())
        central = record["central"]
        rounds = sorted(int(r) for r in central if int(r) > 0)  # "0": the initial model
        if not rounds or rounds[-1] != rounds_wanted:
            continue
        per_round = float(record["epsilon_per_round"])
        rows.append({"file": "%s" % path.name, "epsilon": float(record["config"]["epsilon"]),
                     "per_round": per_round, "whole_run": per_round * len(rounds),
                     "accuracy": {r: central[str(r)]["accuracy"] for r in rounds},
                     "loss": central[str(rounds[-1])]["loss"]})
    return sorted(rows, key=lambda r: r["epsilon"])


def _write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def _markdown(summary, args):
    splits = args.splits
    lines = []
    a = lines.append
    a("# Comparators: Flower's DP on the digits task at SignDS's whole-run ε\n")
    a("Produced by `python comparators.py%s` (%d seeds x %d rounds, 50 clients all taking part "
      "every round; %.0f s in all, %.2f s per %d-round run, on this 2-core machine). "
      "Clip C = %g (median round-1 FedAvg update norm %.3f, seed 1). Accountant: %s; "
      "δ = %g for every Gaussian row.\n"
      % ("".join(" " + v for v in sys.argv[1:]), args.seeds, args.rounds,
         summary["seconds_total"], summary["seconds_one_run"], args.rounds, summary["clip"],
         summary["median_update_norm_round1"], summary["accountant"], args.delta))
    head = ["method", "DP model", "whole-run (ε, δ)", "per-round parameters"]
    for sp in splits:
        head += ["%s acc @100" % sp if args.rounds >= 100 else "%s acc @%d" % (sp, args.rounds),
                 "%s loss" % sp]
    for sp in splits:
        head += ["%s acc @%s" % (sp, r) for r in ("10", "50") if int(r) < args.rounds]
    a("| " + " | ".join(head) + " |")
    a("|" + "---|" * len(head))
    for row in summary["rows"]:
        p = row["params"]
        if p is None:
            cells = ["FedAvg (no DP)", "none", "∞", "—"]
        elif row["method"] == "localdp":
            cells = ["Flower LocalDpMod", "local",
                     "(%g, %g)" % (p["target_epsilon"], p["delta"]),
                     "z = σ/Δ = %.4g, Δ = 2C = %g, σ = %.4g; Flower label ε_r = %.4g, δ_r = %g%s"
                     % (p["z"], p["sensitivity"], p["sigma"], p["flower_epsilon_r"],
                        p["flower_delta_r"], " (ε_r < 1: Flower's per-round statement holds; by "
                        "basic composition (%.4g, %g) whole run)" % (
                            args.rounds * p["flower_epsilon_r"], args.rounds * p["flower_delta_r"])
                        if p["flower_formula_proven"]
                        else " (ε_r ≥ 1: Flower's σ formula is unproven there)")]
        else:
            cells = ["Flower DP ClientSideFixedClipping", "central (trusted server)",
                     "(%g, %g)" % (p["target_epsilon"], p["delta"]),
                     "noise_multiplier z = %.4g, σ = zC/n = %.4g" % (p["z"], p["sigma"])]
        for sp in splits:
            s = row["splits"][sp]
            cells += [_fmt(s["final_accuracy_mean"], s["final_accuracy_sd"]),
                      _fmt(s["final_loss_mean"], s["final_loss_sd"])]
        for sp in splits:
            s = row["splits"][sp]
            cells += [_fmt(*s["accuracy_at"][r]) for r in ("10", "50") if int(r) < args.rounds]
        a("| " + " | ".join(cells) + " |")
    for row in _signds_rows(args.rounds):
        cells = ["SignDS k = 0.2, selection ε %g (from ../%s: Flower simulation, 1 seed, "
                 "non-IID only)" % (row["epsilon"], row["file"]), "local",
                 "(%g, 0)" % row["whole_run"], "pure ε %g per round (ε_sel %g + ε_RR %g)"
                 % (row["per_round"], row["epsilon"], SIGNDS_EPSILON_RR)]
        for sp in splits:
            cells += (["%.3f" % row["accuracy"][args.rounds], "%.3f" % row["loss"]]
                      if sp == "non-iid"
                      else ["—", "—"])
        for sp in splits:
            cells += [("%.3f" % row["accuracy"][int(r)] if sp == "non-iid" else "—")
                      for r in ("10", "50") if int(r) < args.rounds]
        a("| " + " | ".join(cells) + " |")
    a("")
    a("Aggregation: FedAvg and LocalDpMod rows weight clients by num-examples (Flower's FedAvg); "
      "the central rows average uniformly, as Flower's accounted DifferentialPrivacy*"
      "FixedClipping requires (σ = zC/n is the sensitivity of the uniform mean). Clients hold "
      "28–30 rows. With dp-accounting absent the script uses the same RDP formula in numpy "
      "(identical numbers).\n")
    m = summary["mirror_check"]
    if m is not None:
        a("Mirror check: this process's FedAvg, non-IID, seed 1, against Flower's simulation "
          "(`../%s`, 50 SuperNodes): %d rounds, largest accuracy difference %g, largest loss "
          "difference %.2g (%s).\n" % (m["file"], m["rounds"], m["max_accuracy_difference"],
                                       m["max_loss_difference"],
                                       "same" if m["same"] else "DIFFERENT"))
    a("SignDS rows for reference (ε_RR = %g; pure ε, δ = 0, whole-run ε by basic composition "
      "over 100 rounds): selection ε 10 → 15/round → 1500; ε 100 → 105/round → 10500. See "
      "`../table.md` (Flower simulation, one seed, non-IID).\n" % SIGNDS_EPSILON_RR)
    a("Calibration: z = noise multiplier per round; whole-run RDP ε(α) = T·α/(2z²), "
      "(ε, δ) by ε = min_α ε(α) + log((α−1)/α) − (log δ + log α)/(α−1); z by bisection. "
      "Exact ε of the composed Gaussians (μ = √T/z) for reference:\n")
    a("| method | target ε | z | RDP ε (order) | exact Gaussian ε |")
    a("|---|---|---|---|---|")
    for row in summary["rows"]:
        p = row["params"]
        if p is not None:
            a("| %s | %g | %.5g | %.4g (α = %.4g) | %.4g |" % (
                row["method"], p["target_epsilon"], p["z"], p["rdp_epsilon"], p["rdp_order"],
                p["exact_gaussian_epsilon"]))
    sw = summary["sweep"]
    if sw is not None:
        a("\nClip sweep at whole-run ε = %g (δ = %g), %d seed(s), chosen on validation accuracy "
          "(1/5 of each client's training rows held out; test rows not used):\n"
          % (sw["epsilon"], args.delta, len(sw["seeds"])))
        a("| method | C | σ | " + " | ".join("%s val acc" % sp for sp in splits) + " | mean |")
        a("|---|---|---|" + "---|" * len(splits) + "---|")
        for method, entries in sw["results"].items():
            for e in entries:
                best = " (best)" if sw["best"][method]["clip"] == e["clip"] else ""
                a("| %s | %.3g%s | %.4g | %s | %.3f |" % (
                    method, e["clip"], best, e["sigma"],
                    " | ".join(_fmt(e["splits"][sp]["final_accuracy_mean"],
                                    e["splits"][sp]["final_accuracy_sd"]) for sp in splits),
                    e["mean_validation_accuracy"]))
        for method, best in sw["best"].items():
            if "test" in best:
                a("\n%s with the chosen C = %.3g on the test rows (%d seeds): %s" % (
                    method, best["clip"], args.seeds, "; ".join(
                        "%s %s" % (sp, _fmt(best["test"][sp]["final_accuracy_mean"],
                                            best["test"][sp]["final_accuracy_sd"]))
                        for sp in splits)))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
