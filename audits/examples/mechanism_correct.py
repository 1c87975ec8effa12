#!/usr/bin/env python3
"""A correct external mechanism for `fl-audit external` (standard library only).

Speaks the fl-audit protocol: reads one JSON request per line on stdin,
{"input": X, "n": N}, and answers one line {"outputs": [Y1, ..., YN]}.

    python3 mechanism_correct.py --mechanism rr-binary --eps 1 [--classes K] [--seed S]

Mechanisms: rr-binary, label-dp-binary (X, Y in {0, 1}), label-dp-onehot (class
indices, needs --classes), embedding-dp (X: D floats, Y: D bits), laplace (X: a
probability vector, Y: D floats).

Randomness: random.SystemRandom (the OS CSPRNG) by default; --seed S switches to a
seeded random.Random, for reproducible tests only. Sampling uses floats (textbook
inverse-CDF Laplace): fine as a protocol example, not a hardened implementation.
"""

import argparse
import json
import math
import random
import sys


def keep_probability(eps):
    """e^eps / (1 + e^eps), without overflow."""
    return 1.0 / (1.0 + math.exp(-eps))


def make_sampler(args, rng):
    eps = args.eps
    if args.mechanism in ("rr-binary", "label-dp-binary"):
        keep = keep_probability(eps)

        def sample(x, n):
            return [x if rng.random() < keep else 1 - x for _ in range(n)]

        return sample
    if args.mechanism == "label-dp-onehot":
        k = args.classes
        keep = math.exp(eps) / (math.exp(eps) + k - 1)

        def sample(x, n):
            out = []
            for _ in range(n):
                if rng.random() < keep:
                    out.append(x)
                else:
                    lie = rng.randrange(k - 1)  # uniform over the k - 1 other classes
                    out.append(lie if lie < x else lie + 1)
            return out

        return sample
    if args.mechanism == "embedding-dp":
        keep = keep_probability(eps / 2.0)  # eps/2 per coordinate

        def sample(x, n):
            bits = [1 if v > 0 else 0 for v in x]
            return [[b if rng.random() < keep else 1 - b for b in bits] for _ in range(n)]

        return sample
    if args.mechanism == "laplace":
        scale = 2.0 / eps  # L1 sensitivity of a probability vector is 2

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
