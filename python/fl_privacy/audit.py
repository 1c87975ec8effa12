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
import re
import sys
from typing import List, NamedTuple, Optional

import numpy as np

from fl_privacy import _checks, _native

__all__ = ["LAW_OPTIONS", "MECHANISMS", "AuditResult", "audit", "serve"]

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
