#!/usr/bin/env python3
"""A deliberately WRONG external mechanism for `fl-audit external` (standard library only).

Same protocol and options as mechanism_correct.py, with one realistic bug per mechanism
family; the audit must report FAIL for each:

- rr-binary, label-dp-binary, signds-magrr: the keep probability uses 2*eps;
- rr-kary, label-dp-onehot, frequency-grr: the "lie" is drawn uniformly over all k
  classes, including the true one (so the true class is kept too often);
- embedding-dp: randomized response at eps per coordinate instead of eps/2;
- laplace: scale 1/eps instead of 2/eps (ignores the L1 sensitivity 2 of a probability
  vector: the MindSpore-compatible scale, which gives 2*eps);
- exponential: weights exp(eps*u/sensitivity), the classic factor-two bug;
- rr-with-prior: a label outside the prior's top set is reported as itself (it should be
  replaced by a uniform top label): an output the law makes impossible;
- frequency-oue: the user's own bit is kept with probability e^eps/(1 + e^eps) instead
  of 1/2 (symmetric unary encoding's keep probability with OUE's claim);
- frequency-olh: the bucket is perturbed uniformly over all g buckets, the true one
  included;
- signds-selection: the boost is e^(2 eps);
- signds-client: the MagRR bit is sent without randomization.
"""

import math

import mechanism_correct as correct


def make_sampler(args, rng):
    eps, name = args.eps, args.mechanism
    if name in ("rr-binary", "label-dp-binary", "signds-magrr"):
        keep = correct.keep_probability(2.0 * eps)  # BUG: 2*eps
        return lambda x: x if rng.random() < keep else 1 - x
    if name in ("rr-kary", "label-dp-onehot", "frequency-grr"):
        k = args.classes
        keep = math.exp(eps) / (math.exp(eps) + k - 1)
        # BUG: the lie may be the true class.
        return lambda x: x if rng.random() < keep else rng.randrange(k)
    if name == "embedding-dp":
        keep = correct.keep_probability(eps)  # BUG: eps instead of eps/2
        return lambda x: [(1 if v > 0 else 0) ^ (rng.random() >= keep) for v in x]
    if name == "laplace":
        args.eps = 2.0 * eps  # BUG: scale 1/eps, as at 2*eps
        return correct.make_sampler(args, rng)
    if name == "exponential":
        args.form = "monotone"  # BUG: exp(eps*u/sensitivity) under the standard claim
        return correct.make_sampler(args, rng)
    if name == "rr-with-prior":
        sample = correct.make_sampler(args, rng)
        order = sorted(range(len(args.prior)), key=lambda y: (-args.prior[y], y))
        # BUG: the least likely label is reported as itself.
        return lambda y: y if y == order[-1] else sample(y)
    if name == "frequency-oue":
        q = 1.0 / (math.exp(eps) + 1.0)
        keep = correct.keep_probability(eps)  # BUG: should be 1/2
        return lambda v: [
            int(rng.random() < (keep if j == v else q)) for j in range(args.classes)
        ]
    if name == "frequency-olh":
        g = args.buckets or correct.olh_buckets(eps)
        family = correct.OlhFamily(g, args.classes)
        keep = math.exp(eps) / (math.exp(eps) + g - 1)

        def sample(v):
            seed = rng.randrange(family.seeds)
            h = family.hash(seed, v)
            # BUG: the replacement bucket may be the true one.
            bucket = h if rng.random() < keep else rng.randrange(g)
            return correct.olh_report(args, family, seed, bucket)

        return sample
    if name == "signds-selection":
        args.eps = 2.0 * eps  # BUG: the boost is e^(2 eps)
        return correct.make_sampler(args, rng)
    if name == "signds-client":
        args.eps_rr = 60.0  # BUG: the MagRR bit is (all but) never flipped
        return correct.make_sampler(args, rng)
    raise SystemExit(f"unknown mechanism {name}")


if __name__ == "__main__":
    correct.serve(correct.parser(__doc__.splitlines()[0]).parse_args(), make_sampler)
