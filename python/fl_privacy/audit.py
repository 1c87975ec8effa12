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

The function is called as ``mechanism_fn(input, n)`` with the protocol's input (an int for
the RR and LabelDP mechanisms, a list of floats for EmbeddingDP and Laplace) and must return
``n`` outputs (a list or numpy array: class indices, rows of 0/1 bits, rows of floats).
:func:`serve` runs the same function as a child for the command line, so one mechanism can
be audited both ways.
"""

import json
import sys
from typing import List, NamedTuple, Optional

import numpy as np

from fl_privacy import _native

__all__ = ["MECHANISMS", "AuditResult", "audit", "serve"]

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
    #: Where report.json, report.md and the plot were written (None if not written).
    report_dir: Optional[str]

    @property
    def tests(self) -> List[dict]:
        """One row per hypothesis test (test, p-value, Holm-adjusted p-value, passed...)."""
        return self.report["results"]

    @property
    def epsilon(self) -> List[dict]:
        """One row per ε statement (claimed, realised, certified lower bound...)."""
        return self.report["epsilon"]


def _response_line(outputs):
    array = np.asarray(outputs)
    return json.dumps({"outputs": array.tolist()})


class _Answer:
    """Answers request lines with ``mechanism_fn``; keeps its exception for the caller."""

    def __init__(self, mechanism_fn):
        self.mechanism_fn = mechanism_fn
        self.error = None

    def __call__(self, line):
        request = json.loads(line)
        try:
            outputs = self.mechanism_fn(request["input"], request["n"])
        except Exception as exc:  # re-raised by audit(), chained to the audit's error
            self.error = exc
            raise
        return _response_line(outputs)


def audit(mechanism_fn, mechanism, epsilon, *, classes=None, dim=None, samples=1_000_000,
          alpha=1e-3, batch=10_000, out=None):
    """Audit ``mechanism_fn`` against fl-ldp's law of ``mechanism`` at ``epsilon``.

    Args:
      mechanism_fn: ``f(input, n)`` returning ``n`` outputs for the protocol input.
      mechanism: one of :data:`MECHANISMS` (``fl-audit external --mechanism``).
      epsilon: the claimed ε (``--eps``).
      classes: number of classes (label-dp-onehot; ``--classes``).
      dim: dimension (embedding-dp, laplace; ``--dim``).
      samples: samples per input (``--samples``, default 10^6 as the command line).
      alpha: family-wise significance level (``--alpha``).
      batch: outputs per call of ``mechanism_fn`` (``--batch``).
      out: a directory to write report.json, report.md and the plot into (atomically).

    Returns:
      :class:`AuditResult`. A failed audit is a result (``passed`` False), not an exception.

    Raises:
      ValueError: for a usage error (unknown mechanism, missing classes/dim, bad ε or α).
      RuntimeError: when the mechanism misbehaves (wrong count or form of outputs, NaN);
        an exception raised by ``mechanism_fn`` propagates, chained to the audit's error.
    """
    answer = _Answer(mechanism_fn)
    target = getattr(mechanism_fn, "__qualname__", repr(mechanism_fn))
    try:
        passed, header, verdict, report = _native.audit_external(
            answer, str(mechanism), float(epsilon),
            None if classes is None else int(classes),
            None if dim is None else int(dim),
            int(samples), float(alpha), int(batch),
            None if out is None else str(out), target,
        )
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
