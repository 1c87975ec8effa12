"""fl_privacy.audit, and the LDP laws of fl_privacy.ldp audited through it.

Every statistical verdict here is reproducible: the mechanisms draw from SeededRng, so the
samples (and p-values) are fixed. α = 10^-3 family-wise (fl-audit's default) for the
audits; each correct mechanism must pass, and the same mechanism sampled at 1.3·ε while the
claim stays ε (the negative control) must fail.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from fl_privacy import audit, ldp, signds

SAMPLES = 200_000  # per input: fl-audit's quick size, detects a 1.3·ε sampler easily
CLASSES, DIM = 4, 3
UTILITIES = [3.0, 1.0, 0.0, 3.0, 2.0]
SIGNDS = {"dim": 40, "top_k_fraction": 0.1, "output_dim": 2, "eps_rr": 1.0}


def adapters(seed):
    """Adapters from the external protocol to fl_privacy.ldp, sampling at a given ε."""
    rng = ldp.SeededRng(seed)

    def rr_binary(eps):
        rr = ldp.BinaryRandomizedResponse(eps)
        return lambda x, n: rr.randomize(np.full(n, x, dtype=np.int8), rng=rng).output

    def label_binary(eps):
        m = ldp.LabelDP(eps)
        return lambda x, n: m.privatize(np.full(n, x, dtype=np.int8), rng=rng).output

    def label_one_hot(eps):
        m = ldp.LabelDP(eps)
        eye = np.eye(CLASSES, dtype=np.int8)
        return lambda x, n: m.privatize(eye[np.full(n, x)], rng=rng).output.argmax(axis=1)

    def kary(eps):
        m = ldp.KaryRandomizedResponse(eps, CLASSES)
        return lambda x, n: m.randomize(np.full(n, x), rng=rng).output

    def embedding(eps):
        m = ldp.EmbeddingDP(eps)
        return lambda x, n: m.privatize(np.tile(np.asarray(x), (n, 1)), rng=rng).output

    def laplace(eps):
        m = ldp.Laplace(eps, DIM)
        return lambda x, n: m.privatize(np.tile(np.asarray(x), (n, 1)), rng=rng).output

    def exponential(eps):
        # The protocol's input is the utility vector (the claimed one or its neighbour).
        m = ldp.ExponentialMechanism(eps, 1.0)
        return lambda u, n: m.sample(np.asarray(u), n, rng=rng).output

    def signds_client(eps):
        # The whole client: the input is {"update", "r_est", "phase"}, one report per draw.
        client = signds.Client(SIGNDS["dim"], top_k_fraction=SIGNDS["top_k_fraction"],
                               epsilon=eps, output_dimension=SIGNDS["output_dim"],
                               magrr_epsilon=SIGNDS["eps_rr"])

        def reports(x, n):
            update = np.asarray(x["update"], dtype=np.float32)
            broadcast = signds.Broadcast(x["r_est"], x["phase"])
            encoded = (client.encode(update, broadcast, rng=rng) for _ in range(n))
            return [{"sign": r.sign, "magrr_bit": int(r.magrr_bit), "indices": r.indices}
                    for r in encoded]

        return reports

    return {
        "rr-binary": (rr_binary, {}),
        "label-dp-binary": (label_binary, {}),
        "label-dp-onehot": (label_one_hot, {"classes": CLASSES}),
        "rr-kary": (kary, {"classes": CLASSES}),
        "frequency-grr (k-ary RR)": (kary, {"classes": CLASSES}),
        "embedding-dp": (embedding, {"dim": DIM}),
        "laplace": (laplace, {"dim": DIM}),
        "exponential": (exponential, {"utilities": UTILITIES}),
        "signds-client": (signds_client, SIGNDS),
    }


CASES = list(adapters(0))


@pytest.mark.parametrize("name", CASES)
def test_ldp_mechanisms_pass_their_audit_and_a_13_eps_sampler_fails(name):
    mechanism = name.split(" ")[0]
    make, options = adapters(20261124)[name]
    eps = 1.0
    good = audit.audit(make(eps), mechanism, eps, samples=SAMPLES, **options)
    assert good.passed, good.summary
    assert good.summary.splitlines()[1].startswith("PASS")
    for row in good.epsilon:
        assert row["lower_bound"] <= row["claimed"]
    bad = audit.audit(make(1.3 * eps), mechanism, eps, samples=SAMPLES, **options)
    assert not bad.passed, bad.summary
    assert bad.summary.splitlines()[1].startswith("FAIL")


def test_a_mechanism_that_reuses_randomness_fails_serial_independence():
    """Correct marginals, correlated calls: k-ary RR whose every output repeats the previous
    one with probability 5 % keeps the law of each output but fails the audit's serial
    independence test (and its reuse-at-any-lag test); the same sampler without repeats
    passes."""

    def repeating(repeat):
        m, rng = ldp.KaryRandomizedResponse(1.0, CLASSES), ldp.SeededRng(11)
        coins = np.random.default_rng(11)

        def draw(x, n):
            out = np.array(m.randomize(np.full(n, x), rng=rng).output)
            for i in np.flatnonzero(coins.random(n) < repeat):
                if i > 0:
                    out[i] = out[i - 1]
            return out

        return draw

    good = audit.audit(repeating(0.0), "rr-kary", 1.0, classes=CLASSES, samples=SAMPLES)
    assert good.passed, good.summary
    bad = audit.audit(repeating(0.05), "rr-kary", 1.0, classes=CLASSES, samples=SAMPLES)
    assert not bad.passed, bad.summary
    failing = {row["test"] for row in bad.tests if not row["passed"]}
    # The serial test at lag 1, and the reuse test over the whole interleaved stream (the
    # copies are correlated at the lag between them there too); no law test.
    assert "serial-independence" in failing, bad.summary
    assert failing <= {"serial-independence", "reuse-any-lag"}, bad.summary


def test_exponential_mechanism_law():
    """The select/probabilities paths, checked here directly (sample is audited above
    through the protocol). 10^6 draws per path
    (sample, and select over rows); a two-sided z-test per candidate (every n·p ≥ 4·10^4,
    normal approximation), Bonferroni over 2 × 5 cells at α = 10^-3: |z| < 4.42."""
    utilities = np.array([3.0, 1.0, 0.0, 3.0, 2.0])
    n = 1_000_000
    rng = ldp.SeededRng(5)

    def max_z(draws, probabilities):
        counts = np.bincount(draws, minlength=utilities.size)
        return np.max(np.abs(counts - n * probabilities) / np.sqrt(n * probabilities * (1 - probabilities)))

    claimed = ldp.ExponentialMechanism(1.0, 1.0)
    p = claimed.probabilities(utilities)
    assert np.isclose(p.sum(), 1.0) and claimed.claim.epsilon <= 1.0
    assert max_z(claimed.sample(utilities, n, rng=rng).output, p) < 4.42
    rows = np.tile(utilities, (n, 1))
    assert max_z(claimed.select(rows, rng=rng).output, p) < 4.42
    # Negative control: a sampler at 1.3·ε against the law at ε.
    wrong = ldp.ExponentialMechanism(1.3, 1.0)
    assert max_z(wrong.sample(utilities, n, rng=rng).output, p) > 4.42


def test_audit_writes_the_report_and_returns_its_rows(tmp_path):
    make, _ = adapters(3)["rr-binary"]
    result = audit.audit(make(0.5), "rr-binary", 0.5, samples=50_000, out=tmp_path / "report")
    files = sorted(p.name for p in (tmp_path / "report").iterdir())
    assert files == ["report.html", "report.json", "report.md", "rr-binary.svg"]
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<svg" in html and 'src="http' not in html and 'href="http' not in html
    on_disk = json.loads((tmp_path / "report" / "report.json").read_text())
    assert on_disk["results"] == result.report["results"] == result.tests
    # The law-planned statement on the reported bit and the learned event.
    assert result.report_dir == str(tmp_path / "report") and len(result.epsilon) == 2
    assert {"alpha", "seed", "samples", "results", "epsilon"} <= set(on_disk)


def test_audit_errors():
    ok = lambda x, n: [x] * n  # noqa: E731
    with pytest.raises(ValueError, match="external audits support"):
        audit.audit(ok, "rr-ternary", 1.0)
    # Usage errors name this function's arguments, not the command line's options.
    for kwargs, name in [({"mechanism": "laplace"}, "needs dim "),
                         ({"mechanism": "exponential"}, "needs utilities "),
                         ({"mechanism": "rr-with-prior"}, "needs prior "),
                         ({"mechanism": "signds-selection", "dim": 100}, "needs top_k "),
                         ({"mechanism": "rr-binary", "epsilon": float("nan")}, "^epsilon must"),
                         ({"mechanism": "rr-binary", "alpha": 2.0}, "^alpha must")]:
        args = {"epsilon": 1.0, **kwargs}
        with pytest.raises(ValueError, match=name) as info:
            audit.audit(ok, **args)
        assert "--" not in str(info.value), info.value
    with pytest.raises(TypeError, match="unknown mechanism parameters"):
        audit.audit(ok, "rr-binary", 1.0, clases=3)
    # Types are checked by name before anything runs; negative counts name the argument.
    for kwargs, error, name in [({"epsilon": "1"}, TypeError, "epsilon"),
                                ({"samples": -5}, ValueError, "samples must be >= 1"),
                                ({"samples": 10.0}, TypeError, "samples"),
                                ({"batch": 0}, ValueError, "batch must be >= 1"),
                                ({"alpha": "0.01"}, TypeError, "alpha"),
                                ({"classes": -3}, ValueError, "classes must be >= 0"),
                                ({"dim": "3"}, TypeError, "dim"),
                                ({"utilities": "3,1,0"}, TypeError, "utilities"),
                                ({"sensitivity": "1"}, TypeError, "sensitivity"),
                                ({"progress": "yes"}, TypeError, "progress")]:
        args = {"mechanism": "rr-binary", "epsilon": 1.0, **kwargs}
        with pytest.raises(error, match=name):
            audit.audit(ok, **args)
    with pytest.raises(TypeError, match="callable"):
        audit.audit(None, "rr-binary", 1.0)
    with pytest.raises(RuntimeError, match="wrong count"):
        audit.audit(lambda x, n: [x] * (n - 1), "rr-binary", 1.0, samples=100)
    with pytest.raises(RuntimeError, match="expected an integer in 0..1"):
        audit.audit(lambda x, n: [2] * n, "rr-binary", 1.0, samples=100)
    with pytest.raises(RuntimeError, match="malformed"):
        audit.audit(lambda x, n: np.full((n, 3), np.nan), "laplace", 1.0, dim=3, samples=100)

    class Boom(Exception):
        pass

    def raising(x, n):
        raise Boom("the mechanism failed")

    with pytest.raises(Boom) as info:
        audit.audit(raising, "rr-binary", 1.0, samples=100)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert set(audit.MECHANISMS) >= {"rr-binary", "label-dp-binary", "label-dp-onehot",
                                     "embedding-dp", "laplace", "rr-kary", "exponential",
                                     "rr-with-prior", "frequency-grr", "frequency-oue",
                                     "frequency-olh", "signds-selection", "signds-magrr",
                                     "signds-client"}


def _fl_audit_binary():
    configured = os.environ.get("FL_AUDIT_BIN")
    if configured:
        return configured
    built = pathlib.Path(__file__).resolve().parents[2] / "target" / "release" / "fl-audit"
    if built.exists():
        return str(built)
    pytest.skip("fl-audit binary not built (cargo build --release -p fl-audit) and FL_AUDIT_BIN unset")


SERVE = """
import sys
import numpy as np
from fl_privacy import audit, ldp
eps, seed = float(sys.argv[1]), int(sys.argv[2])
rr, rng = ldp.BinaryRandomizedResponse(eps), ldp.SeededRng(seed)
audit.serve(lambda x, n: rr.randomize(np.full(n, x, dtype=np.int8), rng=rng).output)
"""


@pytest.mark.parametrize("sampler_eps", [1.0, 1.3])
def test_in_process_audit_equals_fl_audit_external(tmp_path, sampler_eps):
    """The same seeded mechanism audited by the command line (as a child, through
    audit.serve) and in-process gives the same verdict line, to the last digit."""
    binary = _fl_audit_binary()
    script = tmp_path / "mechanism.py"
    script.write_text(SERVE)
    command = [binary, "external", "--mechanism", "rr-binary", "--eps", "1", "--samples", "30000",
               "--batch", "7000", "--", sys.executable, str(script), str(sampler_eps), "9"]
    cli = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert cli.returncode == (0 if sampler_eps == 1.0 else 1), cli.stdout + cli.stderr
    cli_lines = cli.stdout.strip().splitlines()[-2:]
    rr, rng = ldp.BinaryRandomizedResponse(sampler_eps), ldp.SeededRng(9)
    result = audit.audit(lambda x, n: rr.randomize(np.full(n, x, dtype=np.int8), rng=rng).output,
                         "rr-binary", 1, samples=30_000, batch=7000)
    ours = result.summary.splitlines()
    assert ours[1] == cli_lines[1]
    assert ours[0].split(" against ")[0] == cli_lines[0].split(" against ")[0]
    assert ours[0].split("`: ")[1] == cli_lines[0].split("`: ")[1]
    assert result.passed == (cli.returncode == 0)


def test_the_packages_fl_audit_is_the_binarys(tmp_path):
    """``python -m fl_privacy.audit`` (the ``fl-audit`` script pip installs) is the command
    line: the same report, summary and exit statuses as the Rust binary where it is built
    (FL_AUDIT_BIN), and 2 for a usage error."""
    args = ["run", "--suite", "rr-binary", "--samples", "20000", "--seed", "3", "--out", "report"]
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    ours = subprocess.run([sys.executable, "-m", "fl_privacy.audit"] + args,
                          capture_output=True, text=True, cwd=tmp_path / "ours")
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines()[-1].startswith("PASS: ")
    bad = subprocess.run([sys.executable, "-m", "fl_privacy.audit", "run", "--alpha", "2"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "--alpha" in bad.stderr
    binary = os.environ.get("FL_AUDIT_BIN")
    if binary and os.path.isfile(binary):
        theirs = subprocess.run([binary] + args, capture_output=True, text=True,
                                cwd=tmp_path / "theirs")
        assert theirs.returncode == 0 and theirs.stdout == ours.stdout
        assert (tmp_path / "ours" / "report" / "report.json").read_bytes() == \
            (tmp_path / "theirs" / "report" / "report.json").read_bytes()
