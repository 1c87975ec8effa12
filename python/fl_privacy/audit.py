"""Audit a Python mechanism in-process, exactly as ``fl-audit external`` audits a program.

``fl-audit external`` starts a child process and speaks newline-delimited JSON with it
(``{"input": X, "n": N}`` → ``{"outputs": [...]}``, docs/AUDIT_PROTOCOL.md). :func:`audit`
runs the same audit — fl-audit's own code: the same inputs chosen from the claimed law, the
same tests, certified ε lower bounds, α split, verdict lines and report files — with the
requests answered by a Python function in this process::

    import numpy as np
    from fl_privacy import audit, ldp

    rr = ldp.BinaryRandomizedResponse(1.0)
    rng = ldp.SeededRng(1)          # reproducible samples for a reproducible verdict
    result = audit.audit(
        lambda x, n: rr.randomize(np.full(n, x, dtype=np.int8), rng=rng).output,
        mechanism="rr-binary", epsilon=1.0, samples=200_000, out="audit-report")
    assert result.passed, result.summary

The function is called as ``mechanism_fn(input, n)`` with the protocol's input and must
return ``n`` outputs (a list or numpy array), in the forms of docs/AUDIT_PROTOCOL.md: an int
for the RR, LabelDP, GRR and rr-with-prior mechanisms (output: class indices), a list of
floats for EmbeddingDP and Laplace (rows of 0/1 bits, rows of floats), the utility vector
for the exponential mechanism (candidate indices), a value for OUE (rows of K bits) and OLH
(``[seed, bucket]`` pairs, or ``{"bucket": b, "hashes": [...]}`` with ``olh_hash="reported"``),
a top-k set or ``{"update": u}`` for SignDS selection (rows of indices) and
``{"update": u, "r_est": r, "phase": p}`` for the whole SignDS client (``{"sign": ±1,
"magrr_bit": 0|1, "indices": [...]}``). The mechanism's parameters are keyword arguments
named as ``fl-audit external``'s options (``classes``, ``dim``, ``utilities``, ``prior``,
``eps_rr``, ...; ``suite`` reads them from a suite file). Every audit also tests the serial
independence of each input's outputs in the order returned, so the function must draw
fresh randomness on every call. :func:`serve` runs the same function as a child for the
command line, so one mechanism can be audited both ways.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
from typing import List, NamedTuple, Optional, Sequence

import numpy as np

from fl_privacy import _checks, _native

__all__ = ["LAW_OPTIONS", "MECHANISMS", "AuditResult", "ShardedAuditResult", "audit", "main",
           "merge_shards", "run_on_ray", "serve", "shard_arguments"]

#: The mechanisms the external protocol (and so :func:`audit`) supports.
MECHANISMS = tuple(_native.EXTERNAL_MECHANISMS)


class AuditResult(NamedTuple):
    """The outcome of :func:`audit`."""

    #: Every test consistent with the claimed law and no certified ε violation.
    passed: bool
    #: The two lines ``fl-audit external`` prints (what was audited; PASS/FAIL and ε bounds).
    summary: str
    #: report.json as a dict (schema: audits/report.schema.json).
    report: dict
    #: Where report.json, report.md, report.html and the plot were written (None if not
    #: written).
    report_dir: Optional[str]

    @property
    def tests(self) -> List[dict]:
        """One row per hypothesis test (test, p-value, Holm-adjusted p-value, passed...)."""
        return self.report["results"]

    @property
    def epsilon(self) -> List[dict]:
        """One row per ε statement (claimed, realised, certified lower bound...)."""
        return self.report["epsilon"]


def _plain(value):
    """numpy scalars and arrays inside outputs (e.g. in dicts) as JSON values."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError("not a JSON value: %r" % (value,))


def _response_line(outputs):
    array = np.asarray(outputs) if not isinstance(outputs, list) else None
    plain = outputs if array is None else array.tolist()
    return json.dumps({"outputs": plain}, separators=(",", ":"), default=_plain)


class _Answer:
    """Answers request lines with ``mechanism_fn``; keeps its exception for the caller."""

    def __init__(self, mechanism_fn):
        self.mechanism_fn = mechanism_fn
        self.error = None

    def __call__(self, line):
        request = json.loads(line)
        try:
            outputs = self.mechanism_fn(request["input"], request["n"])
        except BaseException as exc:  # re-raised by audit() (KeyboardInterrupt included)
            self.error = exc
            raise
        return _response_line(outputs)


#: The mechanism parameters :func:`audit` takes, as ``fl-audit external``'s options
#: (``top_k`` is ``--top-k``...).
LAW_OPTIONS = ("classes", "dim", "utilities", "sensitivity", "form", "prior", "top_k",
               "output_dim", "eps_rr", "top_k_fraction", "olh_hash", "buckets",
               "selection_input", "suite")

_INTEGER_OPTIONS = {"classes", "dim", "top_k", "output_dim", "buckets"}
_FLOAT_OPTIONS = {"sensitivity", "eps_rr", "top_k_fraction"}
_VECTOR_OPTIONS = {"utilities", "prior"}


def _law_options(options):
    unknown = set(options) - set(LAW_OPTIONS)
    if unknown:
        raise TypeError("unknown mechanism parameters: %s (allowed: %s)"
                        % (sorted(unknown), ", ".join(LAW_OPTIONS)))
    law = {}
    for name, value in options.items():
        if value is None:
            continue
        if name in _INTEGER_OPTIONS:
            value = _checks.integer(name, value, 0, _checks.U64_MAX)
        elif name in _FLOAT_OPTIONS:
            value = _checks.real(name, value)
        elif name in _VECTOR_OPTIONS:
            if isinstance(value, (str, bytes)):
                raise TypeError("%s must be a sequence of numbers, got %s"
                                % (name, type(value).__name__))
            value = [_checks.real("%s[%d]" % (name, i), v)
                     for i, v in enumerate(np.asarray(value).reshape(-1).tolist())]
        elif name == "suite":
            value = str(value) if hasattr(value, "__fspath__") else _checks.string(name, value)
        else:
            value = _checks.string(name, value)
        law[name] = value
    return law


#: The command line's option names that are not the Python argument's name with "-" → "_".
_RENAMED_OPTIONS = {"eps": "epsilon"}


def _python_names(message):
    """fl-audit's usage message with its command-line options (``--eps``, ``--top-k``)
    written as this function's arguments (``epsilon``, ``top_k``)."""
    return re.sub(
        r"--([a-z][a-z0-9-]*)",
        lambda m: _RENAMED_OPTIONS.get(m.group(1), m.group(1).replace("-", "_")),
        message,
    )


def audit(mechanism_fn, mechanism, epsilon, *, samples=None, alpha=1e-3, batch=10_000,
          out=None, progress=None, **law):
    """Audit ``mechanism_fn`` against fl-audit's law of ``mechanism`` at ``epsilon``.

    Args:
      mechanism_fn: ``f(input, n)`` returning ``n`` outputs for the protocol input.
      mechanism: one of :data:`MECHANISMS` (``fl-audit external --mechanism``).
      epsilon: the claimed ε (``--eps``).
      samples: samples per input (``--samples``); ``None`` (the default, as the command
        line) draws the planner's size for the claimed ε, which detects a 1 % relative error
        in every keep/flip probability with power 0.99; fewer make the summary's verdict line
        say what the audit could detect.
      alpha: family-wise significance level (``--alpha``).
      batch: outputs per call of ``mechanism_fn`` (``--batch``).
      out: a directory to write report.json, report.md, report.html and the plot into
        (atomically; ``--out``).
      progress: draw fl-audit's progress bar (samples drawn, rate, ETA) on the process's
        stderr, as the command line does: redrawn in place on a terminal, a line every 10 %
        otherwise. None (default) decides as the command line: when stderr is a terminal
        or the ``CI`` environment variable is set.
      **law: the mechanism's parameters, named as in :data:`LAW_OPTIONS`: ``classes``
        (``--classes``: rr-kary, label-dp-onehot, frequency-*), ``dim`` (embedding-dp,
        laplace, signds-selection, signds-client), ``utilities``, ``sensitivity`` and
        ``form`` (exponential), ``prior`` (rr-with-prior), ``top_k``, ``output_dim`` and
        ``selection_input`` (signds-selection), ``eps_rr``, ``top_k_fraction`` and
        ``output_dim`` (signds-client), ``olh_hash`` and ``buckets`` (frequency-olh),
        ``suite`` (a suite file with one grid point; the others override it).

    Returns:
      :class:`AuditResult`. A failed audit is a result (``passed`` False), not an exception.

    Raises:
      TypeError: for a parameter :func:`audit` does not know, or of the wrong type (e.g.
        ``epsilon="1"``).
      ValueError: for a usage error (unknown mechanism, missing or invalid parameter, bad ε
        or α), naming the arguments of this function.
      KeyboardInterrupt: on Ctrl-C (raised by ``mechanism_fn``'s next call).
      RuntimeError: when the mechanism misbehaves (wrong count or form of outputs, NaN) or
        ``out`` cannot be written; an exception raised by ``mechanism_fn`` propagates,
        chained to the audit's error.
    """
    if not callable(mechanism_fn):
        raise TypeError("mechanism_fn must be callable, got %s" % type(mechanism_fn).__name__)
    options = _law_options(law)
    mechanism = _checks.string("mechanism", mechanism)
    epsilon = _checks.real("epsilon", epsilon)
    if samples is not None:
        samples = _checks.integer("samples", samples, 1, _checks.U64_MAX)
    alpha = _checks.real("alpha", alpha)
    batch = _checks.integer("batch", batch, 1, _checks.U64_MAX)
    if out is not None and not isinstance(out, str):
        if not hasattr(out, "__fspath__"):
            raise TypeError("out must be None, a str or a path, got %s" % type(out).__name__)
        out = str(out)
    if progress is not None and not isinstance(progress, bool):
        raise TypeError("progress must be None, True or False, got %s" % type(progress).__name__)
    answer = _Answer(mechanism_fn)
    target = getattr(mechanism_fn, "__qualname__", repr(mechanism_fn))
    try:
        passed, header, verdict, report = _native.audit_external(
            answer, mechanism, epsilon, samples, alpha, batch, out, target,
            progress=progress, **options,
        )
    except ValueError as exc:
        raise ValueError(_python_names(str(exc))) from None
    except RuntimeError as exc:
        if answer.error is not None:
            raise answer.error from exc
        raise
    return AuditResult(passed, header + "\n" + verdict, json.loads(report),
                       None if out is None else str(out))


def serve(mechanism_fn, stdin=None, stdout=None):
    """Answer the external protocol on stdin/stdout with ``mechanism_fn`` (for
    ``fl-audit external ... -- python my_mechanism.py``); returns at end of input."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    answer = _Answer(mechanism_fn)
    for line in stdin:
        if line.strip():
            stdout.write(answer(line) + "\n")
            stdout.flush()


# --- Sharded audits on Ray ------------------------------------------------------------------


class ShardedAuditResult(NamedTuple):
    """The outcome of :func:`run_on_ray` (or :func:`merge_shards`)."""

    #: Every test consistent with the claimed law and no certified ε violation.
    passed: bool
    #: What ``fl-audit merge`` printed (the per-suite table and the verdict line).
    summary: str
    #: report.json as a dict (schema: audits/report.schema.json).
    report: dict
    #: Where report.json, report.md, report.html and the plots were written.
    report_dir: str
    #: The shards' counts files, in shard order.
    counts: List[str]


def main(argv=None):
    """The ``fl-audit`` command line, built into this package (``fl-audit ...`` after ``pip
    install``, or ``python -m fl_privacy.audit ...``): the same code and the same output
    and exit status as the Rust binary ``cargo build --release -p fl-audit`` builds."""
    import signal

    args = list(sys.argv[1:] if argv is None else argv)
    # Ctrl-C stops the command as it stops the binary (Python's handler would only run
    # once the native call returns).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    return _native.fl_audit_main(["fl-audit"] + [str(a) for a in args])


def _fl_audit_binary(binary):
    """The fl-audit command, as a list: ``[binary]``, else ``[$FL_AUDIT_BIN]``, else this
    package's own (``python -m fl_privacy.audit``, which needs nothing but the pip install)."""
    found = binary or os.environ.get("FL_AUDIT_BIN")
    if found:
        return [str(found)]
    # `python -m` would import fl_privacy from the working directory first when it holds
    # the source tree (python/ of a checkout, which has no compiled extension): drop it.
    return [sys.executable, "-c", "import sys; sys.path[:] = [p for p in sys.path if p not in "
            "('', '.')]; from fl_privacy.audit import main; sys.exit(main(sys.argv[1:]))"]


def _option_value(value):
    if isinstance(value, (list, tuple)):
        return ",".join(repr(float(v)) for v in value)
    return str(value)


def shard_arguments(shard, shards, counts_out, *, suite=None, mechanism=None, epsilon=None,
                    mechanism_command=None, samples=None, seed=None, alpha=None, batch=None,
                    timeout=None, **law):
    """The ``fl-audit`` arguments that draw shard ``shard`` of ``shards`` into
    ``counts_out``: ``run --suite SUITE`` (the project's samplers), or, with
    ``mechanism_command`` (a list: the program and its arguments; ``{seed}`` in them becomes
    the shard's seed), ``external --mechanism MECHANISM --eps EPSILON`` with the
    mechanism's parameters (``law``, named as in :data:`LAW_OPTIONS`)."""
    shard = _checks.integer("shard", shard, 0, _checks.U64_MAX)
    shards = _checks.integer("shards", shards, 1, _checks.U64_MAX)
    if shard >= shards:
        raise ValueError("shard must be below shards (%d), got %d" % (shards, shard))
    common = []
    if samples is not None:
        common += ["--samples", str(_checks.integer("samples", samples, 1, _checks.U64_MAX))]
    if alpha is not None:
        common += ["--alpha", repr(_checks.real("alpha", alpha))]
    common += ["--shard", "%d/%d" % (shard, shards), "--counts-out", str(counts_out)]
    if mechanism_command is None:
        if mechanism is not None or epsilon is not None or law:
            raise TypeError("mechanism, epsilon and mechanism parameters need mechanism_command "
                            "(an external audit); a run takes suite")
        args = ["run", "--suite", _checks.string("suite", suite or "all")]
        if seed is not None:
            args += ["--seed", str(_checks.integer("seed", seed, 0, _checks.U64_MAX))]
        return args + common
    if isinstance(mechanism_command, (str, bytes)) or not mechanism_command:
        raise TypeError("mechanism_command must be a non-empty list of strings (the program "
                        "and its arguments)")
    if suite is not None or seed is not None:
        raise TypeError("an external audit takes no suite or seed (the mechanism draws its "
                        "own randomness; {seed} in mechanism_command gets the shard's seed)")
    args = ["external", "--mechanism", _checks.string("mechanism", mechanism),
            "--eps", repr(_checks.real("epsilon", epsilon))]
    for name, value in _law_options(law).items():
        args += ["--" + name.replace("_", "-"), _option_value(value)]
    if batch is not None:
        args += ["--batch", str(_checks.integer("batch", batch, 1, _checks.U64_MAX))]
    if timeout is not None:
        args += ["--timeout", repr(_checks.real("timeout", timeout))]
    return args + common + ["--"] + [str(a) for a in mechanism_command]


def _run_fl_audit(command, args):
    """Runs fl-audit (``command``: :func:`_fl_audit_binary`'s list); (exit status, stdout,
    stderr)."""
    done = subprocess.run(list(command) + list(args), capture_output=True, text=True,
                          check=False)
    return done.returncode, done.stdout, done.stderr


def _draw_shard(command, args, counts_name):
    """A Ray task: draws one shard in a scratch directory of the worker and returns the
    counts file's bytes (so that workers need no shared file system)."""
    with tempfile.TemporaryDirectory(prefix="fl-audit-shard-") as scratch:
        path = os.path.join(scratch, counts_name)
        args = [path if a == "{counts_out}" else a for a in args]
        code, out, err = _run_fl_audit(command, args)
        if code != 0:
            return code, out, err, b""
        with open(path, "rb") as f:
            return code, out, err, f.read()


def merge_shards(counts, out, *, binary=None):
    """``fl-audit merge COUNTS... --out OUT``: the report of a run from its shards' counts
    files (each shard exactly once).

    Raises:
      ValueError: when fl-audit refuses the files (a shard missing or twice, another run's
        shard, a corrupted file), with fl-audit's one-line message.
    """
    command = _fl_audit_binary(binary)
    counts = [str(c) for c in counts]
    code, stdout, stderr = _run_fl_audit(command, ["merge"] + counts + ["--out", str(out)])
    if code not in (0, 1):
        raise ValueError(stderr.strip() or "fl-audit merge failed with status %d" % code)
    report = json.loads(pathlib.Path(out, "report.json").read_text())
    return ShardedAuditResult(code == 0, stdout.strip(), report, str(out), counts)


def run_on_ray(shards, *, out, counts_dir=None, binary=None, num_cpus=1, suite=None,
               mechanism=None, epsilon=None, mechanism_command=None, samples=None, seed=None,
               alpha=None, batch=None, timeout=None, **law):
    """Runs an fl-audit audit as ``shards`` Ray tasks and merges them into one report.

    Task i runs ``fl-audit run|external ... --shard i/shards --counts-out FILE`` (see
    :func:`shard_arguments` for the audit's arguments) on a Ray worker and returns FILE's
    bytes; the driver writes them to ``counts_dir`` and runs ``fl-audit merge`` into
    ``out``. The merge equals, count for count and byte for byte in report.json, the same
    shards drawn one after the other in one process (``fl-audit run --shards N``, or the
    shards of an external audit run in a loop and merged), whichever worker ran which shard:
    each shard's seed is derived from the run seed and its index alone.

    Ray is used if installed (``pip install ray``, or the ``flower`` extra, which brings
    it); the cluster is the one ``ray.init`` already connected to, else a local one. Each
    task runs this package's own fl-audit (``python -m fl_privacy.audit`` with the worker's
    Python: ``pip install fl_privacy`` on every node is all it needs), or the binary named
    by ``binary`` or ``$FL_AUDIT_BIN`` (at the same path on every node); an external audit
    also needs ``mechanism_command`` on every node.

    Args:
      shards: the number of shards (Ray tasks).
      out: the report directory.
      counts_dir: where to keep the counts files (default: a fresh temporary directory).
      num_cpus: CPUs Ray reserves per task (fl-audit's samplers use every core they get).
      suite, mechanism, epsilon, mechanism_command, samples, seed, alpha, batch, timeout,
        law: the audit (:func:`shard_arguments`).

    Returns:
      :class:`ShardedAuditResult`; a failed audit is a result (``passed`` False).

    Raises:
      ImportError: when Ray is not installed.
      ValueError: for invalid arguments or when a shard or the merge fails (fl-audit's
        message, naming the shard).
    """
    import ray  # optional dependency: only this function needs it

    command = _fl_audit_binary(binary)
    shards = _checks.integer("shards", shards, 1, _checks.U64_MAX)
    audit_args = dict(suite=suite, mechanism=mechanism, epsilon=epsilon,
                      mechanism_command=mechanism_command, samples=samples, seed=seed,
                      alpha=alpha, batch=batch, timeout=timeout, **law)
    arguments = [shard_arguments(i, shards, "{counts_out}", **audit_args)
                 for i in range(shards)]
    counts_dir = pathlib.Path(counts_dir or tempfile.mkdtemp(prefix="fl-audit-counts-"))
    counts_dir.mkdir(parents=True, exist_ok=True)
    if not ray.is_initialized():
        ray.init()
    task = ray.remote(num_cpus=num_cpus)(_draw_shard)
    futures = [task.remote(command, args, "shard-%d.json" % i)
               for i, args in enumerate(arguments)]
    paths = []
    for i, (code, _stdout, stderr, data) in enumerate(ray.get(futures)):
        if code != 0:
            raise ValueError("shard %d/%d: %s" % (i, shards, stderr.strip()
                                                   or "fl-audit exited with status %d" % code))
        path = counts_dir / ("shard-%d.json" % i)
        path.write_bytes(data)
        paths.append(str(path))
    return merge_shards(paths, out, binary=binary)


if __name__ == "__main__":
    sys.exit(main())
