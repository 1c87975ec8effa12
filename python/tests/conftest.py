"""Shared fixtures: one 2048-bit key pair per test session, seen from both libraries."""

import random

import pytest

phe = pytest.importorskip("phe")

from fl_privacy import paillier  # noqa: E402

#: Seed of every random value the tests draw (the keys themselves come from the OS).
SEED = 20261124


@pytest.fixture(scope="session")
def keypair():
    """A key pair made by fl_privacy."""
    return paillier.generate_paillier_keypair(n_length=2048)


@pytest.fixture(scope="session")
def phe_keypair(keypair):
    """The same key pair as phe objects (built from our n, p and q)."""
    public_key, private_key = keypair
    phe_public = phe.PaillierPublicKey(public_key.n)
    return phe_public, phe.PaillierPrivateKey(phe_public, private_key.p, private_key.q)


@pytest.fixture(scope="session")
def other_keypair():
    """A second, unrelated key pair."""
    return paillier.generate_paillier_keypair(n_length=2048)


@pytest.fixture
def rng():
    """Random values with a fixed seed (never flaky)."""
    return random.Random(SEED)


def random_floats(rng, count):
    """Floats over many magnitudes and both signs, plus the awkward ones."""
    values = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-300, -5e-324, 1.7976931348623157e308, 2.0**60]
    while len(values) < count:
        kind = rng.randrange(3)
        if kind == 0:
            values.append(rng.uniform(-1e3, 1e3))
        elif kind == 1:
            values.append(rng.choice([-1, 1]) * 10.0 ** rng.uniform(-30, 30))
        else:
            values.append(float(rng.randrange(-(2**53), 2**53)))
    return values


def random_ints(rng, count, max_int):
    """Ints from tiny to near max_int, both signs."""
    values = [0, 1, -1, max_int, -max_int, 2**64, -(2**63)]
    while len(values) < count:
        bits = rng.randrange(1, max_int.bit_length())
        values.append(rng.choice([-1, 1]) * rng.getrandbits(bits))
    return values
