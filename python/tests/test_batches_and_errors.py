"""Batch calls as a Python user expects them: Ctrl-C interrupts them (KeyboardInterrupt
within a second), progress callbacks, MemoryError instead of an abort, errors that name the
element; and arguments checked by name (TypeError for a wrong type, ValueError naming a
negative count) across the package."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from fl_privacy import audit, ldp, paillier, signds

#: The issue's bound: Ctrl-C takes effect within a second.
INTERRUPT_WITHIN_SECONDS = 1.0

INTERRUPTED = """
import os, signal, sys, threading, time
import numpy as np
from fl_privacy import paillier
# Python raises KeyboardInterrupt only where SIGINT is not ignored: a CI started as a
# background job of a non-interactive shell passes SIG_IGN down to this child.
signal.signal(signal.SIGINT, signal.default_int_handler)
n, p, q, who = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
public_key = paillier.PaillierPublicKey(n)
private_key = paillier.PaillierPrivateKey(public_key, p, q)
encrypt = public_key.encrypt_many if who == "parent" else private_key.encrypt_many
done = [0]
def progress(d, total):
    done[0] = d
    if d and who == "thread" and not started.is_set():
        started.set()  # under way: a thread of this process sends the signal in 1 s
        threading.Timer(1.0, lambda: (print("sent", time.monotonic(), flush=True),
                                      os.kill(os.getpid(), signal.SIGINT))).start()
started = threading.Event()
print("ready", flush=True)
try:
    encrypt(np.zeros(10**5), progress=progress)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), done[0], flush=True)
    sys.exit(0)
print("finished", flush=True)
sys.exit(1)
"""


def _readline(proc, deadline):
    """The child's next stdout line; fails (never hangs) past `deadline`."""
    line = []

    def read():
        line.append(proc.stdout.readline())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    if reader.is_alive():
        proc.kill()
        pytest.fail("the child gave no output in time")
    return line[0].strip()


@pytest.mark.parametrize("who", ["parent", "thread"])
def test_ctrl_c_interrupts_a_100000_value_encrypt_many_within_a_second(keypair, who):
    """SIGINT sent by another process (the parent) or by a thread of the process itself,
    1 s into a 10^5-value batch (minutes of work): KeyboardInterrupt within a second."""
    public_key, private_key = keypair
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(INTERRUPTED), str(public_key.n),
         str(private_key.p), str(private_key.q), who],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        assert _readline(proc, deadline) == "ready"
        if who == "parent":
            time.sleep(1.5)  # well into the batch
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
        else:
            word, sent = _readline(proc, deadline).split()
            assert word == "sent"
            sent = float(sent)
        word, caught, done = _readline(proc, deadline).split()
        assert word == "interrupted", (word, proc.stderr.read())
        latency = float(caught) - sent  # CLOCK_MONOTONIC: one clock for both processes
        assert 0 <= latency < INTERRUPT_WITHIN_SECONDS, latency
        assert 0 < int(done) < 10**5  # it was running, and did not run to the end
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()


MEMORY = """
import resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a 4 GiB address-space cap
from fl_privacy import ldp, paillier
public_key = paillier.PaillierPublicKey(int(sys.argv[1]))
values = np.zeros(10**8)
for name, call in [
    ("encrypt_many", lambda: public_key.encrypt_many(values)),
    ("exponential sample", lambda: ldp.ExponentialMechanism(1.0, 1.0).sample([0.0, 1.0], 10**12)),
]:
    try:
        call()
        print(name, "returned")
    except MemoryError as exc:
        print(name, "MemoryError:", exc)
print("alive")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS caps the address space on Linux")
def test_a_batch_too_large_for_memory_is_a_memory_error_not_an_abort(keypair):
    public_key, _ = keypair
    # Few threads, so that per-thread reservations (stacks, BLAS buffers) stay well under
    # the cap on any machine.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", RAYON_NUM_THREADS="2")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(MEMORY), str(public_key.n)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "alive", result.stdout
    for line in lines[:-1]:
        assert "MemoryError: not enough memory" in line, line


def test_progress_callbacks_report_every_chunk(keypair):
    public_key, private_key = keypair
    values = np.linspace(-1, 1, 50)
    for call in [lambda cb: public_key.encrypt_many(values, progress=cb),
                 lambda cb: private_key.encrypt_many(values, progress=cb)]:
        seen = []
        encrypted = call(lambda done, total: seen.append((done, total)))
        assert len(seen) >= 2 and seen[-1] == (50, 50)
        assert all(total == 50 for _, total in seen)
        assert [d for d, _ in seen] == sorted({d for d, _ in seen})  # strictly increasing
    for call in [lambda cb: private_key.decrypt_many(encrypted, progress=cb),
                 lambda cb: encrypted.sum(progress=cb),
                 lambda cb: encrypted.obfuscate(progress=cb)]:
        seen = []
        call(lambda done, total: seen.append((done, total)))
        assert seen and seen[-1] == (50, 50), seen
    assert np.array_equal(private_key.decrypt_many(encrypted), values)

    class Stop(Exception):
        pass

    def stop(done, total):
        raise Stop(done)

    with pytest.raises(Stop):
        public_key.encrypt_many(values, progress=stop)
    with pytest.raises(TypeError, match="progress"):
        public_key.encrypt_many(values, progress="yes")


def test_batch_errors_name_the_element(keypair):
    public_key, private_key = keypair
    values = np.zeros(300)
    values[217] = math.nan
    with pytest.raises(ValueError, match=r"values\[217\]: .*finite"):
        public_key.encrypt_many(values)
    big = public_key.encrypt_many([1.0, 2.0, 3.0]) + public_key.encrypt(0)
    numbers = big.to_numbers()
    numbers[2] = public_key.encrypt(public_key.max_int) + public_key.encrypt(public_key.max_int)
    with pytest.raises(OverflowError, match=r"encrypted\[2\]"):
        private_key.decrypt_many(numbers)
    ints = public_key.encrypt_many(np.array([1, 2, 3]))
    with pytest.raises(ValueError, match=r"encrypted\[1\]: .*not an integer"):
        private_key.decrypt_many(ints + np.array([0.0, 0.5, 0.0]), dtype=np.int64)


def test_arguments_are_checked_by_name():
    """A string for a number is a TypeError; a negative count names its argument (never
    "can't convert negative int to unsigned")."""
    cases = [
        (lambda: ldp.BinaryRandomizedResponse(epsilon="1"), TypeError, "epsilon"),
        (lambda: ldp.BinaryRandomizedResponse(True), TypeError, "epsilon"),
        (lambda: ldp.KaryRandomizedResponse("1", 3), TypeError, "epsilon"),
        (lambda: ldp.KaryRandomizedResponse(1.0, -3), ValueError, "k must be >= 0"),
        (lambda: ldp.KaryRandomizedResponse(1.0, 3.0), TypeError, "k must be an int"),
        (lambda: ldp.KaryRandomizedResponse(1.0, "3"), TypeError, "k must be an int"),
        (lambda: ldp.EmbeddingDP("2"), TypeError, "epsilon"),
        (lambda: ldp.EmbeddingDP(1.0).vector_claim(-1), ValueError, "dimension must be >= 0"),
        (lambda: ldp.LabelDP("2"), TypeError, "epsilon"),
        (lambda: ldp.LabelDP(1.0).claim((-5,)), ValueError, r"shape\[0\] must be >= 0"),
        (lambda: ldp.Laplace(1.0, -3), ValueError, "dimension must be >= 0"),
        (lambda: ldp.Laplace(1.0, 3, tolerance="0.1"), TypeError, "tolerance"),
        (lambda: ldp.Laplace(1.0, 3, calibration=1), TypeError, "calibration"),
        (lambda: ldp.ExponentialMechanism(1.0, "1"), TypeError, "sensitivity"),
        (lambda: ldp.ExponentialMechanism(1.0, 1.0).sample([0.0, 1.0], -5), ValueError,
         "size must be >= 0"),
        (lambda: ldp.SeededRng(-1), ValueError, "seed must be >= 0"),
        (lambda: ldp.SeededRng(2**64), ValueError, "seed must be <="),
        (lambda: ldp.SeededRng("7"), TypeError, "seed"),
        (lambda: ldp.BinaryRandomizedResponse(1.0).estimate_ones(-1, 10), ValueError,
         "reported_ones must be >= 0"),
        (lambda: signds.Client(-5), ValueError, "dimension must be >= 0"),
        (lambda: signds.Client(100, epsilon="1"), TypeError, "epsilon"),
        (lambda: signds.Server(100, expected_clients="2"), TypeError, "expected_clients"),
        (lambda: signds.Server(100, 2).begin_round().ingest(b"", -1), ValueError,
         "weight must be >= 0"),
        (lambda: paillier.generate_paillier_keypair(n_length="2048"), TypeError, "n_length"),
        (lambda: paillier.generate_paillier_keypair(n_length=2048.0), TypeError, "n_length"),
        (lambda: audit.audit(lambda x, n: [x] * n, "rr-binary", "1"), TypeError, "epsilon"),
        (lambda: audit.audit(lambda x, n: [x] * n, "rr-kary", 1.0, classes=-2), ValueError,
         "classes must be >= 0"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()
    # Numbers from numpy are numbers.
    assert ldp.KaryRandomizedResponse(np.float32(1.0), np.int64(3)).k == 3


def test_the_audit_shows_progress_and_stops_on_ctrl_c(capfd):
    rr = ldp.BinaryRandomizedResponse(1.0)
    rng = ldp.SeededRng(3)
    fn = lambda x, n: rr.randomize(np.full(n, x, dtype=np.int8), rng=rng).output  # noqa: E731
    result = audit.audit(fn, "rr-binary", 1.0, samples=20_000, progress=True)
    assert result.passed
    err = capfd.readouterr().err
    assert "samples" in err and "100.0%" in err, err
    audit.audit(fn, "rr-binary", 1.0, samples=20_000, progress=False)
    assert "samples" not in capfd.readouterr().err

    calls = [0]

    def interrupted(x, n):
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt  # what Ctrl-C raises inside the mechanism's call
        return fn(x, n)

    with pytest.raises(KeyboardInterrupt):
        audit.audit(interrupted, "rr-binary", 1.0, samples=20_000, batch=1000)
    assert calls[0] == 3
