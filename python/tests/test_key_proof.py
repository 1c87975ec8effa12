"""Key-correctness proofs from Python: ``PaillierPrivateKey.prove_correct(context)`` and
``PaillierPublicKey.verify_key_proof(proof, context)`` (fl-paillier's KeyCorrectnessProof).

Accepted: an honest proof for its key and context. Rejected with ``InvalidKeyProofError``
(a ValueError naming the failed check): another context, another key, a flipped bit in any
root or in the header, truncated / extended / empty encodings. ``TypeError`` for arguments
that are not bytes. The negative control is a modulus with gcd(n, φ(n)) != 1 that
``PaillierPublicKey(n)`` accepts (n = p·q₁·q₂ with q₁q₂ | p − 1, the one of
crates/fl-paillier/tests/malformed_key_rerandomisation.rs): the best proof its owner can
make -- every challenge that has an n-th root gets it -- is rejected, while the same prover
run on a well-formed key reproduces ``prove_correct``'s bytes exactly (so the challenges it
answers are the verifier's)."""

import hashlib
import math
import random

import pytest

from fl_privacy import paillier
from fl_privacy.phe.util import is_prime

CONTEXT = b"fl_privacy tests: session 1, host A, guest B"

#: The proof's parameters (fl-paillier's KEY_PROOF_ROUNDS and encoding version).
ROUNDS = 8
HEADER = 4

#: The challenge derivation's domain tag (docs/proofs/fl-paillier/key-correctness-proof.md).
TAG = b"fl-paillier/key-correctness-proof/v1: n-th roots, gcd(n, phi(n)) = 1"

#: The 2007-bit prime p = 2·q₁·q₂·t + 1 of malformed_key_rerandomisation.rs.
P_HEX = (
    "53e19b203f8338776b23ceae9fe3c37a43d19a58d4d5f5b0477dad653d5284a7b2e7a0affcd96f27cee49b58"
    "aec4d03ca73cddccd4275a8d20317c1b330bdbe04eba4c96fe1d9cc983eaded84afdc93daab2d5d48b355572"
    "fad4fcc6f43ca138d95a40c1c709b1ca012dc2990b428d7bc3d2e7aebef93f5b5d0b8ea197342af52770ef83"
    "6b1aba18ceb02f54e4166ec27cc62ece20c64ba53746c289fe9cd87f8fa608b770893fdb9cf15a440b28029a"
    "c1f61238225c379612ad6947d4cbb2584f0be9dd3339c100e499abc05226ecaf6315383f5ef83093596241d1"
    "d5f40f70f91fc326bb56a24d38654cdac95b45b6001ab4475dc21ec43f09f3"
)


def width(n):
    return (n.bit_length() + 7) // 8


def roots_of(proof, n):
    """The roots of an encoded proof for the modulus n."""
    w = width(n)
    assert len(proof) == HEADER + ROUNDS * w
    return [int.from_bytes(proof[HEADER + i * w:HEADER + (i + 1) * w], "big") for i in range(ROUNDS)]


def encode(roots, n):
    """The documented encoding: version 1, 8 roots, the width (2 bytes BE), the roots."""
    w = width(n)
    return bytes([1, len(roots)]) + w.to_bytes(2, "big") + b"".join(r.to_bytes(w, "big") for r in roots)


def challenges(n, context):
    """The verifier's challenges ρ₀ … ρ₇, derived as the proof's documentation says
    (SHA-256 counter mode over the length-prefixed tag, n and context; rejection sampling)."""
    nb = n.to_bytes(width(n), "big")
    prefix = b"".join(len(f).to_bytes(8, "big") + f for f in (TAG, nb, context))
    length, excess = width(n), 8 * width(n) - n.bit_length()
    out = []
    for i in range(ROUNDS):
        for attempt in range(256):
            stream, block = b"", 0
            while len(stream) < length:
                counters = i.to_bytes(4, "big") + attempt.to_bytes(4, "big") + block.to_bytes(4, "big")
                stream += hashlib.sha256(prefix + counters).digest()
                block += 1
            candidate = bytearray(stream[:length])
            candidate[0] &= 0xFF >> excess
            c = int.from_bytes(candidate, "big")
            if 0 < c < n and math.gcd(c, n) == 1:
                out.append(c)
                break
        else:
            raise AssertionError("no challenge in 256 attempts")
    return out


def next_prime(x):
    """The smallest prime >= x."""
    while not is_prime(x):
        x += 1
    return x


def crt(residues, moduli):
    x, m = 0, 1
    for r, q in zip(residues, moduli):
        x += m * ((r - x) * pow(m, -1, q) % q)
        m *= q
    return x % m


@pytest.fixture(scope="module")
def proof(keypair):
    return keypair[1].prove_correct(CONTEXT)


def rejected(public_key, proof_bytes, context=CONTEXT):
    """The message of the InvalidKeyProofError that verify_key_proof raises."""
    with pytest.raises(paillier.InvalidKeyProofError) as info:
        public_key.verify_key_proof(proof_bytes, context)
    assert isinstance(info.value, ValueError)
    return str(info.value)


# --- accepted ---------------------------------------------------------------------------


def test_an_honest_proof_verifies_for_its_key_and_context(keypair, proof):
    public_key, private_key = keypair
    assert isinstance(proof, bytes)
    n = public_key.n
    assert proof[:HEADER] == bytes([1, ROUNDS]) + width(n).to_bytes(2, "big")
    assert len(proof) == HEADER + ROUNDS * width(n)
    assert public_key.verify_key_proof(proof, CONTEXT) is None
    # The guest usually holds only n (or the JWK): the same proof verifies there.
    assert paillier.PaillierPublicKey(n).verify_key_proof(proof, CONTEXT) is None
    assert paillier.PaillierPublicKey.from_jwk(public_key.to_jwk()).verify_key_proof(proof, CONTEXT) is None
    # Deterministic for a key and context (the n-th roots are unique), bytes-like accepted.
    assert private_key.prove_correct(bytearray(CONTEXT)) == proof
    public_key.verify_key_proof(bytearray(proof), memoryview(CONTEXT))
    # The empty context is a context like any other.
    public_key.verify_key_proof(private_key.prove_correct(b""), b"")


def test_the_phe_layout_has_the_methods(keypair, proof):
    import fl_privacy.phe as phe

    public_key, private_key = keypair
    assert isinstance(public_key, phe.PaillierPublicKey)
    phe.PaillierPublicKey(public_key.n).verify_key_proof(proof, CONTEXT)


# --- rejected: context, key ----------------------------------------------------------------


def test_another_context_is_rejected(keypair, proof):
    public_key, _ = keypair
    for context in (b"", CONTEXT + b"!", CONTEXT[:-1], b"fl_privacy tests: session 2, host A, guest B"):
        assert "n-th power is not its challenge" in rejected(public_key, proof, context)


def expected_rejection(roots, n):
    """The check a same-width proof made for another key fails under the modulus n. The
    verifier checks root by root, range before n-th power, and the first root's n-th power
    is its challenge under n only with negligible probability: so the first root decides --
    outside [1, n) (about half the time when the other modulus is the larger) or not an
    n-th root."""
    if not 1 <= roots[0] < n:
        return "a root is outside [1, n)"
    return "n-th power is not its challenge"


def test_a_proof_for_another_key_is_rejected(keypair, other_keypair, proof):
    public_key, _ = keypair
    other_public, other_private = other_keypair
    assert width(public_key.n) == width(other_public.n)
    other_proof = other_private.prove_correct(CONTEXT)
    # Which check fails depends on which of the two random moduli is the larger; the
    # expected message is computed from the roots, so both orders are covered exactly.
    expected = expected_rejection(roots_of(other_proof, other_public.n), public_key.n)
    assert expected in rejected(public_key, other_proof)
    expected = expected_rejection(roots_of(proof, public_key.n), other_public.n)
    assert expected in rejected(other_public, proof)
    # Another key of another size: the root width is checked first.
    _, big_private = paillier.generate_paillier_keypair(n_length=3072)
    assert "another size" in rejected(public_key, big_private.prove_correct(CONTEXT))


# --- rejected: tampered or malformed bytes ----------------------------------------------------


def test_a_flipped_bit_in_any_root_is_rejected(keypair, proof):
    public_key, _ = keypair
    w = width(public_key.n)
    for i in range(ROUNDS):
        start = HEADER + i * w
        # The root's lowest bit, a bit in its middle, and its highest bit.
        for position, mask in ((start + w - 1, 0x01), (start + w // 2, 0x10), (start, 0x80)):
            tampered = bytearray(proof)
            tampered[position] ^= mask
            message = rejected(public_key, bytes(tampered))
            assert (
                "n-th power is not its challenge" in message
                or "outside [1, n)" in message
                or "a root is 0" in message
            ), message


def test_a_flipped_bit_in_the_header_is_rejected(keypair, proof):
    public_key, _ = keypair
    for position in range(HEADER):
        for bit in range(8):
            tampered = bytearray(proof)
            tampered[position] ^= 1 << bit
            rejected(public_key, bytes(tampered))


def test_truncated_extended_and_empty_encodings_are_value_errors(keypair, proof):
    public_key, _ = keypair
    cases = {
        "empty": b"",
        "header only": proof[:HEADER],
        "shorter than the header": proof[:3],
        "one byte short": proof[:-1],
        "one root short": proof[: -width(public_key.n)],
        "one byte extra": proof + b"\x00",
        "one root extra": proof + proof[-width(public_key.n):],
    }
    for name, data in cases.items():
        with pytest.raises(ValueError, match="invalid key-correctness proof"):
            public_key.verify_key_proof(data, CONTEXT)
        assert "invalid key-correctness proof" in rejected(public_key, data), name
    assert "header" in rejected(public_key, b"")
    assert "length" in rejected(public_key, proof[:-1])


def test_roots_outside_the_range_are_rejected(keypair, proof):
    public_key, _ = keypair
    n = public_key.n
    roots = roots_of(proof, n)
    for bad in (0, n, n + 1, 2 ** (8 * width(n)) - 1):
        forged = list(roots)
        forged[3] = bad
        message = rejected(public_key, encode(forged, n))
        assert "a root is 0" in message or "outside [1, n)" in message, message


# --- wrong types ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["session 1", 17, None, [1, 2], 1.5])
def test_arguments_that_are_not_bytes_are_type_errors(keypair, proof, value):
    public_key, private_key = keypair
    with pytest.raises(TypeError, match="context must be bytes"):
        private_key.prove_correct(value)
    with pytest.raises(TypeError, match="proof must be bytes"):
        public_key.verify_key_proof(value, CONTEXT)
    with pytest.raises(TypeError, match="context must be bytes"):
        public_key.verify_key_proof(proof, value)


def test_the_bytes_checked_are_the_buffer_not_a_bytes_hook(keypair, proof):
    # A bytearray subclass whose __bytes__ returns the valid proof while its contents are
    # four zero bytes: the contents are what is checked (and rejected).
    class Disguised(bytearray):
        def __bytes__(self):
            return proof

    rejected(keypair[0], Disguised(4))
    # The control: the same subclass holding the proof itself verifies.
    assert keypair[0].verify_key_proof(Disguised(proof), CONTEXT) is None


def test_a_released_memoryview_is_a_type_error(keypair, proof):
    view = memoryview(bytearray(proof))
    view.release()
    with pytest.raises(TypeError, match="proof: .*released"):
        keypair[0].verify_key_proof(view, CONTEXT)


def test_the_error_class():
    assert issubclass(paillier.InvalidKeyProofError, ValueError)
    assert "InvalidKeyProofError" in paillier.__all__


# --- the negative control: a modulus with gcd(n, φ(n)) != 1 -----------------------------------


@pytest.fixture(scope="module")
def malformed_modulus():
    """(p, q₁, q₂, n): q₁q₂ | p − 1, so q₁ and q₂ divide both n and φ(n)."""
    q1, q2 = next_prime(2**20 + 7), next_prime(2**21 + 3)
    p = int(P_HEX, 16)
    assert is_prime(p) and (p - 1) % (q1 * q2) == 0
    n = p * q1 * q2
    assert n.bit_length() == 2048
    assert math.gcd(n, (p - 1) * (q1 - 1) * (q2 - 1)) == q1 * q2
    return p, q1, q2, n


def best_proof(p, q1, q2, n, rhos):
    """The best roots the owner of n = p·q₁·q₂ can send, and how many challenges had one.

    Mod q₁ and q₂, x ↦ xⁿ is a bijection: the root is ρ^(n⁻¹ mod (q − 1)). Mod p, xⁿ = x^g
    on Z*_p's character group up to a bijection, with g = q₁q₂, p − 1 = g·t, gcd(g, t) = 1:
    ρ has a root iff ρ^t = 1, then ρ^(g⁻¹ mod t) is one; otherwise the root of ρ's projection
    onto the g-th residues is the closest there is."""
    g = q1 * q2
    t = (p - 1) // g
    assert math.gcd(g, t) == 1
    g_inv = pow(g, -1, t)
    roots, residues = [], 0
    for rho in rhos:
        rp = rho % p
        residues += pow(rp, t, p) == 1
        root_p = pow(pow(rp, g * g_inv, p), g_inv, p)
        root_q = [pow(rho % q, pow(n % (q - 1), -1, q - 1), q) for q in (q1, q2)]
        roots.append(crt([root_p] + root_q, [p, q1, q2]))
    return roots, residues


def test_control_the_python_challenges_are_the_verifier_s(keypair, proof):
    """The challenges above are the verifier's: with them, the n-th roots computed here
    from p and q are exactly the roots of prove_correct's proof."""
    public_key, private_key = keypair
    n, p, q = public_key.n, private_key.p, private_key.q
    d = pow(n, -1, (p - 1) * (q - 1))
    roots = [pow(rho, d, n) for rho in challenges(n, CONTEXT)]
    assert encode(roots, n) == proof


def test_control_the_best_prover_is_a_real_prover(malformed_modulus):
    """For challenges that do have an n-th root (here: made as xⁿ), the cheating prover's
    roots are exact, so its failure below is the modulus's, not the prover's."""
    p, q1, q2, n = malformed_modulus
    rng = random.Random(20261126)
    rhos = [pow(rng.randrange(2, n), n, n) for _ in range(ROUNDS)]
    roots, residues = best_proof(p, q1, q2, n, rhos)
    assert residues == ROUNDS
    assert all(pow(s, n, n) == rho for s, rho in zip(roots, rhos))


def test_a_modulus_with_gcd_n_phi_not_1_is_accepted_as_a_key_but_its_proof_is_rejected(
    malformed_modulus,
):
    p, q1, q2, n = malformed_modulus
    public_key = paillier.PaillierPublicKey(n)  # passes every check of the import
    # The honest prover cannot be used: its key needs two primes of equal size.
    with pytest.raises(ValueError):
        paillier.PaillierPrivateKey(public_key, p, q1 * q2)
    for session in range(4):
        context = CONTEXT + b" #%d" % session
        roots, residues = best_proof(p, q1, q2, n, challenges(n, context))
        # Each challenge has a root with probability 1/(q₁q₂) ~ 2^-41: none of these 32.
        assert residues == 0
        message = rejected(public_key, encode(roots, n), context)
        assert "n-th power is not its challenge" in message
