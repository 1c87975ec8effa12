#!/usr/bin/env python3
"""fl-audit adapter for OpenDP (opendp.prelude, "contrib" features).

    python3 opendp_adapter.py --mechanism rr-binary|rr-kary|laplace --eps E
                              [--classes K] [--sensitivity S]

- rr-binary: make_randomized_response_bool(prob = e^E / (1 + e^E)).
- rr-kary: make_randomized_response(categories = 0..K-1, prob = e^E / (e^E + K - 1)).
- laplace: make_laplace on float vectors with the L1 distance, scale = S / E (S defaults
  to 2, the L1 sensitivity of a probability vector). Each request's n outputs are drawn
  by one call on the n copies of the input laid end to end (the noise is independent per
  coordinate, so the law of each output vector is that of one call on it).

As the OpenDP documentation prescribes; a misconfigured run passes a wrong --eps or
--sensitivity while the audit keeps the claim.
"""

import opendp.prelude as dp

from _protocol import keep_probability, parser, serve

dp.enable_features("contrib")


def main():
    args = parser(__doc__.splitlines()[0], ["rr-binary", "rr-kary", "laplace"]).parse_args()
    eps = args.eps
    if args.mechanism == "rr-binary":
        m = dp.m.make_randomized_response_bool(prob=keep_probability(eps))
        serve(lambda x, n: [int(m(bool(x))) for _ in range(n)])
    elif args.mechanism == "rr-kary":
        k = args.classes
        m = dp.m.make_randomized_response(
            categories=list(range(k)), prob=keep_probability(eps, k)
        )
        serve(lambda x, n: [m(x) for _ in range(n)])
    else:
        sensitivity = 2.0 if args.sensitivity is None else args.sensitivity
        m = dp.m.make_laplace(
            dp.vector_domain(dp.atom_domain(T=float, nan=False)),
            dp.l1_distance(T=float),
            scale=sensitivity / eps,
        )

        def batch(x, n):
            flat = m([float(v) for v in x] * n)
            d = len(x)
            return [flat[i * d : (i + 1) * d] for i in range(n)]

        serve(batch)


if __name__ == "__main__":
    main()
