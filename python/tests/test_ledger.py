"""SignDSMod's per-client privacy ledger (fl_privacy.flower.ledger): the budget and the
total hold across runs and SuperNode restarts, a corrupt ledger is refused (never reset),
a report is charged before it is sent, and the whole-history ε (basic and optimal
composition) of read_ledger.

Driven as test_flower.py drives the mod: SignDSStrategy's own train messages (handshake
included) sent through its FakeGrid to PrivateClientApps with hand-made Contexts; a
"run" is a Context with its own run id and empty state, a "SuperNode restart" a fresh
SignDSMod, a fresh Context and a new node id."""

import json
import math
import multiprocessing
import time

import pytest

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Context, RecordDict  # noqa: E402

from fl_privacy import signds  # noqa: E402
from fl_privacy.flower import (  # noqa: E402
    LedgerError,
    PrivateClientApp,
    SignDSMod,
    SignDSStrategy,
    read_ledger,
)
from fl_privacy.flower import ledger as ledger_module  # noqa: E402
from fl_privacy.flower._records import REFUSED_BUDGET, REFUSED_LEDGER  # noqa: E402
from fl_privacy.flower.signds import (  # noqa: E402
    METRIC_EPSILON_OPTIMAL,
    METRIC_EPSILON_OPTIMAL_DELTA,
    METRIC_EPSILON_TOTAL,
    STATE_RECORD,
)
from test_flower import (  # noqa: E402,F401 - the autouse fixtures too
    PARAMS,
    FakeGrid,
    client_log,
    flwr_home,
    make_train_app,
    model,
    task_identity,
)

#: ε + ε_RR of one report under PARAMS on test_flower's 45-weight model.
WANT = sum(signds.Client(45, **PARAMS).privacy)


def ctx(run_id, node_id, partition=0, node_config=None):
    """A ClientApp's Context in run ``run_id`` on node ``node_id`` (empty state)."""
    config = {"partition-id": partition} if node_config is None else node_config
    return Context(run_id=run_id, node_id=node_id, node_config=config, state=RecordDict(),
                   run_config={})


class Counting:
    """make_train_app's train function, counting its calls."""

    def __init__(self):
        self.calls = 0
        self.train = make_train_app(3)

    def __call__(self, msg, context):
        self.calls += 1
        return self.train(msg, context)


def app_with(mod, train, outer=()):
    app = PrivateClientApp(mods=list(outer) + [mod])
    app.train()(train)
    return app


def send_round(app, context, server_round, strategy=None):
    """One train message of SignDSStrategy (handshake first) to ``app``: its reply."""
    strategy = strategy or SignDSStrategy(min_train_nodes=1, min_available_nodes=1, **PARAMS)
    node = context.node_id
    grid = FakeGrid([node], {node: app}, {node: context})
    messages = list(strategy.configure_train(server_round, model(0), ConfigRecord(), grid))
    assert len(messages) == 1, "the handshake passed"
    (reply,) = grid.send_and_receive(messages)
    return reply


def total_of(reply):
    assert not reply.has_error(), reply.error.reason
    return reply.content.metric_records["metrics"][METRIC_EPSILON_TOTAL]


def test_the_ledger_continues_across_runs_and_the_budget_holds(tmp_path):
    """Two `flwr run`s (two run ids, fresh Contexts) against one ledger directory: the
    second continues from the first's total, and the budget refuses the report that would
    take the sum above it, before the app is called. (Context.state alone restarts at 0
    in the second run: its total would be 1 report.)"""
    train = Counting()
    mod = SignDSMod(epsilon_budget=3.5 * WANT, ledger_dir=tmp_path, **PARAMS)
    app = app_with(mod, train)
    run1 = ctx(run_id=11, node_id=5)
    assert math.isclose(total_of(send_round(app, run1, 1)), WANT, rel_tol=1e-12)
    assert math.isclose(total_of(send_round(app, run1, 2)), 2 * WANT, rel_tol=1e-12)
    run2 = ctx(run_id=22, node_id=5)
    reply = send_round(app, run2, 1)
    assert math.isclose(total_of(reply), 3 * WANT, rel_tol=1e-12)
    # The Context.state record follows the ledger's total; its round count is this run's.
    assert math.isclose(run2.state[STATE_RECORD]["epsilon-total"], 3 * WANT, rel_tol=1e-12)
    assert run2.state[STATE_RECORD]["rounds"] == 1
    assert train.calls == 3
    refused = send_round(app, run2, 2)
    assert refused.has_error() and refused.error.reason == REFUSED_BUDGET
    assert train.calls == 3, "the app was not called for the refused round"
    ledger = read_ledger(tmp_path / "signds-partition-0.json")
    assert [(e.run_id, e.round) for e in ledger.entries] == [(11, 1), (11, 2), (22, 1)]
    assert all(math.isclose(e.epsilon, WANT, rel_tol=1e-12) for e in ledger.entries)
    assert all(abs(e.time - time.time()) < 600 for e in ledger.entries)
    assert math.isclose(ledger.total, 3 * WANT, rel_tol=1e-12)


def test_a_supernode_restart_keeps_the_total(tmp_path):
    """A restarted SuperNode: a fresh SignDSMod, a fresh Context with empty state and a
    new node id (the SuperLink assigns one when a node registers again), same ledger
    directory and partition-id: the total is preserved. Control: another partition-id
    is another client, starting at one report."""
    first = app_with(SignDSMod(ledger_dir=tmp_path, **PARAMS), make_train_app(1))
    for server_round in (1, 2):
        send_round(first, ctx(run_id=1, node_id=100, partition=3), server_round)
    restarted = app_with(SignDSMod(ledger_dir=str(tmp_path), **PARAMS), make_train_app(1))
    reply = send_round(restarted, ctx(run_id=1, node_id=987654321, partition=3), 3)
    assert math.isclose(total_of(reply), 3 * WANT, rel_tol=1e-12)
    other = send_round(restarted, ctx(run_id=1, node_id=987654321, partition=4), 3)
    assert math.isclose(total_of(other), WANT, rel_tol=1e-12)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [
        "signds-partition-3.json", "signds-partition-4.json"]


def test_ledger_name_is_the_key_and_without_a_key_train_is_refused(tmp_path, client_log):
    """ledger_name overrides the partition-id (two partitions under one name share one
    history); with neither, train is refused with the ledger's fixed text and the app is
    not called (the node id is never used as the key)."""
    mod = SignDSMod(ledger_dir=tmp_path, ledger_name="hospital-a", **PARAMS)
    app = app_with(mod, make_train_app(1))
    send_round(app, ctx(1, 7, partition=0), 1)
    reply = send_round(app, ctx(1, 8, partition=1), 1)
    assert math.isclose(total_of(reply), 2 * WANT, rel_tol=1e-12)
    assert mod.ledger_path(ctx(1, 7))[0] == tmp_path / "signds-hospital-a.json"

    train = Counting()
    keyless = app_with(SignDSMod(ledger_dir=tmp_path, **PARAMS), train)
    refused = send_round(keyless, ctx(1, 7, node_config={}), 1)
    assert refused.has_error() and refused.error.reason == REFUSED_LEDGER
    assert train.calls == 0
    assert any("no stable key" in line for line in client_log)

    for bad in ("", "../x", ".hidden", "a/b", "x" * 129):
        with pytest.raises(ValueError, match="ledger_name"):
            SignDSMod(ledger_name=bad, **PARAMS)
    with pytest.raises(TypeError, match="ledger_name"):
        SignDSMod(ledger_name=3, **PARAMS)
    with pytest.raises(TypeError, match="ledger_dir"):
        SignDSMod(ledger_dir=3, **PARAMS)
    with pytest.raises(ValueError, match="ledger_delta"):
        SignDSMod(ledger_delta=0.0, **PARAMS)


def test_the_default_ledger_is_under_flower_home(flwr_home):
    """Without ledger_dir: $FLWR_HOME/fl-privacy/ledger/signds-partition-<p>.json."""
    app = app_with(SignDSMod(**PARAMS), make_train_app(1))
    send_round(app, ctx(1, 7, partition=2), 1)
    path = flwr_home / "fl-privacy" / "ledger" / "signds-partition-2.json"
    assert len(read_ledger(path).entries) == 1


def _charged_ledger(directory, reports=2):
    app = app_with(SignDSMod(ledger_dir=directory, **PARAMS), make_train_app(1))
    context = ctx(1, 7)
    for server_round in range(1, reports + 1):
        send_round(app, context, server_round)
    return directory / "signds-partition-0.json"


def _rewrite_with_checksum(path, doc):
    """``doc`` written with a valid checksum (an edit that only the content checks catch)."""
    doc["sha256"] = ledger_module._sha256(ledger_module._canonical(doc["client"], doc["entries"]))
    path.write_text(json.dumps(doc))


def _flip_byte(path):
    data = bytearray(path.read_bytes())
    i = data.index(b'"epsilon"') + len('"epsilon": ') + 1  # a digit of the first ε
    data[i] = ord("1") if data[i] != ord("1") else ord("2")
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[:-20])


def _negative(path):
    doc = json.loads(path.read_text())
    doc["entries"][0]["epsilon"] = -1.0
    _rewrite_with_checksum(path, doc)


def _infinite(path):
    doc = json.loads(path.read_text())
    path.write_text(path.read_text().replace(repr(doc["entries"][0]["epsilon"]), "1e999", 1))


def _other_client(path):
    doc = json.loads(path.read_text())
    doc["client"] = "partition-9"
    _rewrite_with_checksum(path, doc)


def _extra_field(path):
    doc = json.loads(path.read_text())
    doc["entries"][1]["note"] = "x"
    _rewrite_with_checksum(path, doc)


def _bad_run_id(path):
    doc = json.loads(path.read_text())
    doc["entries"][1]["run_id"] = -3
    _rewrite_with_checksum(path, doc)


def _empty(path):
    path.write_bytes(b"")


@pytest.mark.parametrize("corrupt, why", [
    (_flip_byte, "checksum"), (_truncate, "does not parse"), (_negative, "epsilon must be"),
    (_infinite, "nan|inf|Out of range"), (_other_client, "belongs to client"),
    (_extra_field, "exactly the fields"), (_bad_run_id, "run_id"), (_empty, "does not parse"),
])
def test_a_corrupt_ledger_is_refused_never_reset(tmp_path, client_log, corrupt, why):
    """A ledger that fails its checksum, does not parse or holds an invalid entry (with a
    valid checksum) is refused: read_ledger raises, the mod refuses train with the fixed
    text (the reason only in the local log), does not call the app and leaves the file as
    it is — it never restarts at 0. Control: the same ledger before the damage reads."""
    path = _charged_ledger(tmp_path)
    assert len(read_ledger(path).entries) == 2
    corrupt(path)
    damaged = path.read_bytes()
    with pytest.raises(LedgerError, match=why):
        read_ledger(path)
    train = Counting()
    app = app_with(SignDSMod(ledger_dir=tmp_path, **PARAMS), train)
    reply = send_round(app, ctx(2, 7), 1)
    assert reply.has_error() and reply.error.reason == REFUSED_LEDGER
    assert train.calls == 0
    assert path.read_bytes() == damaged
    assert any(str(path) in line for line in client_log)
    assert str(path) not in reply.error.reason


def test_a_leftover_temporary_file_does_not_break_the_ledger(tmp_path):
    """A crash between writing the temporary file and os.replace leaves a stray
    ``.signds-*.tmp`` beside the ledger: the ledger still reads and charges (the stray file
    is never read)."""
    path = _charged_ledger(tmp_path, reports=1)
    stray = tmp_path / (".%s.abc123.tmp" % path.name)
    stray.write_bytes(path.read_bytes()[:30])
    app = app_with(SignDSMod(ledger_dir=tmp_path, **PARAMS), make_train_app(1))
    reply = send_round(app, ctx(2, 7), 1)
    assert math.isclose(total_of(reply), 2 * WANT, rel_tol=1e-12)
    assert len(read_ledger(path).entries) == 2 and stray.exists()


def test_a_failed_charge_sends_nothing_and_keeps_the_old_ledger(tmp_path, monkeypatch):
    """Charge first, then send: when the ledger cannot be replaced (a crash in os.replace),
    the report is not sent (the ledger's fixed refusal) and the old ledger is intact, with
    no temporary file left behind. Control: the same mod charges and sends once
    os.replace works."""
    path = _charged_ledger(tmp_path, reports=1)
    before = path.read_bytes()
    app = app_with(SignDSMod(ledger_dir=tmp_path, **PARAMS), make_train_app(1))

    def crash(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(ledger_module.os, "replace", crash)
    reply = send_round(app, ctx(2, 7), 1)
    assert reply.has_error() and reply.error.reason == REFUSED_LEDGER
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("*.tmp"))
    monkeypatch.undo()
    assert math.isclose(total_of(send_round(app, ctx(2, 7), 1)), 2 * WANT, rel_tol=1e-12)


def test_the_report_is_charged_before_it_leaves_the_mod(tmp_path):
    """A mod outside SignDSMod sees the reply only after the ledger already holds its
    report's entry."""
    path = tmp_path / "signds-partition-0.json"
    seen = []

    def outer(msg, context, call_next):
        reply = call_next(msg, context)
        if msg.metadata.message_type == "train":
            seen.append((reply.has_error(), len(read_ledger(path).entries)))
        return reply

    app = app_with(SignDSMod(ledger_dir=tmp_path, **PARAMS), make_train_app(1), outer=[outer])
    context = ctx(1, 7)
    send_round(app, context, 1)
    send_round(app, context, 2)
    assert seen == [(False, 1), (False, 2)]


def test_an_exhausted_ledger_refuses_before_the_app_after_a_restart(tmp_path):
    """After a restart (fresh mod, fresh Context), a ledger already at the budget refuses
    the first train message without calling the app and without charging."""
    path = _charged_ledger(tmp_path, reports=2)
    train = Counting()
    app = app_with(SignDSMod(epsilon_budget=2.5 * WANT, ledger_dir=tmp_path, **PARAMS), train)
    reply = send_round(app, ctx(3, 70), 1)
    assert reply.has_error() and reply.error.reason == REFUSED_BUDGET
    assert train.calls == 0 and len(read_ledger(path).entries) == 2
    # Control: a budget with room for one more report.
    roomy = app_with(SignDSMod(epsilon_budget=3.5 * WANT, ledger_dir=tmp_path, **PARAMS), train)
    assert math.isclose(total_of(send_round(roomy, ctx(3, 70), 1)), 3 * WANT, rel_tol=1e-12)
    assert train.calls == 1


def test_the_charge_rechecks_the_budget_under_the_lock(tmp_path):
    """Another process charged the ledger while the app trained: the charge re-reads it
    under the lock and refuses (nothing sent) a report that no longer fits the budget."""
    path = tmp_path / "signds-partition-0.json"

    def train(msg, context):  # another process's report lands while this one trains
        ledger_module.charge(path, "partition-0", WANT, 99, 1)
        return make_train_app(1)(msg, context)

    app = app_with(SignDSMod(epsilon_budget=1.5 * WANT, ledger_dir=tmp_path, **PARAMS), train)
    reply = send_round(app, ctx(1, 7), 1)
    assert reply.has_error() and reply.error.reason == REFUSED_BUDGET
    assert [e.run_id for e in read_ledger(path).entries] == [99]


def _charge_many(path, n, run_id):
    for i in range(n):
        ledger_module.charge(path, "shared", 0.5, run_id, i)


def test_concurrent_processes_lose_no_charge(tmp_path):
    """Four processes charging one ledger at once: every charge is in it (the lock around
    the read-modify-write; without it concurrent writers overwrite each other)."""
    path = tmp_path / "signds-shared.json"
    procs = [multiprocessing.get_context("fork").Process(target=_charge_many, args=(path, 15, r))
             for r in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    ledger = read_ledger(path)
    assert sorted((e.run_id, e.round) for e in ledger.entries) == [
        (r, i) for r in range(4) for i in range(15)]
    assert ledger.total == 30.0


def test_spent_reports_basic_and_optimal_composition(tmp_path):
    """read_ledger(...).spent(δ): Σ ε, and the Kairouz–Oh–Viswanath bound where it is
    smaller (many small reports), flagged as not better where it is not (ε = 105 per
    report, hundreds of reports: computed quickly, equal to the sum)."""
    path = tmp_path / "signds-a.json"
    for i in range(200):
        ledger_module.charge(path, "a", 0.5, 1, i)
    spent = read_ledger(path).spent(1e-6)
    assert spent.basic == 100.0 and spent.releases == 200 and spent.delta == 1e-6
    assert spent.optimal_better and spent.optimal < 0.6 * spent.basic
    accountant = read_ledger(path).accountant(1e-6)
    assert spent.optimal == accountant.get_epsilon(1e-6)

    big = ledger_module.Ledger("b", [ledger_module.LedgerEntry(105.0, 1, i, 0.0)
                                     for i in range(500)])
    started = time.perf_counter()
    spent = big.spent(1e-6)
    assert time.perf_counter() - started < 5.0
    assert spent.basic == 52500.0 and spent.optimal == spent.basic and not spent.optimal_better


def test_the_reply_carries_the_ledgers_optimal_bound(tmp_path):
    """signds-epsilon-optimal is the ledger's spent(ledger_delta).optimal, with its δ
    (0 where the bound is not below the sum)."""
    path = tmp_path / "signds-partition-0.json"
    for i in range(300):  # a long history of small reports (e.g. a run with small ε)
        ledger_module.charge(path, "partition-0", 0.2, 1, i)
    app = app_with(SignDSMod(ledger_dir=tmp_path, ledger_delta=1e-5, **PARAMS),
                   make_train_app(1))
    metrics = send_round(app, ctx(2, 7), 1).content.metric_records["metrics"]
    spent = read_ledger(path).spent(1e-5)
    assert math.isclose(metrics[METRIC_EPSILON_TOTAL], 60.0 + WANT, rel_tol=1e-12)
    assert metrics[METRIC_EPSILON_OPTIMAL] == spent.optimal
    # ε* = the largest report (≈ 10) dominates: the bound is not below the sum.
    assert not spent.optimal_better
    assert metrics[METRIC_EPSILON_OPTIMAL] == metrics[METRIC_EPSILON_TOTAL]
    assert metrics[METRIC_EPSILON_OPTIMAL_DELTA] == 0.0
