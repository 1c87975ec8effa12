"""fl_privacy.flower: the SignDS strategy and client mod, the Laplace evaluation mod and
the server's clustering scores, driven through Flower's own Message, ClientApp and
strategy objects (the engines themselves run in python/examples/flower_digits/run.py,
which .ci/run starts).

Skipped where Flower is not installed (``pip install "./python[flower]"``; .ci/run's
Flower step installs it and runs this file)."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from flwr.app import (  # noqa: E402
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp  # noqa: E402

from fl_privacy import ldp, signds  # noqa: E402
from fl_privacy.flower import (  # noqa: E402
    FLOWER_OLDEST,
    LaplaceEvalMod,
    PrivateClientApp,
    SignDSMod,
    SignDSStrategy,
    cluster_scores,
    clustering_metrics,
)
from fl_privacy.flower import _records  # noqa: E402
from fl_privacy.flower._records import (  # noqa: E402
    REFUSED_APP,
    REFUSED_BUDGET,
    REFUSED_LAW,
    REFUSED_LEGACY,
    REFUSED_NOT_SIGNDS,
)
from fl_privacy.flower.signds import (  # noqa: E402
    METRIC_EPSILON,
    METRIC_EPSILON_OPTIMAL,
    METRIC_EPSILON_OPTIMAL_DELTA,
    METRIC_EPSILON_TOTAL,
    METRIC_REPORT_BYTES,
    REPORT_KEY,
    REPORT_RECORD,
    RoundFailed,
)

FIXTURE = Path(__file__).parent / "data" / "signds_rust_reports.json"


@pytest.fixture
def client_log(monkeypatch):
    """What the mods write to the client's own log (the refusals' details)."""
    lines = []
    monkeypatch.setattr(_records, "log", lambda level, fmt, *args: lines.append(fmt % args))
    return lines


@pytest.fixture(autouse=True)
def flwr_home(tmp_path, monkeypatch):
    """Each test's own Flower home, so that SignDSMod's default ledgers
    (``$FLWR_HOME/fl-privacy/ledger``) start empty in every test and never touch ~/.flwr
    (test_ledger.py tests the ledger across runs)."""
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    return tmp_path / "flwr-home"


@pytest.fixture(autouse=True)
def task_identity():
    """Outside a Flower runtime, Message() needs the identity a ServerApp process is given
    (Flower >= 1.42; older releases have no TaskIdentity)."""
    try:
        from flwr.supercore.task_identity import TaskIdentity
    except ImportError:
        yield
        return
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def test_a_supported_flower_is_installed():
    """The installed Flower is within the supported range (CI runs this file on its oldest
    and its newest release)."""
    version = tuple(int(p) for p in flwr.__version__.split(".")[:3] if p.isdigit())
    assert tuple(int(p) for p in FLOWER_OLDEST.split(".")) <= version < (2,), flwr.__version__


def test_readme_flower_blocks_run():
    """The README's Flower examples (```py blocks: test_readme.py runs the ```python ones,
    which must not need Flower)."""
    readme = Path(__file__).resolve().parents[1] / "README.md"
    blocks = re.findall(r"```py\n(.*?)```", readme.read_text(), re.S)
    assert blocks, "the README has Flower examples"
    for block in blocks:
        exec(compile(block, str(readme), "exec"), {})


class FakeGrid:
    """The part of Flower's Grid that strategies use: sampling nodes, and sending messages
    to the ClientApps in ``apps`` (node id → ClientApp) with their ``contexts``. Every reply
    that reaches the server is kept in :attr:`received` (what a hostile server reads)."""

    def __init__(self, nodes, apps=None, contexts=None):
        self.nodes = list(nodes)
        self.apps = apps or {}
        self.contexts = contexts or {}
        self.received = []

    def get_node_ids(self):
        return self.nodes

    def send_and_receive(self, messages, timeout=None):
        replies = [self._run(m) for m in messages]
        self.received.extend(replies)
        return replies

    def _run(self, message):
        """As a SuperNode runs a ClientApp: an exception becomes an error reply quoting it."""
        from flwr.app import Error

        node = message.metadata.dst_node_id
        try:
            return self.apps[node](message, self.contexts[node])
        except Exception as e:  # noqa: BLE001 - Flower replies with any exception's text
            return Message(Error(code=2, reason="%s:<'%s'>" % (type(e), e)), reply_to=message)


def model(seed, shape=(5, 8)):
    rng = np.random.default_rng(seed)
    return ArrayRecord({"weight": Array(rng.normal(size=shape).astype(np.float32)),
                        "bias": Array(np.zeros(shape[0], np.float32))})


def context(node):
    return Context(run_id=1, node_id=node, node_config={"partition-id": node}, state=RecordDict(),
                   run_config={})


def make_train_app(step_seed, extra_metrics=True):
    """A ClientApp whose train moves every weight by a node- and round-specific amount."""

    def train(msg, ctxt):
        arrays = msg.content["arrays"]
        rng = np.random.default_rng([step_seed, ctxt.node_id, int(msg.content["config"]["server-round"])])
        out = {k: Array((a.numpy() + 0.01 * rng.normal(size=a.numpy().shape)).astype(a.numpy().dtype))
               for k, a in arrays.items()}
        metrics = {"num-examples": 10 + ctxt.node_id}
        if extra_metrics:
            metrics["train-loss"] = 0.5
        return Message(RecordDict({"arrays": ArrayRecord(out), "metrics": MetricRecord(metrics)}),
                       reply_to=msg)

    return train


def client_app(mod, train):
    app = PrivateClientApp(mods=[mod])
    app.train()(train)
    return app


def run_round(strategy, apps, contexts, arrays, server_round):
    """One train round through the strategy (handshake included); (aggregate, replies)."""
    grid = FakeGrid(sorted(contexts), apps, contexts)
    messages = list(strategy.configure_train(server_round, arrays, ConfigRecord(), grid))
    replies = grid.send_and_receive(messages)
    return strategy.aggregate_train(server_round, replies), replies


PARAMS = dict(top_k_fraction=0.25, epsilon=5.0)


def test_mod_sends_only_the_report_with_its_privacy():
    strategy = SignDSStrategy(expected_clients=3, **PARAMS)
    contexts = {n: context(n) for n in (1, 2, 3)}
    apps = {n: client_app(SignDSMod(**PARAMS), make_train_app(7)) for n in contexts}
    arrays = model(0)
    want = sum(signds.Client(45, **PARAMS).privacy)
    assert want <= 5.0 + 5.0 and want > 9.99
    for server_round in range(1, 4):
        (arrays, metrics), replies = run_round(strategy, apps, contexts, arrays, server_round)
        for reply in replies:
            assert not reply.has_error()
            content = reply.content
            # Only the report and the metrics: no model, no train-loss.
            assert len(content.array_records) == 0
            assert set(content.config_records) == {REPORT_RECORD}
            assert set(content.config_records[REPORT_RECORD]) == {REPORT_KEY}
            m = content.metric_records["metrics"]
            assert set(m) == {"num-examples", METRIC_EPSILON, METRIC_EPSILON_TOTAL, METRIC_REPORT_BYTES,
                              METRIC_EPSILON_OPTIMAL, METRIC_EPSILON_OPTIMAL_DELTA}
            assert m[METRIC_EPSILON] == want
            assert math.isclose(m[METRIC_EPSILON_TOTAL], server_round * want, rel_tol=1e-12)
            # A few reports of ε ≈ 10: the optimal bound (at δ = 1e-6) is barely below the sum.
            assert m[METRIC_EPSILON_TOTAL] * (1 - 1e-3) < m[METRIC_EPSILON_OPTIMAL] \
                < m[METRIC_EPSILON_TOTAL]
            assert m[METRIC_EPSILON_OPTIMAL_DELTA] == 1e-6
            data = content.config_records[REPORT_RECORD][REPORT_KEY]
            assert m[METRIC_REPORT_BYTES] == len(data)
            dimension, indices, sign, _ = signds.decode_report(data)
            assert dimension == 45 and len(indices) == signds.Client(45, **PARAMS).law[2]
        assert metrics["signds-accepted"] == 3 and metrics["signds-rejected"] == 0
        assert metrics["signds-epsilon-round"] == want == strategy.epsilon_per_round
        assert metrics["signds-epsilon-reported-max"] == want
        assert math.isclose(metrics["signds-epsilon-total-max"], server_round * want, rel_tol=1e-12)


def test_forward_metrics_is_explicit():
    contexts = {n: context(n) for n in (1, 2)}
    strategy = SignDSStrategy(**PARAMS)
    apps = {n: client_app(SignDSMod(forward_metrics=["train-loss"], **PARAMS), make_train_app(1))
            for n in contexts}
    _, replies = run_round(strategy, apps, contexts, model(1), 1)
    assert all(r.content.metric_records["metrics"]["train-loss"] == 0.5 for r in replies)
    # Asking to forward a metric the app does not return is an error, not a silent drop:
    # no report is accepted, so the round (and the run) fails with one line.
    apps = {n: client_app(SignDSMod(forward_metrics=["accuracy"], **PARAMS), make_train_app(1))
            for n in contexts}
    with pytest.raises(RoundFailed, match=r"round 1 failed: no report accepted \(2 replies: 2 x "
                       + re.escape(REFUSED_APP)):
        run_round(SignDSStrategy(**PARAMS), apps, contexts, model(1), 1)


def test_strategy_equals_fl_signds_server_on_the_same_reports():
    """The strategy's aggregate is fl_privacy.signds.Server's on the reports it received,
    round after round (step-size state machine included); N_exp defaults to the sample."""
    contexts = {n: context(n) for n in range(1, 6)}
    strategy = SignDSStrategy(**PARAMS)
    apps = {n: client_app(SignDSMod(**PARAMS), make_train_app(3)) for n in contexts}
    reference = None
    arrays = model(2)
    flat = np.concatenate([arrays["weight"].numpy().ravel(), arrays["bias"].numpy()]).astype(np.float32)
    for server_round in range(1, 8):
        (arrays, metrics), replies = run_round(strategy, apps, contexts, arrays, server_round)
        if reference is None:
            reference = signds.Server(45, 5, **PARAMS)
        round_ = reference.begin_round()
        for reply in replies:
            round_.ingest(reply.content.config_records[REPORT_RECORD][REPORT_KEY],
                          reply.content.metric_records["metrics"]["num-examples"])
        summary = reference.finish_round(round_, flat)
        got = np.concatenate([arrays["weight"].numpy().ravel(), arrays["bias"].numpy()])
        np.testing.assert_array_equal(got, flat)
        assert metrics["signds-r-est"] == summary.next.r_est
        assert metrics["signds-step"] == summary.step
    # The model moved: the test compares something.
    assert not np.array_equal(flat, np.concatenate([model(2)["weight"].numpy().ravel(), np.zeros(5)]))


def test_rust_encoded_reports_are_aggregated_by_the_python_strategy():
    fx = json.loads(FIXTURE.read_text())
    d = fx["dimension"]
    params = dict(top_k_fraction=fx["top_k_fraction"], epsilon=fx["epsilon"])
    clients = fx["clients"]

    def aggregate(reports):
        strategy = SignDSStrategy(expected_clients=len(clients), **params)
        start = ArrayRecord({"w": Array(np.linspace(-1, 1, d, dtype=np.float32).reshape(4, 10))})
        # The three clients' mods answer the handshake; their reports are the Rust ones.
        nodes = [1, 2, 3]
        grid = FakeGrid(nodes, {n: client_app(SignDSMod(**params), make_train_app(0)) for n in nodes},
                        {n: context(n) for n in nodes})
        messages = list(strategy.configure_train(1, start, ConfigRecord(), grid))
        config = messages[0].content["config"]
        assert (config["signds-dimension"], config["signds-output-dimension"]) == (d, fx["output_dimension"])
        assert config["signds-r-est"] == fx["broadcast"]["r_est"]
        replies = [Message(RecordDict({REPORT_RECORD: ConfigRecord({REPORT_KEY: data}),
                                       "metrics": MetricRecord({"num-examples": c["weight"]})}),
                           reply_to=m)
                   for m, c, data in zip(messages, clients, reports)]
        arrays, metrics = strategy.aggregate_train(1, replies)
        return arrays["w"].numpy().ravel(), metrics, start["w"].numpy().ravel()

    reports = [bytes.fromhex(c["report"]) for c in clients]
    got, metrics, start = aggregate(reports)
    assert metrics["signds-accepted"] == 3 and metrics["signds-rejected"] == 0
    # Independently, from the fields the Rust side wrote: w + g·Σ n_i s_i 1[j ∈ J_i]/Σ n_i,
    # g = η·r_est with η = 4 (the default mean rule; upstream's code rule would be
    # 3·N_exp·r_est).
    g = 4 * fx["broadcast"]["r_est"]
    total = sum(c["weight"] for c in clients)
    want = start.astype(np.float64)
    for c, data in zip(clients, reports):
        decoded = signds.decode_report(data)
        assert (decoded[0], list(decoded[1]), decoded[2], int(decoded[3])) == (
            d, c["indices"], c["sign"], c["magrr_bit"])
        want[c["indices"]] += g * c["weight"] * c["sign"] / total
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-7)
    assert not np.allclose(got, start, rtol=0, atol=1e-7)
    ones = sum(c["magrr_bit"] for c in clients)
    assert metrics["signds-r-est"] == pytest.approx(1e-5 if 2 * ones > len(clients) else 5e-5)

    # Control: one tampered report (a trailing byte) is rejected and counted, and the
    # aggregate is the other two reports' alone.
    tampered = [reports[0] + b"\x00", reports[1], reports[2]]
    got_bad, metrics_bad, _ = aggregate(tampered)
    assert metrics_bad["signds-accepted"] == 2 and metrics_bad["signds-rejected"] == 1
    # So is a report whose weight cannot be an example count (too large, not whole, NaN).
    for bad_weight in (2**70, 2**64, 2.5, float("nan"), 0, -3):
        clients[0]["weight"], saved = bad_weight, clients[0]["weight"]
        got_w, metrics_w, _ = aggregate(reports)
        clients[0]["weight"] = saved
        assert metrics_w["signds-rejected"] == 1, bad_weight
        np.testing.assert_array_equal(got_w, got_bad)
    total2 = clients[1]["weight"] + clients[2]["weight"]
    want2 = start.astype(np.float64)
    for c in clients[1:]:
        want2[c["indices"]] += g * c["weight"] * c["sign"] / total2
    np.testing.assert_allclose(got_bad, want2, rtol=0, atol=1e-7)
    assert not np.allclose(got_bad, got, rtol=0, atol=1e-7)


def test_client_refuses_a_server_with_another_law(client_log):
    contexts = {n: context(n) for n in (1, 2)}
    strategy = SignDSStrategy(top_k_fraction=0.25, epsilon=50.0)
    trained = []
    apps = {n: client_app(SignDSMod(**PARAMS), lambda m, c: trained.append(m) or
                          make_train_app(1)(m, c)) for n in contexts}
    # The handshake finds the other law: no train message is sent, the round fails.
    with pytest.raises(RoundFailed, match="0 of the 2 sampled nodes run SignDSMod"):
        run_round(strategy, apps, contexts, model(1), 1)
    assert trained == []
    # A train message that claims another law anyway is refused by the mod, with the fixed
    # text; the detail is in the client's log.
    message = Message(RecordDict({"arrays": model(1), "config": ConfigRecord({
        "server-round": 1, "signds-r-est": 1e-5, "signds-phase": "growth",
        "signds-dimension": 45, "signds-output-dimension": 999})}),
        dst_node_id=1, message_type=MessageType.TRAIN)
    reply = apps[1](message, contexts[1])
    assert reply.error.reason == REFUSED_LAW and trained == []
    assert any("differs from this client's" in line and "999" in line for line in client_log)


def test_each_client_reports_what_its_own_parameters_spend():
    """ε_RR does not change h: a client with ε_RR = 1 is accepted and reports its own ε."""
    contexts = {1: context(1), 2: context(2)}
    apps = {1: client_app(SignDSMod(magrr_epsilon=1.0, **PARAMS), make_train_app(4)),
            2: client_app(SignDSMod(**PARAMS), make_train_app(4))}
    (_, metrics), replies = run_round(SignDSStrategy(**PARAMS), apps, contexts, model(4), 1)
    low = sum(signds.Client(45, magrr_epsilon=1.0, **PARAMS).privacy)
    want = sum(signds.Client(45, **PARAMS).privacy)
    assert low < want
    reported = {r.metadata.src_node_id: r.content.metric_records["metrics"][METRIC_EPSILON]
                for r in replies}
    assert reported == {1: low, 2: want}
    assert metrics["signds-accepted"] == 2
    assert metrics["signds-epsilon-reported-max"] == want == metrics["signds-epsilon-round"]


def test_budget_stops_participation():
    contexts = {1: context(1), 2: context(2)}
    per_round = sum(signds.Client(45, **PARAMS).privacy)
    apps = {n: client_app(SignDSMod(epsilon_budget=2.5 * per_round, **PARAMS), make_train_app(2))
            for n in contexts}
    strategy = SignDSStrategy(**PARAMS)
    arrays = model(3)
    accepted = []
    for r in range(1, 3):
        (arrays, metrics), replies = run_round(strategy, apps, contexts, arrays, r)
        accepted.append(metrics["signds-accepted"])
    assert accepted == [2, 2]
    # Round 3 would take both clients past their budget: both refuse, the run stops.
    with pytest.raises(RoundFailed, match="round 3 failed: no report accepted \\(2 replies: 2 x "
                       + re.escape(REFUSED_BUDGET)):
        run_round(strategy, apps, contexts, arrays, 3)


def test_mod_rejects_bad_messages_and_replies(client_log):
    mod = SignDSMod(**PARAMS)
    # A train message without the strategy's keys is refused.
    train = Message(RecordDict({"arrays": model(0), "config": ConfigRecord({"server-round": 1})}),
                    dst_node_id=1, message_type=MessageType.TRAIN)
    reply = mod(train, context(1), make_train_app(0))
    assert reply.error.reason == REFUSED_NOT_SIGNDS
    assert "SignDSStrategy" in client_log[-1]
    # A reply that changes the model's layout, or lacks num-examples, is refused.
    strategy = SignDSStrategy(**PARAMS)
    apps = {n: client_app(SignDSMod(**PARAMS), make_train_app(0)) for n in (1, 2)}
    grid = FakeGrid([1, 2], apps, {n: context(n) for n in (1, 2)})
    train = list(strategy.configure_train(1, model(0), ConfigRecord(), grid))[0]

    def wrong_shape(m, c):
        return Message(RecordDict({"arrays": model(0, shape=(4, 8)),
                                   "metrics": MetricRecord({"num-examples": 3})}), reply_to=m)

    def no_count(m, c):
        return Message(RecordDict({"arrays": model(0), "metrics": MetricRecord({"loss": 1.0})}),
                       reply_to=m)

    assert mod(train, context(1), wrong_shape).error.reason == REFUSED_APP
    assert "same keys, shapes" in client_log[-1]
    assert mod(train, context(1), no_count).error.reason == REFUSED_APP
    assert "num-examples" in client_log[-1]
    with pytest.raises(TypeError, match="unknown SignDS parameters"):
        SignDSMod(eps=1.0)
    with pytest.raises(ValueError, match="epsilon_budget"):
        SignDSMod(epsilon_budget=float("nan"), **PARAMS)
    with pytest.raises(ValueError, match="expected_clients"):
        SignDSStrategy(expected_clients=0, **PARAMS)


@pytest.mark.parametrize("build, error, named", [
    (lambda: SignDSStrategy(epsilon="10"), TypeError, "epsilon"),
    (lambda: SignDSMod(epsilon="10"), TypeError, "epsilon"),
    (lambda: SignDSMod(epsilon=-1.0), ValueError, "epsilon"),
    (lambda: SignDSStrategy(epsilon=float("nan")), ValueError, "epsilon"),
    (lambda: SignDSMod(), TypeError, "epsilon is required"),
    (lambda: SignDSStrategy(top_k_fraction=0.2), TypeError, "epsilon is required"),
    (lambda: SignDSMod(epsilon=10.0, top_k_fraction=1.5), ValueError, "top_k_fraction"),
    (lambda: SignDSMod(epsilon=10.0, magrr_epsilon=-2.0), ValueError, "magrr_epsilon"),
    (lambda: SignDSStrategy(epsilon=10.0, global_learning_rate=-1.0), ValueError,
     "global_learning_rate"),
    (lambda: SignDSStrategy(epsilon=10.0, fraction_evaluate=2), ValueError, "fraction_evaluate"),
    (lambda: SignDSStrategy(epsilon=10.0, min_train_nodes=-1), ValueError, "min_train_nodes"),
    (lambda: SignDSStrategy(epsilon=10.0, step_rule="paper"), ValueError, "step_rule"),
    (lambda: SignDSStrategy(epsilon=10.0, handshake_timeout=0), ValueError, "handshake_timeout"),
    (lambda: SignDSStrategy(epsilon=10.0, target_delta=1.0), ValueError, "target_delta"),
    (lambda: SignDSMod(epsilon=10.0, epsilon_budget="5"), TypeError, "epsilon_budget"),
    (lambda: SignDSMod(epsilon=10.0, allow_unprotected="evaluate"), TypeError, "allow_unprotected"),
    (lambda: SignDSMod(epsilon=10.0, allow_unprotected=["fit"]), ValueError, "allow_unprotected"),
    (lambda: SignDSMod(epsilon=10.0, forward_metrics="loss"), TypeError, "forward_metrics"),
    (lambda: LaplaceEvalMod("1"), TypeError, "epsilon"),
    (lambda: LaplaceEvalMod(-1.0), ValueError, "epsilon"),
    (lambda: LaplaceEvalMod(1.0, allow_unprotected=["training"]), ValueError, "allow_unprotected"),
])
def test_constructors_check_every_argument_when_built(build, error, named):
    """Every mistake is an error when the object is built, naming the argument — not at
    round 1 under a traceback, nor as error replies from every client."""
    with pytest.raises(error, match=named):
        build()


def test_upstream_defaults_only_by_name():
    mod = SignDSMod(profile="mindspore")
    strategy = SignDSStrategy(profile="mindspore")
    assert mod is not None and strategy is not None


# --- Laplace evaluation ---------------------------------------------------------------


def evaluate_app(vector, extra=True):
    def evaluate(msg, ctxt):
        metrics = {"num-examples": 20, "probabilities": list(vector)}
        if extra:
            metrics["accuracy"] = 0.9
        return Message(RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)

    app = ClientApp(mods=[LaplaceEvalMod(1.0, rng=ldp.SeededRng(5))])
    app.evaluate()(evaluate)
    return app


def evaluate_message(node=1):
    return Message(RecordDict({"arrays": model(0), "config": ConfigRecord({"server-round": 1})}),
                   dst_node_id=node, message_type=MessageType.EVALUATE)


def test_laplace_mod_releases_only_the_noisy_vector():
    vector = [0.5, 0.25, 0.125, 0.125]
    reply = evaluate_app(vector)(evaluate_message(), context(1))
    metrics = reply.content.metric_records["metrics"]
    assert set(reply.content) == {"metrics"}
    assert set(metrics) == {"num-examples", "probabilities", "laplace-epsilon"}
    mechanism = ldp.Laplace(1.0, 4)
    assert metrics["laplace-epsilon"] == mechanism.claim.epsilon <= 1.0
    noisy = np.asarray(metrics["probabilities"])
    assert noisy.shape == (4,) and not np.array_equal(noisy, vector)
    # Outputs lie on fl-ldp's lattice (multiples of its spacing).
    ratio = noisy / mechanism.spacing
    np.testing.assert_array_equal(ratio, np.round(ratio))


def test_laplace_mod_fails_closed(client_log):
    """Invalid values are replaced by the uniform vector before the release (a refusal
    would tell the server the data made them invalid: red team rt6 B3); a missing vector
    is refused. Either way nothing raw leaves, and the reason is in the client's log."""
    for bad in ([0.9, 0.9], [float("nan"), 0.1], [-0.5, 1.0]):
        reply = evaluate_app(bad)(evaluate_message(), context(1))
        metrics = reply.content.metric_records["metrics"]
        assert set(metrics) == {"num-examples", "probabilities", "laplace-epsilon"}
        assert "uniform vector" in client_log[-1]
    app = ClientApp(mods=[LaplaceEvalMod(1.0)])
    app.evaluate()(lambda m, c: Message(RecordDict({"metrics": MetricRecord({"num-examples": 1})}),
                                        reply_to=m))
    reply = app(evaluate_message(), context(1))
    assert reply.error.reason == REFUSED_APP and "probabilities" in client_log[-1]
    for bad_eps in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            LaplaceEvalMod(bad_eps)


def _noise_z(samples, mechanism):
    """z statistic of the mean |noise|/spacing against the discrete Laplace law
    P(k) ∝ q^|k|, q = exp(-spacing/noise_scale): E|K| = 2q/(1 - q²)."""
    k = np.abs(samples) / mechanism.spacing
    q = math.exp(-mechanism.spacing / mechanism.noise_scale)
    mean = 2 * q / (1 - q * q)
    second = 2 * q * (1 + q) / ((1 - q) ** 2 * (1 + q))  # E K² = 2q/(1-q)²
    sd = math.sqrt(second - mean * mean)
    return (k.mean() - mean) / (sd / math.sqrt(k.size))


def test_laplace_mod_noise_follows_the_configured_law():
    """α = 1e-6 (|z| < 4.89): the mod's noise has the mean |noise| of fl-ldp's law at the
    configured ε; control: the same samples against the law at 2ε (upstream's scale) must
    be rejected."""
    vector = np.array([0.5, 0.25, 0.125, 0.125])
    mod = LaplaceEvalMod(2.0, rng=ldp.SeededRng(11))
    app = ClientApp(mods=[mod])
    app.evaluate()(lambda m, c: Message(RecordDict({"metrics": MetricRecord(
        {"num-examples": 1, "probabilities": list(vector)})}), reply_to=m))
    noise = np.concatenate([
        np.asarray(app(evaluate_message(i), context(i)).content.metric_records["metrics"]
                   ["probabilities"]) - vector
        for i in range(2500)])
    assert abs(_noise_z(noise, ldp.Laplace(2.0, 4))) < 4.89
    assert abs(_noise_z(noise, ldp.Laplace(4.0, 4))) > 4.89


def test_cluster_scores_match_reference_and_scikit_learn():
    x = [[0.9, 0.1], [0.8, 0.2], [0.2, 0.8], [0.1, 0.9]]
    labels, ch, s = cluster_scores(x)
    assert list(labels) == [0, 0, 1, 1]
    assert ch == pytest.approx(98.0, rel=1e-12)
    assert s == pytest.approx(0.8564102564, rel=1e-9)
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    points = rng.dirichlet(np.ones(5), size=60)
    labels, ch, s = cluster_scores(points)
    np.testing.assert_array_equal(labels, points.argmax(axis=1))
    assert ch == pytest.approx(sklearn_metrics.calinski_harabasz_score(points, labels), rel=1e-10)
    assert s == pytest.approx(sklearn_metrics.silhouette_score(points, labels), rel=1e-10)
    with pytest.raises(ValueError):
        cluster_scores([[1.0, 0.0], [0.9, 0.1]])  # one cluster


def test_server_clusters_the_noisy_vectors():
    """FedAvg with clustering_metrics: the server's scores are fl-stats' on exactly the
    vectors the clients' mods released."""
    from flwr.serverapp.strategy import FedAvg

    strategy = FedAvg(evaluate_metrics_aggr_fn=clustering_metrics())
    rng = np.random.default_rng(4)
    centres = np.eye(3) * 0.8 + 0.2 / 3
    replies, released = [], []
    for node in range(12):
        vector = centres[node % 3]
        app = ClientApp(mods=[LaplaceEvalMod(50.0, rng=ldp.SeededRng(node))])
        app.evaluate()(lambda m, c, v=vector: Message(RecordDict({"metrics": MetricRecord(
            {"num-examples": 5, "probabilities": list(v)})}), reply_to=m))
        reply = app(evaluate_message(node), context(node))
        replies.append(reply)
        released.append(reply.content.metric_records["metrics"]["probabilities"])
    assert rng is not None
    metrics = strategy.aggregate_evaluate(1, replies)
    _, ch, s = cluster_scores(np.asarray(released))
    assert metrics["clients"] == 12 and metrics["clusters"] == 3
    assert metrics["calinski-harabasz"] == ch and metrics["silhouette"] == s
    assert metrics["laplace-epsilon"] <= 50.0
    assert s > 0.5  # at ε = 50 the three groups stay apart


# --- A hostile server: everything that reaches it ------------------------------------

#: A value of the client's local data (a label sum) that must never reach the server.
SECRET = 31337.4242


def _everything(replies):
    """Every number and string in the replies that reached the server."""
    seen = []
    for reply in replies:
        if reply.has_error():
            seen.append(reply.error.reason)
            continue
        for name, record in reply.content.items():
            seen.append(name)
            if isinstance(record, ArrayRecord):
                seen.extend(float(v) for a in record.values() for v in a.numpy().ravel())
            else:
                for key, value in record.items():
                    seen.append(key)
                    seen.extend(value if isinstance(value, list) else [value])
    return seen


def leaked(replies, *secrets):
    """Whether any secret (a number, or a string inside a text) reached the server."""
    for item in _everything(replies):
        for secret in secrets:
            if isinstance(item, (bytes, str)):
                if str(secret) in str(item):
                    return True
            elif isinstance(item, (int, float)) and not isinstance(secret, str) and item == secret:
                return True
    return False


def leaky_app(mods, *, allow=False):
    """A ClientApp that answers every category with local data: train returns its model and
    the label sum, evaluate and query the label sum; `allow` registers also functions that
    raise or reply with an error quoting the secret."""
    app = PrivateClientApp(mods=mods)

    @app.train()
    def train(msg, ctxt):
        reply = make_train_app(5)(msg, ctxt)
        reply.content["metrics"]["label-sum"] = SECRET
        return reply

    @app.evaluate()
    def evaluate(msg, ctxt):
        return Message(RecordDict({"metrics": MetricRecord(
            {"num-examples": 3, "label-sum": SECRET, "probabilities": [0.5, 0.5]})}), reply_to=msg)

    @app.query()
    def query(msg, ctxt):
        return Message(RecordDict({"metrics": MetricRecord({"label-sum": SECRET})}), reply_to=msg)

    @app.query("stats")
    def stats(msg, ctxt):
        return Message(RecordDict({"metrics": MetricRecord({"label-sum": SECRET})}), reply_to=msg)

    @app.evaluate("crash")
    def crash(msg, ctxt):
        raise ValueError("label sum %r is odd" % SECRET)

    @app.query("error")
    def error(msg, ctxt):
        from flwr.app import Error

        return Message(Error(code=0, reason="label sum %r" % SECRET), reply_to=msg)

    return app


def hostile_messages(node):
    """What a hostile server sends besides SignDS rounds: evaluations of models it chose,
    queries (default and named actions), crafted train configs, legacy messages."""
    crafted = {"server-round": 1, "signds-r-est": float("nan"), "signds-phase": "growth",
               "signds-dimension": 45, "signds-output-dimension": 11}
    return [
        Message(RecordDict({"arrays": model(9), "config": ConfigRecord({"server-round": 1})}),
                dst_node_id=node, message_type=MessageType.EVALUATE),
        Message(RecordDict({"arrays": model(9), "config": ConfigRecord({"server-round": 1})}),
                dst_node_id=node, message_type=MessageType.EVALUATE + ".crash"),
        Message(RecordDict({"config": ConfigRecord({"x": 1})}), dst_node_id=node,
                message_type=MessageType.QUERY),
        Message(RecordDict({"config": ConfigRecord({"x": 1})}), dst_node_id=node,
                message_type=MessageType.QUERY + ".stats"),
        Message(RecordDict({"config": ConfigRecord({"x": 1})}), dst_node_id=node,
                message_type=MessageType.QUERY + ".error"),
        Message(RecordDict({"arrays": model(9), "config": ConfigRecord(crafted)}),
                dst_node_id=node, message_type=MessageType.TRAIN),
        Message(RecordDict({"arrays": model(9), "config": ConfigRecord(
            dict(crafted, **{"signds-r-est": 1e-5, "signds-output-dimension": 3}))}),
                dst_node_id=node, message_type=MessageType.TRAIN),
        Message(RecordDict({"arrays": model(9), "config": ConfigRecord({"server-round": 1})}),
                dst_node_id=node, message_type=MessageType.TRAIN),
        Message(RecordDict({"fitins.parameters": model(9), "fitins.config": ConfigRecord({})}),
                dst_node_id=node, message_type=MessageType.TRAIN),
    ]


@pytest.mark.parametrize("order", ["signds-outer", "laplace-outer", "signds-only"])
def test_a_hostile_server_reads_nothing_raw(order, client_log):
    """Every message a hostile server can send, to clients with the mods as documented:
    nothing of the local data reaches it (refusals carry fixed texts; the details are in the
    client's log). Control: the same server against mods that let evaluate and query
    replies through (allow_unprotected, i.e. what SignDSMod did before) reads the secret."""
    signds_mod = SignDSMod(**PARAMS)
    laplace_mod = LaplaceEvalMod(1.0, rng=ldp.SeededRng(3))
    mods = {"signds-outer": [signds_mod, laplace_mod], "laplace-outer": [laplace_mod, signds_mod],
            "signds-only": [signds_mod]}[order]
    app = leaky_app(mods)
    grid = FakeGrid([1], {1: app}, {1: context(1)})
    replies = grid.send_and_receive(hostile_messages(1))
    assert all(r.has_error() for r in replies if r.metadata.message_type != "evaluate"
               or order == "signds-only"), [r.error.reason if r.has_error() else "content"
                                            for r in replies]
    assert not leaked(grid.received, SECRET, "31337")
    reasons = {r.error.reason for r in replies if r.has_error()}
    fixed = {getattr(_records, n) for n in dir(_records) if n.startswith("REFUSED_")}
    fixed |= {_records.REFUSED_CATEGORY % c for c in ("train", "evaluate", "query")}
    assert reasons <= fixed, reasons - fixed
    assert REFUSED_LEGACY in reasons and REFUSED_NOT_SIGNDS in reasons and REFUSED_LAW in reasons
    # The client's own log has the details (the secret included, for the one who owns it).
    assert any("31337" in line for line in client_log)
    if order != "signds-only":  # the default evaluate reached LaplaceEvalMod: a release
        evaluated = replies[0].content.metric_records["metrics"]
        assert set(evaluated) == {"num-examples", "probabilities", "laplace-epsilon"}
    # A SignDS round still works on the same apps.
    one_node = dict(min_train_nodes=1, min_available_nodes=1, **PARAMS)
    (arrays, metrics), _ = run_round(SignDSStrategy(**one_node), {1: app}, {1: context(1)},
                                     model(0), 1)
    assert metrics["signds-accepted"] == 1

    # Control: with evaluate and query let through, the same server reads the secret.
    open_app = leaky_app([SignDSMod(allow_unprotected=("evaluate", "query"), **PARAMS)])
    open_grid = FakeGrid([1], {1: open_app}, {1: context(1)})
    open_grid.send_and_receive(hostile_messages(1)[:4])
    assert leaked(open_grid.received, SECRET)


def test_error_texts_never_quote_the_vector(client_log):
    """An app returning logits instead of probabilities: the server reads neither the
    values (previously "probability vector[1] = -1.25 is invalid") nor that they were
    invalid — it gets the release of the uniform vector, at ε = 50 close to it. Control:
    the values are in the client's log."""
    app = ClientApp(mods=[LaplaceEvalMod(50.0, rng=ldp.SeededRng(2))])
    app.evaluate()(lambda m, c: Message(RecordDict({"metrics": MetricRecord(
        {"num-examples": 1, "probabilities": [2.65, -1.25]})}), reply_to=m))
    grid = FakeGrid([1], {1: app}, {1: context(1)})
    (reply,) = grid.send_and_receive([evaluate_message()])
    released = reply.content.metric_records["metrics"]["probabilities"]
    assert max(abs(v - 0.5) for v in released) < 0.5
    assert not leaked(grid.received, "-1.25", "2.65", -1.25, 2.65, "1.4")
    assert any("-1.25" in line for line in client_log)


def test_a_client_without_the_mod_never_receives_a_train_message():
    """The strategy trains only nodes whose SignDSMod answered its handshake: a ClientApp
    without the mod (a plain ClientApp, or PrivateClientApp with no SignDSMod) is sent no
    train message, so its model never leaves; the round fails with one line. Control: the
    same apps with the mod train and are aggregated."""
    trained = []

    def train(m, c):
        trained.append(c.node_id)
        return make_train_app(6)(m, c)

    plain = ClientApp()
    plain.train()(train)
    without = PrivateClientApp(mods=[LaplaceEvalMod(1.0)])
    without.train()(train)
    contexts = {1: context(1), 2: context(2)}
    grid = FakeGrid([1, 2], {1: plain, 2: without}, contexts)
    with pytest.raises(RoundFailed, match=r"round 1 failed: 0 of the 2 sampled nodes run SignDSMod"):
        SignDSStrategy(**PARAMS).configure_train(1, model(0), ConfigRecord(), grid)
    assert trained == []
    assert not any(isinstance(r, ArrayRecord) for m in grid.received if m.has_content()
                   for r in m.content.values())
    # One node with the mod, one without: only the first is trained (min_train_nodes=1).
    mixed = {1: client_app(SignDSMod(**PARAMS), train), 2: without}
    (_, metrics), replies = run_round(SignDSStrategy(min_train_nodes=1, **PARAMS), mixed,
                                      contexts, model(0), 1)
    assert trained == [1] and metrics["signds-accepted"] == 1 and len(replies) == 1


def test_legacy_api_gets_a_clear_error(client_log):
    """Flower's legacy API (client_fn + NumPyClient; a strategy in ServerAppComponents):
    an error that says so, not Flower's KeyError 'fitins.parameters' or AttributeError."""
    from flwr.client import NumPyClient

    class Legacy(NumPyClient):
        def fit(self, parameters, config):
            return parameters, 10, {"label-sum": SECRET}

    app = PrivateClientApp(client_fn=lambda context: Legacy().to_client(),
                           mods=[SignDSMod(**PARAMS)])
    contexts = {1: context(1)}
    strategy = SignDSStrategy(min_train_nodes=1, min_available_nodes=1, **PARAMS)
    grid = FakeGrid([1], {1: app}, contexts)
    with pytest.raises(RoundFailed, match=re.escape(REFUSED_LEGACY)):
        strategy.aggregate_train(1, grid.send_and_receive(
            list(strategy.configure_train(1, model(0), ConfigRecord(), grid))))
    assert not leaked(grid.received, SECRET)
    assert any("legacy API" in line and "fitins" in line for line in client_log)
    with pytest.raises(TypeError, match="legacy API"):
        strategy.initialize_parameters(client_manager=None)
    with pytest.raises(TypeError, match="legacy API"):
        strategy.configure_fit(1, None, None)


# --- Privacy accounting ---------------------------------------------------------------


def _hockey_stick(k, eps0, eps):
    """δ(ε) by brute force: the hockey-stick divergence of k-fold binary randomized
    response at ε0 (the worst pair for k-fold ε0-DP), enumerating all 2^k outcomes."""
    import itertools

    p = math.exp(eps0) / (1 + math.exp(eps0))
    total = 0.0
    for outcome in itertools.product((0, 1), repeat=k):
        ones = sum(outcome)
        P = p ** ones * (1 - p) ** (k - ones)
        Q = (1 - p) ** ones * p ** (k - ones)
        total += max(0.0, P - math.exp(eps) * Q)
    return total


def test_optimal_composition_equals_the_worst_pair():
    from fl_privacy.flower.accounting import optimal_composition_delta, optimal_composition_epsilon

    for k, eps0 in ((1, 1.0), (5, 0.5), (10, 2.0), (12, 0.1)):
        for eps in (0.0, 0.3, 1.0, 2.5, 7.0):
            assert optimal_composition_delta(eps, k, eps0) == pytest.approx(
                _hockey_stick(k, eps0, eps), rel=1e-9, abs=1e-15)
    # Control: the same brute force at another ε0 differs.
    assert optimal_composition_delta(1.0, 10, 2.0) != pytest.approx(_hockey_stick(10, 1.9, 1.0))
    # ε at δ is the inverse, and below both basic and advanced composition for many rounds.
    k, eps0, delta = 100, 0.5, 1e-6
    eps = optimal_composition_epsilon(delta, k, eps0)
    assert optimal_composition_delta(eps, k, eps0) <= delta < optimal_composition_delta(
        eps * (1 - 1e-6), k, eps0)
    advanced = eps0 * math.sqrt(2 * k * math.log(1 / delta)) + k * eps0 * (math.exp(eps0) - 1)
    assert eps < min(k * eps0, advanced)


def test_accountant_speaks_flowers_protocol():
    from fl_privacy.flower import PureEpsilonAccountant, PureEpsilonEvent

    accountant = PureEpsilonAccountant(target_delta=1e-5, max_epsilon=30.0)
    accountant.compose(PureEpsilonEvent(10.0), count=2)
    assert accountant.num_releases == 2 and accountant.get_epsilon(0.0) == 20.0
    assert accountant.get_delta(20.0) == 0.0 and 0 < accountant.get_delta(19.0) < 1
    spent = accountant.get_privacy_spent()
    assert spent.num_releases == 2 and spent.epsilon <= 20.0
    assert accountant.would_exceed(PureEpsilonEvent(10.0), count=2)
    assert not accountant.would_exceed(PureEpsilonEvent(1.0))
    restored = PureEpsilonAccountant(target_delta=1e-5)
    restored.load_state_dict(accountant.state_dict())
    assert restored.get_epsilon(0.0) == 20.0
    with pytest.raises(ValueError, match="epsilon"):
        accountant.compose(PureEpsilonEvent(float("inf")))
    try:
        from flwr.supercore.privacy_accounting import GaussianPrivacyEvent, PrivacyConfig
    except ImportError:  # Flower before 1.42 has no PrivacyAccountant
        return
    assert isinstance(accountant.config, PrivacyConfig)
    with pytest.raises(TypeError, match="Gaussian"):
        accountant.compose(GaussianPrivacyEvent(1.0, 1, 1))


def test_strategy_ledger_counts_every_report_received():
    contexts = {n: context(n) for n in (1, 2)}
    apps = {n: client_app(SignDSMod(**PARAMS), make_train_app(8)) for n in contexts}
    strategy = SignDSStrategy(target_delta=1e-6, **PARAMS)
    arrays = model(1)
    per_round = sum(signds.Client(45, **PARAMS).privacy)
    for r in range(1, 4):
        (arrays, metrics), _ = run_round(strategy, apps, contexts, arrays, r)
    assert metrics["signds-epsilon-ledger-max"] == pytest.approx(3 * per_round)
    assert metrics["signds-epsilon-optimal-max"] <= metrics["signds-epsilon-ledger-max"]
    assert strategy.privacy_spent(1, 0.0).epsilon == pytest.approx(3 * per_round)
    assert strategy.privacy_spent(99).epsilon == 0.0


# --- Red team rt5 (a helper told only the claims and the code): its findings, fixed -----


def _secret_app(mods, reply):
    """A PrivateClientApp whose query function does ``reply`` (a callable of the message)."""
    app = PrivateClientApp(mods=mods)
    app.query()(lambda m, c: reply(m))
    return app


class DataCheck(BaseException):
    """Not an Exception: Flower's simulation sends its text (and traceback) to the server."""


def _raise(exc):
    raise exc


@pytest.mark.parametrize("mods", [lambda: [SignDSMod(**PARAMS)], lambda: [LaplaceEvalMod(1.0)]])
def test_the_refusal_text_does_not_say_what_the_app_did(mods, client_log):
    """rt5 A02: a query refused because the app raised, replied with an error or replied
    carries the same text (before: REFUSED_APP for the first two, which let a server
    bisect a local value by asking "raise if x > t"). Control: the app's replies differ."""
    query = Message(RecordDict({"config": ConfigRecord({"t": 1})}), dst_node_id=1,
                    message_type=MessageType.QUERY)
    from flwr.app import Error

    behaviours = [
        lambda m: Message(RecordDict({"metrics": MetricRecord({"x": SECRET})}), reply_to=m),
        lambda m: _raise(ValueError("x = %r" % SECRET)),
        lambda m: Message(Error(code=0, reason="x = %r" % SECRET), reply_to=m),
        lambda m: _raise(DataCheck("x = %r" % SECRET)),
        lambda m: None,
    ]
    reasons = {_secret_app(mods(), b)(query, context(1)).error.reason for b in behaviours}
    assert reasons == {_records.REFUSED_CATEGORY % "query"}
    assert sum("31337" in line for line in client_log) >= 3  # the details stay local


def test_a_base_exception_of_the_app_leaves_no_text(client_log):
    """rt5 A04: a BaseException (not an Exception) raised by the app under a protected
    category is refused with the fixed text; KeyboardInterrupt stays fatal but loses its
    arguments."""
    app = PrivateClientApp(mods=[LaplaceEvalMod(1.0)])
    app.evaluate()(lambda m, c: _raise(DataCheck("label sum %r" % SECRET)))
    assert app(evaluate_message(), context(1)).error.reason == REFUSED_APP
    app = PrivateClientApp(mods=[LaplaceEvalMod(1.0)])
    app.evaluate()(lambda m, c: _raise(KeyboardInterrupt("label sum %r" % SECRET)))
    with pytest.raises(KeyboardInterrupt) as caught:
        app(evaluate_message(), context(1))
    assert caught.value.args == () and caught.value.__cause__ is None


def test_a_message_passed_twice_is_refused_twice():
    """rt5 A03: the mark that lets an inner mod pass a message to the app (an outer mod
    protects its reply) lasts for that call only: a user mod that retries with the same
    message object, or a runtime that delivers one object twice, gets a refusal both times
    (before: the second pass went straight to the app and its raw reply left)."""

    def retry(msg, ctxt, call_next):
        first = call_next(msg, ctxt)
        return call_next(msg, ctxt) if first.has_error() else first

    query = Message(RecordDict({"config": ConfigRecord({"t": 1})}), dst_node_id=1,
                    message_type=MessageType.QUERY)
    for mods in ([retry, LaplaceEvalMod(1.0)], [retry, SignDSMod(**PARAMS)]):
        app = _secret_app(mods, lambda m: Message(
            RecordDict({"metrics": MetricRecord({"x": SECRET})}), reply_to=m))
        grid = FakeGrid([1], {1: app}, {1: context(1)})
        grid.send_and_receive([query, query])
        assert not leaked(grid.received, SECRET)
        assert all(r.has_error() for r in grid.received)
    # The training route: a retried train message still leaves only as a report.
    app = PrivateClientApp(mods=[retry, LaplaceEvalMod(1.0)])
    app.train()(make_train_app(1))
    reply = app(Message(RecordDict({"arrays": model(0), "config": ConfigRecord({})}),
                        dst_node_id=1, message_type=MessageType.TRAIN), context(1))
    assert reply.error.reason == _records.REFUSED_CATEGORY % "train"


def test_crafted_server_bytes_and_odd_app_returns_get_fixed_texts():
    """rt5 A05/A06: a train message whose array bytes do not parse, and an app that returns
    None, are refusals with fixed texts (before: numpy's EOFError text, AttributeError)."""
    from flwr.app import Array

    bad = Array("float32", (3,), "numpy.ndarray", b"")
    contexts = {1: context(1)}
    strategy = SignDSStrategy(min_train_nodes=1, min_available_nodes=1, **PARAMS)
    app = client_app(SignDSMod(**PARAMS), make_train_app(0))
    (train,) = strategy.configure_train(1, model(0), ConfigRecord(), FakeGrid([1], {1: app},
                                                                             contexts))
    crafted = Message(RecordDict({"arrays": ArrayRecord({"w": bad}),
                                  "config": train.content["config"]}),
                      dst_node_id=1, message_type=MessageType.TRAIN)
    assert app(crafted, contexts[1]).error.reason == REFUSED_NOT_SIGNDS
    none_app = client_app(SignDSMod(**PARAMS), lambda m, c: None)
    assert none_app(train, contexts[1]).error.reason == REFUSED_APP


def test_only_the_apps_own_mods_answer_the_handshake():
    """rt5 A08: the handshake proves SignDSMod is on the train route. A SignDSMod among one
    function's own mods, or on a plain ClientApp whose user registered the handshake, or
    added to the mods list after the app was built, refuses it: no train message is sent.
    Control: the same SignDSMod as the PrivateClientApp's own mod answers."""
    from fl_privacy.flower.signds import HANDSHAKE_ACTION

    trained = []

    def train(m, c):
        trained.append(c.node_id)
        return make_train_app(2)(m, c)

    function_mod = ClientApp()
    function_mod.query(HANDSHAKE_ACTION, mods=[SignDSMod(**PARAMS)])(lambda m, c: None)
    function_mod.train()(train)
    plain = ClientApp(mods=[SignDSMod(**PARAMS)])
    plain.query(HANDSHAKE_ACTION)(lambda m, c: None)
    plain.train()(train)
    mods = []
    late = PrivateClientApp(mods=mods)
    mods.append(SignDSMod(**PARAMS))
    late.train()(train)
    for app in (function_mod, plain, late):
        grid = FakeGrid([1], {1: app}, {1: context(1)})
        with pytest.raises(RoundFailed, match="0 of the 1 sampled nodes"):
            SignDSStrategy(min_train_nodes=1, min_available_nodes=1, **PARAMS).configure_train(
                1, model(0), ConfigRecord(), grid)
    assert trained == []
    good = client_app(SignDSMod(**PARAMS), train)
    (_, metrics), _ = run_round(SignDSStrategy(min_train_nodes=1, min_available_nodes=1, **PARAMS),
                                {1: good}, {1: context(1)}, model(0), 1)
    assert trained == [1] and metrics["signds-accepted"] == 1


# --- Red team rt6 (a second helper, on the fixed version): its findings, fixed ----------


class Unprintable(Exception):
    def __str__(self):
        raise KeyError(SECRET)


def test_an_exception_whose_text_raises_leaves_no_text(client_log):
    """rt6 B1: an exception of the app whose str() raises (with local data) is refused with
    the fixed text (before: the str's own KeyError escaped the mod with the secret)."""
    for mods, category in (([SignDSMod(**PARAMS)], "query"), ([LaplaceEvalMod(1.0)], "evaluate")):
        app = PrivateClientApp(mods=mods)
        app.query()(lambda m, c: _raise(Unprintable()))
        app.evaluate()(lambda m, c: _raise(Unprintable()))
        grid = FakeGrid([1], {1: app}, {1: context(1)})
        message = evaluate_message() if category == "evaluate" else Message(
            RecordDict({"config": ConfigRecord({})}), dst_node_id=1, message_type=MessageType.QUERY)
        (reply,) = grid.send_and_receive([message])
        assert reply.has_error() and not leaked(grid.received, SECRET, "31337")
    assert any("unprintable Unprintable" in line for line in client_log)


def test_system_exit_is_a_refusal_too():
    """rt6 B4: SystemExit (e.g. sys.exit when a local value passes a threshold) is refused
    with the fixed text like any exception (before: it escaped, and no reply versus a
    refusal told the server which)."""
    app = _secret_app([SignDSMod(**PARAMS)], lambda m: _raise(SystemExit(3)))
    query = Message(RecordDict({"config": ConfigRecord({})}), dst_node_id=1,
                    message_type=MessageType.QUERY)
    assert app(query, context(1)).error.reason == _records.REFUSED_CATEGORY % "query"


def test_a_mod_between_two_fl_privacy_mods_cannot_add_to_a_protected_reply():
    """rt6 B2: a user mod between the two fl_privacy mods that adds local data to the inner
    mod's protected reply in place: the outer mod refuses the changed reply (before: it
    forwarded it, the label sum included). Control: the same mods without the edit send
    the release."""

    def stats(msg, ctxt, call_next):
        reply = call_next(msg, ctxt)
        if not reply.has_error():
            reply.content["metrics"]["label-sum"] = SECRET
        return reply

    def app_with(middle):
        app = PrivateClientApp(mods=[SignDSMod(**PARAMS)] + middle + [LaplaceEvalMod(1.0)])
        app.evaluate()(lambda m, c: Message(RecordDict({"metrics": MetricRecord(
            {"num-examples": 3, "probabilities": [0.5, 0.5]})}), reply_to=m))
        return app

    grid = FakeGrid([1], {1: app_with([stats])}, {1: context(1)})
    (reply,) = grid.send_and_receive([evaluate_message()])
    assert reply.has_error() and not leaked(grid.received, SECRET)
    control = app_with([])(evaluate_message(), context(1))
    assert set(control.content.metric_records["metrics"]) == {
        "num-examples", "probabilities", "laplace-epsilon"}


def test_an_overflowing_update_is_reported_not_refused(client_log):
    """rt6 B3: an update the data made non-finite is reported as a zero update (charged as
    a report) instead of refused, so a server that picks weights to overflow the update
    for some data learns nothing from refusals (before: 30 train messages read a local
    value to 1e-3, none of the refusals charged). Control: a finite update is the usual
    report."""

    def overflow(m, c):
        reply = make_train_app(0)(m, c)
        w = reply.content["arrays"]["weight"].numpy().copy()
        w[0, 0] = np.float32(np.inf)
        reply.content["arrays"]["weight"] = Array(w)
        return reply

    contexts = {1: context(1)}
    app = client_app(SignDSMod(**PARAMS), overflow)
    (_, metrics), (reply,) = run_round(SignDSStrategy(min_train_nodes=1, min_available_nodes=1,
                                                      **PARAMS), {1: app}, contexts, model(0), 1)
    assert not reply.has_error() and metrics["signds-accepted"] == 1
    assert reply.content.metric_records["metrics"][METRIC_EPSILON_TOTAL] == sum(
        signds.Client(45, **PARAMS).privacy)
    assert any("non-finite" in line for line in client_log)


def test_the_handshake_needs_signds_mod_itself_among_the_apps_mods():
    """rt6 B5: an app mod that calls SignDSMod for the handshake but skips it for train
    (a warm-up switch) cannot pass the handshake; SignDSMod(configure=...) is the way to
    choose parameters (or no SignDS) per run. Control: the configured mod answers, and
    configure returning None refuses."""
    inner = SignDSMod(**PARAMS)
    warm_up = {"done": False}

    def switch(msg, ctxt, call_next):
        if msg.metadata.message_type.startswith("query") or warm_up["done"]:
            return inner(msg, ctxt, call_next)
        return call_next(msg, ctxt)

    def apps(mod):
        app = PrivateClientApp(mods=[mod])
        app.train()(make_train_app(3))
        return {1: app}

    one = dict(min_train_nodes=1, min_available_nodes=1, **PARAMS)
    contexts = {1: context(1)}
    with pytest.raises(RoundFailed, match="0 of the 1 sampled nodes"):
        run_round(SignDSStrategy(**one), apps(switch), contexts, model(0), 1)
    configured = SignDSMod(configure=lambda ctxt: dict(PARAMS))
    (_, metrics), _ = run_round(SignDSStrategy(**one), apps(configured), contexts, model(0), 1)
    assert metrics["signds-accepted"] == 1
    with pytest.raises(RoundFailed, match="0 of the 1 sampled nodes"):
        run_round(SignDSStrategy(**one), apps(SignDSMod(configure=lambda ctxt: None)), contexts,
                  model(0), 1)
    with pytest.raises(TypeError, match="not both"):
        SignDSMod(configure=lambda ctxt: None, epsilon=1.0)
    # A front mod that sends the handshake to a second PrivateClientApp with SignDSMod.
    second = PrivateClientApp(mods=[SignDSMod(**PARAMS)])

    def front(msg, ctxt, call_next):
        if msg.metadata.message_type.startswith("query"):
            return second(msg, ctxt)
        return call_next(msg, ctxt)

    with pytest.raises(RoundFailed, match="0 of the 1 sampled nodes"):
        run_round(SignDSStrategy(**one), apps(front), contexts, model(0), 1)


def test_an_outer_mod_that_allows_a_category_keeps_the_inner_protection():
    """An outer SignDSMod that names evaluate in allow_unprotected must not stop an inner
    LaplaceEvalMod from protecting evaluate (the outer mod's call no longer marks the
    message as protected further out)."""
    app = PrivateClientApp(mods=[SignDSMod(allow_unprotected=("evaluate",), **PARAMS),
                                 LaplaceEvalMod(1.0)])
    app.evaluate()(lambda m, c: Message(RecordDict({"metrics": MetricRecord(
        {"num-examples": 3, "probabilities": [0.5, 0.5], "label-sum": SECRET})}), reply_to=m))
    grid = FakeGrid([1], {1: app}, {1: context(1)})
    (reply,) = grid.send_and_receive([evaluate_message()])
    assert set(reply.content.metric_records["metrics"]) == {
        "num-examples", "probabilities", "laplace-epsilon"}
    assert not leaked(grid.received, SECRET)


def test_a_private_client_app_survives_rays_pickling():
    """Flower's simulation ships the ClientApp to Ray actors with cloudpickle: the app, its
    wrapped mods and its handshake must survive the round trip (a closure over the
    ContextVar did not: every node failed the handshake in the simulation)."""
    cloudpickle = pytest.importorskip("cloudpickle")
    import pickle

    app = client_app(SignDSMod(configure=lambda ctxt: dict(PARAMS)), make_train_app(1))
    copy = pickle.loads(cloudpickle.dumps(app))
    (_, metrics), _ = run_round(SignDSStrategy(min_train_nodes=1, min_available_nodes=1, **PARAMS),
                                {1: copy}, {1: context(1)}, model(0), 1)
    assert metrics["signds-accepted"] == 1


def test_mod_keeps_error_feedback_on_the_client_only():
    """The error-feedback state lives in the node's Context.state (never in a reply), is
    updated once per charged report as fl_privacy.signds' encode with feedback would, and is
    absent with error_feedback=False."""
    from fl_privacy.flower.signds import FEEDBACK_RECORD

    for feedback in (True, False):
        strategy = SignDSStrategy(expected_clients=2, **PARAMS)
        contexts = {n: context(n) for n in (1, 2)}
        apps = {n: client_app(SignDSMod(error_feedback=feedback, **PARAMS), make_train_app(3))
                for n in contexts}
        arrays = model(1)
        states = []
        for server_round in (1, 2):
            (arrays, _), replies = run_round(strategy, apps, contexts, arrays, server_round)
            for reply in replies:
                assert not reply.has_error()
                assert len(reply.content.array_records) == 0
            record = contexts[1].state.get(FEEDBACK_RECORD)
            if not feedback:
                assert record is None
                continue
            state = record["state"].numpy()
            assert state.shape == (45,) and state.dtype == np.float32
            assert np.all(np.isfinite(state)) and np.any(state != 0)
            states.append(state.copy())
        if feedback:
            assert not np.array_equal(states[0], states[1])
    with pytest.raises(TypeError, match="error_feedback"):
        SignDSMod(error_feedback=1, **PARAMS)


def test_feedback_state_restarts_with_every_run():
    """Flower keeps Context.state across the runs of a series: the mod's state must not."""
    from fl_privacy.flower.signds import FEEDBACK_RECORD, FEEDBACK_RUN_RECORD, _read_feedback

    contexts = {n: context(n) for n in (1, 2)}
    ctxt = contexts[1]
    apps = {n: client_app(SignDSMod(**PARAMS), make_train_app(3)) for n in contexts}
    run_round(SignDSStrategy(expected_clients=2, **PARAMS), apps, contexts, model(1), 1)
    assert np.any(ctxt.state[FEEDBACK_RECORD]["state"].numpy() != 0)
    assert ctxt.state[FEEDBACK_RUN_RECORD]["run-id"] == "1"
    assert np.any(_read_feedback(ctxt, 45) != 0)
    next_run = Context(run_id=2, node_id=1, node_config=ctxt.node_config, state=ctxt.state,
                       run_config={})
    assert not np.any(_read_feedback(next_run, 45))
