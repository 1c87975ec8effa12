"""fl_privacy.paillier against python-paillier (phe 1.5) itself: the same encodings, the
same ciphertexts for the same inputs, numbers and keys moving both ways (as ints, in the
JSON layout of phe's docs and in pheutil's JWK / {"v", "e"} files)."""

import json

import pytest
from conftest import random_floats, random_ints

import phe
from fl_privacy import paillier

click_testing = pytest.importorskip("click.testing")
from phe import command_line  # noqa: E402  (needs click)


def test_encodings_equal_phe_on_random_values(keypair, phe_keypair, rng):
    public_key, _ = keypair
    phe_public, _ = phe_keypair
    cases = [(x, None, None) for x in random_floats(rng, 300)]
    cases += [(x, None, None) for x in random_ints(rng, 100, public_key.max_int)]
    for _ in range(150):
        x = rng.choice([rng.uniform(-1e6, 1e6), rng.randrange(-(10**12), 10**12)])
        precision = rng.choice([None, 1e-8, 0.5, 3.0, 1e-20, 17.0, 256.0])
        max_exponent = rng.choice([None, -40, -3, 0, 2])
        cases.append((x, precision, max_exponent))
    for x, precision, max_exponent in cases:
        ours = paillier.EncodedNumber.encode(public_key, x, precision, max_exponent)
        theirs = phe.EncodedNumber.encode(phe_public, x, precision, max_exponent)
        assert (ours.encoding, ours.exponent) == (theirs.encoding, theirs.exponent), (
            x,
            precision,
            max_exponent,
        )
        decoded, expected = ours.decode(), theirs.decode()
        assert type(decoded) is type(expected) and decoded == expected
        lower = ours.exponent - 3
        assert ours.decrease_exponent_to(lower).encoding == (
            theirs.decrease_exponent_to(lower).encoding
        )


def test_numbers_move_both_ways_on_random_values(keypair, phe_keypair, rng):
    public_key, private_key = keypair
    phe_public, phe_private = phe_keypair
    values = random_floats(rng, 25) + random_ints(rng, 15, public_key.max_int)
    for x in values:
        ours = public_key.encrypt(x)
        as_phe = phe.EncryptedNumber(phe_public, ours.ciphertext(), ours.exponent)
        assert phe_private.decrypt(as_phe) == x
        theirs = phe_public.encrypt(x)
        as_ours = paillier.EncryptedNumber(public_key, theirs.ciphertext(), theirs.exponent)
        decrypted = private_key.decrypt(as_ours)
        assert decrypted == x and type(decrypted) is type(phe_private.decrypt(theirs))


def test_homomorphic_results_are_phe_ciphertexts_bit_for_bit(keypair, phe_keypair, rng):
    """Additions and scalar products are deterministic: from the same input ciphertexts
    both libraries must produce the same integers (before obfuscation)."""
    public_key, private_key = keypair
    phe_public, _ = phe_keypair
    for _ in range(12):
        a, b = rng.uniform(-100, 100), rng.randrange(-1000, 1000)
        k, f = rng.randrange(-(2**40), 2**40), rng.uniform(-10, 10)
        ours_a, ours_b = public_key.encrypt(a), public_key.encrypt(b)
        phe_a = phe.EncryptedNumber(phe_public, ours_a.ciphertext(), ours_a.exponent)
        phe_b = phe.EncryptedNumber(phe_public, ours_b.ciphertext(), ours_b.exponent)
        pairs = [
            (ours_a + ours_b, phe_a + phe_b),
            (ours_a - ours_b, phe_a - phe_b),
            (ours_a + f, phe_a + f),
            (ours_b + k, phe_b + k),
            (f - ours_a, f - phe_a),
            (ours_a * k, phe_a * k),
            (ours_a * f, phe_a * f),
            (ours_b / 4.0, phe_b / 4.0),
            (ours_a.decrease_exponent_to(ours_a.exponent - 2),
             phe_a.decrease_exponent_to(phe_a.exponent - 2)),
            (sum([ours_a, ours_b, ours_a]), sum([phe_a, phe_b, phe_a])),
        ]
        for ours, theirs in pairs:
            assert ours.exponent == theirs.exponent
            assert ours.ciphertext(be_secure=False) == theirs.ciphertext(be_secure=False)
        assert private_key.decrypt(ours_a * k) == pytest.approx(a * k, rel=1e-12)


def test_raw_encrypt_with_a_given_r_equals_phe(keypair, phe_keypair, rng):
    public_key, private_key = keypair
    phe_public, _ = phe_keypair
    for _ in range(5):
        m = rng.randrange(public_key.n)
        r = rng.randrange(2, public_key.n)
        assert public_key.raw_encrypt(m, r_value=r) == phe_public.raw_encrypt(m, r_value=r)
        assert private_key.raw_decrypt(public_key.raw_encrypt(m)) == m
    encoded = phe.EncodedNumber.encode(phe_public, -7.25)
    ours = paillier.EncodedNumber(public_key, encoded.encoding, encoded.exponent)
    # A given r_value leaves the number unobfuscated in both: ciphertext() would add r^n.
    assert (
        public_key.encrypt(ours, r_value=5).ciphertext(be_secure=False)
        == phe_public.encrypt(encoded, r_value=5).ciphertext(be_secure=False)
    )


def test_phe_docs_json_layout_both_ways(keypair, phe_keypair):
    """phe's serialisation docs: {"public_key": {"n": ...}, "values": [[str(c), e], ...]}."""
    public_key, private_key = keypair
    phe_public, phe_private = phe_keypair
    values = [1.5, -2, 3.25e-5]
    sent = json.dumps(
        {
            "public_key": {"g": phe_public.g, "n": phe_public.n},
            "values": [(str(x.ciphertext()), x.exponent) for x in map(phe_public.encrypt, values)],
        }
    )
    received = json.loads(sent)
    pk = paillier.PaillierPublicKey(n=int(received["public_key"]["n"]))
    assert pk == public_key
    numbers = [paillier.EncryptedNumber(pk, int(c), int(e)) for c, e in received["values"]]
    assert [private_key.decrypt(x) for x in numbers] == values
    back = json.dumps([(str(x.ciphertext()), x.exponent) for x in numbers])
    phe_numbers = [phe.EncryptedNumber(phe_public, int(c), e) for c, e in json.loads(back)]
    assert [phe_private.decrypt(x) for x in phe_numbers] == values


def _pheutil(args):
    result = click_testing.CliRunner().invoke(command_line.cli, args)
    assert result.exit_code == 0, result.output
    return result


def test_pheutil_keys_and_files_both_ways(tmp_path, keypair):
    # pheutil's key and ciphertext files are read here...
    private_file, public_file = tmp_path / "private.json", tmp_path / "public.json"
    _pheutil(["genpkey", "--keysize", "2048", str(private_file)])
    _pheutil(["extract", str(private_file), str(public_file)])
    private_key = paillier.PaillierPrivateKey.from_jwk(private_file.read_text())
    public_key = paillier.PaillierPublicKey.from_jwk(json.loads(public_file.read_text()))
    assert private_key.public_key == public_key
    for x in ["2.5", "-1234.0625", "1e-07"]:
        enc_file = tmp_path / "enc.json"
        _pheutil(["encrypt", str(public_file), "--output", str(enc_file), "--", x])
        number = paillier.EncryptedNumber.from_json(public_key, enc_file.read_text())
        assert number.exponent == -32
        assert private_key.decrypt(number) == float(x)
    # ...and ours are read by pheutil.
    our_public, our_private = keypair
    ours_private_file, ours_public_file = tmp_path / "ours.json", tmp_path / "ours_pub.json"
    ours_private_file.write_text(our_private.to_jwk(kid="test key"))
    ours_public_file.write_text(our_public.to_jwk())
    for x in [3.75, -0.001, 12345]:
        enc_file = tmp_path / "ours_enc.json"
        enc_file.write_text(our_public.encrypt(x).to_json())
        out = _pheutil(["decrypt", str(ours_private_file), str(enc_file)])
        assert float(out.stdout.strip().splitlines()[-1]) == x
    # pheutil adds our ciphertext files and multiplies under our public key.
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(our_public.encrypt(1.25).to_json())
    b.write_text(our_public.encrypt(-4.0).to_json())
    out = _pheutil(["addenc", str(ours_public_file), str(a), str(b)])
    total = paillier.EncryptedNumber.from_json(our_public, out.stdout.strip().splitlines()[-1])
    assert our_private.decrypt(total) == -2.75


def test_private_jwk_with_lambda_and_mu_is_accepted(keypair):
    public_key, private_key = keypair
    p, q = private_key.p, private_key.q
    lam = (p - 1) * (q - 1) // __import__("math").gcd(p - 1, q - 1)
    mu = pow(lam, -1, public_key.n)
    jwk = {
        "kty": "DAJ",
        "key_ops": ["decrypt"],
        "lambda": paillier.int_to_base64(lam),
        "mu": paillier.int_to_base64(mu),
        "pub": json.loads(public_key.to_jwk()),
    }
    assert paillier.PaillierPrivateKey.from_jwk(jwk) == private_key
    assert paillier.int_to_base64(public_key.n) == phe.util.int_to_base64(public_key.n)
    assert paillier.base64_to_int(phe.util.int_to_base64(lam)) == lam


def test_phe_private_key_imports_and_decrypts(phe_keypair):
    """A key generated by phe itself works here (its primes pass our validation)."""
    phe_public, phe_private = phe.generate_paillier_keypair(n_length=2048)
    public_key = paillier.PaillierPublicKey(phe_public.n)
    private_key = paillier.PaillierPrivateKey(public_key, phe_private.p, phe_private.q)
    theirs = phe_public.encrypt(-31.5)
    ours = paillier.EncryptedNumber(public_key, theirs.ciphertext(), theirs.exponent)
    assert private_key.decrypt(ours * 2) == -63.0
    assert (private_key.p, private_key.q) == (phe_private.p, phe_private.q)
    assert private_key.hp == phe_private.hp and private_key.hq == phe_private.hq
    assert private_key.p_inverse == phe_private.p_inverse
