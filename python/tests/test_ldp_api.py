"""fl_privacy.ldp and fl_privacy.signds: shapes, dtypes, realised ε, reproducibility and
every error case. (The laws themselves are audited in test_audit.py.)"""

import math

import numpy as np
import pytest

from fl_privacy import ldp, signds


def test_releases_keep_shape_and_dtype_and_report_the_realised_epsilon():
    rng = ldp.SeededRng(1)
    bits = np.zeros((3, 5), dtype=bool)
    for dtype in [bool, np.int8, np.int64, np.float32]:
        release = ldp.BinaryRandomizedResponse(1.0).randomize(bits.astype(dtype), rng=rng)
        assert release.output.shape == (3, 5) and release.output.dtype == dtype
        assert set(np.unique(release.output)) <= {0, 1}
        assert 0.999 < release.epsilon <= 1.0 and release.claim.requested_epsilon == 1.0
    classes = np.arange(12).reshape(3, 4) % 5
    release = ldp.KaryRandomizedResponse(2.0, 5).randomize(classes, rng=rng)
    assert release.output.shape == (3, 4) and release.output.min() >= 0 and release.output.max() < 5
    assert release.epsilon <= 2.0
    one_hot = np.eye(4, dtype=np.int32)[[0, 3, 1]]
    out = ldp.KaryRandomizedResponse(1.0, 4).randomize_one_hot(one_hot, rng=rng).output
    assert out.dtype == np.int32 and (out.sum(axis=1) == 1).all()
    embedding = ldp.EmbeddingDP(3.0)
    release = embedding.privatize(np.ones((10, 7), dtype=np.float32), rng=rng)
    assert release.output.dtype == np.uint8 and release.output.shape == (10, 7)
    assert release.epsilon <= 7 * 1.5 and release.epsilon == embedding.vector_claim(7).epsilon
    assert embedding.coordinate_claim.epsilon <= 1.5
    quantised = ldp.EmbeddingDP(None).privatize(np.array([0.5, -1.0, 0.0, -0.0, 3.0]))
    assert list(quantised.output) == [1, 0, 0, 0, 1] and math.isinf(quantised.epsilon)
    for labels in [np.array([0, 1, 1]), np.array([[0], [1]]), np.eye(3)[[2, 0]]]:
        release = ldp.LabelDP(1.0).privatize(labels, rng=rng)
        assert release.output.shape == labels.shape and release.output.dtype == labels.dtype
        assert release.epsilon <= 1.0
    laplace = ldp.Laplace(2.0, 3)
    release = laplace.privatize(np.array([[0.2, 0.3, 0.5]] * 4), rng=rng)
    assert release.output.shape == (4, 3) and release.epsilon <= 2.0 and release.claim.delta == 0
    assert np.all(np.round(release.output / laplace.spacing) * laplace.spacing == release.output)
    compatible = ldp.Laplace(2.0, 3, calibration="mindspore")
    assert compatible.claim.epsilon > 2.0  # upstream's scale realises 2ε, and says so
    bounded = ldp.Laplace(2.0, 3, timing="bounded")
    assert 0 < bounded.claim.delta < 1e-20
    em = ldp.ExponentialMechanism(1.0, 1.0)
    assert em.select([0.0, 1.0, 2.0], rng=rng).output in (0, 1, 2)
    rows = em.select(np.zeros((5, 4)), rng=rng).output
    assert rows.shape == (5,) and rows.max() < 4
    assert em.sample([0.0, 1.0], 100, rng=rng).output.shape == (100,)
    assert np.isclose(em.probabilities([0.0, 2.0]).sum(), 1.0)


def test_seeded_rng_reproduces_and_os_randomness_does_not():
    x = np.zeros(100_000, dtype=bool)
    rr = ldp.BinaryRandomizedResponse(0.5)
    a, b = ldp.SeededRng(7), ldp.SeededRng(7)
    first = rr.randomize(x, rng=a).output
    assert np.array_equal(first, rr.randomize(x, rng=b).output)
    assert not np.array_equal(first, rr.randomize(x, rng=a).output)  # the stream advances
    assert not np.array_equal(rr.randomize(x).output, rr.randomize(x).output)
    # Chunks are fixed-size, so a seeded result does not depend on the thread count; and
    # two chunks do not repeat each other's randomness.
    out = rr.randomize(np.zeros(1 << 17, dtype=bool), rng=ldp.SeededRng(3)).output
    assert not np.array_equal(out[: 1 << 16], out[1 << 16 :])


def test_ldp_errors_are_value_errors_naming_the_problem():
    for eps in [math.nan, math.inf, -1.0]:
        with pytest.raises(ValueError, match="epsilon"):
            ldp.BinaryRandomizedResponse(eps)
    with pytest.raises(TypeError):
        ldp.BinaryRandomizedResponse("one")
    with pytest.raises(ValueError, match="0 or 1"):
        ldp.BinaryRandomizedResponse(1.0).randomize(np.array([0, 1, 2]))
    with pytest.raises(TypeError):
        ldp.BinaryRandomizedResponse(1.0).randomize(np.array(["a"]))
    with pytest.raises(ValueError, match="classes\\[2\\]"):
        ldp.KaryRandomizedResponse(1.0, 3).randomize(np.array([0, 1, 3]))
    with pytest.raises(ValueError, match="classes\\[0\\]"):
        ldp.KaryRandomizedResponse(1.0, 3).randomize(np.array([-1]))
    with pytest.raises(TypeError):
        ldp.KaryRandomizedResponse(1.0, 3).randomize(np.array([0.5]))
    with pytest.raises(ValueError):
        ldp.KaryRandomizedResponse(1.0, 1)
    with pytest.raises(ValueError, match="one-hot row 1"):
        ldp.KaryRandomizedResponse(1.0, 3).randomize_one_hot(np.array([[1, 0, 0], [1, 1, 0]]))
    with pytest.raises(ValueError):
        ldp.KaryRandomizedResponse(1.0, 3).randomize_one_hot(np.ones((2, 4)))
    with pytest.raises(ValueError, match="NaN|finite"):
        ldp.EmbeddingDP(1.0).privatize(np.array([0.0, np.nan]))
    # A NaN far into a large array is named by its index in the whole array.
    big = np.zeros(200_000)
    big[150_001] = np.nan
    with pytest.raises(ValueError, match="150001"):
        ldp.EmbeddingDP(1.0).privatize(big)
    with pytest.raises(ValueError, match="one-hot row 1"):
        ldp.LabelDP(1.0).privatize(np.array([[1, 0, 0], [0, 0, 0]]))
    with pytest.raises(ValueError, match="0 or 1"):
        ldp.LabelDP(1.0).privatize(np.array([0, 1, 2]))
    with pytest.raises(ValueError):
        ldp.LabelDP(1.0).privatize(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="row\\) 1"):
        ldp.Laplace(1.0, 3).privatize(np.array([[0.2, 0.3, 0.5], [0.2, 0.3, np.nan]]))
    with pytest.raises(ValueError):
        ldp.Laplace(1.0, 3).privatize(np.array([0.2, 0.8]))
    with pytest.raises(ValueError):
        ldp.Laplace(1.0, 3).privatize(np.array([0.9, 0.9, 0.9]))
    with pytest.raises(ValueError, match="calibration"):
        ldp.Laplace(1.0, 3, calibration="loose")
    with pytest.raises(ValueError):
        ldp.Laplace(0.0, 3)
    with pytest.raises(ValueError, match="form"):
        ldp.ExponentialMechanism(1.0, 1.0, form="other")
    with pytest.raises(ValueError):
        ldp.ExponentialMechanism(1.0, 1.0).select([0.0, np.nan])
    with pytest.raises(ValueError, match="row\\) 1"):
        ldp.ExponentialMechanism(1.0, 1.0).select(np.array([[0.0, 1.0], [np.inf, 0.0]]))
    with pytest.raises(TypeError):
        ldp.BinaryRandomizedResponse(1.0).randomize([True], rng=42)


def test_signds_client_and_server_aggregate_as_documented():
    d = 500
    params = dict(top_k_fraction=0.1, epsilon=10.0)
    client = signds.Client(d, **params)
    server = signds.Server(d, expected_clients=3, **params)
    dimension, top_k, h, threshold = client.law
    assert (dimension, top_k) == (d, 50) and 0 < h <= 100 and threshold <= h
    round_ = server.begin_round()
    rng = ldp.SeededRng(11)
    updates = np.random.default_rng(5).normal(size=(3, d)).astype(np.float32)
    reports, weights_n = [], [10, 20, 30]
    for update, n in zip(updates, weights_n):
        report = client.encode(update, server.broadcast(), rng=rng)
        assert report.epsilon == report.selection_epsilon + report.magrr_epsilon <= 15.0
        assert report.sign in (-1, 1) and len(report.indices) == h
        assert np.all(np.diff(report.indices) > 0)
        decoded = signds.decode_report(report.data)
        assert decoded[0] == d and np.array_equal(decoded[1], report.indices)
        round_.ingest(report, weight=n)
        reports.append(report)
    assert round_.accepted == 3 and round_.total_weight == 60
    step = server.step
    weights = np.zeros(d, dtype=np.float32)
    summary = server.finish_round(round_, weights)
    expected = np.zeros(d)
    for report, n in zip(reports, weights_n):
        expected[report.indices] += n * report.sign
    expected *= step / sum(weights_n)
    assert np.allclose(weights, expected, rtol=1e-6, atol=0)
    assert summary.accepted == 3 and summary.step == step
    assert summary.ones + summary.zeros == 3 and summary.next.phase in ("growth", "shrink")


def test_signds_errors():
    client = signds.Client(100, top_k_fraction=0.2)
    with pytest.raises(ValueError, match="top_k|sign_k|k"):
        signds.Client(100, top_k_fraction=0.5)
    with pytest.raises(TypeError, match="unknown"):
        signds.Client(100, sign_k=0.1)
    with pytest.raises(ValueError):
        client.encode(np.zeros(99, dtype=np.float32))
    with pytest.raises(ValueError):
        client.encode(np.full(100, np.nan, dtype=np.float32))
    with pytest.raises(ValueError, match="phase"):
        client.encode(np.zeros(100, dtype=np.float32), signds.Broadcast(1e-5, "sideways"))
    server = signds.Server(100, expected_clients=1, top_k_fraction=0.2)
    round_ = server.begin_round()
    with pytest.raises(ValueError):
        round_.ingest(b"\x01\x00\x00", 1)
    other = signds.Client(101, top_k_fraction=0.2).encode(np.ones(101, dtype=np.float32))
    with pytest.raises(ValueError):
        round_.ingest(other, 1)
    with pytest.raises(ValueError):
        round_.ingest(client.encode(np.ones(100, dtype=np.float32)), 0)
    assert round_.accepted == 0
    with pytest.raises(TypeError):
        server.finish_round(round_, np.zeros(100))
    with pytest.raises(ValueError):
        server.finish_round(round_, np.zeros(99, dtype=np.float32))
    server.finish_round(round_, np.zeros(100, dtype=np.float32))
    with pytest.raises(ValueError, match="finished"):
        server.finish_round(round_, np.zeros(100, dtype=np.float32))
    with pytest.raises(ValueError):
        signds.Server(100, expected_clients=0)
    with pytest.raises(ValueError):
        signds.decode_report(b"")


def test_signds_error_feedback_is_encode_on_update_plus_state():
    d = 60
    client = signds.Client(d, top_k_fraction=0.2, epsilon=5.0)
    update = np.random.default_rng(1).normal(scale=0.01, size=d).astype(np.float32)
    state = np.random.default_rng(2).normal(scale=0.01, size=d).astype(np.float32)
    broadcast = signds.Broadcast(0.004, "growth")
    before = state.copy()
    fed = client.encode(update, broadcast, rng=ldp.SeededRng(5), feedback=state)
    plain = client.encode(update + before, broadcast, rng=ldp.SeededRng(5))
    assert fed.data == plain.data
    want = update + before
    want[fed.indices] -= np.float32(0.004 * fed.sign)
    assert np.array_equal(state, want)
    # Errors leave the state as it was.
    kept = state.copy()
    bad = update.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError):
        client.encode(bad, broadcast, feedback=state)
    with pytest.raises(ValueError, match="dimension"):
        client.encode(update, broadcast, feedback=np.zeros(d + 1, np.float32))
    with pytest.raises(TypeError, match="float32"):
        client.encode(update, broadcast, feedback=np.zeros(d))
    assert np.array_equal(state, kept)
    # The server's rules.
    assert signds.Server(d, 3.0, top_k_fraction=0.2, epsilon=5.0).step_rule == "mean"
    assert signds.Server(d, 3.0, "code", top_k_fraction=0.2, epsilon=5.0).step_rule == "code"
    server = signds.Server(d, 3.0, server_learning_rate=2.0, top_k_fraction=0.2, epsilon=5.0)
    assert server.step == pytest.approx(2.0 * server.broadcast().r_est)
    with pytest.raises(ValueError, match="server learning rate"):
        signds.Server(d, 3.0, server_learning_rate=-1.0, top_k_fraction=0.2, epsilon=5.0)
    with pytest.raises(ValueError, match="step_rule"):
        signds.Server(d, 3.0, "sum", top_k_fraction=0.2, epsilon=5.0)
