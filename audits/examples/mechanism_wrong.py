#!/usr/bin/env python3
"""A deliberately WRONG external mechanism for `fl-audit external` (standard library only).

Same protocol and options as mechanism_correct.py, with one realistic bug per mechanism;
the audit must report FAIL for each:

- rr-binary, label-dp-binary: the keep probability uses 2*eps (releases more than claimed);
- label-dp-onehot: the "lie" is drawn uniformly over all k classes, including the true one
  (so the true class is kept too often);
- embedding-dp: randomized response at eps per coordinate instead of eps/2;
- laplace: scale 1/eps instead of 2/eps (ignores the L1 sensitivity 2 of a probability
  vector: the MindSpore-compatible scale, which gives 2*eps).
"""

import argparse
import json
import math
import random
import sys


def keep_probability(eps):
    return 1.0 / (1.0 + math.exp(-eps))


def make_sampler(args, rng):
    eps = args.eps
    if args.mechanism in ("rr-binary", "label-dp-binary"):
        keep = keep_probability(2.0 * eps)  # BUG: 2*eps

        def sample(x, n):
            return [x if rng.random() < keep else 1 - x for _ in range(n)]

        return sample
    if args.mechanism == "label-dp-onehot":
        k = args.classes
        keep = math.exp(eps) / (math.exp(eps) + k - 1)

        def sample(x, n):
            # BUG: the lie may be the true class.
            return [x if rng.random() < keep else rng.randrange(k) for _ in range(n)]

        return sample
    if args.mechanism == "embedding-dp":
        keep = keep_probability(eps)  # BUG: eps instead of eps/2

        def sample(x, n):
            bits = [1 if v > 0 else 0 for v in x]
            return [[b if rng.random() < keep else 1 - b for b in bits] for _ in range(n)]

        return sample
    if args.mechanism == "laplace":
        scale = 1.0 / eps  # BUG: ignores the sensitivity 2

        def laplace():
            u = rng.random() - 0.5
            return -scale * math.copysign(1.0, u) * math.log(1.0 - 2.0 * abs(u))

        def sample(x, n):
            return [[v + laplace() for v in x] for _ in range(n)]

        return sample
    raise SystemExit(f"unknown mechanism {args.mechanism}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mechanism", required=True)
    parser.add_argument("--eps", type=float, required=True)
    parser.add_argument("--classes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed) if args.seed is not None else random.SystemRandom()
    sample = make_sampler(args, rng)
    for line in sys.stdin:
        request = json.loads(line)
        outputs = sample(request["input"], int(request["n"]))
        sys.stdout.write(json.dumps({"outputs": outputs}, separators=(",", ":")) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
