"""Helpers shared by the Flower strategy and mods: flattening models, reading replies,
the mods' refusals (error replies with a fixed text) and the mark that a reply was made
by one of fl_privacy's mods."""

import weakref
from logging import ERROR

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Error, Message, MetricRecord
from flwr.common import log
from flwr.common.constant import ErrorCode

#: The error code of the mods' refusals (Flower < 1.22 has no MOD_FAILED_PRECONDITION).
REFUSAL_CODE = getattr(ErrorCode, "MOD_FAILED_PRECONDITION", ErrorCode.UNKNOWN)

#: Flower's legacy API, named in the refusals and the local log.
LEGACY_API = ("Flower's legacy API (client_fn with NumPyClient/Client, fitins/evaluateins "
              "messages, ServerAppComponents) is not supported: fl_privacy.flower works on "
              "the Message API only (a ClientApp with @app.train()/@app.evaluate(), a "
              "ServerApp with @app.main() calling strategy.start())")

# Every text an error reply of the mods can carry: a closed set of fixed strings, none
# computed from the client's data (the details go to the client's own log). A refusal
# still tells the server that the client refused; which of these it is depends on the
# configuration, the message the server sent and the round count, which the server knows.
REFUSED_CATEGORY = ("fl_privacy: this client answers no %s message that an fl_privacy mod "
                    "does not protect")
REFUSED_LEGACY = "fl_privacy: " + LEGACY_API
REFUSED_APP = ("fl_privacy: the ClientApp's reply could not be protected, so nothing of it "
               "was sent (the reason is in the client's log)")
REFUSED_NOT_SIGNDS = "fl_privacy SignDSMod: not a SignDSStrategy train message"
REFUSED_LAW = "fl_privacy SignDSMod: the server's SignDS law (d, h) differs from this client's"
REFUSED_BUDGET = "fl_privacy SignDSMod: this client's privacy budget is exhausted"
REFUSED_LEDGER = ("fl_privacy SignDSMod: this client's privacy ledger is unavailable or "
                  "invalid (the reason is in the client's log)")
REFUSED_HANDSHAKE = "fl_privacy SignDSMod: malformed handshake"
REFUSED_CONFIG = "fl_privacy SignDSMod: this client's SignDS configuration is invalid"
REFUSED_NO_MOD = "fl_privacy: this ClientApp has no SignDSMod, so it takes part in no SignDS round"

#: Replies made by fl_privacy's mods in this process (their own reports, releases and
#: refusals) with a fingerprint of what they held, so that an outer mod forwards what an
#: inner one protected — and nothing a mod between them added to it afterwards.
_PROTECTED = weakref.WeakKeyDictionary()
#: Messages whose reply an fl_privacy mod further out is about to protect, so that an inner
#: mod lets them through to the app (mods=[SignDSMod, LaplaceEvalMod] or the reverse).
_GUARDED = weakref.WeakSet()


def _fingerprint(reply):
    """What a reply holds: its error, or every record's contents."""
    if reply.has_error():
        return ("error", reply.error.code, reply.error.reason)
    parts = []
    for name, record in reply.content.items():
        if isinstance(record, ArrayRecord):
            parts.append((name, "arrays", tuple((k, a.dtype, tuple(a.shape), a.stype, bytes(a.data))
                                                for k, a in record.items())))
        else:
            parts.append((name, type(record).__name__, repr(list(record.items()))))
    return tuple(parts)


def protected(reply):
    """Marks ``reply`` as made by an fl_privacy mod (with a fingerprint of its contents)
    and returns it."""
    _PROTECTED[reply] = _fingerprint(reply)
    return reply


def is_protected(reply):
    """Whether ``reply`` was made by an fl_privacy mod (a report, a release, a refusal)
    and still holds exactly what the mod put in it."""
    try:
        return reply in _PROTECTED and _PROTECTED[reply] == _fingerprint(reply)
    except Exception:  # noqa: BLE001 - an unhashable or odd object is not protected
        return False


def local_log(level, fmt, *args):
    """A line in this process's log only (the client's own: never in a reply)."""
    log(level, fmt, *args)


def message_category(msg):
    """The message type without its action suffix ("train", "evaluate", "query")."""
    return msg.metadata.message_type.split(".", 1)[0]


def refuse(msg, public, detail):
    """A reply to ``msg`` carrying an error with the fixed text ``public`` (one of the
    ``REFUSED_*`` strings); ``detail``, which may name local values, goes to this process's
    log only."""
    log(ERROR, "%s: %s", public, detail)
    return protected(Message(Error(code=REFUSAL_CODE, reason=public), reply_to=msg))


#: The record-name prefixes of Flower's legacy messages ("fitins.parameters", ...).
_LEGACY_RECORDS = ("fitins", "evaluateins", "getparametersins", "getpropertiesins")


def _legacy_name(name):
    return "." in str(name) and str(name).split(".", 1)[0] in _LEGACY_RECORDS


def is_legacy(msg):
    """Whether ``msg`` is one of Flower's legacy messages (fitins, evaluateins, ...)."""
    names = list(msg.content.keys()) if msg.has_content() else []
    legacy_type = msg.metadata.message_type in ("get_parameters", "get_properties")
    return legacy_type or any(_legacy_name(n) for n in names)


def describe(e):
    """``TypeName: text`` of an exception, for the local log; never raises (an exception
    whose ``str`` raises would otherwise escape with its own text)."""
    try:
        return "%s: %s" % (type(e).__name__, e)
    except BaseException:  # noqa: BLE001
        return "<unprintable %s>" % type(e).__name__


def _legacy_error(e):
    try:
        return isinstance(e, KeyError) and any(_legacy_name(a) for a in e.args)
    except BaseException:  # noqa: BLE001
        return False


def _run_app(msg, ctxt, call_next, who, guarded):
    """``call_next`` (with ``msg`` marked as guarded for the duration of the call when the
    calling mod protects its reply): ``(reply, None)``, or ``(None, detail)`` when it raised
    anything (``BaseException`` included: an escaping exception's text would reach the
    server through Flower; only ``KeyboardInterrupt`` stays fatal, re-raised without its
    arguments) or returned something that is not a Message."""
    if guarded:
        _GUARDED.add(msg)
    try:
        out = call_next(msg, ctxt)
    except KeyboardInterrupt:
        raise KeyboardInterrupt() from None
    except BaseException as e:  # noqa: BLE001 - nothing the app raises may leave as text
        if _legacy_error(e):
            return None, "%s: the wrapped ClientApp raised KeyError(%r): it uses %s" % (
                who, describe(e), LEGACY_API)
        return None, "%s: the wrapped ClientApp raised %s" % (who, describe(e))
    finally:
        if guarded:
            _GUARDED.discard(msg)
    if not isinstance(out, Message):
        return None, "%s: the wrapped ClientApp returned %s, not a Message" % (
            who, type(out).__name__)
    return out, None


def call_app(msg, ctxt, call_next, who):
    """Runs the rest of the ClientApp for a message the calling mod protects: ``(reply,
    None)``, or ``(None, refusal)`` when it raised or replied with an error (whose text,
    which may quote local data, is logged here and never sent) or an inner fl_privacy mod
    refused."""
    out, detail = _run_app(msg, ctxt, call_next, who, guarded=True)
    if out is None:
        public = REFUSED_LEGACY if LEGACY_API in detail else REFUSED_APP
        return None, refuse(msg, public, detail)
    if is_protected(out):
        return (None, out) if out.has_error() else (out, None)
    if out.has_error():
        return None, refuse(msg, REFUSED_APP, "%s: the wrapped ClientApp replied with an error "
                            "(code %s): %s" % (who, out.error.code, out.error.reason))
    return out, None


def guard(msg, ctxt, call_next, who, allow_unprotected):
    """A mod's answer to a message category it does not protect: the reply of an inner
    fl_privacy mod, or the app's reply where the user named the category in
    ``allow_unprotected``; otherwise a refusal with one text for the category, whatever
    the app did (raised, replied with an error, replied), so that the choice of text says
    nothing about local data."""
    if msg in _GUARDED:  # an outer fl_privacy mod protects this reply (during its call)
        return call_next(msg, ctxt)
    category = message_category(msg)
    if is_legacy(msg):
        return refuse(msg, REFUSED_LEGACY, "%s received a legacy %r message: %s"
                      % (who, msg.metadata.message_type, LEGACY_API))
    # Not marked as guarded: an inner fl_privacy mod that protects this category must.
    out, detail = _run_app(msg, ctxt, call_next, who, guarded=False)
    if out is not None and is_protected(out):
        return out
    allowed = category in allow_unprotected
    if out is not None and allowed and not out.has_error():
        return out
    if out is not None:
        detail = ("%s: the wrapped ClientApp replied with an error (code %s): %s"
                  % (who, out.error.code, out.error.reason)) if out.has_error() else (
            "%s refused to send the ClientApp's %r reply: no fl_privacy mod protects it "
            "(name the category in allow_unprotected=... to send it as it is)" % (who, category))
    return refuse(msg, REFUSED_APP if allowed else REFUSED_CATEGORY % category, detail)


def check_categories(name, value):
    """``allow_unprotected``: a tuple of message categories ("train", "evaluate", "query")."""
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise TypeError("%s must be a list of message categories (str), got %r" % (name, value))
    unknown = set(value) - {"train", "evaluate", "query"}
    if unknown:
        raise ValueError("%s: unknown message categories %s (allowed: train, evaluate, query)"
                         % (name, sorted(unknown)))
    return tuple(value)


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
