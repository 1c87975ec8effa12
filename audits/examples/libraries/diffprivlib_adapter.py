#!/usr/bin/env python3
"""fl-audit adapter for IBM diffprivlib (diffprivlib.mechanisms).

    python3 diffprivlib_adapter.py --mechanism rr-binary|laplace|exponential --eps E
                                   [--sensitivity S]

- rr-binary: Binary(epsilon=E, value0="0", value1="1").randomise(str(x)).
- laplace: Laplace(epsilon=E, sensitivity=S) on each coordinate of the probability vector
  (S defaults to 2, the vector's L1 sensitivity; the coordinates get independent noise,
  which is the L1 mechanism on the whole vector).
- exponential: Exponential(epsilon=E, sensitivity=S, utility=x).randomise() for the
  utility vector x the audit sends (S defaults to 1), standard (non-monotonic) form.

As the diffprivlib documentation prescribes; a misconfigured run passes a wrong --eps or
--sensitivity while the audit keeps the claim.
"""

from diffprivlib.mechanisms import Binary, Exponential, Laplace

from _protocol import parser, serve


def main():
    args = parser(
        __doc__.splitlines()[0], ["rr-binary", "laplace", "exponential"]
    ).parse_args()
    eps = args.eps
    if args.mechanism == "rr-binary":
        m = Binary(epsilon=eps, value0="0", value1="1")
        serve(lambda x, n: [int(m.randomise(str(x))) for _ in range(n)])
    elif args.mechanism == "laplace":
        sensitivity = 2.0 if args.sensitivity is None else args.sensitivity
        m = Laplace(epsilon=eps, sensitivity=sensitivity)
        serve(lambda x, n: [[float(m.randomise(float(v))) for v in x] for _ in range(n)])
    else:
        sensitivity = 1.0 if args.sensitivity is None else args.sensitivity
        cache = {}

        def batch(u, n):
            key = tuple(u)
            if key not in cache:
                cache[key] = Exponential(
                    epsilon=eps, sensitivity=sensitivity, utility=list(u), monotonic=False
                )
            m = cache[key]
            return [int(m.randomise()) for _ in range(n)]

        serve(batch)


if __name__ == "__main__":
    main()
