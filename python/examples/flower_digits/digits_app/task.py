"""The learning task shared by the ClientApp and the ServerApp: scikit-learn's digits,
a non-IID split, and softmax regression in numpy (d = 10·64 + 10 = 650 weights).

Split (as crates/fl-signds/examples/digits.rs and datasets-and-baselines.md §3): test =
rows with index i % 5 == 4 (359 rows), train = the other 1,438. Non-IID: the training rows
sorted by label and cut into 2·N shards; each of the N clients gets two shards drawn by a
seeded permutation, so most clients see only two or three digits. IID: a seeded shuffle cut
into N equal parts.
"""

from functools import lru_cache

import numpy as np

FEATURES = 64
CLASSES = 10
DIMENSION = CLASSES * FEATURES + CLASSES


@lru_cache(maxsize=1)
def _data():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    index = np.arange(len(y))
    test = index % 5 == 4
    return (x[~test], y[~test].astype(np.int64)), (x[test], y[test].astype(np.int64))


def test_set():
    """(x, y) of the 359 test rows."""
    return _data()[1]


def _held_out():
    """The server's validation rows when it keeps the best model: every tenth training row
    (no client trains on them)."""
    (_, y), _ = _data()
    return np.arange(len(y)) % 10 == 0


def validation_set():
    """(x, y) of the server's validation rows (144 training rows, see :func:`_held_out`)."""
    (x, y), _ = _data()
    keep = _held_out()
    return x[keep], y[keep]


@lru_cache(maxsize=4096)
def _partition_rows(partition_id, num_partitions, split, seed, hold_out=False):
    (_, y), _ = _data()
    pool = np.flatnonzero(~_held_out()) if hold_out else np.arange(len(y))
    n = len(pool)
    rng = np.random.default_rng(seed)
    if split == "iid":
        rows = rng.permutation(n)
        picked = rows[partition_id * n // num_partitions:(partition_id + 1) * n // num_partitions]
        return tuple(pool[picked])
    if split != "non-iid":
        raise ValueError('split must be "iid" or "non-iid", got %r' % (split,))
    rows = np.lexsort((np.arange(n), y[pool]))
    shards = 2 * num_partitions
    ids = rng.permutation(shards)[2 * partition_id:2 * partition_id + 2]
    return tuple(pool[np.concatenate([rows[s * n // shards:(s + 1) * n // shards] for s in ids])])


def load_partition(partition_id, num_partitions, split="non-iid", seed=1, hold_out=False):
    """(x, y) of one client's training rows (without the server's validation rows when
    ``hold_out``)."""
    if not 0 <= partition_id < num_partitions:
        raise ValueError("partition-id %r is not in 0..%d" % (partition_id, num_partitions - 1))
    (x, y), _ = _data()
    rows = np.asarray(_partition_rows(int(partition_id), int(num_partitions), split, int(seed),
                                      bool(hold_out)))
    return x[rows], y[rows]


def initial_model():
    """Zero weights (10, 64) and biases (10,), float32."""
    return np.zeros((CLASSES, FEATURES), np.float32), np.zeros(CLASSES, np.float32)


def probabilities(weights, bias, x):
    z = x @ weights.T + bias
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def train(weights, bias, x, y, epochs, lr, batch, rng):
    """Local minibatch SGD on the cross-entropy; returns new (weights, bias) and the mean
    training loss of the last epoch."""
    w, b = weights.astype(np.float32).copy(), bias.astype(np.float32).copy()
    loss = 0.0
    for _ in range(epochs):
        order = rng.permutation(len(y))
        losses = []
        for start in range(0, len(y), batch):
            rows = order[start:start + batch]
            p = probabilities(w, b, x[rows])
            losses.append(-np.log(p[np.arange(len(rows)), y[rows]] + 1e-12).mean())
            p[np.arange(len(rows)), y[rows]] -= 1.0
            w -= (lr / len(rows)) * (p.T @ x[rows]).astype(np.float32)
            b -= (lr / len(rows)) * p.sum(axis=0).astype(np.float32)
        loss = float(np.mean(losses))
    return w, b, loss


def evaluate(weights, bias, x, y):
    """(accuracy, mean cross-entropy) on (x, y)."""
    p = probabilities(weights, bias, x)
    accuracy = float((p.argmax(axis=1) == y).mean())
    loss = float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())
    return accuracy, loss
