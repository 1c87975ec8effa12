"""Runs the digits Flower app on Flower's two engines and checks what it must show.

    python run.py simulation [--num-supernodes 50] [--rounds 100]
                             [--strategies signds,signds-upstream,fedavg]
                             [--epsilons 10,100] [--keep-best] [--out DIR] [--readme]
    python run.py deployment [--rounds 5] [--timeout 300]

``simulation``: a SuperLink in simulation mode (Flower's Simulation Runtime, Ray backend)
on 127.0.0.1, then ``flwr run`` of this app once per configuration with ``num-supernodes``
virtual SuperNodes (each ClientApp gets one CPU; Ray runs as many at once as the machine has
CPUs). Writes DIR/<run>.json per run, DIR/table.md (accuracy per round, ε per round and
the ε this run added to each client's ledger) and, with --readme, DIR/accuracy.png.
Checks: every round of every run aggregated all the nodes; SignDS's ε per round equals fl-signds' statement for its
parameters and each client's whole-history total (its ledger under the scratch FLWR_HOME,
which the runs share) grows by that every round; FedAvg ends above 0.5.

``deployment``: a SuperLink and two SuperNodes (partition 0 and 1 of 2, IID) as separate
processes on 127.0.0.1, then ``flwr run`` with SignDS for a few rounds, clients evaluating
with the Laplace mod. Checks: the initial (all-zero) model is at chance (< 0.15) and the
final SignDS model's test accuracy is >= 0.25 (chance is 0.1: on 359 test rows
P(accuracy >= 0.25) under chance is below 1e-15), every round accepted both reports, the
clients' ε adds up, and the server computed clustering scores from the Laplace vectors.

Every process this script starts runs in its own process group and is stopped (SIGTERM,
then SIGKILL after 10 s) when the script ends, whatever happens; each phase is bounded by
--timeout. Exit status 0 when every check passes, 1 otherwise.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

APP = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """Starts processes in their own process groups and stops all of them on exit."""

    def __init__(self, log_dir):
        self.log_dir = Path(log_dir)
        self.started = []

    def start(self, name, argv, env):
        log = open(self.log_dir / (name + ".log"), "w")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd=self.log_dir)
        self.started.append((name, proc, log))
        print("started %s (pid %d): %s" % (name, proc.pid, " ".join(map(str, argv))), flush=True)
        return proc

    def check_alive(self, skip=None):
        for name, proc, _ in self.started:
            if proc is not skip and proc.poll() is not None and not name.startswith("flwr-run-"):
                raise RuntimeError("%s exited early with status %s; log:\n%s"
                                   % (name, proc.returncode, self.tail(name)))

    def tail(self, name, lines=40):
        path = self.log_dir / (name + ".log")
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:]) if path.exists() else ""

    def __enter__(self):
        # Linux: become the subreaper of everything started below, so that processes whose
        # parent is stopped first are re-parented here and reaped (not left as zombies).
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            pass
        return self

    def __exit__(self, *exc):
        # Everything started, and everything they started (the SuperLink's ServerApp and
        # simulation processes, the SuperNodes' ClientApps, Ray's workers), whichever
        # session or group they put themselves in: collected before anything is stopped,
        # since orphans are re-parented and could no longer be traced.
        leaders = [proc.pid for _, proc, _ in self.started if proc.poll() is None]
        victims = descendants([proc.pid for _, proc, _ in self.started]) | set(leaders)
        for pid in leaders:
            _signal_group(pid, signal.SIGTERM)
        for pid in victims:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in victims):
            time.sleep(0.2)
        victims |= descendants(list(victims))
        for _, proc, _ in self.started:
            _signal_group(proc.pid, signal.SIGKILL)
        for pid in victims:
            _signal(pid, signal.SIGKILL)
        for name, proc, log in self.started:
            proc.wait()
            log.close()
            print("stopped %s (pid %d)" % (name, proc.pid), flush=True)
        reap_until = time.monotonic() + 5
        while time.monotonic() < reap_until:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    time.sleep(0.1)
            except ChildProcessError:
                break
        left = [p for p in victims if _alive(p)]
        if left:
            print("WARNING: processes still alive after SIGKILL: %s" % left, flush=True)
        return False


def _children_map():
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        # The command may hold spaces and parentheses: fields resume after the last ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(pids):
    """Every live process below the given ones."""
    children = _children_map()
    found, stack = set(), list(pids)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_health(port, procs, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError("the SuperLink on port %d did not answer /health within %ds" % (port, timeout))


def environment(home):
    env = dict(os.environ)
    env["FLWR_HOME"] = str(home)
    env["FLWR_DISABLE_UPDATE_CHECK"] = "1"
    env["FLWR_TELEMETRY_ENABLED"] = "0"
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    # Ray: no dashboard, no usage report, a small object store.
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["RAY_DEDUP_LOGS"] = "1"
    return env


def write_connection(home, name, port):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "%s"\n\n[superlink.%s]\naddress = "127.0.0.1:%d"\ninsecure = true\n'
        % (name, name, port))


def start_superlink(procs, port, env, simulation):
    """A SuperLink on 127.0.0.1:port (in simulation mode or not), healthy when this returns."""
    procs.start("superlink", [str(BIN / "flower-superlink"), "--insecure"]
                + (["--simulation"] if simulation else [])
                + ["--disable-runtime-dependency-installation", "--host", "127.0.0.1",
                   "--port", str(port)], env)
    wait_health(port, procs, 60)


def setup(prefix, connection):
    """A scratch directory with FLWR_HOME naming one connection to a free port:
    (work, port, env)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    home = work / "flwr-home"
    port = free_port()
    write_connection(home, connection, port)
    return work, port, environment(home)


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'%s'" % v


def flwr_run(name, connection, run_config, env, procs, timeout, federation_config=None,
             expect_failure=False):
    """`flwr run` of this app through fl_privacy's `fl-privacy-flwr-run` (which exits 1
    with one line when the run fails); the ServerApp's results, or with `expect_failure`
    the (exit status, last line) of a run that must fail."""
    results = Path(run_config.get("results-path", "")) if run_config.get("results-path") else None
    if results is not None and results.exists():
        results.unlink()
    argv = [sys.executable, "-m", "fl_privacy.flower.run", str(APP), connection, "--stream",
            "--run-config", " ".join("%s=%s" % (k, toml_value(v)) for k, v in run_config.items())]
    if federation_config:
        argv += ["--federation-config",
                 " ".join("%s=%s" % (k, toml_value(v)) for k, v in federation_config.items())]
    print("flwr run %s: %s" % (name, " ".join(argv[4:])), flush=True)
    started = time.monotonic()
    proc = procs.start("flwr-run-" + name, argv, env)
    while proc.poll() is None:
        procs.check_alive(skip=proc)
        if time.monotonic() - started > timeout:
            raise TimeoutError("run %s did not finish within %ds; log:\n%s"
                               % (name, timeout, procs.tail("flwr-run-" + name)))
        time.sleep(0.5)
    last = (procs.tail("flwr-run-" + name, 1) or "").strip()
    if expect_failure:
        print("run %s: exit status %d, last line: %s" % (name, proc.returncode, last), flush=True)
        return proc.returncode, last
    if proc.returncode != 0:
        raise RuntimeError("run %s failed (exit status %d): %s\nlog:\n%s"
                           % (name, proc.returncode, last, procs.tail("flwr-run-" + name, 80)))
    for _ in range(20):  # the ServerApp wrote the file before the run finished
        if results.exists():
            break
        time.sleep(0.5)
    record = json.loads(results.read_text())
    print("run %s finished in %.1fs" % (name, time.monotonic() - started), flush=True)
    return record


def per_round(record, section, key):
    return [record[section][r][key] for r in sorted(record[section], key=int) if key in record[section][r]]


def expected_epsilon(top_k_fraction, epsilon, dimension):
    from fl_privacy import signds

    return float(sum(signds.Client(dimension, top_k_fraction=top_k_fraction, epsilon=epsilon).privacy))


class Checks:
    def __init__(self):
        self.failed = []

    def __call__(self, ok, what):
        print("%s: %s" % ("ok" if ok else "FAILED", what), flush=True)
        if not ok:
            self.failed.append(what)


def check_signds(check, name, record, nodes, rounds, epsilon, top_k_fraction):
    from digits_app import task

    want = expected_epsilon(top_k_fraction, epsilon, task.DIMENSION)
    accepted = per_round(record, "train", "signds-accepted")
    check(accepted == [nodes] * rounds, "%s: every round accepted all %d reports (%s)" % (name, nodes, accepted))
    eps = per_round(record, "train", "signds-epsilon-round")
    check(len(eps) == rounds and all(abs(e - want) <= 1e-12 for e in eps),
          "%s: ε per round = fl-signds' realised ε + ε_RR = %.12g" % (name, want))
    check(want <= epsilon + 5.0, "%s: realised ε per round %.12g <= requested %g + 5" % (name, want, epsilon))
    # The clients' ledgers (FLWR_HOME/fl-privacy/ledger, one per partition) hold every
    # earlier run of this FLWR_HOME: the total starts where the last SignDS run left it.
    totals = per_round(record, "train", "signds-epsilon-total-max")
    before = totals[0] - want if totals else 0.0
    check(len(totals) == rounds and before >= -1e-9 and all(
        abs(t - before - (r + 1) * want) <= 1e-9 * (before + (r + 1) * want)
        for r, t in enumerate(totals)),
          "%s: each client's whole-history total grows by ε per round (basic composition; "
          "%.6g before this run)" % (name, before))


def simulation(args):
    sys.path.insert(0, str(APP))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work, port, env = setup("flower-sim-", "sim")
    check = Checks()
    runs = {}
    configs = []
    for s in args.strategies.split(","):
        if s == "signds":
            configs += [("signds-eps%g" % e, {"strategy": "signds", "epsilon": float(e)})
                        for e in map(float, args.epsilons.split(","))]
        elif s == "signds-upstream":
            # Upstream's server rule (g = 3·N_exp·r_est, low-participation fallback) and its
            # stateless client: the configuration the fl-signds ablation starts from.
            configs += [("signds-upstream-eps%g" % e,
                         {"strategy": "signds", "epsilon": float(e), "step-rule": "code",
                          "error-feedback": False})
                        for e in map(float, args.epsilons.split(","))]
        else:
            configs.append((s, {"strategy": s}))
    try:
        with Processes(work) as procs:
            start_superlink(procs, port, env, simulation=True)
            for name, overrides in configs:
                run_config = {"num-server-rounds": args.rounds, "min-nodes": args.num_supernodes,
                              "fraction-evaluate": 0.0, "seed": args.seed,
                              "keep-best": bool(args.keep_best),
                              "results-path": str(out / (name + ".json"))}
                run_config.update(overrides)
                runs[name] = flwr_run(name, "sim", run_config, env, procs, args.timeout, {
                    "num-supernodes": args.num_supernodes,
                    "client-resources-num-cpus": 1,
                    "init-args-num-cpus": args.cpus,
                })
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, record in runs.items():
        check(record["nodes"] == args.num_supernodes,
              "%s: %d virtual SuperNodes connected (%d)" % (name, args.num_supernodes, record["nodes"]))
        if record["strategy"] == "signds":
            check_signds(check, name, record, args.num_supernodes, args.rounds,
                         float(record["config"]["epsilon"]), float(record["config"]["top-k-fraction"]))
        else:
            accuracy = per_round(record, "central", "accuracy")
            check(accuracy[-1] > 0.5, "%s: final accuracy %.3f > 0.5" % (name, accuracy[-1]))
    write_table(runs, out, args)
    if args.readme:
        plot(runs, out / "accuracy.png", args)
    return 1 if check.failed else 0


def write_table(runs, out, args):
    rounds = args.rounds
    marks = [r for r in (1, 5, 10, 20, 30, 50, 75, 100, 150, 200) if r <= rounds]
    if rounds not in marks:
        marks.append(rounds)
    best = any("best" in record for record in runs.values())
    lines = ["| run | " + " | ".join("@%d" % r for r in marks)
             + (" | best kept (round) |" if best else " |")
             + " ε per round | ε after %d rounds | bytes/client/round |" % rounds,
             "|---|" + "---|" * (len(marks) + 3 + int(best))]
    for name, record in runs.items():
        acc = per_round(record, "central", "accuracy")  # index 0 = initial model
        cells = ["%.3f" % acc[r] for r in marks]
        if best:
            kept = record.get("best")
            cells.append("%.3f (%d)" % (kept["accuracy"], kept["round"]) if kept else "–")
        if record["strategy"] == "signds":
            eps = record["epsilon_per_round"]
            totals = per_round(record, "train", "signds-epsilon-total-max")
            total = totals[-1] - (totals[0] - eps)  # this run's share of the ledger
            size = sum(per_round(record, "train", "signds-report-bytes")) / rounds
            tail = ["%.4f" % eps, "%.1f" % total, "%.1f" % size]
        else:
            tail = ["∞ (no DP)", "∞", "%d" % (4 * 650)]
        lines.append("| %s | %s | %s |" % (name, " | ".join(cells), " | ".join(tail)))
    text = "\n".join(lines) + "\n"
    (out / "table.md").write_text(text)
    print(text)


def plot(runs, path, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for name, record in runs.items():
        acc = per_round(record, "central", "accuracy")
        label = name
        if record["strategy"] == "signds":
            label += " (ε per round %.2f)" % record["epsilon_per_round"]
        ax.plot(range(len(acc)), acc, label=label, linestyle="-" if record["strategy"] == "fedavg" else "--")
    ax.axhline(0.1, color="grey", linewidth=0.8, linestyle=":", label="chance (0.1)")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (359 rows)")
    ax.set_ylim(0, 1)
    ax.set_title("digits, %d clients non-IID, Flower simulation (Ray): SignDS vs FedAvg" % args.num_supernodes)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    print("plot: %s" % path)


def deployment(args):
    sys.path.insert(0, str(APP))
    work, port, env = setup("flower-deploy-", "deploy")
    check = Checks()
    nodes = 2
    started = time.monotonic()
    try:
        with Processes(work) as procs:
            start_superlink(procs, port, env, simulation=False)
            for i in range(nodes):
                procs.start("supernode-%d" % i, [
                    str(BIN / "flower-supernode"), "--insecure", "--superlink", "127.0.0.1:%d" % port,
                    "--host", "127.0.0.1", "--port", str(free_port()),
                    "--node-config", "partition-id=%d num-partitions=%d" % (i, nodes)], env)
            run_config = {"strategy": "signds", "num-server-rounds": args.rounds, "epsilon": 100.0,
                          "split": "iid", "local-epochs": 5, "batch-size": 16, "min-nodes": nodes,
                          "fraction-evaluate": 1.0, "laplace-epsilon": 1.0,
                          "results-path": str(work / "deployment.json")}
            record = flwr_run("deployment", "deploy", run_config, env, procs,
                              max(10, args.timeout - (time.monotonic() - started)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    accuracy = per_round(record, "central", "accuracy")
    print("test accuracy per round (0 = initial model): %s" % " ".join("%.3f" % a for a in accuracy))
    check(record["nodes"] == nodes, "2 SuperNodes connected (%d)" % record["nodes"])
    check(accuracy[0] < 0.15, "the initial model is at chance: %.3f < 0.15" % accuracy[0])
    check(accuracy[-1] >= 0.25, "SignDS raised test accuracy above chance: %.3f >= 0.25" % accuracy[-1])
    check_signds(check, "deployment", record, nodes, args.rounds, 100.0, 0.2)
    clustering = [record["evaluate"].get(str(r), {}) for r in range(1, args.rounds + 1)]
    check(all(c.get("clients") == nodes and c.get("laplace-epsilon", 99) <= 1.0 for c in clustering),
          "every round the server received 2 Laplace vectors with ε <= 1 (%s)" % clustering[-1])
    print("deployment finished in %.1fs" % (time.monotonic() - started))
    return 1 if check.failed else 0


def mistakes(args):
    """Runs that must fail: SignDSStrategy with clients that lack SignDSMod, and a negative
    ε; each must end with exit status 1 and one line saying why (and nothing trained)."""
    sys.path.insert(0, str(APP))
    work, port, env = setup("flower-mistakes-", "sim")
    check = Checks()
    nodes = 4
    cases = [
        ("no-signds-mod", {"mistake": "no-signds-mod"},
         "SignDS round 1 failed: 0 of the %d sampled nodes run SignDSMod" % nodes),
        ("negative-epsilon", {"epsilon": -1.0}, "SignDSStrategy: "),
    ]
    try:
        with Processes(work) as procs:
            start_superlink(procs, port, env, simulation=True)
            for name, overrides, want in cases:
                run_config = {"strategy": "signds", "num-server-rounds": 2, "min-nodes": nodes,
                              "results-path": str(work / (name + ".json"))}
                run_config.update(overrides)
                code, last = flwr_run(name, "sim", run_config, env, procs, args.timeout, {
                    "num-supernodes": nodes, "client-resources-num-cpus": 1,
                    "init-args-num-cpus": args.cpus}, expect_failure=True)
                check(code == 1, "%s: fl-privacy-flwr-run exits 1 (%d)" % (name, code))
                check(last.startswith("fl-privacy-flwr-run: run ") and "finished:failed" in last
                      and want in last, "%s: its last line says why: %s" % (name, last))
                check(not (work / (name + ".json")).exists(), "%s: no results written" % name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if check.failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulation")
    sim.add_argument("--num-supernodes", type=int, default=50)
    sim.add_argument("--rounds", type=int, default=100)
    sim.add_argument("--strategies", default="signds,fedavg")
    sim.add_argument("--epsilons", default="10,100")
    sim.add_argument("--keep-best", action="store_true",
                     help="the server holds every tenth training row and reports the best model")
    sim.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    sim.add_argument("--seed", type=int, default=1)
    sim.add_argument("--timeout", type=float, default=3600)
    sim.add_argument("--out", default="flower-digits-results")
    sim.add_argument("--readme", action="store_true", help="also write accuracy.png")
    dep = sub.add_parser("deployment")
    dep.add_argument("--rounds", type=int, default=5)
    dep.add_argument("--timeout", type=float, default=300)
    bad = sub.add_parser("mistakes", help="runs that must fail with exit status 1 and one line")
    bad.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    bad.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    # `timeout` and CI cancel with SIGTERM: unwind, so every started process is stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sys.exit({"simulation": simulation, "deployment": deployment,
              "mistakes": mistakes}[args.command](args))


if __name__ == "__main__":
    main()
