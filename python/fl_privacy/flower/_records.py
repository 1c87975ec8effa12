"""Helpers shared by the Flower strategy and mods: flattening models, reading replies,
error replies."""

from logging import ERROR

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Error, Message, MetricRecord
from flwr.common.constant import ErrorCode
from flwr.common import log


def message_category(msg):
    """The message type without its action suffix ("train", "evaluate", "query")."""
    return msg.metadata.message_type.split(".", 1)[0]


def error_reply(msg, reason):
    """A reply to ``msg`` carrying an error (Flower's way for a mod to refuse)."""
    log(ERROR, reason)
    return Message(Error(code=ErrorCode.MOD_FAILED_PRECONDITION, reason=reason), reply_to=msg)


def single_record(content, kind, what):
    """The only record of ``kind`` in a RecordDict, or ValueError naming what is wrong."""
    records = {
        ArrayRecord: content.array_records,
        ConfigRecord: content.config_records,
        MetricRecord: content.metric_records,
    }[kind]
    if len(records) != 1:
        raise ValueError(
            "%s must hold exactly one %s, found %d" % (what, kind.__name__, len(records))
        )
    return next(iter(records.items()))


def flatten(record):
    """A model's ArrayRecord as one float32 vector (arrays in the record's key order,
    each flattened in C order), and the layout that :func:`unflatten` needs."""
    layout = []
    parts = []
    for key, array in record.items():
        a = array.numpy()
        if a.dtype.kind != "f":
            raise TypeError(
                "SignDS updates floating-point models: array %r has dtype %s" % (key, a.dtype)
            )
        layout.append((key, a.shape, a.dtype))
        parts.append(np.asarray(a, dtype=np.float32).reshape(-1))
    if not parts:
        raise ValueError("the model's ArrayRecord is empty")
    return np.ascontiguousarray(np.concatenate(parts)), layout


def unflatten(flat, layout):
    """The ArrayRecord of ``layout`` (keys, shapes, dtypes) holding the values of ``flat``."""
    arrays = {}
    offset = 0
    for key, shape, dtype in layout:
        size = int(np.prod(shape, dtype=np.int64))
        arrays[key] = Array(np.asarray(flat[offset:offset + size], dtype=dtype).reshape(shape))
        offset += size
    if offset != flat.size:
        raise ValueError("the vector has %d values, the layout %d" % (flat.size, offset))
    return ArrayRecord(arrays)


def same_layout(a, b):
    """Whether two layouts have the same keys, shapes and dtypes in the same order."""
    return [(k, tuple(s), np.dtype(d)) for k, s, d in a] == [(k, tuple(s), np.dtype(d)) for k, s, d in b]


def client_weight(metrics, key):
    """The client's example count n_i >= 1 from its MetricRecord (an int, or a float with
    an integer value)."""
    if key not in metrics:
        raise ValueError("the reply's MetricRecord has no %r (the client's example count)" % key)
    value = metrics[key]
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value)
            or value != int(value) or not 1 <= value <= 2**64 - 1):
        raise ValueError("%r must be a whole number in [1, 2^64 - 1], got %r" % (key, value))
    return int(value)
