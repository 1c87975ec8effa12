"""SignDS on Flower: :class:`SignDSStrategy` (ServerApp) and :class:`SignDSMod` (ClientApp).

The client mod wraps any ClientApp whose train function returns the locally trained model
as an ArrayRecord of numpy arrays. It turns the update (trained − received weights,
flattened in the ArrayRecord's key order) into one fl-signds report and replies with **only**
the report's wire bytes (fl-signds' versioned wire format, ``Report::encode`` in Rust) and
the client's example count n_i — the weights, and every other metric the wrapped app
returned, are dropped unless ``forward_metrics`` names them. The reply's metrics carry the
privacy the report spent this round and the client's whole-history total from its ledger
(a file on the client's disk, :mod:`fl_privacy.flower.ledger`, charged before the report
is sent; it survives runs and SuperNode restarts). Every other message
(evaluate, query) is answered only through an inner fl_privacy mod (LaplaceEvalMod) or where
the user named its category in ``allow_unprotected``; errors leave as fixed texts.

The strategy is Flower's FedAvg with SignDS aggregation: it broadcasts fl-signds' step-size
state (r_est, phase) in the train config, validates every report with fl-signds' server
(a malformed or mismatched report is rejected and counted, never applied), applies
w' = w + g·Σ n_i s_i 1[j ∈ J_i]/Σ n_i and moves the r_est state machine.

Privacy (docs/proofs/fl-signds/selection.md and magrr.md): one report is
(ε + ε_RR)-LDP for any two updates of the reporting client in that round, with the
*realised* ε and ε_RR that fl-signds computes (each at most the requested value). Across
rounds and runs: a client's whole-history ε is its ledger's sum Σ(ε + ε_RR) (basic
composition, δ = 0; ``signds-epsilon-total``), or the optimal composition bound of
Kairouz–Oh–Viswanath at δ = ``ledger_delta`` (``signds-epsilon-optimal``), over every
report charged to the same ledger file (see :class:`SignDSMod` for what identifies a
client). Not covered: n_i (sent in the clear, as upstream's SignDS
does), any metric listed in ``forward_metrics``, replies of a category named in
``allow_unprotected``, the client's participation history (the total tells this run's
server how many reports the client sent before, in other runs too), the fact of participating or of refusing (which of the fixed refusal
texts is sent depends on the configuration and the round count, not on local data; an app
whose reply is invalid for some data and valid for other data reveals that one bit), and
timing.
"""

import contextvars
import os
from logging import INFO, WARNING

from pathlib import Path

import numpy as np
from flwr.app import (Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord,
                      RecordDict)
from flwr.clientapp import ClientApp
from flwr.common import log
from flwr.serverapp.strategy import FedAvg

from fl_privacy import ldp as _ldp
from fl_privacy import signds as _signds
from fl_privacy.flower._records import (
    LEGACY_API,
    REFUSED_BUDGET,
    REFUSED_CONFIG,
    REFUSED_HANDSHAKE,
    REFUSED_LAW,
    REFUSED_LEDGER,
    REFUSED_LEGACY,
    REFUSED_NO_MOD,
    REFUSED_NOT_SIGNDS,
    REFUSED_APP,
    call_app,
    check_categories,
    client_weight,
    describe,
    flatten,
    guard,
    is_legacy,
    local_log,
    message_category,
    protected,
    refuse,
    same_layout,
    single_record,
    unflatten,
)
from fl_privacy.flower import ledger as _ledger
from fl_privacy.flower.accounting import PureEpsilonAccountant, PureEpsilonEvent, _probability

__all__ = [
    "CONFIG_DIMENSION",
    "CONFIG_OUTPUT_DIMENSION",
    "CONFIG_PHASE",
    "CONFIG_R_EST",
    "HANDSHAKE_ACTION",
    "HANDSHAKE_PROTOCOL",
    "HANDSHAKE_RECORD",
    "METRIC_EPSILON",
    "METRIC_EPSILON_OPTIMAL",
    "METRIC_EPSILON_OPTIMAL_DELTA",
    "METRIC_EPSILON_TOTAL",
    "METRIC_REPORT_BYTES",
    "REPORT_KEY",
    "REPORT_RECORD",
    "PrivateClientApp",
    "RoundFailed",
    "SignDSMod",
    "SignDSStrategy",
]

#: Train-config keys the strategy sends: fl-signds' broadcast and the law's d and h.
CONFIG_R_EST = "signds-r-est"
CONFIG_PHASE = "signds-phase"
CONFIG_DIMENSION = "signds-dimension"
CONFIG_OUTPUT_DIMENSION = "signds-output-dimension"
#: The reply's ConfigRecord name and the key of the report's wire bytes in it.
REPORT_RECORD = "signds"
REPORT_KEY = "report"
#: Reply metrics: ε + ε_RR of this round's report, the client's whole-history total from its
#: ledger (basic composition), report size, and the ledger's optimal composition bound
#: (Kairouz–Oh–Viswanath; the basic total where that is not smaller) at the δ it names.
METRIC_EPSILON = "signds-epsilon"
METRIC_EPSILON_TOTAL = "signds-epsilon-total"
METRIC_REPORT_BYTES = "signds-report-bytes"
METRIC_EPSILON_OPTIMAL = "signds-epsilon-optimal"
METRIC_EPSILON_OPTIMAL_DELTA = "signds-epsilon-optimal-delta"
#: The mod's record in the ClientApp's Context.state: ``epsilon-total`` (the ledger's
#: whole-history total after this run's last report) and ``rounds`` (reports sent in this
#: run on this SuperNode). The budget is kept in the ledger, not here.
STATE_RECORD = "fl-privacy-signds"
#: The capability handshake: a query message of action HANDSHAKE_ACTION whose ConfigRecord
#: of this name holds ``protocol`` = HANDSHAKE_PROTOCOL and the model's dimension; SignDSMod
#: answers it itself (the app is not called) with its law (d, h) and ε per report. Flower
#: runs a ClientApp's mods only around registered functions: :class:`PrivateClientApp`
#: registers one for this action, and only its own mods may answer.
HANDSHAKE_ACTION = "fl_privacy_handshake"
HANDSHAKE_TYPE = "query." + HANDSHAKE_ACTION
HANDSHAKE_RECORD = "fl-privacy-handshake"
HANDSHAKE_PROTOCOL = "fl-privacy/signds/1"

#: The keyword parameters that fix a client's law (fl_privacy.signds' names).
_LAW_PARAMS = ("top_k_fraction", "epsilon", "threshold_ratio", "output_dimension",
               "magrr_epsilon", "profile")
#: The dimension of the model built when the parameters are checked (a constructor cannot
#: know the model's): every parameter's domain is checked, K and h again at the first round.
_PROBE_DIMENSION = 10_000


def _check_params(params, allowed, who):
    """Refuses unknown names and a missing ε; builds a probe client so that every value is
    checked now (TypeError / ValueError naming the parameter), not at round 1."""
    unknown = set(params) - set(allowed)
    if unknown:
        raise TypeError("%s: unknown SignDS parameters %s (allowed: %s)"
                        % (who, sorted(unknown), sorted(allowed)))
    if params.get("epsilon") is None and params.get("profile") != "mindspore":
        raise TypeError("%s: epsilon is required (the selection's ε per report; ε_RR is "
                        "magrr_epsilon, 5 unless given). Upstream's defaults (ε = 100) only "
                        "by name: profile=\"mindspore\"" % who)
    try:
        _signds.Client(_PROBE_DIMENSION, **{k: v for k, v in params.items() if k in _LAW_PARAMS})
    except (TypeError, ValueError) as e:
        raise type(e)("%s: %s" % (who, e)) from None


class RoundFailed(RuntimeError):
    """A SignDS round that cannot go on (no report accepted, no client running SignDSMod):
    raised by :class:`SignDSStrategy`, it stops the ServerApp, so the run ends as failed with
    this one line."""


#: The PrivateClientApp mod whose own code runs now (None inside its call_next): Flower
#: puts the app's mods around every function registered on it, so a SignDSMod that finds
#: itself here is one of them, on the train route too — not merely called by one (an app
#: mod that calls SignDSMod for the handshake could skip it for train).
_IN_APP_MOD = contextvars.ContextVar("fl_privacy_in_app_mod", default=None)
#: The PrivateClientApp that received the message from Flower (the outermost one): only
#: its own mods may answer the handshake, not those of an app another mod calls.
_RECEIVING_APP = contextvars.ContextVar("fl_privacy_receiving_app", default=None)


class _AppMod:
    """One of ``app``'s own mods, with :data:`_IN_APP_MOD` set to ``(mod, app)`` during its
    own code and cleared during the rest of the chain it calls. A class at module level
    (not a closure), so that Ray can pickle the app for Flower's simulation: a closure
    would be pickled by value with the ContextVar it reads, which cannot be pickled."""

    def __init__(self, mod, app):
        self.mod = mod
        self.app = app

    def __call__(self, msg, ctxt, call_next):
        def rest(m, c):
            token = _IN_APP_MOD.set(None)
            try:
                return call_next(m, c)
            finally:
                _IN_APP_MOD.reset(token)

        token = _IN_APP_MOD.set((self.mod, self.app))
        try:
            return self.mod(msg, ctxt, rest)
        finally:
            _IN_APP_MOD.reset(token)


class PrivateClientApp(ClientApp):
    """Flower's ``ClientApp`` that answers fl_privacy's capability handshake.

    Flower runs a ClientApp's ``mods`` only around the functions registered on it; this
    subclass registers one for the handshake query (``query.fl_privacy_handshake``), so
    that the :class:`SignDSMod` among ``mods`` answers it and :class:`SignDSStrategy`
    sends train messages to this node. Only the app's own ``mods`` (copied when it is
    built; Flower puts them around every function, train included) can answer: a SignDSMod
    among one function's ``mods=``, or on a plain ClientApp, refuses the handshake. Without
    a SignDSMod the handshake is refused (and the strategy sends this node nothing to
    train). Use it as ``ClientApp``::

        app = PrivateClientApp(mods=[SignDSMod(epsilon=10.0), LaplaceEvalMod(1.0)])

        @app.train()
        def train(msg, context): ...
    """

    def __init__(self, client_fn=None, mods=None):
        super().__init__(client_fn=client_fn, mods=[_AppMod(m, self) for m in (mods or [])])
        if client_fn is None:  # (Flower's legacy client_fn path runs every message through mods)
            self.query(HANDSHAKE_ACTION)(_handshake_without_mod)


    def __call__(self, message, context):
        token = _RECEIVING_APP.set(self) if _RECEIVING_APP.get() is None else None
        try:
            return super().__call__(message, context)
        finally:
            if token is not None:
                _RECEIVING_APP.reset(token)


def _handshake_without_mod(msg, ctxt):
    """The handshake reached the app: no SignDSMod is installed."""
    return refuse(msg, REFUSED_NO_MOD, "the SignDS handshake reached the ClientApp: no "
                  "SignDSMod among its mods, so it answers no SignDS round")


class SignDSMod:
    """A ClientApp mod that uploads a SignDS report instead of the trained model.

    Keyword parameters are fl_privacy.signds.Client's (``epsilon``, required, ``top_k_fraction``,
    ``threshold_ratio``, ``output_dimension``, ``magrr_epsilon``, ``profile``; omitted ones
    keep upstream's defaults; upstream's ε = 100 only with ``profile="mindspore"``), checked
    here: the client decides what it spends; the mod refuses to answer when the server's law
    (d, h) differs from its own.

    What leaves the client through this mod: for a train message, the report, n_i and the
    privacy metrics; for the strategy's handshake (a query), the law and ε per report; for
    every other message, the reply of an inner fl_privacy mod (e.g. :class:`LaplaceEvalMod`
    for evaluate), or the app's own reply only for the categories named in
    ``allow_unprotected`` (e.g. ``("evaluate",)``: outside the privacy claim); otherwise a
    refusal. Refusals are error replies with a fixed text (``_records.REFUSED_*``); the
    reason, which may quote local values, goes to the client's log only.

    ``error_feedback`` (default True): keep the client's error-feedback state (what its
    earlier reports did not credit, fl-signds' ``Client::encode_with_feedback``) in the
    node's ``Context.state`` (never sent; kept only once a report is charged) and report
    update + state. Same ε per report; the whole-run claim is the ledger's sum, as without
    (docs/proofs/fl-signds/feedback.md). It is what lets label-skewed clients reach FedAvg
    on digits (fl-signds README, ablation).

    ``configure``: instead of the keywords, a callable ``configure(context)`` returning
    them as a dict (``error_feedback`` may be one of its keys) (e.g. from ``context.run_config``; a mod per parameter set, checked when
    first used; an invalid one is refused with a fixed text), or None for a run without
    SignDS (train is then a category this mod does not protect). An update the data made
    non-finite is reported as a zero update (charged as any report) rather than refused.

    **Ledger** (:mod:`fl_privacy.flower.ledger`): every report is charged to a file the
    client keeps on its own disk — its ε + ε_RR, the run id, the server round, the time —
    written atomically and fsynced *before* the report leaves the mod (a crash after the
    charge over-counts, never under-counts), under a lock (``fcntl.flock``) shared by every
    process that uses the same file. It survives ``flwr run`` after ``flwr run`` and
    SuperNode restarts, so ``epsilon_budget`` and ``signds-epsilon-total`` are per client
    over its whole history, not per run. The file is
    ``<ledger_dir>/signds-<key>.json``:

    * ``ledger_dir``: a directory (str or path); default ``<Flower home>/fl-privacy/ledger``
      (:func:`~fl_privacy.flower.ledger.default_ledger_dir`: ``$FLWR_HOME``, else Flower's
      default, ``~/.flwr``; Flower 1.21 uses ``$XDG_DATA_HOME/.flwr`` where that variable
      is set). Give it explicitly in real deployments: Flower hands a ClientApp neither
      the SuperNode's ``--flwr-dir`` nor any other directory of its own.
    * ``<key>``, what identifies "the same client": ``ledger_name`` where given (1 to 128
      characters of ``A-Za-z0-9._-``); otherwise ``partition-<p>`` with ``p`` the
      ``partition-id`` of the node config (``flower-supernode --node-config
      "partition-id=..."``, or the Simulation Runtime's numbering). Never the node id:
      the SuperLink assigns it (a fresh random id when a node registers again, e.g. an
      unauthenticated SuperNode restarting), so a server could reset a ledger keyed by
      it. With neither a ``ledger_name`` nor a ``partition-id``, train messages are
      refused. Reports land in one ledger exactly when they are sent by mods with the
      same directory and key: two SuperNodes sharing both share one budget (over-counted,
      never under-counted); the same data under another key or directory starts a
      separate history — keeping them fixed per data holder is the operator's part.

    A ledger that is unreadable, does not parse, fails its SHA-256 checksum, belongs to
    another key or holds an invalid entry is refused, and with it every train message
    (fixed text ``REFUSED_LEDGER``; the reason in the client's log): it is never silently
    restarted at 0. The operator restores it from a backup, or deletes it to reset that
    client's history explicitly. ``ledger_delta`` (default 1e-6): the δ of the ledger's
    optimal composition bound (Kairouz–Oh–Viswanath, ε* = the largest ε per report) sent
    in ``signds-epsilon-optimal`` (with ``signds-epsilon-optimal-delta``); where that
    bound is not below the sum (few reports, or large ε per report), the sum is sent and
    the δ is 0. :func:`~fl_privacy.flower.read_ledger` reads a ledger file.

    ``epsilon_budget``: when set, a train message is refused — before the app is called,
    nothing sent — when the ledger's total (Σ ε, basic composition) plus one report's ε
    would exceed it; the charge checks again under the lock (another process may have
    charged meanwhile) and refuses if the report would now exceed it. ``forward_metrics``: names of the wrapped app's metrics to
    send along (outside the privacy claim); by default only ``num-examples`` is sent.
    ``rng``: None (OS randomness, the only choice for real data), an
    ``fl_privacy.ldp.SeededRng``, or a callable ``rng(context)`` returning one (seeded
    experiments and tests only).
    """

    def __init__(self, *, configure=None, epsilon_budget=None, forward_metrics=(),
                 weighted_by_key="num-examples", allow_unprotected=(), rng=None,
                 ledger_dir=None, ledger_name=None, ledger_delta=1e-6, error_feedback=True,
                 **params):
        if not isinstance(error_feedback, bool):
            raise TypeError("SignDSMod: error_feedback must be True or False, got %s"
                            % type(error_feedback).__name__)
        if configure is None:
            _check_params(params, _LAW_PARAMS, "SignDSMod")
        elif params:
            raise TypeError("SignDSMod: give the SignDS parameters as keywords or through "
                            "configure, not both (got %s)" % sorted(params))
        elif not callable(configure):
            raise TypeError("SignDSMod: configure must be a callable(context) returning the "
                            "SignDS keyword parameters (a dict) or None")
        if epsilon_budget is not None:
            if isinstance(epsilon_budget, bool) or not isinstance(epsilon_budget, (int, float)):
                raise TypeError("SignDSMod: epsilon_budget must be a number, got %s"
                                % type(epsilon_budget).__name__)
            epsilon_budget = float(epsilon_budget)
            if not epsilon_budget > 0 or not np.isfinite(epsilon_budget):
                raise ValueError("SignDSMod: epsilon_budget must be a finite number > 0, got %r"
                                 % epsilon_budget)
        if isinstance(forward_metrics, str) or not all(isinstance(m, str) for m in forward_metrics):
            raise TypeError("SignDSMod: forward_metrics must be a list of metric names (str)")
        if not isinstance(weighted_by_key, str):
            raise TypeError("SignDSMod: weighted_by_key must be a str")
        if rng is not None and not (isinstance(rng, _ldp.SeededRng) or callable(rng)):
            raise TypeError("SignDSMod: rng must be None, a SeededRng or a callable(context) -> "
                            "SeededRng")
        if ledger_dir is not None and not isinstance(ledger_dir, (str, os.PathLike)):
            raise TypeError("SignDSMod: ledger_dir must be a directory (str or path) or None, "
                            "got %s" % type(ledger_dir).__name__)
        if ledger_name is not None:
            try:
                _ledger.check_key("ledger_name", ledger_name)
            except (TypeError, ValueError) as e:
                raise type(e)("SignDSMod: %s" % e) from None
        try:
            ledger_delta = _probability("ledger_delta", ledger_delta)
        except (TypeError, ValueError) as e:
            raise type(e)("SignDSMod: %s" % e) from None
        self._ledger_dir = Path(ledger_dir) if ledger_dir is not None else None
        self._ledger_name = ledger_name
        self._ledger_delta = ledger_delta
        self._feedback = error_feedback
        self._params = dict(params)
        self._budget = epsilon_budget
        self._forward = tuple(forward_metrics)
        self._weight_key = weighted_by_key
        self._allow = check_categories("SignDSMod: allow_unprotected", allow_unprotected)
        self._rng = rng
        self._clients = {}
        self._configure = configure
        self._configured = {}

    def _for_context(self, ctxt):
        """The SignDSMod of this context: this one, or the one of the parameters
        ``configure(context)`` returns (built once per parameter set, checked as the
        constructor checks keywords); None where it returns None (no SignDS in this run)."""
        if self._configure is None:
            return self
        params = self._configure(ctxt)
        if params is None:
            return None
        if not isinstance(params, dict):
            raise TypeError("configure(context) must return a dict or None, got %s"
                            % type(params).__name__)
        key = repr(sorted(params.items()))
        if key not in self._configured:
            params = dict(params)
            feedback = params.pop("error_feedback", self._feedback)
            self._configured[key] = SignDSMod(
                epsilon_budget=self._budget, forward_metrics=self._forward,
                weighted_by_key=self._weight_key, allow_unprotected=self._allow, rng=self._rng,
                ledger_dir=self._ledger_dir, ledger_name=self._ledger_name,
                ledger_delta=self._ledger_delta, error_feedback=feedback, **params)
        return self._configured[key]

    def ledger_path(self, context):
        """The ledger file this mod charges for ``context``'s client (ValueError where the
        context has no stable key: no ``ledger_name`` and no ``partition-id``)."""
        if self._ledger_name is not None:
            key = self._ledger_name
        else:
            node_config = getattr(context, "node_config", None) or {}
            partition = node_config.get("partition-id")
            if partition is None or isinstance(partition, bool) \
                    or not isinstance(partition, (int, str)):
                raise ValueError(
                    "SignDSMod has no stable key for this client's ledger: give "
                    "ledger_name=... (or run the SuperNode with --node-config "
                    "\"partition-id=...\"); the node id is not used (the SuperLink assigns it)")
            key = "partition-%s" % partition
        directory = self._ledger_dir if self._ledger_dir is not None \
            else _ledger.default_ledger_dir()
        return _ledger.ledger_file(directory, key), key

    def _client(self, dimension):
        if dimension not in self._clients:
            self._clients[dimension] = _signds.Client(dimension, **self._params)
        return self._clients[dimension]

    def __call__(self, msg, ctxt, call_next):
        running = _IN_APP_MOD.get()
        as_app_mod = running is not None and running[0] is self \
            and running[1] is _RECEIVING_APP.get()
        try:
            mod = self._for_context(ctxt)
        except Exception as e:  # noqa: BLE001 - a configuration error is this client's
            return refuse(msg, REFUSED_CONFIG, "SignDSMod: configure(context): %s" % describe(e))
        if mod is None:
            if msg.metadata.message_type == HANDSHAKE_TYPE:
                return refuse(msg, REFUSED_NO_MOD, "SignDSMod: configure(context) returned "
                              "None: this run uses no SignDS")
            return guard(msg, ctxt, call_next, "SignDSMod", self._allow)
        return mod._handle(msg, ctxt, call_next, as_app_mod)

    def _handle(self, msg, ctxt, call_next, as_app_mod):
        category = message_category(msg)
        if msg.metadata.message_type == HANDSHAKE_TYPE:
            return self._handshake(msg, as_app_mod)
        if category != MessageType.TRAIN:
            return guard(msg, ctxt, call_next, "SignDSMod", self._allow)
        if is_legacy(msg):
            return refuse(msg, REFUSED_LEGACY, "SignDSMod received a legacy train message: %s"
                          % LEGACY_API)
        try:
            _, global_record = single_record(msg.content, ArrayRecord, "the train message")
            _, config = single_record(msg.content, ConfigRecord, "the train message")
            missing = [k for k in (CONFIG_R_EST, CONFIG_PHASE, CONFIG_DIMENSION, CONFIG_OUTPUT_DIMENSION)
                       if k not in config]
            if missing:
                raise ValueError("the train config lacks %s: SignDSMod needs SignDSStrategy on the "
                                 "server" % missing)
            global_flat, layout = flatten(global_record)
            client = self._client(global_flat.size)
            broadcast = _signds.Broadcast(float(config[CONFIG_R_EST]), str(config[CONFIG_PHASE]))
        except Exception as e:  # noqa: BLE001 - whatever the server's bytes raise (np.load...)
            return refuse(msg, REFUSED_NOT_SIGNDS, "SignDSMod: %s: %s" % (type(e).__name__, e))
        dimension, _, output_dimension, _ = client.law
        if (config[CONFIG_DIMENSION], config[CONFIG_OUTPUT_DIMENSION]) != (dimension, output_dimension):
            return refuse(msg, REFUSED_LAW,
                          "SignDSMod: the server's SignDS law (d = %r, h = %r) differs from this "
                          "client's (d = %d, h = %d): use the same SignDS parameters on both sides"
                          % (config[CONFIG_DIMENSION], config[CONFIG_OUTPUT_DIMENSION], dimension,
                             output_dimension))

        try:
            path, key = self.ledger_path(ctxt)
            history = _ledger.load(path, key)
            run_id = int(ctxt.run_id)
            rounds = _read_state(ctxt)[1]
        except Exception as e:  # noqa: BLE001 - never restart a refused ledger at 0
            return refuse(msg, REFUSED_LEDGER, "SignDSMod: %s" % describe(e))
        spent = history.total
        per_round = sum(client.privacy)
        if self._budget is not None and spent + per_round > self._budget:
            return refuse(msg, REFUSED_BUDGET,
                          "SignDSMod: privacy budget exhausted (ledger %s): %.6g spent over %d "
                          "reports, one more report costs %.6g, budget %.6g"
                          % (path, spent, len(history.entries), per_round, self._budget))

        out, refusal = call_app(msg, ctxt, call_next, "SignDSMod")
        if refusal is not None:
            return refusal
        try:
            _, local_record = single_record(out.content, ArrayRecord, "the ClientApp's reply")
            local_flat, local_layout = flatten(local_record)
            if not same_layout(layout, local_layout):
                raise ValueError("the ClientApp's reply must return the model it received "
                                 "(same keys, shapes and dtypes)")
            _, metrics = single_record(out.content, MetricRecord, "the ClientApp's reply")
            weight = client_weight(metrics, self._weight_key)
            forwarded = {}
            for name in self._forward:
                if name not in metrics:
                    raise ValueError("forward_metrics names %r, which the reply lacks" % name)
                forwarded[name] = metrics[name]
            update = local_flat - global_flat
            if not np.all(np.isfinite(update)):
                # A value the data made non-finite (an overflow): refusing would tell the
                # server so, a bit per message it chooses, for free. The report of a zero
                # update instead is as private as any report (ε-LDP for any two updates)
                # and is charged as one.
                local_log(WARNING, "SignDSMod: the update has non-finite values; reporting a zero "
                    "update instead (this round trains nothing from this client)")
                update = np.zeros_like(update)
            # Error feedback: a copy of the state, kept only once the report is charged.
            state = _read_feedback(ctxt, update.size) if self._feedback else None
            report = client.encode(update, broadcast, rng=self._rng_for(ctxt), feedback=state)
        except Exception as e:  # noqa: BLE001 - no exception text may carry local data out
            return refuse(msg, REFUSED_APP, "SignDSMod: %s: %s" % (type(e).__name__, e))

        # Charge first, then send: the entry is on disk before the report leaves.
        server_round = config.get("server-round")
        if isinstance(server_round, bool) or not isinstance(server_round, int) \
                or server_round < 0:
            server_round = None
        try:
            history = _ledger.charge(path, key, float(report.epsilon), run_id, server_round,
                                     budget=self._budget)
        except _ledger.BudgetExceeded as e:
            return refuse(msg, REFUSED_BUDGET, "SignDSMod: privacy budget exhausted when "
                          "charging (ledger %s, another process charged it meanwhile): %s"
                          % (path, e))
        except Exception as e:  # noqa: BLE001 - not charged, so not sent
            return refuse(msg, REFUSED_LEDGER, "SignDSMod: %s" % describe(e))
        ledger_spent = history.spent(self._ledger_delta)
        _write_state(ctxt, ledger_spent.basic, rounds + 1)
        if state is not None:
            _write_feedback(ctxt, state)
        reply_metrics = dict(forwarded)
        reply_metrics.update({
            self._weight_key: weight,
            METRIC_EPSILON: float(report.epsilon),
            METRIC_EPSILON_TOTAL: float(ledger_spent.basic),
            METRIC_EPSILON_OPTIMAL: float(ledger_spent.optimal),
            METRIC_EPSILON_OPTIMAL_DELTA: ledger_spent.delta if ledger_spent.optimal_better
            else 0.0,
            METRIC_REPORT_BYTES: len(report.data),
        })
        return protected(Message(RecordDict({
            REPORT_RECORD: ConfigRecord({REPORT_KEY: report.data}),
            "metrics": MetricRecord(reply_metrics),
        }), reply_to=msg))

    def _handshake(self, msg, as_app_mod):
        """The answer to the strategy's capability query: the law for the dimension it
        names and ε per report (configuration only: the app is not called). Given only
        where this mod runs as one of a PrivateClientApp's own mods, which Flower wraps
        around every function of the app, train included: answered through a function's
        own mods, the handshake would prove nothing about the train route."""
        if not as_app_mod:
            return refuse(msg, REFUSED_NO_MOD, "SignDSMod answers the handshake only as one of "
                          "PrivateClientApp(mods=[...])'s own mods (it was reached through a "
                          "function's own mods, another mod's code or a plain ClientApp)")
        request = msg.content.config_records.get(HANDSHAKE_RECORD) if msg.has_content() else None
        request = request if request is not None else {}
        dimension = request.get(CONFIG_DIMENSION)
        if request.get("protocol") != HANDSHAKE_PROTOCOL or isinstance(dimension, bool) \
                or not isinstance(dimension, int) or dimension < 1:
            return refuse(msg, REFUSED_HANDSHAKE, "SignDSMod: a handshake for protocol %r and "
                          "dimension %r (this mod speaks %s)"
                          % (request.get("protocol"), dimension, HANDSHAKE_PROTOCOL))
        try:
            client = self._client(dimension)
        except Exception as e:  # noqa: BLE001 - a dimension no law exists for
            return refuse(msg, REFUSED_LAW, "SignDSMod: no SignDS law for d = %d: %s"
                          % (dimension, e))
        d, _, h, _ = client.law
        return protected(Message(RecordDict({HANDSHAKE_RECORD: ConfigRecord({
            "protocol": HANDSHAKE_PROTOCOL,
            CONFIG_DIMENSION: int(d),
            CONFIG_OUTPUT_DIMENSION: int(h),
            METRIC_EPSILON: float(sum(client.privacy)),
        })}), reply_to=msg))

    def _rng_for(self, ctxt):
        if self._rng is None or isinstance(self._rng, _ldp.SeededRng):
            return self._rng
        return self._rng(ctxt)


def _read_state(ctxt):
    record = ctxt.state.get(STATE_RECORD)
    if record is None:
        return 0.0, 0
    return float(record["epsilon-total"]), int(record["rounds"])


def _write_state(ctxt, total, rounds):
    ctxt.state[STATE_RECORD] = MetricRecord({"epsilon-total": float(total), "rounds": int(rounds)})


#: Where the mod keeps the client's error-feedback state (private: never sent) in the
#: ClientApp's Context.state.
FEEDBACK_RECORD = "fl-privacy-signds-feedback"
#: The run the stored state belongs to (a ConfigRecord with "run-id").
FEEDBACK_RUN_RECORD = "fl-privacy-signds-feedback-run"


def _read_feedback(ctxt, dimension):
    """A writable copy of this run's error-feedback state: zeros at the run's first report,
    when the model's dimension changed, or when the state belongs to another run (Flower ≥
    1.42 keeps a ClientApp's Context.state across the runs of a *run series*, which the
    server chooses; the state restarts with every run so that a run's reports depend on
    that run's data only)."""
    record = ctxt.state.get(FEEDBACK_RECORD)
    owner = ctxt.state.get(FEEDBACK_RUN_RECORD)
    if record is not None and "state" in record and owner is not None \
            and owner.get("run-id") == str(int(ctxt.run_id)):
        state = np.array(record["state"].numpy(), dtype=np.float32).reshape(-1)
        if state.size == dimension and np.all(np.isfinite(state)):
            return np.ascontiguousarray(state)
    return np.zeros(dimension, dtype=np.float32)


def _write_feedback(ctxt, state):
    ctxt.state[FEEDBACK_RECORD] = ArrayRecord({"state": Array(state)})
    ctxt.state[FEEDBACK_RUN_RECORD] = ConfigRecord({"run-id": str(int(ctxt.run_id))})


class SignDSStrategy(FedAvg):
    """Flower's FedAvg with SignDS aggregation on fl-signds' server.

    The SignDS keyword parameters are fl_privacy.signds.Server's (``epsilon`` required, or
    ``profile="mindspore"`` for upstream's defaults), checked here, and must be the
    clients' (the strategy sends d and h and the mod checks them). ``expected_clients`` is
    fl-signds' N_exp (reports expected per round; None: the number of nodes sampled in the
    first round). ``step_rule`` is None (the profile's: "mean" for the default exact
    profile, g = η·r_est with η = ``server_learning_rate`` (default 4) and no
    low-participation fallback; "code" for ``profile="mindspore"``), "mean", "code"
    (g = 3·N_exp·r_est, upstream's code) or "docs"
    (2·N_exp·r_est). FedAvg's sampling and key options are accepted as keywords;
    ``fraction_evaluate`` defaults to 0 (clients evaluate only where asked, and their
    replies leave only through an fl_privacy mod such as :class:`LaplaceEvalMod`).

    Before a node's first train message the strategy sends it a capability handshake (a
    query, answered by :class:`SignDSMod` itself, ``handshake_timeout`` seconds): only
    nodes whose mod answered with the strategy's law (d, h) receive train messages, so a
    client without the mod never uploads a model. A round with no accepted report — or in
    which fewer than ``min_train_nodes`` sampled nodes passed the handshake — raises
    :class:`RoundFailed`, which stops the run with one line.

    :attr:`epsilon_per_round` is fl-signds' realised ε + ε_RR of one report under these
    parameters (``signds-epsilon-round`` in the round's metrics). Each client spends what its
    own mod's parameters say (they fix the same h, but ε_RR may differ): the metrics also
    give the largest per-round ε (``signds-epsilon-reported-max``) and whole-history total
    (``signds-epsilon-total-max``, from their ledgers) that the accepted clients reported. The server's own
    ledger, one :class:`~fl_privacy.flower.accounting.PureEpsilonAccountant` per node
    (:meth:`privacy_spent`, :attr:`accountants`), composes every report it received:
    ``signds-epsilon-ledger-max`` (basic composition, δ = 0) and, at ``target_delta``,
    ``signds-epsilon-optimal-max`` (the optimal composition bound).
    """

    def __init__(self, *, expected_clients=None, step_rule=None, server_learning_rate=None,
                 fraction_train=1.0,
                 fraction_evaluate=0.0, min_train_nodes=2, min_evaluate_nodes=2,
                 min_available_nodes=2, weighted_by_key="num-examples", arrayrecord_key="arrays",
                 configrecord_key="config", evaluate_metrics_aggr_fn=None, handshake_timeout=60.0,
                 target_delta=1e-6, **params):
        _check_params(params, _LAW_PARAMS + ("global_learning_rate",), "SignDSStrategy")
        for name, value in (("fraction_train", fraction_train),
                            ("fraction_evaluate", fraction_evaluate)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0.0 <= value <= 1.0:
                raise ValueError("SignDSStrategy: %s must be a number in [0, 1], got %r"
                                 % (name, value))
        for name, value in (("min_train_nodes", min_train_nodes),
                            ("min_evaluate_nodes", min_evaluate_nodes),
                            ("min_available_nodes", min_available_nodes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError("SignDSStrategy: %s must be an int >= 0, got %r" % (name, value))
        if isinstance(handshake_timeout, bool) or not isinstance(handshake_timeout, (int, float)) \
                or not (np.isfinite(handshake_timeout) and handshake_timeout > 0):
            raise ValueError("SignDSStrategy: handshake_timeout must be a number of seconds > 0, "
                             "got %r" % (handshake_timeout,))
        # Checks target_delta (ValueError naming it).
        PureEpsilonAccountant(target_delta=target_delta)
        super().__init__(
            fraction_train=fraction_train,
            fraction_evaluate=fraction_evaluate,
            min_train_nodes=min_train_nodes,
            min_evaluate_nodes=min_evaluate_nodes,
            min_available_nodes=min_available_nodes,
            weighted_by_key=weighted_by_key,
            arrayrecord_key=arrayrecord_key,
            configrecord_key=configrecord_key,
            evaluate_metrics_aggr_fn=evaluate_metrics_aggr_fn,
        )
        if expected_clients is not None:
            if isinstance(expected_clients, bool) or not isinstance(expected_clients, (int, float)):
                raise TypeError("SignDSStrategy: expected_clients must be a number, got %s"
                                % type(expected_clients).__name__)
            expected_clients = float(expected_clients)
            if not (np.isfinite(expected_clients) and expected_clients > 0):
                raise ValueError("SignDSStrategy: expected_clients must be finite and > 0, got %r"
                                 % expected_clients)
        if step_rule not in (None, "mean", "code", "docs"):
            raise ValueError('SignDSStrategy: step_rule must be None, "mean", "code" or "docs", '
                             'got %r' % (step_rule,))
        try:  # global_learning_rate and the server's own checks, now rather than at round 1
            _signds.Server(_PROBE_DIMENSION, 1.0, step_rule, server_learning_rate, **params)
        except (TypeError, ValueError) as e:
            raise type(e)("SignDSStrategy: %s" % e) from None
        self._params = dict(params)
        self._law_params = {k: v for k, v in params.items() if k in _LAW_PARAMS}
        self._expected = expected_clients
        self._step_rule = step_rule
        self._server_lr = server_learning_rate
        self._handshake_timeout = float(handshake_timeout)
        self._target_delta = float(target_delta)
        self._server = None
        self._client_law = None
        self._global = None
        self._layout = None
        self._verified = set()
        self._accountants = {}
        self.epsilon_per_round = None

    # Flower's legacy strategy interface (ServerAppComponents, server_fn): a clear error
    # instead of an AttributeError deep in Flower's server loop.
    def initialize_parameters(self, *args, **kwargs):
        """Not supported: SignDSStrategy runs on Flower's Message API only."""
        raise TypeError("SignDSStrategy: " + LEGACY_API)

    configure_fit = aggregate_fit = initialize_parameters

    def summary(self):
        super().summary()
        log(INFO, "\t└──> SignDS: %s, N_exp %s, step rule %s", self._params,
            self._expected if self._expected is not None else "(first round's sample)", self._step_rule)

    @property
    def server(self):
        """The fl_privacy.signds.Server (None before the first round)."""
        return self._server

    @property
    def accountants(self):
        """The server's ledger: node id → PureEpsilonAccountant of the reports received."""
        return dict(self._accountants)

    def privacy_spent(self, node_id, delta=None):
        """Flower's ``PrivacySpent`` of one node's reports received so far (at ``delta``,
        default ``target_delta``; basic composition at δ = 0)."""
        accountant = self._accountants.get(node_id) or PureEpsilonAccountant(
            target_delta=self._target_delta)
        return accountant.get_privacy_spent(delta)

    def _ensure_server(self, dimension, grid):
        if self._server is not None:
            if dimension != self._client_law[0]:
                raise ValueError("the global model has %d weights, the SignDS server was built for %d"
                                 % (dimension, self._client_law[0]))
            return
        expected = self._expected
        if expected is None:
            nodes = len(list(grid.get_node_ids()))
            expected = float(max(int(nodes * self.fraction_train), self.min_train_nodes, 1))
        self._server = _signds.Server(dimension, expected, self._step_rule, self._server_lr,
                                      **self._params)
        probe = _signds.Client(dimension, **self._law_params)
        self._client_law = probe.law
        self.epsilon_per_round = float(sum(probe.privacy))
        self._expected = expected

    def _handshake(self, server_round, nodes, grid):
        """Sends the capability query to the nodes not yet verified; adds those whose
        SignDSMod answered with this strategy's law to the verified set."""
        pending = [n for n in nodes if n not in self._verified]
        if not pending:
            return
        d, _, h, _ = self._client_law
        request = RecordDict({HANDSHAKE_RECORD: ConfigRecord({
            "protocol": HANDSHAKE_PROTOCOL, CONFIG_DIMENSION: int(d)})})
        messages = [Message(request, dst_node_id=n, message_type=HANDSHAKE_TYPE)
                    for n in pending]
        for reply in grid.send_and_receive(messages, timeout=self._handshake_timeout):
            node = reply.metadata.src_node_id
            if reply.has_error():
                log(WARNING, "SignDSStrategy round %d: node %s fails the SignDS handshake (no "
                    "train message is sent to it; its ClientApp must be "
                    "fl_privacy.flower.PrivateClientApp(mods=[SignDSMod(...), ...])): %s",
                    server_round, node, reply.error.reason)
                continue
            answer = reply.content.config_records.get(HANDSHAKE_RECORD) \
                if reply.has_content() else None
            if answer is None or answer.get("protocol") != HANDSHAKE_PROTOCOL:
                log(WARNING, "SignDSStrategy round %d: node %s answered the handshake without "
                    "SignDSMod (no train message is sent to it)", server_round, node)
                continue
            if (answer.get(CONFIG_DIMENSION), answer.get(CONFIG_OUTPUT_DIMENSION)) != (d, h):
                log(WARNING, "SignDSStrategy round %d: node %s runs another SignDS law (d = %r, "
                    "h = %r; the strategy's: d = %d, h = %d): no train message is sent to it",
                    server_round, node, answer.get(CONFIG_DIMENSION),
                    answer.get(CONFIG_OUTPUT_DIMENSION), d, h)
                continue
            self._verified.add(node)

    def configure_train(self, server_round, arrays, config, grid):
        flat, layout = flatten(arrays)
        self._ensure_server(flat.size, grid)
        self._global, self._layout = flat, layout
        broadcast = self._server.broadcast()
        config[CONFIG_R_EST] = float(broadcast.r_est)
        config[CONFIG_PHASE] = broadcast.phase
        config[CONFIG_DIMENSION] = int(self._client_law[0])
        config[CONFIG_OUTPUT_DIMENSION] = int(self._client_law[2])
        messages = list(super().configure_train(server_round, arrays, config, grid))
        sampled = [m.metadata.dst_node_id for m in messages]
        self._handshake(server_round, sampled, grid)
        kept = [m for m in messages if m.metadata.dst_node_id in self._verified]
        if messages and len(kept) < max(1, min(self.min_train_nodes, len(messages))):
            raise RoundFailed("SignDS round %d failed: %d of the %d sampled nodes run SignDSMod "
                              "with this strategy's law (at least %d needed): every ClientApp "
                              "must be fl_privacy.flower.PrivateClientApp(mods=[SignDSMod(...)]) "
                              "with the strategy's SignDS parameters" % (server_round, len(kept), len(messages),
                                             max(1, min(self.min_train_nodes, len(messages)))))
        return kept

    def aggregate_train(self, server_round, replies):
        if self._server is None:
            raise RuntimeError("aggregate_train before configure_train")
        replies = list(replies)
        round_ = self._server.begin_round()
        rejected = 0
        reasons = {}
        totals, spent, sizes = [], [], []
        for msg in replies:
            node = msg.metadata.src_node_id
            if msg.has_error():
                rejected += 1
                reason = (str(msg.error.reason).splitlines() or [""])[0]
                reasons[reason] = reasons.get(reason, 0) + 1
                log(WARNING, "SignDSStrategy round %d: node %s replied with an error: %s",
                    server_round, node, msg.error.reason)
                continue
            try:
                data, weight, metrics = _read_report(msg.content, self.weighted_by_key)
                epsilon = float(metrics.get(METRIC_EPSILON, self.epsilon_per_round))
                total = float(metrics[METRIC_EPSILON_TOTAL]) if METRIC_EPSILON_TOTAL in metrics \
                    else None
            except (TypeError, ValueError, OverflowError) as e:
                rejected += 1
                reasons["malformed reply"] = reasons.get("malformed reply", 0) + 1
                log(WARNING, "SignDSStrategy: rejected the reply of node %s: %s", node, e)
                continue
            # The report left the client: its ε is spent whether or not it is accepted.
            if np.isfinite(epsilon) and 0 < epsilon < 1e6:
                self._accountants.setdefault(node, PureEpsilonAccountant(
                    target_delta=self._target_delta)).compose(PureEpsilonEvent(epsilon))
            try:
                round_.ingest(data, weight)
            except (TypeError, ValueError, OverflowError) as e:
                rejected += 1
                reasons["invalid report"] = reasons.get("invalid report", 0) + 1
                log(WARNING, "SignDSStrategy: rejected the report of node %s: %s", node, e)
                continue
            sizes.append(len(data))
            if total is not None:
                totals.append(total)
            if METRIC_EPSILON in metrics:
                spent.append(epsilon)
        if round_.accepted == 0:
            why = "; ".join("%d x %s" % (n, r) for r, n in sorted(reasons.items()))
            raise RoundFailed("SignDS round %d failed: no report accepted (%d replies%s)"
                              % (server_round, len(replies), ": " + why if why else ""))
        weights = self._global.copy()
        summary = self._server.finish_round(round_, weights)
        arrays = unflatten(weights, self._layout)
        record = {
            "signds-accepted": int(summary.accepted),
            "signds-rejected": int(rejected),
            "signds-step": float(summary.step),
            "signds-r-est": float(summary.next.r_est),
            "signds-shrink-phase": int(summary.next.phase == "shrink"),
            "signds-epsilon-round": float(self.epsilon_per_round),
        }
        if spent:
            record["signds-epsilon-reported-max"] = max(spent)
        if totals:
            record["signds-epsilon-total-max"] = max(totals)
        if self._accountants:
            ledgers = self._accountants.values()
            record["signds-epsilon-ledger-max"] = max(a.get_epsilon(0.0) for a in ledgers)
            record["signds-epsilon-optimal-max"] = max(a.get_epsilon(self._target_delta)
                                                       for a in ledgers)
            record["signds-delta"] = self._target_delta
        if sizes:
            record[METRIC_REPORT_BYTES] = float(np.mean(sizes))
        return arrays, MetricRecord(record)


def _read_report(content, weight_key):
    """(report bytes, n_i, metrics) of one SignDSMod reply."""
    if REPORT_RECORD not in content.config_records:
        raise ValueError("the reply has no %r ConfigRecord: is SignDSMod installed on the client?"
                         % REPORT_RECORD)
    data = content.config_records[REPORT_RECORD].get(REPORT_KEY)
    if not isinstance(data, bytes):
        raise TypeError("the report must be bytes, got %s" % type(data).__name__)
    _, metrics = single_record(content, MetricRecord, "the reply")
    return data, client_weight(metrics, weight_key), metrics
