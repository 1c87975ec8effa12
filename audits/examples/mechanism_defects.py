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
  (50 million outputs), written in pieces so that this program stays small;
- previous-caller (any): a buffer keeps the previous request's input, and the first output
  of every request is drawn for it (memory across callers: each output's law is a law of
  the mechanism, the wrong input's);
- single-request (rr-binary, label-dp-binary, signds-magrr): a request of one output is
  answered at twice the epsilon (a law that depends on the request size);
- coin-pool (any): 2^16 random words are drawn once and then used in a cycle (a pool that
  wraps and replays its coins, whatever the inputs);
- too-regular (rr-binary, label-dp-binary, signds-magrr): each response keeps exactly
  floor(n p) or ceil(n p) of its n bits (each output's law exact, the response's counts
  far less variable than independent draws);
- front-truth (rr-binary, label-dp-binary, signds-magrr): each response is drawn correctly,
  then a truthful output is moved to its front (the counts exact, the order not);
- drift (rr-binary, label-dp-binary, signds-magrr): after 2^18 outputs the program answers
  at epsilon + 1 (a state that changes during a run).

Defects of the output as sent (the values are exact; the bytes carry more than them):

- order-leak (signds-selection, signds-client): the selected indices are sent in the
  order they were drawn, members of the top-k set first;
- notation-bit (laplace): a real is written in exponent notation (same shortest digits)
  when the input's first coordinate is its largest, as repr writes it otherwise;
- whitespace-bit (any): the response's separators are ", " and ": " when its first output,
  as JSON, has an odd number of digits 1, compact otherwise;
- extra-key (any): the response carries a key besides "outputs" (the request's n);
- integer-float (integer-valued families): every integer of the response is written as
  a float (1.0);
- duplicate-key (signds-client): the report carries "magrr_bit" twice, the true bit
  first (which a last-wins JSON reader drops) and the randomized one second.

Options as mechanism_correct.py; --seed S makes the randomness reproducible.
"""

import decimal
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


def leaky_select(rng, probs, top, d):
    """mechanism_correct.select without its sort: the drawn order, top-k members first."""
    nu = rng.choices(range(len(probs)), weights=probs)[0]
    inside = set(top)
    rest = [j for j in range(d) if j not in inside]
    return rng.sample(sorted(top), nu) + rng.sample(rest, len(probs) - 1 - nu)


def client(args, rng, shared=False, factor=2.0, shrink_rule="shrink", leak=None, tail=None):
    """The SignDS client of mechanism_correct.py with one of its defects."""
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
        select = leaky_select if leak == "order-leak" else correct.select
        report = {
            "sign": 1 if positive else -1,
            "magrr_bit": bit if coin < keep else 1 - bit,
            "indices": select(rng, probs, top, d),
        }
        if leak == "duplicate-key":
            report["true_bit"] = bit  # written as a first "magrr_bit" by encode()
        return report

    return sample


def magrr_flip_low(args, rng):
    flip = 0.97 * (1.0 - correct.keep_probability(args.eps))  # BUG: 3 % too few flips
    return lambda x: x if rng.random() >= flip else 1 - x


class PoolRandom(random.Random):
    """BUG (coin-pool): 2^16 random words drawn once from `base`, then used in a cycle."""

    def __init__(self, base, size=1 << 16):
        self.pool = [base.getrandbits(32) for _ in range(size)]
        self.at = 0
        super().__init__(0)

    def _word(self):
        w = self.pool[self.at]
        self.at = (self.at + 1) % len(self.pool)
        return w

    def getrandbits(self, k):
        bits, have = 0, 0
        while have < k:
            bits = (bits << 32) | self._word()
            have += 32
        return bits >> (have - k)

    def random(self):
        a, b = self._word() >> 5, self._word() >> 6
        return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


def binary_response(args, rng, n, answered):
    """The binary defects that shape a whole response (None: not one of them)."""
    defect, eps = args.defect, args.eps
    if defect == "single-request" and n == 1:
        keep = correct.keep_probability(2.0 * eps)  # BUG: twice the epsilon for n = 1
        return lambda x: [x if rng.random() < keep else 1 - x]
    if defect == "drift" and answered >= 1 << 18:
        keep = correct.keep_probability(eps + 1.0)  # BUG: the law changes mid-run
        return lambda x: [x if rng.random() < keep else 1 - x for _ in range(n)]
    if defect == "front-truth":
        keep = correct.keep_probability(eps)

        def front(x):
            outputs = [x if rng.random() < keep else 1 - x for _ in range(n)]
            if x in outputs:
                # BUG: a truthful output moved to the front (the counts stay exact).
                i = outputs.index(x)
                outputs[0], outputs[i] = outputs[i], outputs[0]
            return outputs

        return front
    if defect == "too-regular":
        keep = correct.keep_probability(eps)

        def regular(x):
            # BUG: exactly floor(n p) or ceil(n p) kept bits per response.
            kept = int(math.floor(n * keep))
            kept += int(rng.random() < n * keep - kept)
            flags = [True] * kept + [False] * (n - kept)
            rng.shuffle(flags)
            return [x if f else 1 - x for f in flags]

        return regular
    return None


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
    if defect in ("order-leak", "duplicate-key") and args.mechanism == "signds-client":
        return client(args, rng, leak=defect)
    if defect == "order-leak":
        correct.select = leaky_select  # BUG: the selection in drawn order
    return correct.make_sampler(args, rng)


def exponent_form(v):
    """v with the same (shortest) digits as repr, in exponent notation."""
    return "{:e}".format(decimal.Decimal(repr(v)))


def encode(args, x, outputs):
    """The response line, with the defects of the output as sent."""
    defect = args.defect
    separators = (",", ":")
    if defect == "whitespace-bit" and correct.json.dumps(outputs[0]).count("1") % 2:
        separators = (", ", ": ")  # BUG: the layout depends on the data
    if defect == "extra-key":
        return correct.json.dumps({"outputs": outputs, "n": len(outputs)},
                                  separators=separators)
    if defect == "integer-float":
        def as_float(o):
            if isinstance(o, list):
                return [as_float(v) for v in o]
            if isinstance(o, dict):
                return {k: as_float(v) for k, v in o.items()}
            return float(o)
        outputs = as_float(outputs)  # BUG: 1.0 for 1
    if defect == "notation-bit" and x[0] == max(x):
        rows = ["[" + ",".join(exponent_form(v) for v in o) + "]" for o in outputs]
        return '{"outputs":[' + ",".join(rows) + "]}"  # BUG: notation follows the input
    if defect == "duplicate-key":
        reports = ['{"sign":%d,"magrr_bit":%d,"magrr_bit":%d,"indices":%s}'
                   % (r["sign"], r["true_bit"], r["magrr_bit"],
                      correct.json.dumps(r["indices"], separators=separators))
                   for r in outputs]
        return '{"outputs":[' + ",".join(reports) + "]}"  # BUG: the true bit, sent first
    return correct.json.dumps({"outputs": outputs}, separators=separators)


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
    if args.defect == "coin-pool":
        rng = PoolRandom(rng)
    sample = make_sampler(args, rng)
    stream = {}  # per input: its outputs so far (the last two are enough)
    last_response = {}  # per input: its previous response's outputs
    replies = {}  # per input: responses answered
    previous_input = None
    answered = 0
    for line in sys.stdin:
        if args.defect == "flood":
            flood(sys.stdout)
            continue
        request = correct.json.loads(line)
        x, n = request["input"], int(request["n"])
        key = correct.json.dumps(x, sort_keys=True)
        replies[key] = replies.get(key, 0) + 1
        earlier = stream.setdefault(key, [])
        outputs = []
        whole = binary_response(args, rng, n, answered)
        if whole is not None:
            outputs = whole(x)
        elif args.defect == "replay-batches" and replies[key] % 2 == 0 and key in last_response:
            # BUG: every second response for an input repeats that input's previous one
            # (as much of it as is asked for, fresh outputs after it).
            outputs = last_response[key][:n]
            outputs += [sample(x) for _ in range(n - len(outputs))]
        else:
            for t in range(n):
                if args.defect == "lag2-repeat" and len(earlier) >= 2 and rng.random() < 0.05:
                    out = earlier[-2]  # BUG: the output two places earlier, again
                elif args.defect == "previous-caller" and t == 0 and previous_input is not None:
                    out = sample(previous_input)  # BUG: the previous caller's input
                else:
                    out = sample(x)
                outputs.append(out)
                earlier.append(out)
                del earlier[:-2]
        last_response[key] = outputs
        previous_input = x
        answered += n
        text = encode(args, x, outputs) + "\n"
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
            "previous-caller",
            "single-request",
            "coin-pool",
            "too-regular",
            "drift",
            "front-truth",
            "order-leak",
            "notation-bit",
            "whitespace-bit",
            "extra-key",
            "integer-float",
            "duplicate-key",
        ],
    )
    serve(parser.parse_args())
