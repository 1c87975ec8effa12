"""fl_privacy against python-paillier + gmpy2, and against fl-ldp's own rate, in one run.

    pip install -r python/requirements-test.txt && pip install ./python
    python python/bench.py                      # the issue's sizes (about 6 minutes)
    python python/bench.py --batch 1000 --ldp-size 1000000   # a quick look

Prints one Markdown table (docs/PERFORMANCE.md, section "Python package"), for the engine
fl_privacy.paillier.engine() names (FL_PAILLIER_ENGINE=x86-64-adx measures the kernels of a
CPU without AVX-512 IFMA on one that has it). Per-call rows are paired sample by sample
(phe and ours back to back, alternating the order; the ratio is the median of per-pair
ratios). Every ratio is measured in this run: phe's figures come from phe 1.5 with gmpy2 on the same key, the
"crate" figures from fl-ldp's own batch calls on one thread (no Python in the loop,
`_native.crate_baseline_seconds`). Per-call figures are medians of ``--calls`` calls; batch
figures one timed call each. Threads: phe is single-threaded; fl_privacy's batch calls use
rayon's pool (all cores, or RAYON_NUM_THREADS).
"""

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time

# This script sits beside the package's sources (python/fl_privacy, without the compiled
# extension): import the installed package, not the source directory.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402

import phe  # noqa: E402
import phe.util  # noqa: E402
from fl_privacy import _native, ldp, paillier  # noqa: E402


def median_seconds(call, calls):
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


#: The per-call rows' clock: wall time, or with --clock cpu the calling thread's CPU time
#: (the per-call operations run on the calling thread; a loaded machine inflates wall time).
PER_CALL_CLOCK = time.perf_counter


def paired_seconds(phe_call, our_call, calls):
    """Per-call timings paired sample by sample (phe and ours back to back, alternating which
    goes first): (phe's median, ours' median, the median of the per-pair ratios)."""
    phe_t, our_t, ratios = [], [], []
    for i in range(calls):
        order = [(phe_t, phe_call), (our_t, our_call)]
        for times, call in order if i % 2 == 0 else reversed(order):
            start = PER_CALL_CLOCK()
            call()
            times.append(PER_CALL_CLOCK() - start)
        ratios.append(phe_t[-1] / our_t[-1])
    return statistics.median(phe_t), statistics.median(our_t), statistics.median(ratios)


def once(call):
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def fmt_time(seconds):
    if seconds >= 1:
        return "%.2f s" % seconds
    if seconds >= 1e-3:
        return "%.2f ms" % (seconds * 1e3)
    return "%.1f µs" % (seconds * 1e6)


def paillier_rows(args):
    rows = []
    public_key, private_key = paillier.generate_paillier_keypair(n_length=args.key_bits)
    phe_public = phe.PaillierPublicKey(public_key.n)
    phe_private = phe.PaillierPrivateKey(phe_public, private_key.p, private_key.q)
    rng = random.Random(1)
    x = rng.uniform(-1e3, 1e3)

    def row(what, phe_seconds, ours_seconds, goal, ratio=None):
        ratio = phe_seconds / ours_seconds if ratio is None else ratio
        rows.append((what, fmt_time(phe_seconds), fmt_time(ours_seconds), "%.2f×" % ratio,
                     goal))

    # Issue 22's goals depend on the kernel class: with AVX-512 IFMA ≥ 4× per call and
    # ≥ 10× for batches on 2 cores; without (x86-64-adx) ≥ 1.5× on every row.
    ifma = paillier.engine() == "ifma"
    per_call_goal, batch_goal = ("≥ 4×", "≥ 10×") if ifma else ("≥ 1.5×", "≥ 1.5×")

    def per_call(what, phe_call, our_call, calls):
        phe_s, our_s, ratio = paired_seconds(phe_call, our_call, calls)
        row(what + " (per call, paired)", phe_s, our_s, per_call_goal, ratio)

    per_call("encrypt one float", lambda: phe_public.encrypt(x), lambda: public_key.encrypt(x),
             args.calls)
    phe_c, our_c = phe_public.encrypt(x), public_key.encrypt(x)
    per_call("decrypt one float", lambda: phe_private.decrypt(phe_c),
             lambda: private_key.decrypt(our_c), args.calls)
    per_call("add two encrypted floats", lambda: phe_c + phe_c, lambda: our_c + our_c,
             args.calls * 10)
    per_call("multiply by a float scalar", lambda: phe_c * 3.25, lambda: our_c * 3.25,
             args.calls)
    values = np.array([rng.uniform(-1e3, 1e3) for _ in range(args.batch)])
    phe_enc, phe_numbers = once(lambda: [phe_public.encrypt(float(v)) for v in values])
    our_enc, our_array = once(lambda: public_key.encrypt_many(values))
    row("encrypt %d floats (batch)" % args.batch, phe_enc, our_enc, batch_goal)
    owner_enc, owner_array = once(lambda: private_key.encrypt_many(values))
    row("encrypt %d floats (batch) by the key owner (CRT; not in phe)" % args.batch, phe_enc,
        owner_enc, "—")
    assert np.array_equal(private_key.decrypt_many(owner_array), values)
    phe_dec, phe_out = once(lambda: [phe_private.decrypt(c) for c in phe_numbers])
    our_dec, our_out = once(lambda: private_key.decrypt_many(our_array))
    row("decrypt %d floats (batch)" % args.batch, phe_dec, our_dec, batch_goal)
    assert np.array_equal(np.asarray(phe_out), values) and np.array_equal(our_out, values)
    phe_sum, _ = once(lambda: sum(phe_numbers))
    our_sum, _ = once(lambda: our_array.sum())
    row("sum of %d encrypted floats (batch)" % args.batch, phe_sum, our_sum,
        "—" if ifma else batch_goal)
    phe_mul, _ = once(lambda: [c * float(s) for c, s in zip(phe_numbers, values)])
    our_mul, _ = once(lambda: our_array * values)
    row("multiply %d by float scalars (batch)" % args.batch, phe_mul, our_mul,
        "—" if ifma else batch_goal)
    return rows


def ldp_rows(args):
    n = args.ldp_size
    eps = 1.0
    bits = np.arange(n) % 3 == 0
    classes = (np.arange(n) % 10).astype(np.int64)
    embedding = ((np.arange(n) % 7) - 3.0).astype(np.float32)
    laplace = ldp.Laplace(eps, 10)
    vectors = np.full((n // 10, 10), 0.1)
    cases = [
        ("binary RR", "rr-binary", lambda: ldp.BinaryRandomizedResponse(eps).randomize(bits)),
        ("k-ary RR (k = 10)", "rr-kary",
         lambda: ldp.KaryRandomizedResponse(eps, 10).randomize(classes)),
        ("EmbeddingDP (float32)", "embedding-dp",
         lambda: ldp.EmbeddingDP(eps).privatize(embedding)),
        ("Laplace, d = 10 vectors (exact lattice noise)", "laplace",
         lambda: laplace.privatize(vectors)),
    ]
    rows = []
    for what, name, call in cases:
        ours = min(once(call)[0] for _ in range(args.repeats))
        crate = min(_native.crate_baseline_seconds(name, n, eps) for _ in range(args.repeats))
        rows.append((what, "%.1f M/s" % (n / crate / 1e6), "%.1f M/s" % (n / ours / 1e6),
                     "%.2f×" % (crate / ours), "≥ 0.5× (within 2×)"))
    return rows


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--calls", type=int, default=30, help="calls per per-call median")
    parser.add_argument("--batch", type=int, default=10_000, help="values per batch call")
    parser.add_argument("--ldp-size", type=int, default=10_000_000, help="elements per LDP call")
    parser.add_argument("--repeats", type=int, default=3, help="LDP calls (best of)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="per-call rows: wall time or the thread's CPU time")
    parser.add_argument("--skip-paillier", action="store_true")
    parser.add_argument("--skip-ldp", action="store_true")
    args = parser.parse_args()
    global PER_CALL_CLOCK
    if args.clock == "cpu":
        PER_CALL_CLOCK = time.thread_time
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    print("machine: %s, %s, %d cores; load average before the run: %s; commit %s" % (
        platform.processor() or platform.machine(), platform.platform(), os.cpu_count(),
        "n/a" if load is None else "%.2f %.2f %.2f" % load, commit))
    print("fl_privacy.paillier engine: %s; per-call clock: %s" % (paillier.engine(), args.clock))
    print("phe %s with gmpy2 %s; numpy %s; RAYON_NUM_THREADS=%s" % (
        phe.__version__, "yes" if phe.util.HAVE_GMP else "NO (pure Python)", np.__version__,
        os.environ.get("RAYON_NUM_THREADS", "unset (all cores)")))
    if not args.skip_paillier:
        print("\nPaillier, %d-bit key (phe + gmpy2 vs fl_privacy.paillier)\n" % args.key_bits)
        print(table(["operation", "phe + gmpy2", "fl_privacy", "phe ÷ fl_privacy", "goal"],
                    paillier_rows(args)))
    if not args.skip_ldp:
        print("\nLDP over %d-element arrays (fl-ldp's own batch call on one thread vs "
              "fl_privacy.ldp from numpy)\n" % args.ldp_size)
        print(table(["mechanism", "fl-ldp crate, 1 thread", "fl_privacy.ldp",
                     "fl_privacy ÷ crate (rate)", "goal"], ldp_rows(args)))
    try:
        print("\nload average after the run: %.2f %.2f %.2f" % os.getloadavg())
    except OSError:
        pass


if __name__ == "__main__":
    main()
