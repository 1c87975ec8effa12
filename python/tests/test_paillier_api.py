"""The behaviour a phe user relies on, the batch calls, and every error case."""

import io
import math
import pickle
import threading
import time

import numpy as np
import pytest

import phe
from fl_privacy import paillier


def test_constructors_and_attributes_are_phes(keypair, phe_keypair):
    public_key, private_key = keypair
    phe_public, phe_private = phe_keypair
    for name in ["n", "g", "nsquare", "max_int"]:
        assert getattr(public_key, name) == getattr(phe_public, name), name
    for name in ["p", "q", "psquare", "qsquare", "p_inverse", "hp", "hq"]:
        assert getattr(private_key, name) == getattr(phe_private, name), name
    assert private_key.public_key is public_key
    rebuilt = paillier.PaillierPrivateKey(
        paillier.PaillierPublicKey(public_key.n), private_key.q, private_key.p
    )
    assert rebuilt == private_key and hash(rebuilt) == hash(private_key)
    assert paillier.PaillierPublicKey(public_key.n) == public_key
    assert hash(paillier.PaillierPublicKey(public_key.n)) == hash(public_key)
    totient = (private_key.p - 1) * (private_key.q - 1)
    assert paillier.PaillierPrivateKey.from_totient(public_key, totient) == private_key
    x = public_key.encrypt(-12.5)
    copy = paillier.EncryptedNumber(public_key, x.ciphertext(), exponent=x.exponent)
    assert copy.public_key is public_key and copy.exponent == x.exponent
    assert private_key.decrypt(copy) == -12.5
    assert paillier.DEFAULT_KEYSIZE == phe.paillier.DEFAULT_KEYSIZE
    assert (paillier.EncodedNumber.BASE, paillier.EncodedNumber.LOG2_BASE) == (16, 4.0)
    assert repr(public_key).startswith("<PaillierPublicKey ")


def test_arithmetic_a_phe_user_writes(keypair):
    public_key, private_key = keypair
    a, b = public_key.encrypt(3.5), public_key.encrypt(-2)
    assert private_key.decrypt(a + b) == 1.5
    assert private_key.decrypt(a + 1) == 4.5
    assert private_key.decrypt(2 + a) == 5.5
    assert private_key.decrypt(a - b) == 5.5
    assert private_key.decrypt(10 - a) == 6.5
    assert private_key.decrypt(a * 3) == 10.5
    assert private_key.decrypt(-0.5 * a) == -1.75
    assert private_key.decrypt(a / 2) == 1.75
    assert private_key.decrypt(-b) == 2
    assert private_key.decrypt(sum([a, b, a])) == 5.0
    assert private_key.decrypt(public_key.encrypt(7) * 6) == 42
    assert isinstance(private_key.decrypt(public_key.encrypt(7)), int)
    assert isinstance(private_key.decrypt(public_key.encrypt(7.0)), float)
    assert private_key.decrypt(public_key.encrypt(2**200)) == 2**200
    enc = paillier.EncodedNumber.encode(public_key, 0.25)
    assert private_key.decrypt(a + enc) == 3.75 and private_key.decrypt(a * enc) == 0.875
    assert private_key.decrypt(public_key.encrypt(1.0 / 3.0, precision=1e-6)) == pytest.approx(
        1 / 3, abs=1e-6
    )
    assert private_key.decrypt(public_key.encrypt(np.float32(0.5))) == 0.5
    assert private_key.decrypt(public_key.encrypt(np.int64(-9))) == -9
    assert private_key.decrypt_encoded(a).decode() == 3.5
    keyring = paillier.PaillierPrivateKeyring([private_key])
    assert keyring.decrypt(a) == 3.5 and len(keyring) == 1 and public_key in keyring


def test_obfuscation_is_phes(keypair):
    public_key, private_key = keypair
    x = public_key.encrypt(1.0)
    y = x * 5
    raw = y.ciphertext(be_secure=False)
    assert y.ciphertext(be_secure=False) == raw  # not obfuscated yet
    secure = y.ciphertext()
    assert secure != raw and y.ciphertext() == secure  # obfuscated once
    assert private_key.decrypt(y) == 5.0
    first = x.ciphertext()
    assert x.ciphertext() == first  # encrypt() results are already obfuscated
    # A pickle leaves the process: it carries an obfuscated ciphertext.
    z = x + 1
    raw = z.ciphertext(be_secure=False)
    restored = pickle.loads(pickle.dumps(z))
    assert restored.ciphertext(be_secure=False) != raw
    assert private_key.decrypt(restored) == 2.0
    batch = public_key.encrypt_many(np.arange(6.0).reshape(2, 3)) * 2
    raw = batch.ciphertexts(be_secure=False)
    copy = pickle.loads(pickle.dumps(batch))
    assert copy.shape == (2, 3) and copy.ciphertexts(be_secure=False) != raw
    assert np.array_equal(private_key.decrypt_many(copy), np.arange(6.0).reshape(2, 3) * 2)
    keys = pickle.loads(pickle.dumps((public_key, private_key)))
    assert keys == (public_key, private_key) and keys[1].decrypt(restored) == 2.0


def _poses_as(impostor, genuine):
    """Whether ``impostor`` (another modulus) passes for ``genuine`` wherever Python looks a
    key up: ``==``, hashing (dicts, keyrings) and pickling (which rebuilds from ``.n``)."""
    return (impostor == genuine and hash(impostor) == hash(genuine)
            and pickle.loads(pickle.dumps(impostor)) == genuine)


def test_keys_are_immutable_so_an_unverified_key_cannot_pose_as_a_verified_one(keypair,
                                                                               other_keypair):
    # Red team finding A1: with n a plain attribute, `key.n = verified.n` made an unverified
    # key compare equal to, hash like and pickle as the verified one, while encryption still
    # used its own native modulus.
    public_key, private_key = keypair
    other_public, other_private = other_keypair
    x = public_key.encrypt(2.5)
    batch = public_key.encrypt_many([1.0, 2.0])
    attributes = {
        other_public: ["n", "g", "nsquare", "max_int", "_native"],
        other_private: ["public_key", "_native"],
        x: ["public_key"],
        batch: ["public_key"],
    }
    for obj, names in attributes.items():
        for name in names:
            with pytest.raises(AttributeError):
                setattr(obj, name, getattr(public_key if obj is other_public else private_key,
                                           name, public_key))
            if obj in (other_public, other_private):
                with pytest.raises(AttributeError, match="immutable"):
                    delattr(obj, name)
    with pytest.raises(AttributeError, match="immutable"):
        other_public.anything_new = 1
    assert not _poses_as(other_public, public_key)
    assert other_private.public_key is other_public and x.public_key is public_key
    keyring = paillier.PaillierPrivateKeyring([private_key])
    with pytest.raises(KeyError):
        keyring.decrypt(other_public.encrypt(1.0))
    assert keyring.decrypt(x) == 2.5 and private_key.decrypt_many(batch).tolist() == [1.0, 2.0]

    # Negative control: the same key with assignment re-enabled (the behaviour before the
    # fix) is an impostor the checks above catch -- it passes for the verified key while it
    # still encrypts under its own modulus, which the verified key's owner cannot decrypt.
    class Mutable(paillier.PaillierPublicKey):
        __setattr__ = object.__setattr__

    impostor = Mutable._from_native(other_public._native)
    assert not _poses_as(impostor, public_key)
    impostor.n = public_key.n
    assert _poses_as(impostor, public_key)
    y = impostor.encrypt(1.0)
    with pytest.raises(ValueError):
        private_key.decrypt(y)
    encoding = other_private.raw_decrypt(y.ciphertext())
    assert paillier.EncodedNumber(other_public, encoding, y.exponent).decode() == 1.0


def _op(value):
    """One pickle opcode argument (protocol 4, unframed)."""
    return pickle.dumps(value, protocol=4)[2:-1]


def _forged_number_pickle(genuine, impostor, ciphertext):
    """A pickle whose only globals are those of an honest EncryptedNumber pickle
    (``_restore_number`` and ``PaillierPublicKey``): it builds ``PaillierPublicKey(impostor.n)``
    and then BUILDs the genuine key's n, g, nsquare and max_int into it -- pickle's BUILD
    writes an object's state past ``__setattr__`` unless the class has ``__setstate__``."""
    w = [b"\x80\x04", _op("fl_privacy.paillier"), _op("_restore_number"), b"\x93",
         _op("fl_privacy.paillier"), _op("PaillierPublicKey"), b"\x93", _op(impostor.n),
         b"\x85", b"R", b"}", b"(", _op("n"), _op(genuine.n), _op("g"), _op(genuine.g),
         _op("nsquare"), _op(genuine.nsquare), _op("max_int"), _op(genuine.max_int), b"u", b"b",
         _op(ciphertext), _op(0), b"\x87", b"R", b"."]
    return b"".join(w)


class _AllowlistUnpickler(pickle.Unpickler):
    """The usual guard on received pickles: only the globals an honest number pickle uses."""

    ALLOWED = {("fl_privacy.paillier", "PaillierPublicKey"),
               ("fl_privacy.paillier", "_restore_number")}

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError("blocked %s.%s" % (module, name))
        return super().find_class(module, name)


def test_a_pickle_cannot_forge_a_key_or_refile_a_keyring(keypair, other_keypair, monkeypatch):
    # Red team rt4: a pickle through an allowlisting unpickler gave a number whose key
    # compared equal to the verified key while it computed under the attacker's key.
    public_key, private_key = keypair
    other_public, other_private = other_keypair
    honest = _AllowlistUnpickler(io.BytesIO(pickle.dumps(public_key.encrypt(1.0)))).load()
    assert honest.public_key == public_key and private_key.decrypt(honest) == 1.0
    blob = _forged_number_pickle(public_key, other_public, other_public.encrypt(3).ciphertext())
    with pytest.raises(TypeError, match="rebuilt only by its constructor"):
        _AllowlistUnpickler(io.BytesIO(blob)).load()
    # The same for a keyring: one filing B's private key under A's public key.
    forged_ring = b"".join([
        b"\x80\x04", _op("fl_privacy.paillier"), _op("PaillierPrivateKeyring"), b"\x93", b")",
        b"\x81", b"}", _op("_PaillierPrivateKeyring__keyring"), b"}", _op(public_key),
        _op(other_private), b"s", b"s", b"b", b"."])
    with pytest.raises(TypeError, match="rebuilt only by its constructor"):
        pickle.loads(forged_ring)
    ring = pickle.loads(pickle.dumps(paillier.PaillierPrivateKeyring([private_key, other_private])))
    assert ring[public_key] == private_key and ring[other_public] == other_private

    # Negative control: without __setstate__ (the state before the fix) the same bytes give an
    # impostor that passes for the verified key and encrypts under the other modulus.
    monkeypatch.delattr(paillier._Frozen, "__setstate__")
    forged = _AllowlistUnpickler(io.BytesIO(blob)).load()
    assert forged.public_key == public_key and hash(forged.public_key) == hash(public_key)
    assert forged.public_key._native.n == other_public.n


def test_a_constructed_key_or_number_cannot_be_reinitialised(keypair, other_keypair):
    # Red team rt4: calling __init__ again re-pointed a built key (or number) at another key.
    public_key, private_key = keypair
    other_public, other_private = other_keypair
    p, q = other_private.p, other_private.q
    x = public_key.encrypt(1.0)
    array = paillier.EncryptedArray([x])
    for reinit in [lambda: public_key.__init__(other_public.n),
                   lambda: private_key.__init__(other_public, p, q),
                   lambda: x.__init__(other_public, other_public.encrypt(1).ciphertext()),
                   lambda: array.__init__([other_public.encrypt(1.0)])]:
        with pytest.raises(TypeError, match="already constructed"):
            reinit()
    assert public_key != other_public and private_key.public_key is public_key
    assert x.public_key is public_key and private_key.decrypt(x) == 1.0
    assert array.public_key is public_key and private_key.decrypt_many(array).tolist() == [1.0]
    # Even a number whose private _public_key was overwritten (deliberate hacking) cannot
    # join an array of the key it claims: the native ciphertext is bound to its own key.
    hacked = other_public.encrypt(1.0)
    hacked._public_key = public_key
    with pytest.raises(ValueError, match="different key"):
        paillier.EncryptedArray.from_numbers([public_key.encrypt(2.0), hacked])


def test_errors_a_phe_user_relies_on(keypair, other_keypair):
    public_key, private_key = keypair
    other_public, other_private = other_keypair
    x = public_key.encrypt(1.5)
    with pytest.raises(ValueError, match="different key"):
        other_private.decrypt(x)
    with pytest.raises(ValueError, match="different public keys"):
        x + other_public.encrypt(1)
    with pytest.raises(NotImplementedError):
        x * x
    with pytest.raises(TypeError):
        private_key.decrypt(1234)
    with pytest.raises(TypeError, match="precision"):
        public_key.encrypt("1.5")
    with pytest.raises(TypeError):
        x + "1"
    with pytest.raises(TypeError):
        paillier.PaillierPrivateKey(public_key, private_key.p, private_key.q).raw_decrypt(1.5)
    with pytest.raises(ValueError, match="does not match"):
        paillier.PaillierPrivateKey(public_key, private_key.p, private_key.p)
    with pytest.raises(ValueError):
        x.decrease_exponent_to(x.exponent + 1)
    with pytest.raises(ValueError):
        paillier.EncodedNumber.encode(public_key, 1.0).decrease_exponent_to(5)


def test_validation_errors_are_exceptions_never_crashes(keypair):
    public_key, private_key = keypair
    n = public_key.n
    for bad_n in [0, -n, n + 1, 2**2047 + 1, 3**1300, 2**9000 + 1, 15]:
        with pytest.raises(ValueError):
            paillier.PaillierPublicKey(bad_n)
    with pytest.raises(TypeError):
        paillier.PaillierPublicKey(float(2**100))
    with pytest.raises(ValueError, match="bits"):
        paillier.PaillierPublicKey(2**30000 + 1)
    for bad_c in [0, n * n, n * n + 5, n, 2 * n, -1]:
        with pytest.raises(ValueError):
            paillier.EncryptedNumber(public_key, bad_c)
    with pytest.raises(TypeError):
        paillier.EncryptedNumber(public_key, "123")
    with pytest.raises(TypeError):
        paillier.EncryptedNumber(n, 123)
    for bad in [math.nan, math.inf, -math.inf]:
        with pytest.raises(ValueError, match="finite"):
            public_key.encrypt(bad)
    with pytest.raises(ValueError, match="precision"):
        public_key.encrypt(1.0, precision=-1.0)
    with pytest.raises(ValueError, match="range"):
        public_key.encrypt(public_key.max_int + 1)
    # The exponent is validated when the number is built (not at decryption).
    c = public_key.encrypt(1).ciphertext()
    for bad_exponent, error in [(10**6, ValueError), (-10**6, ValueError), ("a", TypeError),
                                (1.5, TypeError), (None, TypeError)]:
        with pytest.raises(error, match="exponent"):
            paillier.EncryptedNumber(public_key, c, bad_exponent)
    with pytest.raises(TypeError, match="encoding"):
        paillier.EncodedNumber(public_key, "15", 0)
    with pytest.raises(ValueError, match="exponent"):
        paillier.EncodedNumber(public_key, 15, 10**5)
    # raw_encrypt takes the plaintext mod n, as phe (n encrypts 0); r must be a unit.
    assert private_key.raw_decrypt(public_key.raw_encrypt(n)) == 0
    assert private_key.raw_decrypt(public_key.raw_encrypt(n + 7)) == 7
    for bad_r in [n, private_key.p, 2 * private_key.q]:
        with pytest.raises(ValueError, match="nonce"):
            public_key.raw_encrypt(5, r_value=bad_r)
    for size in [1024, 2047, 5000]:
        with pytest.raises(ValueError, match="2048"):
            paillier.generate_paillier_keypair(n_length=size)
    with pytest.raises(ValueError):
        paillier.PaillierPublicKey.from_jwk('{"kty": "DAJ"}')
    with pytest.raises(ValueError):
        paillier.PaillierPrivateKey.from_jwk("not json")
    with pytest.raises(ValueError):
        paillier.EncryptedNumber.from_json(public_key, '{"v": "-5", "e": 0}')


def test_overflow_is_detected_as_phe_detects_it(keypair):
    public_key, private_key = keypair
    big = public_key.encrypt(public_key.max_int)
    with pytest.raises(OverflowError):
        private_key.decrypt(big + big)
    tiny = paillier.EncodedNumber(public_key, 1, -300)
    assert tiny.decode() == 0.0
    with pytest.raises(OverflowError):
        paillier.EncodedNumber(public_key, 2**1100, -1).decode()
    with pytest.raises(ValueError, match="out of range|n"):
        paillier.EncodedNumber(public_key, public_key.n, 0).decode()


def test_batch_calls_match_the_scalar_api(keypair, rng):
    public_key, private_key = keypair
    values = np.array([rng.uniform(-50, 50) for _ in range(64)] + [0.0, 1e-12, -3e20])
    arr = public_key.encrypt_many(values)
    assert len(arr) == values.size and arr.shape == values.shape
    assert np.array_equal(private_key.decrypt_many(arr), values)
    # Element i of the batch is phe's EncryptedNumber: same exponent, decrypts alike.
    for i in [0, 5, 65]:
        assert arr[i].exponent == public_key.encrypt(float(values[i])).exponent
        assert private_key.decrypt(arr[i]) == values[i]
    scalars = np.array([rng.uniform(-3, 3) for _ in range(values.size)])
    summed = arr + scalars
    product = arr * scalars
    for i in range(0, values.size, 7):
        assert summed[i].ciphertext(False) == (arr[i] + float(scalars[i])).ciphertext(False)
        assert product[i].ciphertext(False) == (arr[i] * float(scalars[i])).ciphertext(False)
    assert np.allclose(private_key.decrypt_many(arr * 2 - arr), values, rtol=0, atol=1e-9)
    assert private_key.decrypt(arr.sum()) == pytest.approx(float(np.sum(values)), rel=1e-12)
    ints = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    encrypted_ints = public_key.encrypt_many(ints)
    assert encrypted_ints.shape == (3, 4)
    assert np.array_equal(private_key.decrypt_many(encrypted_ints * 3 + 1, dtype=np.int64),
                          ints * 3 + 1)
    assert private_key.decrypt(encrypted_ints[1, 2]) == ints[1, 2]
    assert np.array_equal(private_key.decrypt_many(encrypted_ints[2]), ints[2])
    # The key owner's CRT encryption: the same phe encodings, decrypting alike, and ordinary
    # ciphertexts anyone can compute with.
    owned = private_key.encrypt_many(values)
    assert np.array_equal(owned.exponents, arr.exponents)
    assert np.array_equal(private_key.decrypt_many(owned + arr), values * 2)
    assert private_key.decrypt(owned[4] * 2) == values[4] * 2
    assert owned.ciphertexts() != arr.ciphertexts()
    from_numbers = paillier.EncryptedArray.from_numbers([public_key.encrypt(1.5), arr[3]])
    assert np.array_equal(private_key.decrypt_many(from_numbers), [1.5, values[3]])
    assert np.array_equal(private_key.decrypt_many([arr[0], arr[1]]), values[:2])
    cts = arr.ciphertexts()
    again = [paillier.EncryptedNumber(public_key, c, e) for c, e in zip(cts, arr.exponents)]
    assert np.array_equal(private_key.decrypt_many(again), values)


def test_batch_errors(keypair, other_keypair):
    public_key, private_key = keypair
    other_public, other_private = other_keypair
    arr = public_key.encrypt_many([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite"):
        public_key.encrypt_many([1.0, np.nan])
    with pytest.raises(TypeError, match="dtype"):
        public_key.encrypt_many(np.array(["a", "b"]))
    with pytest.raises(ValueError):
        arr + np.ones(4)
    with pytest.raises(ValueError, match="different"):
        arr + other_public.encrypt_many([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="different key"):
        other_private.decrypt_many(arr)
    with pytest.raises(ValueError, match="not an integer"):
        private_key.decrypt_many(arr * 0.5, dtype=np.int64)
    with pytest.raises(ValueError, match="dtype"):
        private_key.decrypt_many(arr, dtype=np.float32)
    with pytest.raises(NotImplementedError):
        arr * arr
    with pytest.raises(OverflowError):
        public_key.encrypt_many(np.array([2**64 - 1], dtype=np.uint64))
    with pytest.raises(IndexError):
        arr[3]


def test_batch_calls_release_the_gil(keypair):
    """While encrypt_many runs, another Python thread keeps running; while a GIL-holding
    C call of similar length runs (big-int pow), it does not (negative control)."""
    public_key, _ = keypair
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    def rate(call):
        """Spinner increments per second while `call` runs (at most one switch interval
        of spinning can slip in before a GIL-holding call starts)."""
        before, start = counter[0], time.perf_counter()
        call()
        return (counter[0] - before) / (time.perf_counter() - start)

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        released = rate(lambda: public_key.encrypt_many(np.arange(16, dtype=np.float64)))
        nsquare = public_key.nsquare
        held = rate(lambda: pow(3, (1 << 60000) + 1, nsquare))  # holds the GIL throughout
    finally:
        stop.set()
        thread.join()
    assert released > 4 * held, (released, held)


def test_engine_names_the_kernel_this_cpu_runs():
    # One of fl-paillier's engine names; the same as the Rust default_engine().
    assert paillier.engine() in {"ifma", "x86-64-adx", "avx2", "portable"}
