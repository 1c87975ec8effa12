#!/usr/bin/env python3
"""Audit real third-party DP libraries with `fl-audit external` and print the results table.

    python3 audits/examples/libraries/audit_libraries.py [--library NAME]... [--quick]
        [--samples N] [--alpha A] [--fl-audit PATH] [--venv-root DIR]
        [--readme audits/README.md]

For each library (opendp, diffprivlib, multi-freq-ldpy) a virtual environment is created
(python3 -m venv) under --venv-root (default: a temporary directory, removed at the end)
and the pinned requirements-<library>.txt beside this script is installed into it. Each
audited mechanism is then run twice through its adapter: configured as the library's
documentation prescribes (the audit must PASS) and misconfigured on purpose with a wrong
epsilon or sensitivity while the audit keeps the claim (the audit must FAIL). The table
(library, version, mechanism, configuration, verdict, certified epsilon lower bound) goes
to stdout and, with --readme, between the markers
`<!-- library-audits:begin -->` and `<!-- library-audits:end -->` of that file.

Exit status 0 when every run got its expected verdict, 1 otherwise (2 for a usage or
set-up error). The libraries draw from their own generators (OpenDP and multi-freq-ldpy
cannot be seeded), so p-values and bounds vary between runs; the verdicts do not (a
correct run fails with probability at most alpha, 1e-3 by default). CI passes a smaller
alpha (--alpha 1e-6): its documented runs are unseeded, so at 1e-3 each would fail about
once in a thousand CI runs, while the misconfigured ones (2ε, half the sensitivity) are
still rejected at 1e-6 (their errors are tens of standard errors at --quick's sizes).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

LIBRARIES = {
    "opendp": ("opendp", "opendp_adapter.py"),
    "diffprivlib": ("diffprivlib", "diffprivlib_adapter.py"),
    "multi-freq-ldpy": ("multi-freq-ldpy", "multi_freq_ldpy_adapter.py"),
}

# (library, mechanism, audit options, adapter options, documented, misconfigured), where
# documented and misconfigured are (what the table says, extra adapter options). The audit
# always claims epsilon = 1.
RUNS = [
    ("opendp", "rr-binary", [], [],
     ("prob = e^ε/(1+e^ε)", ["--eps", "1"]),
     ("prob computed at 2ε", ["--eps", "2"])),
    ("opendp", "rr-kary", ["--classes", "4"], ["--classes", "4"],
     ("4 categories, prob = e^ε/(e^ε+3)", ["--eps", "1"]),
     ("prob computed at 2ε", ["--eps", "2"])),
    ("opendp", "laplace", ["--dim", "3"], [],
     ("make_laplace, L1, scale = 2/ε", ["--eps", "1", "--sensitivity", "2"]),
     ("scale = 1/ε (sensitivity 1)", ["--eps", "1", "--sensitivity", "1"])),
    ("diffprivlib", "rr-binary", [], [],
     ("Binary(epsilon=ε)", ["--eps", "1"]),
     ("Binary(epsilon=2ε)", ["--eps", "2"])),
    ("diffprivlib", "laplace", ["--dim", "3"], [],
     ("Laplace(epsilon=ε, sensitivity=2) per coordinate", ["--eps", "1", "--sensitivity", "2"]),
     ("sensitivity=1", ["--eps", "1", "--sensitivity", "1"])),
    ("diffprivlib", "exponential", ["--utilities", "3,1,0,3,2"], [],
     ("Exponential(epsilon=ε, sensitivity=1)", ["--eps", "1", "--sensitivity", "1"]),
     ("sensitivity=0.5", ["--eps", "1", "--sensitivity", "0.5"])),
    ("multi-freq-ldpy", "frequency-grr", ["--classes", "6"], ["--classes", "6"],
     ("GRR_Client(x, 6, ε)", ["--eps", "1"]),
     ("GRR_Client at 2ε", ["--eps", "2"])),
    ("multi-freq-ldpy", "frequency-oue", ["--classes", "6"], ["--classes", "6"],
     ("UE_Client(x, 6, ε, optimal=True)", ["--eps", "1"]),
     ("UE_Client at 2ε", ["--eps", "2"])),
    # The library's g = round(e^ε) + 1 is 4 at ε = 1 and still 4 at 1.25ε (2ε would change
    # the report's shape, a usage error rather than a verdict).
    ("multi-freq-ldpy", "frequency-olh",
     ["--classes", "6", "--olh-hash", "reported", "--buckets", "4"], ["--classes", "6"],
     ("LH_Client(x, 6, ε, optimal=True), g = 4, hashes reported", ["--eps", "1"]),
     ("LH_Client at 1.25ε (same g)", ["--eps", "1.25"])),
]


def fail(message):
    print(f"audit_libraries: {message}", file=sys.stderr)
    sys.exit(2)


def venv_python(root, library):
    """A virtual environment with the library's pinned requirements; its python."""
    venv = os.path.join(root, library)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        requirements = os.path.join(HERE, f"requirements-{library}.txt")
        subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "-r", requirements],
            check=True,
        )
    return python


def version(python, distribution):
    out = subprocess.run(
        [python, "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
        check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


def fmt(x):
    """A bound for people: three decimals."""
    return f"{x:.3f}"


def audit(fl_audit, python, adapter, mechanism, audit_args, adapter_args, samples, alpha,
          out):
    """One `fl-audit external` run: (verdict, bounds text, first failing test or '')."""
    command = [fl_audit, "external", "--mechanism", mechanism, "--eps", "1", *audit_args,
               "--samples", str(samples), "--alpha", repr(alpha), "--out", out,
               "--timeout", "600", "--",
               python, os.path.join(HERE, adapter), "--mechanism", mechanism,
               *adapter_args]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode not in (0, 1):
        return "ERROR", run.stderr.strip().splitlines()[-1:] or ["?"], ""
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    bounds = []
    for e in report["epsilon"]:
        scope = e["params"].get("scope", "")
        bounds.append(f"{scope} {fmt(e['lower_bound'])}".strip())
    failing = sorted(
        (r for r in report["results"] if not r["passed"]), key=lambda r: r["adjusted_p_value"]
    )
    first = failing[0]["test"] if failing else ""
    if not first and run.returncode == 1:
        first = "ε bound above the claim"
    return ("PASS" if run.returncode == 0 else "FAIL"), bounds, first


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--library", action="append", choices=sorted(LIBRARIES))
    p.add_argument("--quick", action="store_true", help="20 000 samples per input")
    p.add_argument("--samples", type=int, default=None, help="samples per input")
    p.add_argument("--alpha", type=float, default=1e-3,
                   help="family-wise significance level of each audit (default 1e-3)")
    p.add_argument("--fl-audit", default=os.path.join(ROOT, "target", "release", "fl-audit"))
    p.add_argument("--venv-root", default=None)
    p.add_argument("--readme", default=None)
    args = p.parse_args()
    samples = args.samples or (20_000 if args.quick else 200_000)
    if not os.access(args.fl_audit, os.X_OK):
        fail(f"{args.fl_audit} is not an executable: build it with "
             "`cargo build --release -p fl-audit` or pass --fl-audit")
    libraries = args.library or list(LIBRARIES)
    root = args.venv_root or tempfile.mkdtemp(prefix="fl-audit-libraries-")
    rows, wrong = [], 0
    try:
        for library in libraries:
            distribution, adapter = LIBRARIES[library]
            python = venv_python(root, library)
            v = version(python, distribution)
            for lib, mechanism, audit_args, adapter_args, documented, misconfigured in RUNS:
                if lib != library:
                    continue
                for (config, extra), expect in ((documented, "PASS"), (misconfigured, "FAIL")):
                    out = tempfile.mkdtemp(prefix="fl-audit-report-")
                    try:
                        verdict, bounds, first = audit(
                            args.fl_audit, python, adapter, mechanism, audit_args,
                            adapter_args + extra, samples, args.alpha, out,
                        )
                    finally:
                        shutil.rmtree(out, ignore_errors=True)
                    wrong += verdict != expect
                    detail = f" ({first})" if first else ""
                    rows.append(
                        f"| {library} | {v} | {mechanism} | {config} | {expect} | "
                        f"**{verdict}**{detail} | {', '.join(bounds)} |"
                    )
                    print(rows[-1], flush=True)
    finally:
        if args.venv_root is None:
            shutil.rmtree(root, ignore_errors=True)
    table = "\n".join(
        [
            f"Claimed ε = 1 throughout; {samples} samples per input; family-wise α = "
            f"{'10⁻³' if args.alpha == 1e-3 else repr(args.alpha)}; "
            "ε̂_lb per ε statement (scope and certified bound).",
            "",
            "| library | version | mechanism | configuration | expected | verdict | ε̂_lb |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print()
    print(table)
    if args.readme:
        with open(args.readme, encoding="utf-8") as f:
            text = f.read()
        pattern = re.compile(
            r"(<!-- library-audits:begin -->\n).*?(<!-- library-audits:end -->)", re.S
        )
        if not pattern.search(text):
            fail(f"{args.readme} has no library-audits markers")
        text = pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)
        with open(args.readme, "w", encoding="utf-8") as f:
            f.write(text)
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
