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
    FLOWER_VERSION,
    LaplaceEvalMod,
    SignDSMod,
    SignDSStrategy,
    cluster_scores,
    clustering_metrics,
)
from fl_privacy.flower.signds import (  # noqa: E402
    METRIC_EPSILON,
    METRIC_EPSILON_TOTAL,
    METRIC_REPORT_BYTES,
    REPORT_KEY,
    REPORT_RECORD,
)

FIXTURE = Path(__file__).parent / "data" / "signds_rust_reports.json"


@pytest.fixture(autouse=True)
def task_identity():
    """Outside a Flower runtime, Message() needs the identity a ServerApp process is given."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def test_the_pinned_flower_is_installed():
    assert flwr.__version__ == FLOWER_VERSION


def test_readme_flower_blocks_run():
    """The README's Flower examples (```py blocks: test_readme.py runs the ```python ones,
    which must not need Flower)."""
    readme = Path(__file__).resolve().parents[1] / "README.md"
    blocks = re.findall(r"```py\n(.*?)```", readme.read_text(), re.S)
    assert blocks, "the README has Flower examples"
    for block in blocks:
        exec(compile(block, str(readme), "exec"), {})


class FakeGrid:
    """The part of Flower's Grid that strategies use to sample nodes."""

    def __init__(self, nodes):
        self.nodes = list(nodes)

    def get_node_ids(self):
        return self.nodes


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
    app = ClientApp(mods=[mod])
    app.train()(train)
    return app


def run_round(strategy, apps, contexts, arrays, server_round):
    grid = FakeGrid(sorted(contexts))
    messages = list(strategy.configure_train(server_round, arrays, ConfigRecord(), grid))
    replies = [apps[m.metadata.dst_node_id](m, contexts[m.metadata.dst_node_id]) for m in messages]
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
            assert set(m) == {"num-examples", METRIC_EPSILON, METRIC_EPSILON_TOTAL, METRIC_REPORT_BYTES}
            assert m[METRIC_EPSILON] == want
            assert math.isclose(m[METRIC_EPSILON_TOTAL], server_round * want, rel_tol=1e-12)
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
    # Asking to forward a metric the app does not return is an error, not a silent drop.
    apps = {n: client_app(SignDSMod(forward_metrics=["accuracy"], **PARAMS), make_train_app(1))
            for n in contexts}
    (_, metrics), replies = run_round(SignDSStrategy(**PARAMS), apps, contexts, model(1), 1)
    assert all(r.has_error() and "accuracy" in r.error.reason for r in replies)
    assert metrics["signds-accepted"] == 0 and metrics["signds-rejected"] == 2


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
        messages = list(strategy.configure_train(1, start, ConfigRecord(), FakeGrid([1, 2, 3])))
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
    # g = 3·N_exp·r_est (upstream's code rule).
    g = 3 * len(clients) * fx["broadcast"]["r_est"]
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


def test_client_refuses_a_server_with_another_law():
    contexts = {n: context(n) for n in (1, 2)}
    strategy = SignDSStrategy(top_k_fraction=0.25, epsilon=50.0)
    apps = {n: client_app(SignDSMod(**PARAMS), make_train_app(1)) for n in contexts}
    (arrays, metrics), replies = run_round(strategy, apps, contexts, model(1), 1)
    assert all(r.has_error() and "differs from this client's" in r.error.reason for r in replies)
    assert metrics["signds-accepted"] == 0 and metrics["signds-rejected"] == 2
    # Nothing accepted: the model is unchanged.
    np.testing.assert_array_equal(arrays["weight"].numpy(), model(1)["weight"].numpy())


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
    for r in range(1, 5):
        (arrays, metrics), replies = run_round(strategy, apps, contexts, arrays, r)
        accepted.append(metrics["signds-accepted"])
    assert accepted == [2, 2, 0, 0]
    assert "budget exhausted" in replies[0].error.reason


def test_mod_passes_other_messages_and_rejects_bad_replies():
    mod = SignDSMod(**PARAMS)
    msg = Message(RecordDict({"config": ConfigRecord({"x": 1})}), dst_node_id=1,
                  message_type=MessageType.QUERY)
    seen = []
    mod(msg, context(1), lambda m, c: seen.append(m) or m)
    assert seen == [msg]
    # A train message without the strategy's keys is refused.
    train = Message(RecordDict({"arrays": model(0), "config": ConfigRecord({"server-round": 1})}),
                    dst_node_id=1, message_type=MessageType.TRAIN)
    reply = mod(train, context(1), make_train_app(0))
    assert reply.has_error() and "SignDSStrategy" in reply.error.reason
    # A reply that changes the model's layout, or lacks num-examples, is refused.
    strategy = SignDSStrategy(**PARAMS)
    train = list(strategy.configure_train(1, model(0), ConfigRecord(), FakeGrid([1, 2])))[0]

    def wrong_shape(m, c):
        return Message(RecordDict({"arrays": model(0, shape=(4, 8)),
                                   "metrics": MetricRecord({"num-examples": 3})}), reply_to=m)

    def no_count(m, c):
        return Message(RecordDict({"arrays": model(0), "metrics": MetricRecord({"loss": 1.0})}),
                       reply_to=m)

    assert "same keys, shapes" in mod(train, context(1), wrong_shape).error.reason
    assert "num-examples" in mod(train, context(1), no_count).error.reason
    with pytest.raises(TypeError, match="unknown SignDS parameters"):
        SignDSMod(eps=1.0)
    with pytest.raises(ValueError, match="epsilon_budget"):
        SignDSMod(epsilon_budget=float("nan"))
    with pytest.raises(ValueError, match="expected_clients"):
        SignDSStrategy(expected_clients=0)


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


def test_laplace_mod_fails_closed():
    for bad in ([0.9, 0.9], [float("nan"), 0.1], [-0.5, 1.0]):
        reply = evaluate_app(bad)(evaluate_message(), context(1))
        assert reply.has_error() and "LaplaceEvalMod" in reply.error.reason
    app = ClientApp(mods=[LaplaceEvalMod(1.0)])
    app.evaluate()(lambda m, c: Message(RecordDict({"metrics": MetricRecord({"num-examples": 1})}),
                                        reply_to=m))
    reply = app(evaluate_message(), context(1))
    assert reply.has_error() and "probabilities" in reply.error.reason
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
