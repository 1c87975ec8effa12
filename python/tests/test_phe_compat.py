"""fl_privacy.phe, phe's package layout, against python-paillier (phe 1.5) itself: other
encoding bases, raw_encrypt's reduction mod n, phe.util, pheutil's command line, the
`install_as_phe` alias, and legacy (< 2048-bit) keys imported for decryption only."""

import json
import math
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from conftest import random_floats, random_ints

import phe
import phe.util
from fl_privacy import paillier
from fl_privacy import phe as fphe

click_testing = pytest.importorskip("click.testing")


def _bases(module):
    """EncodedNumber subclasses of `module` in the bases phe's tests use (and 16 itself,
    with a LOG2_BASE that sends ours down the generic path)."""

    class Base64(module.EncodedNumber):
        BASE = 64
        LOG2_BASE = math.log(64, 2)

    class Base2(module.EncodedNumber):
        BASE = 2
        LOG2_BASE = math.log(2, 2)

    class Base13(module.EncodedNumber):
        BASE = 13
        LOG2_BASE = math.log(13, 2)

    class Base16Generic(module.EncodedNumber):
        BASE = 16
        LOG2_BASE = 4.000000000000001  # not phe's 4.0: our generic path, phe's rules

    return [Base64, Base2, Base13, Base16Generic]


def test_other_bases_encode_decode_and_decrease_as_phe(keypair, phe_keypair, rng):
    public_key, _ = keypair
    phe_public, _ = phe_keypair
    values = random_floats(rng, 120) + random_ints(rng, 40, 2**200)
    for ours_cls, phe_cls in zip(_bases(paillier), _bases(phe.encoding)):
        for x in values:
            precision = rng.choice([None, None, 1e-8, 0.5, 3.0, 1e-20, 17.0])
            max_exponent = rng.choice([None, None, -40, -3, 0, 2])
            try:
                theirs = phe_cls.encode(phe_public, x, precision, max_exponent)
            except ValueError:  # out of range in this base: ours must refuse too
                with pytest.raises(ValueError):
                    ours_cls.encode(public_key, x, precision, max_exponent)
                continue
            ours = ours_cls.encode(public_key, x, precision, max_exponent)
            case = (ours_cls.__name__, x, precision, max_exponent)
            assert (ours.encoding, ours.exponent) == (theirs.encoding, theirs.exponent), case
            decoded, expected = ours.decode(), theirs.decode()
            assert type(decoded) is type(expected) and decoded == expected, case
            lower = ours.exponent - 3
            assert ours.decrease_exponent_to(lower).encoding == (
                theirs.decrease_exponent_to(lower).encoding
            ), case
            assert type(ours.decrease_exponent_to(lower)) is ours_cls


def test_the_issues_wrong_base_cases_now_give_the_right_value(keypair, phe_keypair):
    """15.1 in base 64 read back as 2.25e-7, and a phe peer's base-64 number decrypted as
    3958374.4: both now give 15.1, as phe does."""
    public_key, private_key = keypair
    phe_public, phe_private = phe_keypair
    Alt, PheAlt = _bases(paillier)[0], _bases(phe.encoding)[0]
    assert Alt.encode(public_key, 15.1).decode() == 15.1
    theirs = phe_public.encrypt(PheAlt.encode(phe_public, 15.1))
    as_ours = paillier.EncryptedNumber(public_key, theirs.ciphertext(), theirs.exponent)
    assert private_key.decrypt_encoded(as_ours, Alt).decode() == 15.1
    assert phe_private.decrypt_encoded(theirs, PheAlt).decode() == 15.1
    # And the other way: our base-64 encryption read by phe with its base-64 class.
    ours = public_key.encrypt(Alt.encode(public_key, -2.5e-3))
    back = phe.EncryptedNumber(phe_public, ours.ciphertext(), ours.exponent)
    assert phe_private.decrypt_encoded(back, PheAlt).decode() == -2.5e-3


def test_other_bases_cannot_enter_base16_arithmetic(keypair):
    public_key, private_key = keypair
    Alt = _bases(paillier)[0]
    x = public_key.encrypt(1.5)
    encoded = Alt.encode(public_key, 2.0)
    for operation in [lambda: x + encoded, lambda: encoded + x, lambda: x * encoded,
                      lambda: encoded * x]:
        with pytest.raises(ValueError, match="BASE = 64"):
            operation()
    # Base-16 subclasses (whatever their other attributes) still combine.
    Generic16 = _bases(paillier)[3]
    assert private_key.decrypt(x + Generic16.encode(public_key, 2.0)) == 3.5
    assert private_key.decrypt(x * Generic16.encode(public_key, 2.0)) == 3.0

    class NoBase(paillier.EncodedNumber):
        BASE = 1

    class FloatBase(paillier.EncodedNumber):
        BASE = 2.5

    for cls in [NoBase, FloatBase]:
        with pytest.raises(TypeError, match="BASE must be an int >= 2"):
            cls.encode(public_key, 1.0)
    with pytest.raises(ValueError, match="finite"):
        Alt.encode(public_key, math.nan)
    with pytest.raises(ValueError, match="precision"):
        Alt.encode(public_key, 1.0, precision=0.0)


def test_raw_encrypt_reduces_mod_n_as_phe(keypair, phe_keypair, rng):
    public_key, private_key = keypair
    phe_public, _ = phe_keypair
    n = public_key.n
    for m in [n, n + 1, n - 1, 2 * n + 12345, -1, -n - 3, 10 * n**2 + 5]:
        r = rng.randrange(2, n - 1)
        assert public_key.raw_encrypt(m, r_value=r) == phe_public.raw_encrypt(m, r_value=r), m
        assert private_key.raw_decrypt(public_key.raw_encrypt(m)) == m % n
    # r is taken mod n as well (r^n mod n^2 depends only on r mod n).
    r = rng.randrange(2, n - 1)
    assert public_key.raw_encrypt(7, r_value=r + 3 * n) == phe_public.raw_encrypt(7, r_value=r)
    # r = 0 means "random", as in phe.
    c = public_key.raw_encrypt(7, r_value=0)
    assert private_key.raw_decrypt(c) == 7 and c != phe_public.raw_encrypt(7, r_value=1)
    with pytest.raises(TypeError):
        public_key.raw_encrypt(7.0)
    with pytest.raises(TypeError, match="r_value"):
        public_key.raw_encrypt(7, r_value="5")


def test_package_layout_is_phes():
    assert fphe.paillier.PaillierPublicKey is paillier.PaillierPublicKey
    assert fphe.encoding.EncodedNumber is paillier.EncodedNumber
    assert fphe.EncryptedNumber is paillier.EncryptedNumber
    assert fphe.paillier.DEFAULT_KEYSIZE == phe.paillier.DEFAULT_KEYSIZE
    for module, reference in [(fphe, phe), (fphe.paillier, phe.paillier),
                              (fphe.encoding, phe.encoding), (fphe.util, phe.util)]:
        public = {name for name in dir(reference)
                  if not name.startswith("_") and not isinstance(getattr(reference, name),
                                                                 type(sys))}
        # phe's module-level imports that are not its API (os, random, gmpy2...).
        public -= {"os", "random", "hexlify", "unhexlify", "urlsafe_b64encode",
                   "urlsafe_b64decode", "gmpy2", "number", "Mapping", "fractions", "json",
                   "math", "sys"}
        missing = {name for name in public if not hasattr(module, name)}
        assert not missing, (module.__name__, sorted(missing))


INSTALL = """
import sys
import fl_privacy.phe, fl_privacy.paillier
fl_privacy.phe.install_as_phe()
fl_privacy.phe.install_as_phe()  # idempotent
import phe, phe.paillier, phe.encoding, phe.util
from phe.command_line import cli
from phe import paillier
assert phe is fl_privacy.phe and paillier is fl_privacy.phe.paillier
assert phe.paillier.PaillierPublicKey is fl_privacy.paillier.PaillierPublicKey
assert phe.encoding.EncodedNumber is fl_privacy.paillier.EncodedNumber
assert cli.callback.__module__ == "fl_privacy.phe.command_line"
pk, sk = phe.generate_paillier_keypair(n_length=2048)
assert sk.decrypt(pk.encrypt(2.5) * 2) == 5.0
print("ok")
"""

REFUSE = """
import phe  # python-paillier itself
import fl_privacy.phe
try:
    fl_privacy.phe.install_as_phe()
except RuntimeError as exc:
    print("refused:", exc)
"""


def _python(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)


def test_install_as_phe_makes_import_phe_ours_and_refuses_a_mix():
    result = _python(INSTALL)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    result = _python(REFUSE)
    assert result.returncode == 0 and "refused: python-paillier's own `phe`" in result.stdout


def test_util_matches_phe_util(rng):
    util = fphe.util
    for _ in range(200):
        a, b, c = rng.randrange(1, 2**300), rng.randrange(0, 2**64), rng.randrange(2, 2**200)
        assert util.powmod(a, b, c) == phe.util.powmod(a, b, c)
        assert util.mulmod(a, b, c) == phe.util.mulmod(a, b, c)
        assert util.extended_euclidean_algorithm(a, c) == (
            phe.util.extended_euclidean_algorithm(a, c))
        if math.gcd(a, c) == 1:
            assert util.invert(a, c) == phe.util.invert(a, c)
        else:
            with pytest.raises(ZeroDivisionError):
                util.invert(a, c)
        assert util.isqrt(a) == phe.util.isqrt(a) == util.improved_i_sqrt(a)
        assert util.base64_to_int(util.int_to_base64(a)) == a
        assert util.int_to_base64(a) == phe.util.int_to_base64(a)
        assert util.base64url_encode(b"x" * (a % 7)) == phe.util.base64url_encode(b"x" * (a % 7))
    assert util.first_primes == phe.util.first_primes
    for n in list(range(-5, 2000)) + [17881, 2**61 - 1, 2**61 + 1, 561, 41041, 2**89 - 1]:
        assert util.is_prime(n) == phe.util.is_prime(n), n
    for bits in [2, 3, 16, 64, 512]:
        p = util.getprimeover(bits)
        assert p >= 1 << (bits - 1) and util.is_prime(p) and phe.util.is_prime(p)
    # int_to_base64(0): phe raises AssertionError; ours raises an error that is both that
    # and a ValueError.
    for bad in [0, -5]:
        with pytest.raises(ValueError):
            util.int_to_base64(bad)
        with pytest.raises(AssertionError):
            util.int_to_base64(bad)
    with pytest.raises(TypeError):
        util.int_to_base64(1.5)
    with pytest.raises(ValueError):
        util.miller_rabin(3, 5)
    with pytest.raises(ValueError):
        util.getprimeover(1)


def _cli(command_line, args):
    result = click_testing.CliRunner().invoke(command_line.cli, args)
    return result


def test_our_pheutil_and_phes_read_each_others_files(tmp_path):
    ours, theirs = fphe.command_line, __import__("phe.command_line").command_line
    for generate, use in [(ours, theirs), (theirs, ours)]:
        private_file, public_file = tmp_path / "priv.json", tmp_path / "pub.json"
        assert _cli(generate, ["genpkey", "--keysize", "2048", str(private_file)]).exit_code == 0
        assert _cli(use, ["extract", str(private_file), str(public_file)]).exit_code == 0
        a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "out.json"
        assert _cli(generate, ["encrypt", str(public_file), "--output", str(a), "--",
                               "-2.5"]).exit_code == 0
        assert _cli(use, ["encrypt", str(public_file), "--output", str(b), "4"]).exit_code == 0
        assert _cli(use, ["addenc", str(public_file), str(a), str(b), "--output",
                          str(out)]).exit_code == 0
        result = _cli(generate, ["decrypt", str(private_file), str(out)])
        assert result.exit_code == 0 and result.stdout.strip().splitlines()[-1] == "1.5"
        assert _cli(generate, ["multiply", "--output", str(out), str(public_file), str(a),
                               "--", "-3"]).exit_code == 0
        result = _cli(use, ["decrypt", str(private_file), str(out)])
        assert result.exit_code == 0 and result.stdout.strip().splitlines()[-1] == "7.5"
    # Refusals are messages with exit status 1, not tracebacks.
    result = _cli(ours, ["genpkey", "--keysize", "1024", str(tmp_path / "small.json")])
    assert result.exit_code == 1 and "2048" in result.output
    (tmp_path / "junk.json").write_text("{not json")
    result = _cli(ours, ["decrypt", str(tmp_path / "junk.json"), str(out)])
    assert result.exit_code == 1 and "not JSON" in result.output


@pytest.fixture(scope="module")
def phe_legacy_keypair():
    """A 1024-bit key made by python-paillier itself, as old data has."""
    return phe.generate_paillier_keypair(n_length=1024)


def _composite_above(q):
    """An odd composite just above the prime q > 3, of q's length: q + 2 or q + 4, whichever
    3 divides (one of them does). Not q + 2 alone: that is prime for about 0.4 % of
    512-bit primes q (twin primes), and a test expecting "not prime" would then fail."""
    composite = q + 2 if (q + 2) % 3 == 0 else q + 4
    assert composite % 3 == 0 and composite.bit_length() == q.bit_length()
    return composite


def _legacy(p, q):
    with pytest.warns(paillier.InsecureKeyWarning, match="1024-bit"):
        return paillier.LegacyPaillierPrivateKey.from_primes_insecure(p, q)


def test_a_legacy_key_decrypts_old_data_and_moves_it_to_a_new_key(phe_legacy_keypair, keypair,
                                                                   rng):
    phe_public, phe_private = phe_legacy_keypair
    new_public, new_private = keypair
    legacy = _legacy(phe_private.q, phe_private.p)
    assert legacy.n == phe_public.n and (legacy.p, legacy.q) == (phe_private.p, phe_private.q)
    values = random_floats(rng, 40) + random_ints(rng, 20, 2**300)
    old = [phe_public.encrypt(x) for x in values]
    cts, exps = [x.ciphertext() for x in old], [x.exponent for x in old]
    for x, number, c, e in zip(values, old, cts, exps):
        got, expected = legacy.decrypt(c, e), phe_private.decrypt(number)
        assert got == expected == x and type(got) is type(expected)
        assert legacy.raw_decrypt(c) == phe_private.raw_decrypt(c)
    floats = np.array([float(x) for x in values])
    assert np.array_equal(legacy.decrypt_many(cts, exps), floats)
    ints = [int(x) for x in values if isinstance(x, int) and abs(x) < 2**62]
    int_numbers = [phe_public.encrypt(x) for x in ints]
    assert np.array_equal(
        legacy.decrypt_many([x.ciphertext() for x in int_numbers], 0, dtype=np.int64), ints)
    # A phe peer's base-64 number under the old key.
    Alt, PheAlt = _bases(paillier)[0], _bases(phe.encoding)[0]
    old_alt = phe_public.encrypt(PheAlt.encode(phe_public, 15.1))
    assert legacy.decrypt_encoded(old_alt.ciphertext(), old_alt.exponent, Alt).decode() == 15.1
    # The migration: the same values, exactly, under the new 2048-bit key.
    moved = legacy.reencrypt_many(cts, exps, new_public)
    assert moved.public_key == new_public and np.array_equal(moved.exponents, exps)
    assert np.array_equal(new_private.decrypt_many(moved), floats)
    one = legacy.reencrypt(cts[3], exps[3], new_public)
    assert new_private.decrypt(one) == values[3]
    seen = []
    legacy.reencrypt_many(cts, exps, new_public, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (len(cts), len(cts))


def test_a_legacy_key_is_decryption_only_and_hard_to_pick_by_accident(phe_legacy_keypair,
                                                                      keypair):
    phe_public, phe_private = phe_legacy_keypair
    legacy = _legacy(phe_private.p, phe_private.q)
    for encrypt in [legacy.public_key.encrypt, legacy.public_key.raw_encrypt,
                    legacy.public_key.encrypt_many]:
        with pytest.raises(TypeError, match="decryption only"):
            encrypt(1)
    assert not hasattr(legacy, "encrypt") and not hasattr(legacy, "encrypt_many")
    # Immutable like every key: its n cannot be swapped for another's.
    for obj, name in [(legacy.public_key, "n"), (legacy.public_key, "max_int"),
                      (legacy, "public_key"), (legacy, "_native")]:
        with pytest.raises(AttributeError, match="immutable"):
            setattr(obj, name, getattr(obj, name))
    with pytest.raises(TypeError, match="already constructed"):
        legacy.public_key.__init__(legacy.public_key.n + 2, legacy.public_key.max_int)
    assert legacy.public_key.n == phe_public.n
    with pytest.raises(TypeError, match="from_primes_insecure"):
        paillier.LegacyPaillierPrivateKey(phe_private.p, phe_private.q)
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(legacy)
    assert str(phe_private.p) not in repr(legacy) and "1024 bits" in repr(legacy)
    # The ordinary constructors refuse the small key, and say where to go.
    for refuse in [lambda: paillier.PaillierPublicKey(phe_public.n),
                   lambda: paillier.PaillierPrivateKey.from_jwk(_jwk(phe_private))]:
        with pytest.raises(ValueError, match="LegacyPaillierPrivateKey"):
            refuse()
    # Keys that are not legacy keys are refused by the legacy constructor.
    new_public, new_private = keypair
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is imported: no warning either
        with pytest.raises(ValueError, match="2048 bits or more"):
            paillier.LegacyPaillierPrivateKey.from_primes_insecure(new_private.p, new_private.q)
        small_public, small_private = phe.generate_paillier_keypair(n_length=512)
        with pytest.raises(ValueError, match="at least 1024 bits"):
            paillier.LegacyPaillierPrivateKey.from_primes_insecure(small_private.p,
                                                                   small_private.q)
        with pytest.raises(ValueError, match="prime"):
            paillier.LegacyPaillierPrivateKey.from_primes_insecure(
                phe_private.p, _composite_above(phe_private.q))
        with pytest.raises(TypeError):
            paillier.LegacyPaillierPrivateKey.from_primes_insecure(str(phe_private.p), 5)
    # Ciphertexts of another key, and non-ciphertexts, are errors naming the element.
    c = phe_public.encrypt(5).ciphertext()
    with pytest.raises(ValueError, match=r"ciphertexts\[1\]"):
        legacy.decrypt_many([c, phe_public.n], 0)
    with pytest.raises(TypeError, match=r"ciphertexts\[0\]"):
        legacy.decrypt_many(["5"], 0)
    with pytest.raises(ValueError):
        legacy.decrypt(phe_public.nsquare, 0)
    with pytest.raises(ValueError, match="exponents"):
        legacy.decrypt_many([c, c], [0, 10**6])
    with pytest.raises(TypeError, match="PaillierPublicKey"):
        legacy.reencrypt_many([c], [0], legacy.public_key)


def _jwk(phe_private):
    public = {"kty": "DAJ", "alg": "PAI-GN1", "key_ops": ["encrypt"], "kid": "old",
              "n": phe.util.int_to_base64(phe_private.public_key.n)}
    return {"kty": "DAJ", "key_ops": ["decrypt"], "kid": "old", "pub": public,
            "p": phe.util.int_to_base64(phe_private.p),
            "q": phe.util.int_to_base64(phe_private.q)}


def test_a_legacy_jwk_imports_in_both_of_phes_forms(phe_legacy_keypair):
    phe_public, phe_private = phe_legacy_keypair
    jwk = _jwk(phe_private)
    with pytest.warns(paillier.InsecureKeyWarning):
        from_pq = paillier.LegacyPaillierPrivateKey.from_jwk_insecure(json.dumps(jwk))
    p, q = phe_private.p, phe_private.q
    lam = (p - 1) * (q - 1) // math.gcd(p - 1, q - 1)
    lambda_mu = {key: value for key, value in jwk.items() if key not in ("p", "q")}
    lambda_mu["lambda"] = phe.util.int_to_base64(lam)
    lambda_mu["mu"] = phe.util.int_to_base64(pow(lam, -1, phe_public.n))
    with pytest.warns(paillier.InsecureKeyWarning):
        from_lambda = paillier.LegacyPaillierPrivateKey.from_jwk_insecure(lambda_mu)
    assert from_pq == from_lambda and hash(from_pq) == hash(from_lambda)
    x = phe_public.encrypt(-7.25)
    assert from_lambda.decrypt(x.ciphertext(), x.exponent) == -7.25
    bad = dict(lambda_mu, mu=phe.util.int_to_base64(3))
    for broken in [bad, dict(jwk, kty="RSA"), {"kty": "DAJ"}, "[1, 2]",
                   dict(jwk, q=phe.util.int_to_base64(q + 2))]:
        with pytest.raises(ValueError):
            paillier.LegacyPaillierPrivateKey.from_jwk_insecure(broken)
