#!/usr/bin/env python3
"""Golden values for fl-stats, computed with scipy.

Regenerate (from the repository root, with scipy and scikit-learn installed, e.g.
`pip install scipy scikit-learn`):

    python3 crates/fl-stats/tests/data/generate.py > crates/fl-stats/tests/data/golden.txt
    python3 crates/fl-stats/tests/data/generate.py clustering > crates/fl-stats/tests/data/clustering.txt
    python3 crates/fl-stats/tests/data/generate.py normal > crates/fl-stats/tests/data/normal.txt

Every line is `tag field field ...`; floats are written with repr() so they round-trip
exactly; lists are comma-separated. The Rust test `tests/golden.rs` parses this file.
Cases cover n from 5 to 10^6 and p-values from about 0.5 down to 1e-30 (plus the
chi-square tail down to 1e-300).
"""

import sys

import numpy as np
import scipy
from scipy import stats

TARGETS = [0.5, 0.1, 1e-2, 1e-3, 1e-5, 1e-10, 1e-20, 1e-30]
NS = [5, 10, 20, 50, 100, 140, 141, 200, 500, 1000, 10_000, 100_000, 1_000_000]


def out(*fields):
    print(" ".join(str(f) for f in fields))


def fl(x):
    return repr(float(x))


def lst(xs, f=str):
    return ",".join(f(x) for x in xs)


def chi_square_sf():
    for df in [1, 2, 5, 10, 50, 100, 1000]:
        for target in TARGETS + [1e-50, 1e-100, 1e-200, 1e-300]:
            x = stats.chi2.isf(target, df)
            if not np.isfinite(x) or x <= 0:
                continue
            out("chi2sf", fl(x), df, fl(stats.chi2.sf(x, df)))


def chi_square_gof():
    for n in NS:
        for k in [2, 4, 10]:
            probs = np.full(k, 1.0 / k) if k != 4 else np.array([0.1, 0.2, 0.3, 0.4])
            expected = n * probs
            base = np.floor(expected).astype(np.int64)
            base[-1] += n - base.sum()
            seen = set()
            for target in TARGETS:
                x = stats.chi2.isf(target, k - 1)
                e0, e1 = expected[0], expected[1]
                delta = int(round(np.sqrt(x / (1.0 / e0 + 1.0 / e1))))
                delta = min(delta, int(base[1]))
                obs = base.copy()
                obs[0] += delta
                obs[1] -= delta
                key = tuple(obs)
                if key in seen:
                    continue
                seen.add(key)
                res = stats.chisquare(obs, f_exp=n * probs)
                out("chi2gof", lst(obs), lst(probs, fl), fl(res.statistic), fl(res.pvalue))


def binomial():
    for n in NS:
        for p in [0.5, 0.731058578630005, 0.1, 0.01]:
            seen = set()
            for target in TARGETS:
                for side in ["upper", "lower"]:
                    if side == "upper":
                        k = int(stats.binom.isf(target / 2, n, p)) + 1
                    else:
                        k = int(stats.binom.ppf(target / 2, n, p))
                    k = max(0, min(n, k))
                    if (k, side) in seen:
                        continue
                    seen.add((k, side))
                    for alt in ["two-sided", "less", "greater"]:
                        r = stats.binomtest(k, n, p, alternative=alt)
                        out("binomtest", k, n, fl(p), alt, fl(r.pvalue))
                    # Clopper-Pearson from its definition through the beta quantiles
                    # (boost, ~1e-15). binomtest(...).proportion_ci(method="exact") is not
                    # used: it solves with brentq at an absolute xtol of 2e-12, i.e. only
                    # ~1e-9 relative for small proportions.
                    for tag, conf in [("cp95", 0.95), ("cp999999", 1 - 1e-6)]:
                        err = 1 - conf  # as Confidence::error_probability computes it
                        low = 0.0 if k == 0 else stats.beta.ppf(err / 2, k, n - k + 1)
                        high = 1.0 if k == n else stats.beta.isf(err / 2, k + 1, n - k)
                        out(tag, k, n, fl(low), fl(high))
                    out("binomcdf", k, n, fl(p), fl(stats.binom.cdf(k, n, p)), fl(stats.binom.sf(k, n, p)))


def kolmogorov():
    for n in NS:
        for target in TARGETS:
            # Exact inverses are slow for large n (each ksone.sf is an O(n) double-double
            # sum); there the limit laws give a d whose p-value is near the target.
            if n <= 1000:
                d = stats.kstwo.isf(target, n)
                d1 = stats.ksone.isf(target, n)
            else:
                d = stats.kstwobign.isf(target) / np.sqrt(n)
                d1 = np.sqrt(-np.log(target) / (2 * n))
            if not (0 < d < 1):
                continue
            out("kstwo", n, fl(d), fl(stats.kstwo.sf(d, n)), fl(stats.kstwo.cdf(d, n)))
            if 0 < d1 < 1:
                out("ksone", n, fl(d1), fl(stats.ksone.sf(d1, n)))
        # Region edges: t = n d near 1 and n - 1, d = 1/2, n d^2 at the cut-offs.
        for nd2 in [0.3, 0.754693, 0.76, 2.19, 2.21, 3.9, 4.1, 17.0, 19.0]:
            d = np.sqrt(nd2 / n)
            if 0 < d < 1:
                out("kstwo", n, fl(d), fl(stats.kstwo.sf(d, n)), fl(stats.kstwo.cdf(d, n)))
    for t in [0.2, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0]:
        out("kstwobign", fl(t), fl(stats.kstwobign.sf(t)))


def ks_one_sample_data():
    rng = np.random.default_rng(20261101)
    for n in [5, 20, 100, 1000]:
        for shift in [0.0, 0.05, 0.2]:
            x = rng.random(n) * (1 - shift) + shift
            r = stats.kstest(x, "uniform")
            out("kstest_uniform", lst(x, fl), fl(r.statistic), fl(r.pvalue))


def ks_two_sample():
    # Deterministic samples a_i = i/n1, b_j = j/n2 + s (the same float operations in Rust).
    for n1, n2 in [(5, 5), (5, 7), (20, 30), (100, 100), (300, 200), (1000, 999), (10_000, 10_000),
                   (10_000, 3_000), (20_000, 20_000), (100_000, 70_000), (1_000_000, 1_000_000)]:
        seen = set()
        for target in TARGETS:
            en = n1 * n2 / (n1 + n2)
            s = stats.kstwobign.isf(target) / np.sqrt(en)
            if not (0 < s < 1):
                continue
            a = np.arange(n1) / n1
            b = np.arange(n2) / n2 + s
            r = stats.ks_2samp(a, b)
            key = float(r.statistic)
            if key in seen:
                continue
            seen.add(key)
            out("ks2samp", n1, n2, fl(s), fl(r.statistic), fl(r.pvalue))


def multiple_testing():
    rng = np.random.default_rng(7)
    for m in [1, 5, 50]:
        p = rng.random(m) ** 3
        out("bh", lst(p, fl), lst(stats.false_discovery_control(p, method="bh"), fl))


def clustering():
    from sklearn import __version__ as skv
    from sklearn.metrics import calinski_harabasz_score, silhouette_score

    out("# generated by generate.py clustering with scikit-learn", skv, "numpy", np.__version__)
    rng = np.random.default_rng(42)
    cases = [
        np.array([[0.9, 0.1], [0.8, 0.2], [0.2, 0.8], [0.1, 0.9]]),
        np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]),
        np.array([[0.5, 0.5], [0.6, 0.4], [0.2, 0.8]]),
        np.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.1, 0.1, 0.8]]),
    ]
    for n, k in [(10, 3), (40, 5), (200, 10)]:
        # Noisy probability vectors (softmax of Gaussians), labelled by argmax.
        z = rng.normal(size=(n, k)) * 2
        x = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        cases.append(x + rng.laplace(scale=0.05, size=x.shape))
    for x in cases:
        labels = np.argmax(x, axis=1)
        if not (2 <= len(set(labels)) <= len(x) - 1):
            continue
        out("cluster", x.shape[1], lst(x.ravel(), fl), lst(labels),
            fl(calinski_harabasz_score(x, labels)), fl(silhouette_score(x, labels)))


def normal():
    """Standard normal tails (norm.sf, norm.cdf) and two-sided z-test p-values
    (2·norm.sf(|z|)) on a grid of z and at the quantiles of small tail probabilities."""
    out("# generated by generate.py normal with scipy", scipy.__version__, "numpy", np.__version__,
        "python", sys.version.split()[0])
    zs = [i / 4 for i in range(-160, 153)]
    for target in [0.5, 0.25, 0.1, 0.05, 0.025, 0.01, 1e-3, 1e-5, 1e-7, 1e-10, 1e-15, 1e-20,
                   1e-30, 1e-50, 1e-100, 1e-150, 1e-200, 1e-250, 1e-300]:
        z = stats.norm.isf(target)
        zs += [z, -z]
    for z in zs:
        out("normsf", fl(z), fl(stats.norm.sf(z)), fl(stats.norm.cdf(z)))
    # z-tests: estimate, hypothesised value, standard error -> z and the three p-values.
    for est, hyp, se in [(10230.0, 10000.0, 100.0), (0.5, 0.5, 0.1), (-3.0, 1.0, 0.25),
                         (1e6 + 5e3, 1e6, 1e3), (0.731, 0.7310585786300049, 4.4e-4),
                         (123.0, 0.0, 3.5), (0.0, 7.5, 0.2)]:
        z = (est - hyp) / se
        out("ztest", fl(est), fl(hyp), fl(se), fl(z), fl(2 * stats.norm.sf(abs(z))),
            fl(stats.norm.cdf(z)), fl(stats.norm.sf(z)))


def main():
    if sys.argv[1:] == ["clustering"]:
        clustering()
        return
    if sys.argv[1:] == ["normal"]:
        normal()
        return
    out("# generated by generate.py with scipy", scipy.__version__, "numpy", np.__version__,
        "python", sys.version.split()[0])
    chi_square_sf()
    chi_square_gof()
    binomial()
    kolmogorov()
    ks_one_sample_data()
    ks_two_sample()
    multiple_testing()


if __name__ == "__main__":
    main()
