"""The fl-audit external protocol loop shared by the library adapters (standard library).

Each adapter gives `serve` a function batch(x, n) -> list of n outputs in the protocol's
form (docs/AUDIT_PROTOCOL.md) for input x. One JSON request per line on stdin, one JSON
response per line on stdout, flushed.
"""

import argparse
import json
import math
import sys


def parser(description, mechanisms):
    """Options every adapter takes: the mechanism and the library's own configuration
    (which a misconfigured run sets differently from the audit's claim)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mechanism", required=True, choices=mechanisms)
    p.add_argument("--eps", type=float, required=True, help="epsilon given to the library")
    p.add_argument(
        "--sensitivity", type=float, default=None, help="sensitivity given to the library"
    )
    p.add_argument("--classes", type=int, default=2)
    return p


def keep_probability(eps, k=2):
    """e^eps / (e^eps + k - 1): randomized response's probability of the true value."""
    return 1.0 / (1.0 + (k - 1) * math.exp(-eps))


def serve(batch):
    for line in sys.stdin:
        request = json.loads(line)
        outputs = batch(request["input"], int(request["n"]))
        sys.stdout.write(json.dumps({"outputs": outputs}, separators=(",", ":")) + "\n")
        sys.stdout.flush()
