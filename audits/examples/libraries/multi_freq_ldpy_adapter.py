#!/usr/bin/env python3
"""fl-audit adapter for multi-freq-ldpy's pure frequency oracles.

    python3 multi_freq_ldpy_adapter.py --mechanism frequency-grr|frequency-oue|frequency-olh
                                       --eps E --classes K

- frequency-grr: GRR_Client(x, K, E).
- frequency-oue: UE_Client(x, K, E, optimal=True), as K bits.
- frequency-olh: LH_Client(x, K, E, optimal=True) returns (bucket, seed); the library hashes
  value v to xxh32(str(v), seed) mod g with g = round(e^E) + 1 (its own family, not
  fl-ldp's), so the adapter reports {"bucket", "hashes"} with that formula for every value
  and the audit runs with --olh-hash reported --buckets g.

As the library's documentation prescribes; a misconfigured run passes a wrong --eps while
the audit keeps the claim.
"""

import math

import xxhash
from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client
from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Client
from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Client

from _protocol import parser, serve


def olh_buckets(eps):
    """The library's g (LH.py): int(round(e^eps)) + 1."""
    return int(round(math.exp(eps))) + 1


def main():
    args = parser(
        __doc__.splitlines()[0], ["frequency-grr", "frequency-oue", "frequency-olh"]
    ).parse_args()
    eps, k = args.eps, args.classes
    if args.mechanism == "frequency-grr":
        serve(lambda x, n: [int(GRR_Client(x, k, eps)) for _ in range(n)])
    elif args.mechanism == "frequency-oue":
        serve(
            lambda x, n: [[int(b) for b in UE_Client(x, k, eps, optimal=True)] for _ in range(n)]
        )
    else:
        g = olh_buckets(eps)

        def report(x):
            bucket, seed = LH_Client(x, k, eps, optimal=True)
            seed = int(seed)
            hashes = [xxhash.xxh32(str(v), seed=seed).intdigest() % g for v in range(k)]
            return {"bucket": int(bucket), "hashes": hashes}

        serve(lambda x, n: [report(x) for _ in range(n)])


if __name__ == "__main__":
    main()
