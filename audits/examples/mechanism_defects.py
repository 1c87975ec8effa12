#!/usr/bin/env python3
"""Held-out WRONG mechanisms for `fl-audit external` whose every marginal law is exact
(standard library only): the defects a marginal test cannot see. Written from the
protocol (docs/AUDIT_PROTOCOL.md) and the mechanisms' documented laws, not from fl-audit's
code; fl-audit's tests (tests/defects.rs) require each to FAIL, and the same programs
without --defect to PASS.

    python3 mechanism_defects.py --mechanism NAME --eps E --defect DEFECT [options]

Defects (and the mechanisms they apply to):

- oue-shared-uniform (frequency-oue): bit j and bit j + k/2 are drawn from one uniform,
  so each bit keeps its law but P(bit 0 = 1, bit k/2 = 0) is 0 under input k/2;
- client-shared-uniform (signds-client): the random sign and the MagRR coin come from one
  uniform (sign + iff u < 1/2, bit kept iff u < keep), so a positive sign always reports
  the true bit;
- lag2-repeat (exponential, rr-kary, signds-selection; any): 5 % of outputs repeat the
  output two places earlier in the stream;
- replay-batches (frequency-grr; any): every second response repeats the previous one;
- client-threshold-factor (signds-client): the growth phase compares r with r_est instead
  of 2 r_est (a wrong threshold factor);
- client-shrink-branch (signds-client): the shrink phase uses the growth rule r < 2 r_est;
- client-wrong-tail (signds-client): r is the magnitude of the positive sign's top-k mean
  whatever sign was drawn (right for a symmetric update only);
- magrr-flip-low (signds-magrr, rr-binary): the flip probability is 3 % lower than
  1/(1 + e^eps) (true epsilon slightly above the claim);
- embedding-offset-coins (embedding-dp, D > 64): coordinate j >= 64 reuses the
  randomized-response coin of coordinate j - 64 (every coordinate keeps its law; pairs 64
  apart do not);
- embedding-carried-coin (embedding-dp): 5 % of the time, coordinate j of an output reuses
  the coin of coordinate j + 1 (mod D) of the previous output of the same input;
- embedding-two-positives (embedding-dp): an input with exactly two positive coordinates
  takes a "sparse" branch that flips with the probability of eps instead of eps/2;
- flood (any): answers the first request with one valid JSON response of about 100 MB
  (50 million outputs), written in pieces so that this program stays small.

Options as mechanism_correct.py; --seed S makes the randomness reproducible.
"""

import math
import random
import sys

import mechanism_correct as correct


def oue_shared_uniform(args, rng):
    k, eps = args.classes, args.eps
    q = 1.0 / (math.exp(eps) + 1.0)
    half = k // 2

    def sample(v):
        probs = [0.5 if j == v else q for j in range(k)]
        u = [rng.random() for _ in range(k)]
        for j in range(half):
            u[j + half] = u[j]  # BUG: one uniform for bits j and j + k/2
        return [int(u[j] < probs[j]) for j in range(k)]

    return sample


def client(args, rng, shared=False, factor=2.0, shrink_rule="shrink", tail=None):
    """The SignDS client of mechanism_correct.py with one of four defects."""
    eps = args.eps
    keep = correct.keep_probability(args.eps_rr)

    def sample(x):
        update, r_est, phase = x["update"], x["r_est"], x.get("phase", "growth")
        d = len(update)
        k = int(math.floor(args.top_k_fraction * d))
        u = rng.random()
        positive = u < 0.5
        top = correct.top_k(update, k, positive)
        tail_set = top if tail is None else correct.top_k(update, k, tail)  # BUG if tail
        r = abs(sum(update[j] for j in tail_set) / k)
        if phase == "growth" or shrink_rule == "growth":
            bound = factor * r_est
        else:
            bound = r_est / 2.0
        bit = int(r < bound)
        coin = u if shared else rng.random()  # BUG when shared: the sign's uniform again
        probs = correct.selection_probabilities(eps, k, d, args.output_dim)
        return {
            "sign": 1 if positive else -1,
            "magrr_bit": bit if coin < keep else 1 - bit,
            "indices": correct.select(rng, probs, top, d),
        }

    return sample


def magrr_flip_low(args, rng):
    flip = 0.97 * (1.0 - correct.keep_probability(args.eps))  # BUG: 3 % too few flips
    return lambda x: x if rng.random() >= flip else 1 - x


def embedding(args, rng, defect):
    """EmbeddingDP (RR at eps/2 per sign bit) with one of three coin defects."""
    keep = correct.keep_probability(args.eps / 2.0)
    sparse_keep = correct.keep_probability(args.eps)
    previous = {}  # per input: the coins of its previous output

    def sample(x):
        d = len(x)
        signs = [1 if v > 0 else 0 for v in x]
        k = keep
        if defect == "embedding-two-positives" and sum(signs) == 2:
            k = sparse_keep  # BUG: a branch for two positives with the wrong epsilon
        coins = [int(rng.random() >= k) for _ in range(d)]
        if defect == "embedding-offset-coins":
            for j in range(64, d):
                coins[j] = coins[j - 64]  # BUG: the coin of coordinate j - 64, again
        key = correct.json.dumps(x)
        before = previous.get(key)
        if defect == "embedding-carried-coin" and before and rng.random() < 0.05:
            coins = [before[(j + 1) % d] for j in range(d)]  # BUG: last output's coins
        previous[key] = coins
        return [s ^ c for s, c in zip(signs, coins)]

    return sample


def make_sampler(args, rng):
    defect = args.defect
    if defect and defect.startswith("embedding-"):
        return embedding(args, rng, defect)
    if defect == "oue-shared-uniform":
        return oue_shared_uniform(args, rng)
    if defect == "client-shared-uniform":
        return client(args, rng, shared=True)
    if defect == "client-threshold-factor":
        return client(args, rng, factor=1.0)
    if defect == "client-shrink-branch":
        return client(args, rng, shrink_rule="growth")
    if defect == "client-wrong-tail":
        return client(args, rng, tail=True)
    if defect == "magrr-flip-low":
        return magrr_flip_low(args, rng)
    return correct.make_sampler(args, rng)


def flood(stdout):
    """One valid response of ~100 MB: {"outputs": [0, 0, ... 50 million ...]}."""
    stdout.write('{"outputs":[0')
    piece = ",0" * 1_000_000
    for _ in range(50):
        stdout.write(piece)
    stdout.write("]}\n")
    stdout.flush()


def serve(args):
    rng = random.Random(args.seed) if args.seed is not None else random.SystemRandom()
    sample = make_sampler(args, rng)
    stream = {}  # per input: its outputs so far (the last two are enough)
    previous_response = None
    for number, line in enumerate(sys.stdin):
        if args.defect == "flood":
            flood(sys.stdout)
            continue
        request = correct.json.loads(line)
        x, n = request["input"], int(request["n"])
        if args.defect == "replay-batches" and number % 2 == 1 and previous_response:
            # BUG: every second response repeats the previous one.
            if previous_response[0] == correct.json.dumps(x) and previous_response[1] == n:
                sys.stdout.write(previous_response[2])
                sys.stdout.flush()
                continue
        key = correct.json.dumps(x, sort_keys=True)
        earlier = stream.setdefault(key, [])
        outputs = []
        for _ in range(n):
            if args.defect == "lag2-repeat" and len(earlier) >= 2 and rng.random() < 0.05:
                out = earlier[-2]  # BUG: the output two places earlier, again
            else:
                out = sample(x)
            outputs.append(out)
            earlier.append(out)
            del earlier[:-2]
        text = correct.json.dumps({"outputs": outputs}, separators=(",", ":")) + "\n"
        previous_response = (correct.json.dumps(x), n, text)
        sys.stdout.write(text)
        sys.stdout.flush()


if __name__ == "__main__":
    parser = correct.parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--defect",
        default=None,
        choices=[
            "oue-shared-uniform",
            "client-shared-uniform",
            "lag2-repeat",
            "replay-batches",
            "client-threshold-factor",
            "client-shrink-branch",
            "client-wrong-tail",
            "magrr-flip-low",
            "embedding-offset-coins",
            "embedding-carried-coin",
            "embedding-two-positives",
            "flood",
        ],
    )
    serve(parser.parse_args())
