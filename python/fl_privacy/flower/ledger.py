"""A client's privacy ledger on its own disk: every report's ε, across runs and restarts.

Flower's ``Context.state`` lives at most as long as one SuperNode process, and (Flower
≥ 1.42) as long as one run or one *run series* the server chooses: a second ``flwr run``
outside the series, or a restarted SuperNode, starts it empty. :class:`SignDSMod` therefore
charges each report to a **ledger file** that the client keeps itself: one JSON file per
client, one entry per report (ε + ε_RR as realised, the run id, the server round where the
train config names it, the time), written atomically and durably *before* the report leaves
the mod, under an exclusive lock (``fcntl.flock`` on a ``.lock`` file beside it) around
every read-modify-write.

File format (``FORMAT``)::

    {"format": "fl-privacy-ledger/1", "client": "<key>",
     "entries": [{"mechanism": "signds", "epsilon": 10.0, "run_id": 7, "round": 1,
                  "time": 1767000000.0}, ...],
     "sha256": "<hex SHA-256 of the canonical JSON of the three fields above>"}

The canonical JSON is ``json.dumps(..., sort_keys=True, separators=(",", ":"),
ensure_ascii=True, allow_nan=False)`` of ``{"format", "client", "entries"}``. The checksum
detects corruption and accidental edits; it is not a signature (whoever can write the file
can recompute it). A file that does not parse, whose checksum does not match, whose
``client`` is not the key it is read under, or with an invalid entry (ε not a finite number
> 0, a run id or round that is not an int ≥ 0, a time that is not a finite number ≥ 0, an
unknown field) is **refused** (:class:`LedgerError`): the mod then refuses every train
message until the operator restores the file from a backup or deliberately removes it
(which resets that client's history to zero: the one way to reset, and an explicit one). A
missing file is a client with no history.

Reading: :func:`read_ledger` (a path) returns a :class:`Ledger`, whose
:meth:`Ledger.spent` gives the whole-history ε of basic composition (Σ ε_i, δ = 0) and the
optimal composition bound of Kairouz, Oh and Viswanath at δ (:mod:`.accounting`, ε* = the
largest ε_i). With large per-report ε (tens and more) the optimal bound is barely below
the sum, and for few reports not below it at all: :attr:`LedgerSpent.optimal_better` says
whether it is.
"""

import hashlib
import json
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import NamedTuple, Optional

from fl_privacy.flower.accounting import PureEpsilonAccountant, PureEpsilonEvent

__all__ = [
    "BudgetExceeded",
    "FORMAT",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerSpent",
    "charge",
    "default_ledger_dir",
    "ledger_file",
    "read_ledger",
]

#: The format tag of ledger files this module reads and writes.
FORMAT = "fl-privacy-ledger/1"
#: The mechanisms whose releases a ledger holds.
MECHANISMS = ("signds",)
#: A client key (``ledger_name``, or ``partition-<id>``): a file name, nothing else.
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_FILE = re.compile(r"signds-([A-Za-z0-9][A-Za-z0-9._-]{0,127})\.json\Z")
_ENTRY_FIELDS = ("epsilon", "mechanism", "round", "run_id", "time")


class LedgerError(ValueError):
    """A ledger that cannot be trusted (unreadable, corrupt, invalid) or written."""


class LedgerEntry(NamedTuple):
    """One release charged to the client: ``epsilon`` (> 0, finite), the ``run_id`` it was
    sent in, the server ``round`` (None where the train config did not name it), ``time``
    (seconds since the epoch) and the ``mechanism``."""

    epsilon: float
    run_id: int
    round: Optional[int]
    time: float
    mechanism: str = "signds"


class LedgerSpent(NamedTuple):
    """A ledger's whole-history privacy: ``basic`` = Σ ε_i (δ = 0); ``optimal`` = the
    smaller of ``basic`` and the Kairouz–Oh–Viswanath bound at ``delta``;
    ``optimal_better`` whether the bound is below the sum (otherwise ``optimal`` is the
    sum, and the claim is (basic, 0)); ``releases`` the number of entries."""

    basic: float
    optimal: float
    delta: float
    releases: int
    optimal_better: bool


def check_key(name, value):
    """A client key usable as a file name (ValueError / TypeError naming ``name``)."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, got %s" % (name, type(value).__name__))
    if not _KEY.match(value):
        raise ValueError("%s must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', '-', "
                         "starting with a letter or digit, got %r" % (name, value))
    return value


def default_ledger_dir():
    """``<Flower home>/fl-privacy/ledger``: Flower's home as the installed Flower computes it
    (``$FLWR_HOME`` when set; otherwise ``~/.flwr`` on Flower 1.42, and
    ``$XDG_DATA_HOME/.flwr`` or ``$HOME/.flwr`` on Flower 1.21)."""
    try:
        from flwr.supercore.utils import get_flwr_home  # Flower >= 1.2x (1.42 has it)
    except ImportError:
        from flwr.common.config import get_flwr_dir as get_flwr_home  # Flower 1.21
    return Path(get_flwr_home()) / "fl-privacy" / "ledger"


def ledger_file(directory, key):
    """The ledger file of client ``key`` in ``directory``."""
    return Path(directory) / ("signds-%s.json" % check_key("the ledger key", key))


def _canonical(client, entries):
    return json.dumps({"format": FORMAT, "client": client, "entries": entries},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def _int(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _entry(i, raw):
    if not isinstance(raw, dict) or tuple(sorted(raw)) != _ENTRY_FIELDS:
        raise LedgerError("entry %d must be an object with exactly the fields %s"
                          % (i, list(_ENTRY_FIELDS)))
    if not (_number(raw["epsilon"]) and raw["epsilon"] > 0):
        raise LedgerError("entry %d: epsilon must be a finite number > 0, got %r"
                          % (i, raw["epsilon"]))
    if not _int(raw["run_id"]):
        raise LedgerError("entry %d: run_id must be an int in [0, 2^64), got %r"
                          % (i, raw["run_id"]))
    if raw["round"] is not None and not _int(raw["round"]):
        raise LedgerError("entry %d: round must be null or an int >= 0, got %r"
                          % (i, raw["round"]))
    if not (_number(raw["time"]) and raw["time"] >= 0):
        raise LedgerError("entry %d: time must be a finite number >= 0, got %r"
                          % (i, raw["time"]))
    if raw["mechanism"] not in MECHANISMS:
        raise LedgerError("entry %d: mechanism must be one of %s, got %r"
                          % (i, list(MECHANISMS), raw["mechanism"]))
    return LedgerEntry(float(raw["epsilon"]), raw["run_id"], raw["round"],
                       float(raw["time"]), raw["mechanism"])


class Ledger:
    """A client's ledger as read from its file: :attr:`client` (the key), :attr:`entries`
    (a tuple of :class:`LedgerEntry`, oldest first), :attr:`path`."""

    def __init__(self, client, entries, path=None):
        self.client = client
        self.entries = tuple(entries)
        self.path = path

    @property
    def total(self):
        """Σ ε_i (basic composition), as :class:`SignDSMod` reports it."""
        return math.fsum(e.epsilon for e in self.entries)

    def accountant(self, delta=1e-6):
        """A :class:`~.accounting.PureEpsilonAccountant` holding every entry (target δ
        ``delta``)."""
        accountant = PureEpsilonAccountant(target_delta=delta)
        for e in self.entries:
            accountant.compose(PureEpsilonEvent(e.epsilon))
        return accountant

    def spent(self, delta=1e-6):
        """The whole-history privacy (:class:`LedgerSpent`): basic composition, and the
        Kairouz–Oh–Viswanath bound at ``delta`` (in (0, 1)) where it is smaller."""
        accountant = self.accountant(delta)
        basic = accountant.get_epsilon(0.0)
        optimal = accountant.get_epsilon(delta)
        return LedgerSpent(basic, optimal, float(delta), len(self.entries), optimal < basic)

    def __repr__(self):
        return "Ledger(client=%r, releases=%d, total=%r)" % (self.client, len(self.entries),
                                                             self.total)


def _parse(data, path, key=None):
    try:
        doc = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as e:
        raise LedgerError("%s does not parse as a ledger (JSON): %s" % (path, e)) from None
    if not isinstance(doc, dict) or set(doc) != {"format", "client", "entries", "sha256"}:
        raise LedgerError("%s is not a ledger: an object with the fields format, client, "
                          "entries, sha256 is expected" % path)
    if doc["format"] != FORMAT:
        raise LedgerError("%s has format %r, this version reads %r" % (path, doc["format"], FORMAT))
    if not isinstance(doc["client"], str) or not _KEY.match(doc["client"]):
        raise LedgerError("%s: invalid client key %r" % (path, doc["client"]))
    if not isinstance(doc["entries"], list):
        raise LedgerError("%s: entries must be a list" % path)
    try:
        digest = _sha256(_canonical(doc["client"], doc["entries"]))
    except ValueError as e:  # a NaN or infinity (json reads them; canonical JSON does not)
        raise LedgerError("%s: %s" % (path, e)) from None
    if doc["sha256"] != digest:
        raise LedgerError("%s: the checksum does not match the content (the file was "
                          "corrupted or edited)" % path)
    if key is not None and doc["client"] != key:
        raise LedgerError("%s belongs to client %r, not %r" % (path, doc["client"], key))
    try:
        entries = [_entry(i, e) for i, e in enumerate(doc["entries"])]
    except LedgerError as e:
        raise LedgerError("%s: %s" % (path, e)) from None
    return Ledger(doc["client"], entries, path)


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def read_ledger(path, key=None):
    """The :class:`Ledger` in file ``path`` (LedgerError when it cannot be read or is
    refused; FileNotFoundError when there is none). ``key``: the client it must belong
    to; None: the key its name says (``signds-<key>.json``), or any for another name."""
    path = Path(path)
    if key is None:
        named = _FILE.match(path.name)
        key = named.group(1) if named else None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise LedgerError("%s cannot be read: %s" % (path, e)) from None
    return _parse(data, path, key)


def _fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path, client, entries):
    """Atomic, durable replacement of ``path``: a temporary file in the same directory,
    fsync, os.replace, fsync of the directory."""
    raw = [e._asdict() for e in entries]
    payload = {"format": FORMAT, "client": client, "entries": raw,
               "sha256": _sha256(_canonical(client, raw))}
    data = json.dumps(payload, sort_keys=True, indent=1, ensure_ascii=True,
                      allow_nan=False).encode("ascii") + b"\n"
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


class _Locked:
    """An exclusive ``fcntl.flock`` on ``<ledger>.lock`` for a read-modify-write."""

    def __init__(self, path):
        self.path = Path(str(path) + ".lock")
        self.fd = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            raise LedgerError("the ledger needs fcntl.flock (a POSIX system)") from None
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # closing releases the lock


def load(path, key):
    """The ledger of client ``key`` at ``path`` (an empty one where there is no file)."""
    try:
        return read_ledger(path, key)
    except FileNotFoundError:
        return Ledger(key, (), Path(path))


def charge(path, key, epsilon, run_id, server_round, budget=None, mechanism="signds"):
    """Adds one release of ``epsilon`` to client ``key``'s ledger at ``path`` under the
    lock, durably, and returns the new :class:`Ledger`; with ``budget``, refuses
    (:class:`BudgetExceeded`, nothing written) when Σ ε would exceed it. LedgerError when
    the ledger is refused or cannot be written."""
    path = Path(path)
    entry = _entry(0, {"epsilon": epsilon, "run_id": run_id, "round": server_round,
                       "time": time.time(), "mechanism": mechanism})
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with _Locked(path):
            ledger = load(path, key)
            if budget is not None and ledger.total + entry.epsilon > budget:
                raise BudgetExceeded(ledger, entry.epsilon, budget)
            entries = ledger.entries + (entry,)
            _write(path, key, entries)
    except (LedgerError, BudgetExceeded):
        raise
    except (OSError, ValueError, TypeError) as e:
        raise LedgerError("the ledger %s cannot be written: %s" % (path, e)) from None
    return Ledger(key, entries, path)


class BudgetExceeded(Exception):
    """A release that would take the ledger's Σ ε above the budget (nothing was written)."""

    def __init__(self, ledger, epsilon, budget):
        super().__init__("%.6g spent over %d reports, one more costs %.6g, budget %.6g"
                         % (ledger.total, len(ledger.entries), epsilon, budget))
        self.ledger = ledger
