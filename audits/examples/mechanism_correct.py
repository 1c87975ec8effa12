#!/usr/bin/env python3
"""A correct external mechanism for `fl-audit external` (standard library only).

Speaks the fl-audit protocol (docs/AUDIT_PROTOCOL.md): reads one JSON request per line on
stdin, {"input": X, "n": N}, and answers one line {"outputs": [Y1, ..., YN]} in the
protocol's canonical form (the output as sent): index sets in ascending order, plain
integers, reals as Python's repr writes them (shortest round-trip digits), the documented
keys in one order, and one fixed layout (json.dumps with compact separators).

    python3 mechanism_correct.py --mechanism NAME --eps E [options] [--seed S]

Every mechanism family fl-audit speaks: rr-binary, label-dp-binary, rr-kary and
label-dp-onehot (--classes K), embedding-dp, laplace, exponential (--sensitivity,
--form), rr-with-prior (--prior), frequency-grr / frequency-oue / frequency-olh
(--classes K; OLH: --olh-hash fl-ldp|reported, --buckets G), signds-selection
(--output-dim H), signds-magrr (eps = MagRR's epsilon) and signds-client (--eps-rr,
--top-k-fraction, --output-dim).

Randomness: random.SystemRandom (the OS CSPRNG) by default; --seed S switches to a
seeded random.Random, for reproducible tests only. Sampling uses floats (textbook
inverse-CDF Laplace, float coins): fine as a protocol example, not a hardened
implementation. --repeat R makes it deliberately wrong in one way every family shares:
it returns its previous output again with probability R (randomness reused across calls).
"""

import argparse
import json
import math
import random
import sys


def keep_probability(eps):
    """e^eps / (1 + e^eps), without overflow."""
    return 1.0 / (1.0 + math.exp(-eps))


def kary_rr(rng, eps, k, x):
    """k-ary randomized response: keep x with probability e^eps/(e^eps + k - 1), else a
    uniform other value."""
    if rng.random() < math.exp(eps) / (math.exp(eps) + k - 1):
        return x
    lie = rng.randrange(k - 1)
    return lie if lie < x else lie + 1


def is_prime(n):
    return n >= 2 and all(n % d for d in range(2, int(math.isqrt(n)) + 1))


def olh_buckets(eps):
    """fl-ldp's g: the smallest prime >= round(e^eps) + 1."""
    g = max(int(round(math.exp(eps))) + 1, 2)
    while not is_prime(g):
        g += 1
    return g


class OlhFamily:
    """fl-ldp's pairwise independent family: v in base g with m digits v_i, seed digits
    (b, a_1, ..., a_m), H(v) = (b + sum a_i v_i) mod g, seed uniform below g^(m+1)."""

    def __init__(self, g, k):
        self.g = g
        self.m = 1
        while g**self.m < k:
            self.m += 1
        self.seeds = g ** (self.m + 1)

    def hash(self, seed, v):
        g = self.g
        acc, rest = seed % g, seed // g
        for _ in range(self.m):
            acc = (acc + (rest % g) * (v % g)) % g
            rest //= g
            v //= g
        return acc


def olh_report(args, family, seed, bucket):
    """The report in the audit's form: [seed, bucket] (fl-ldp's family) or the bucket with
    every value's hash (--olh-hash reported)."""
    if args.olh_hash == "reported":
        return {"bucket": bucket, "hashes": [family.hash(seed, u) for u in range(args.classes)]}
    return [seed, bucket]


def selection_probabilities(eps, k, d, h):
    """SignDS's selection law: P(nu) ~ C(K, nu) C(d - K, h - nu) e^(eps [nu >= t]), with the
    threshold t grown from 1 while the boosted mean of nu exceeds t (fl-signds, Exact)."""
    omega = [math.comb(k, nu) * math.comb(d - k, h - nu) for nu in range(h + 1)]

    def law(t):
        w = [o * (math.exp(eps) if nu >= t else 1.0) for nu, o in enumerate(omega)]
        z = sum(w)
        return [x / z for x in w]

    t = 1
    while t < h and omega[t] > 0 and sum(nu * p for nu, p in enumerate(law(t))) > t:
        t += 1
    return law(t)


def select(rng, probs, top, d):
    """nu from the law, then nu indices of the top-k set and h - nu of the rest, sent in
    ascending order: the set's one canonical order (drawn order, top-k members first,
    would tell which indices are in the top-k set)."""
    nu = rng.choices(range(len(probs)), weights=probs)[0]
    inside = set(top)
    rest = [j for j in range(d) if j not in inside]
    return sorted(rng.sample(sorted(top), nu) + rng.sample(rest, len(probs) - 1 - nu))


def top_k(update, k, positive=True):
    """Indices of the k largest (positive sign) or smallest (negative) entries."""
    order = sorted(range(len(update)), key=lambda j: update[j], reverse=positive)
    return order[:k]


def make_sampler(args, rng):
    """One function sample(x) -> output per mechanism family."""
    eps, name = args.eps, args.mechanism
    if name in ("rr-binary", "label-dp-binary", "signds-magrr"):
        keep = keep_probability(eps)
        return lambda x: x if rng.random() < keep else 1 - x
    if name in ("rr-kary", "label-dp-onehot", "frequency-grr"):
        return lambda x: kary_rr(rng, eps, args.classes, x)
    if name == "embedding-dp":
        keep = keep_probability(eps / 2.0)  # eps/2 per coordinate
        return lambda x: [(1 if v > 0 else 0) ^ (rng.random() >= keep) for v in x]
    if name == "laplace":
        scale = 2.0 / eps  # L1 sensitivity of a probability vector is 2

        def laplace():
            u = rng.random() - 0.5
            return -scale * math.copysign(1.0, u) * math.log(1.0 - 2.0 * abs(u))

        return lambda x: [v + laplace() for v in x]
    if name == "exponential":
        factor = 1.0 if args.form == "monotone" else 0.5

        def sample(u):
            top = max(u)
            w = [math.exp(factor * eps * (v - top) / args.sensitivity) for v in u]
            return rng.choices(range(len(u)), weights=w)[0]

        return sample
    if name == "rr-with-prior":
        prior = args.prior
        order = sorted(range(len(prior)), key=lambda y: (-prior[y], y))
        best, kk, mass = -1.0, 1, 0.0
        for i, y in enumerate(order):
            mass += prior[y]
            objective = mass / (1.0 + i * math.exp(-eps))
            if objective >= best:
                best, kk = objective, i + 1
        top = order[:kk]

        def sample(y):
            if kk == 1:
                return top[0]
            if y in top:
                return top[kary_rr(rng, eps, kk, top.index(y))]
            return rng.choice(top)

        return sample
    if name == "frequency-oue":
        q = 1.0 / (math.exp(eps) + 1.0)
        return lambda v: [
            int(rng.random() < (0.5 if j == v else q)) for j in range(args.classes)
        ]
    if name == "frequency-olh":
        g = args.buckets or olh_buckets(eps)
        family = OlhFamily(g, args.classes)

        def sample(v):
            seed = rng.randrange(family.seeds)
            bucket = kary_rr(rng, eps, g, family.hash(seed, v))
            return olh_report(args, family, seed, bucket)

        return sample
    if name == "signds-selection":
        probs = None

        def sample(x):
            nonlocal probs
            top = top_k(x["update"], args.top_k) if isinstance(x, dict) else x
            if probs is None:
                probs = selection_probabilities(eps, len(top), args.dim, args.output_dim)
            return select(rng, probs, top, args.dim)

        return sample
    if name == "signds-client":
        keep = keep_probability(args.eps_rr)

        def sample(x):
            update, r_est = x["update"], x["r_est"]
            d = len(update)
            k = int(math.floor(args.top_k_fraction * d))
            positive = rng.random() < 0.5
            top = top_k(update, k, positive)
            r = abs(sum(update[j] for j in top) / k)
            bound = 2.0 * r_est if x.get("phase", "growth") == "growth" else r_est / 2.0
            bit = int(r < bound)
            probs = selection_probabilities(eps, k, d, args.output_dim)
            return {
                "sign": 1 if positive else -1,
                "magrr_bit": bit if rng.random() < keep else 1 - bit,
                "indices": select(rng, probs, top, d),
            }

        return sample
    raise SystemExit(f"unknown mechanism {name}")


def parser(description):
    """The options both example mechanisms take."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mechanism", required=True)
    p.add_argument("--eps", type=float, required=True)
    p.add_argument("--classes", type=int, default=2)
    p.add_argument("--dim", type=int, default=0)
    p.add_argument("--sensitivity", type=float, default=1.0)
    p.add_argument("--form", default="standard")
    p.add_argument("--prior", type=lambda s: [float(v) for v in s.split(",")])
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--output-dim", type=int, default=0)
    p.add_argument("--eps-rr", type=float, default=1.0)
    p.add_argument("--top-k-fraction", type=float, default=0.1)
    p.add_argument("--olh-hash", default="fl-ldp")
    p.add_argument("--buckets", type=int, default=0)
    p.add_argument("--repeat", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None)
    return p


def serve(args, make):
    """The protocol loop: one response line per request line, flushed."""
    rng = random.Random(args.seed) if args.seed is not None else random.SystemRandom()
    sample = make(args, rng)
    previous, previous_input = None, None
    for line in sys.stdin:
        request = json.loads(line)
        if request["input"] != previous_input:
            previous, previous_input = None, request["input"]
        outputs = []
        for _ in range(int(request["n"])):
            if previous is not None and args.repeat > 0 and rng.random() < args.repeat:
                out = previous  # deliberately wrong: randomness reused
            else:
                out = sample(request["input"])
            outputs.append(out)
            previous = out
        sys.stdout.write(json.dumps({"outputs": outputs}, separators=(",", ":")) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve(parser(__doc__.splitlines()[0]).parse_args(), make_sampler)
