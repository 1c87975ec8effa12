"""Paillier encryption with python-paillier's (``phe`` 1.5) API, on fl-paillier.

Existing ``phe`` code runs by changing its import::

    from fl_privacy import paillier          # instead of: from phe import paillier
    public_key, private_key = paillier.generate_paillier_keypair(n_length=2048)
    x = public_key.encrypt(3.141592653)
    y = x * 2 + 1.5 - public_key.encrypt(-4)
    assert abs(private_key.decrypt(y) - (2 * 3.141592653 + 1.5 + 4)) < 1e-9

The classes, constructors, attributes, encoding rules (base 16, exponent, precision) and
exceptions are phe's; the arithmetic is fl-paillier's (validated keys and ciphertexts,
constant-time CRT decryption, zeroized private keys). Ciphertext values are identical to
phe's for the same inputs (homomorphic results are deterministic), so numbers move both
ways: as ints (``ciphertext()``, ``EncryptedNumber(public_key, c, exponent)``), in the JSON
layout of phe's docs, and in pheutil's JWK / ``{"v", "e"}`` files.

Batch calls over numpy arrays (``encrypt_many``, ``decrypt_many`` and ``EncryptedArray``'s
``+``, ``*``, ``sum``) run in chunks with the GIL released and in parallel; Ctrl-C
interrupts them between chunks (``KeyboardInterrupt``, within about 0.1 s of work),
``progress=callable`` reports ``(done, total)`` after each chunk, and a batch whose result
cannot be allocated raises ``MemoryError``.

``EncodedNumber`` subclasses with another ``BASE`` (phe documents them) encode, decode and
decrease their exponent in that base, exactly as phe does.

Deliberate deviations from phe (stricter, never silently different):

* keys: n must have 2048 to 8192 bits and pass fl-paillier's validation (odd, not prime,
  not a perfect power, no factor below 2^16); ``generate_paillier_keypair`` makes 2048,
  3072 (the default, as phe) or 4096-bit keys. phe accepts any n. Data under an existing
  smaller key (1024–2047 bits, e.g. FATE's default) can be decrypted and moved to a new key
  with :class:`LegacyPaillierPrivateKey`, an explicit opt-in that warns.
* ``EncryptedNumber(public_key, ciphertext, exponent)`` validates 0 < c < n², gcd(c, n) =
  1 and the exponent (an int within ±10000) when it is built (phe stores anything and
  fails, or not, later).
* an ``EncodedNumber`` whose class has another ``BASE`` than 16 cannot be added to or
  multiplied with an ``EncryptedNumber`` (``ValueError``): the ciphertext's exponent is in
  base 16, and phe silently mixes the bases into a wrong value.
* ``raw_encrypt``'s ``r_value`` must be a unit mod n (phe computes a ciphertext that does
  not decrypt); like phe, the plaintext and r are taken mod n.
* keys are immutable (``AttributeError`` on assigning ``n``, ``g``, ``nsquare``,
  ``max_int`` or a private key's ``public_key``), as is an ``EncryptedNumber``'s or
  ``EncryptedArray``'s ``public_key``: equality, hashing and pickling read them while the
  cryptography uses the native key, so they must not diverge. ``__init__`` called again
  raises ``TypeError``, and unpickling goes only through the constructors (a pickle that
  carries object state is refused).
* pickling an ``EncryptedNumber`` obfuscates it first (phe pickles the raw, possibly
  unobfuscated ciphertext, which can reveal the scalars applied to it).
* error messages do not include plaintext values.

Extensions (phe has no such methods):

* key-correctness proofs: the key owner sends ``private_key.prove_correct(context)``
  with its public key, and whoever encrypts, masks or re-randomises under that key checks
  it first with ``public_key.verify_key_proof(proof, context)``, which raises
  :class:`InvalidKeyProofError` unless gcd(n, φ(n)) = 1 (see
  :meth:`PaillierPublicKey.verify_key_proof`).
"""

import base64
import fractions
import json
import math
import numbers
import secrets
import warnings
from collections.abc import Mapping

import numpy as np

from fl_privacy import _checks, _native

__all__ = [
    "DEFAULT_KEYSIZE",
    "EncodedNumber",
    "EncryptedArray",
    "EncryptedNumber",
    "InsecureKeyWarning",
    "InvalidKeyProofError",
    "LegacyPaillierPrivateKey",
    "LegacyPaillierPublicKey",
    "NonPositiveIntError",
    "PaillierPrivateKey",
    "PaillierPrivateKeyring",
    "PaillierPublicKey",
    "base64_to_int",
    "engine",
    "generate_paillier_keypair",
    "int_to_base64",
]

#: phe's default key size (bits).
DEFAULT_KEYSIZE = 3072

#: The smallest modulus accepted for new work (generated or imported public keys).
MIN_KEY_BITS = 2048

_BASE = 16

#: phe exponents are bounded to ±MAX_EXPONENT (fl-paillier's bound: 16^10000 is far beyond
#: any float or key).
MAX_EXPONENT = _native.MAX_PHE_EXPONENT

_LEGACY_HINT = (
    "keys under 2048 bits are refused; to decrypt data that already exists under such a "
    "key (1024 to 2047 bits) and move it to a new key, import it with "
    "LegacyPaillierPrivateKey.from_primes_insecure or .from_jwk_insecure (decryption only)"
)


def _exponent(value, name="exponent"):
    """A phe exponent: an int within ±MAX_EXPONENT."""
    return _checks.integer(name, value, -MAX_EXPONENT, MAX_EXPONENT)


def _progress(progress):
    return _checks.callback("progress", progress)


def _scalar(value):
    """A number as phe encodes it: an int (bool and numpy integers too) or a float."""
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError("Don't know the precision of type %s." % type(value))


def _encryptable(values):
    """A flat contiguous float64 or int64 array of ``values``, and its shape."""
    array = np.asarray(values)
    flat = array.reshape(-1)
    if flat.dtype.kind in "biu":
        if flat.dtype.kind == "u" and flat.size and flat.max() > np.iinfo(np.int64).max:
            raise OverflowError("unsigned values above 2**63 - 1 are not supported")
        return np.ascontiguousarray(flat, dtype=np.int64), array.shape
    if flat.dtype.kind == "f":
        return np.ascontiguousarray(flat, dtype=np.float64), array.shape
    raise TypeError("encrypt_many takes an array of floats or ints, got dtype %s" % flat.dtype)


def engine():
    """The arithmetic engine fl-paillier runs on, on this CPU: ``"ifma"`` (AVX-512 IFMA),
    ``"x86-64-adx"`` (BMI2/ADX, x86-64 without IFMA) or ``"portable"`` (everything else,
    e.g. ARM). The speed-up over phe depends on it (the README has one figure per engine).
    """
    return _native.engine()


def generate_paillier_keypair(private_keyring=None, n_length=DEFAULT_KEYSIZE):
    """Return a new (:class:`PaillierPublicKey`, :class:`PaillierPrivateKey`) pair.

    The key has an n of exactly ``n_length`` bits (2048, 3072 or 4096); the private key is
    added to ``private_keyring`` if given. The primes come from the operating system's
    CSPRNG; the GIL is released while they are searched.
    """
    n_length = _checks.integer("n_length", n_length)
    if n_length not in _native.SUPPORTED_KEY_BITS:
        raise ValueError(
            "unsupported key size %d bits: allowed are 2048, 3072 (default) or 4096 "
            "(smaller keys are not generated: about 80-bit security or less)" % n_length
        )
    if private_keyring is not None and not isinstance(private_keyring, PaillierPrivateKeyring):
        raise TypeError("private_keyring must be a PaillierPrivateKeyring, got %s"
                        % type(private_keyring).__name__)
    native = _native.NativePrivateKey.generate(n_length)
    public_key = PaillierPublicKey._from_native(native.public_key())
    private_key = PaillierPrivateKey._from_native(public_key, native)
    if private_keyring is not None:
        private_keyring.add(private_key)
    return public_key, private_key


def _refuse_pickled_state(self, state):
    """``__setstate__`` of keys, numbers, arrays and keyrings. pickle's BUILD would write
    ``state`` straight into ``__dict__``, past ``__setattr__``; these objects are only ever
    rebuilt by their constructors (their ``__reduce__`` carries no state), so a pickle that
    carries state was not made by them."""
    raise TypeError("%s is rebuilt only by its constructor: a pickle with object state is "
                    "refused" % type(self).__name__)


def _refuse_reinit(obj):
    """Raises ``TypeError`` when ``__init__`` is called again on a built key, number or
    array (it would re-point the object at another key)."""
    if vars(obj):
        raise TypeError("%s is already constructed: its key cannot change" % type(obj).__name__)


class _Frozen:
    """Keys are immutable: their attributes are set once, when the key is made, and every
    later assignment or deletion raises ``AttributeError``.

    A key's Python attributes (``n``, ``public_key``) decide ``==``, hashing, pickling and the
    keyring's lookup, while the cryptography uses the native key they were read from; if
    user code could reassign ``key.n``, an unverified key could compare equal to (and be
    looked up as) a verified one. Freezing keeps the two the same object's description."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(
            "%s is immutable: %r cannot be assigned (its attributes describe the native key "
            "the cryptography uses; make a new key instead)" % (type(self).__name__, name))

    def __delattr__(self, name):
        raise AttributeError("%s is immutable: %r cannot be deleted" % (type(self).__name__, name))

    def _init(self, **attributes):
        _refuse_reinit(self)
        for name, value in attributes.items():
            object.__setattr__(self, name, value)

    __setstate__ = _refuse_pickled_state


class PaillierPublicKey(_Frozen):
    """A Paillier public key (g = n + 1), phe's ``PaillierPublicKey``.

    Attributes (read-only: assigning any attribute raises ``AttributeError``):
      n (int), g (int) = n + 1, nsquare (int) = n², max_int (int) = n // 3 - 1.

    Raises:
      ValueError: if n fails validation (see the module docs).
    """

    def __init__(self, n):
        if isinstance(n, numbers.Integral) and not isinstance(n, bool) and 0 < n < 2 ** (MIN_KEY_BITS - 1):
            raise ValueError("n has %d bits: %s" % (int(n).bit_length(), _LEGACY_HINT))
        self._set_native(_native.NativePublicKey.from_n(n))

    @classmethod
    def _from_native(cls, native):
        key = cls.__new__(cls)
        key._set_native(native)
        return key

    def _set_native(self, native):
        n = native.n
        self._init(_native=native, n=n, g=n + 1, nsquare=n * n, max_int=native.max_int)

    def __repr__(self):
        return "<PaillierPublicKey {}>".format(hex(hash(self))[2:][:10])

    def __eq__(self, other):
        if not isinstance(other, PaillierPublicKey):
            return NotImplemented
        return self.n == other.n

    def __hash__(self):
        return hash(self.n)

    def __reduce__(self):
        return (PaillierPublicKey, (self.n,))

    def raw_encrypt(self, plaintext, r_value=None):
        """Paillier encryption of an int plaintext (taken mod n, as phe does: n encrypts
        0); returns the ciphertext int.

        ``r_value`` fixes the obfuscator r, taken mod n like phe's (r^n mod n² depends only
        on r mod n); it must be a unit mod n. By default (None or 0, as phe) a fresh uniform
        r is drawn.

        Raises:
          TypeError: if plaintext or r_value is not an int.
          ValueError: if r_value is not a unit mod n (phe would return a ciphertext that
            does not decrypt).
        """
        if not isinstance(plaintext, int):
            raise TypeError("Expected int type plaintext but got: %s" % type(plaintext))
        return int(self._native.raw_encrypt(plaintext % self.n, self._r_value(r_value)))

    def _r_value(self, r_value):
        """phe's obfuscator argument: None or 0 for a fresh random r, else r mod n (a unit)."""
        if r_value is None:
            return None
        r_value = _checks.integer("r_value", r_value)
        if r_value == 0:
            return None
        r = r_value % self.n
        if r == 0 or math.gcd(r, self.n) != 1:
            raise ValueError(
                "r_value must be a unit mod n (the nonce r must satisfy gcd(r, n) = 1): "
                "phe would compute a ciphertext that does not decrypt"
            )
        return r

    def get_random_lt_n(self):
        """A cryptographically random int in [1, n)."""
        return secrets.randbelow(self.n - 1) + 1

    def encrypt(self, value, precision=None, r_value=None):
        """Encode (phe's rules) and encrypt an int, a float or an :class:`EncodedNumber`.

        Raises:
          ValueError: if the encoding is out of range (|mantissa| > max_int), the value is
            NaN or infinite, or the precision is not a positive number.
          TypeError: for a value that is neither int nor float.
        """
        if isinstance(value, EncodedNumber):
            return self.encrypt_encoded(value, r_value)
        if r_value is None:
            c, exponent = self._native.encrypt(_scalar(value), _precision(precision))
            return EncryptedNumber._make(self, c, exponent, obfuscated=True)
        return self.encrypt_encoded(EncodedNumber.encode(self, value, precision), r_value)

    def encrypt_encoded(self, encoding, r_value):
        """Encrypt an :class:`EncodedNumber` (of any ``BASE``; the exponent travels as it
        is): obfuscated with a fresh r when ``r_value`` is None, else with r = ``r_value``
        (phe: 0 means r = 1, an unobfuscated ciphertext)."""
        if not isinstance(encoding, EncodedNumber):
            raise TypeError("encoding must be an EncodedNumber, got %s" % type(encoding).__name__)
        if encoding.public_key != self:
            raise ValueError("the encoding was made for a different public key")
        exponent = _exponent(encoding.exponent, "encoding.exponent")
        m = _checks.integer("encoding.encoding", encoding.encoding)
        if not 0 <= m < self.n:
            raise ValueError("encoding.encoding must be in [0, n)")
        r = self._r_value(r_value) if r_value else 1
        c = self._native.raw_encrypt(m, r)
        return EncryptedNumber._make(self, c, exponent, obfuscated=r_value is None)

    def encrypt_many(self, values, precision=None, progress=None):
        """Encrypt every value of an array (floats or ints, any shape) in parallel.

        Float arrays use phe's float encoding, integer arrays phe's int encoding (exponent
        0, or the one ``precision`` gives). Returns an :class:`EncryptedArray` of the same
        shape. The work runs in chunks with the GIL released: Ctrl-C raises
        ``KeyboardInterrupt`` between chunks, and ``progress(done, total)`` (a callable,
        optional) is called after each chunk.

        Raises:
          MemoryError: if the result does not fit in memory (checked before any work).
        """
        flat, shape = _encryptable(values)
        native = self._native.encrypt_array(flat, _precision(precision), _progress(progress))
        return EncryptedArray._make(self, native, shape, obfuscated=True)

    def verify_key_proof(self, proof, context):
        """Check the key owner's proof that this key's modulus n satisfies
        gcd(n, φ(n)) = 1 (an extension: phe has no such method).

        Call it before relying on this key for masking or re-randomisation, for example as
        the guest of a FATE-style protocol whose host holds the private key: every
        re-randomisation (``obfuscate``, a fresh encryption's rⁿ) multiplies by an n-th
        power, and only when gcd(n, φ(n)) = 1 is x ↦ xⁿ a bijection of Z*_n, so that the
        new ciphertext carries no trace of the old randomness. A key owner who picks an n
        with a prime p′ dividing both n and φ(n) (e.g. n = p·q₁·q₂ with q₁q₂ | p − 1, which
        passes every check of ``PaillierPublicKey(n)``) can read a guest's secret scalar
        mod p′ off a re-randomised reply; re-randomisation cannot repair such a key, the
        guest has to refuse it.

        What is checked (fl-paillier's ``KeyCorrectnessProof::verify``): the encoding is
        well formed; n has no prime factor below 2^16; the proof was made for a modulus of
        n's size; and each of the 8 roots σᵢ lies in [1, n) with σᵢⁿ ≡ ρᵢ (mod n), where
        the challenges ρᵢ are derived by SHA-256 from (n, ``context``, i). When the check
        passes, gcd(n, φ(n)) = 1 except with probability 2^-128 in the random-oracle model
        (Q·2^-128 for a key owner who tries Q moduli or contexts). It proves **nothing
        more** about n: not that it has exactly two prime factors, nor that they have
        similar size or are safe primes (gcd(n, φ(n)) = 1 does imply n is square-free).
        The proof reveals nothing the public key does not (zero knowledge in the random-
        oracle model). docs/proofs/fl-paillier/key-correctness-proof.md has the argument.

        ``context`` binds the proof to a session: both sides must pass the same bytes,
        and a proof made for one context does not verify under another. Use something the
        verifier trusts to be fresh and specific (a session id, both parties' names, a
        nonce the verifier chose and sent to the key owner).

        The check covers this key object only. Numbers that arrive already attached to a
        key (unpickled ``EncryptedNumber``/``EncryptedArray``) carry the sender's key, which
        nobody verified: build received ciphertexts with this key
        (``EncryptedNumber(public_key, ciphertext, exponent)``) or check
        ``number.public_key == public_key`` before computing on them.

        Runs with the GIL released (8 modular exponentiations by n). Every input is
        public: the check is variable time.

        Args:
          proof: the bytes of :meth:`PaillierPrivateKey.prove_correct` (bytes-like).
          context: the session context both parties agreed on (bytes-like; may be empty).

        Raises:
          TypeError: if proof or context is not bytes-like (e.g. a str).
          InvalidKeyProofError: (a ValueError) naming the failed check, if the proof is
            malformed (truncated, extended, empty, unknown version) or does not verify
            for this key and context.
        """
        proof = _checks.byte_string("proof", proof)
        context = _checks.byte_string("context", context)
        failure = self._native.key_proof_failure(proof, context)
        if failure is not None:
            raise InvalidKeyProofError(failure)

    def to_jwk(self, kid=None):
        """This key as pheutil's public JWK (a JSON string)."""
        return self._native.to_jwk(kid if kid is not None else "fl_privacy Paillier public key")

    @classmethod
    def from_jwk(cls, jwk):
        """Parse a phe public JWK (``pheutil extract`` output; a JSON string or dict)."""
        if isinstance(jwk, Mapping):
            jwk = json.dumps(jwk)
        return cls._from_native(_with_legacy_hint(_native.NativePublicKey.from_jwk, jwk))


class _Primes:
    """``p`` and ``q`` of a private key held by fl-paillier, read on access."""

    @property
    def p(self):
        """The smaller prime (a Python int, which cannot be wiped: for export only)."""
        return self._native.primes()[0]

    @property
    def q(self):
        """The larger prime (a Python int, which cannot be wiped: for export only)."""
        return self._native.primes()[1]


class PaillierPrivateKey(_Primes, _Frozen):
    """A Paillier private key, phe's ``PaillierPrivateKey(public_key, p, q)``.

    The key lives in fl-paillier (constant-time CRT decryption, secrets zeroized when the
    key is freed). ``p``, ``q`` and phe's derived attributes (``psquare``, ``qsquare``,
    ``p_inverse``, ``hp``, ``hq``) are computed on access as Python ints, which Python
    cannot wipe: read them only to export the key.

    Raises:
      ValueError: if p·q != n, p == q, or the primes fail fl-paillier's validation.
    """

    def __init__(self, public_key, p, q):
        if not isinstance(public_key, PaillierPublicKey):
            raise TypeError("public_key should be a PaillierPublicKey")
        p = _checks.integer("p", p)
        q = _checks.integer("q", q)
        if not p * q == public_key.n:
            raise ValueError("given public key does not match the given p and q.")
        if p == q:
            raise ValueError("p and q have to be different")
        self._init(public_key=public_key, _native=_native.NativePrivateKey.from_primes(p, q))

    @classmethod
    def _from_native(cls, public_key, native):
        key = cls.__new__(cls)
        key._init(public_key=public_key, _native=native)
        return key

    @staticmethod
    def from_totient(public_key, totient):
        """The private key of ``public_key`` given φ(n) = (p - 1)(q - 1)."""
        p_plus_q = public_key.n - totient + 1
        disc = p_plus_q * p_plus_q - public_key.n * 4
        if disc < 0:
            raise ValueError("given public key and totient do not match.")
        p_minus_q = math.isqrt(disc)
        q = (p_plus_q - p_minus_q) // 2
        p = p_plus_q - q
        if not p * q == public_key.n:
            raise ValueError("given public key and totient do not match.")
        return PaillierPrivateKey(public_key, p, q)

    @property
    def psquare(self):
        return self.p * self.p

    @property
    def qsquare(self):
        return self.q * self.q

    @property
    def p_inverse(self):
        p, q = self._native.primes()
        return pow(p, -1, q)

    def _h(self, x):
        xsquare = x * x
        lx = (pow(self.public_key.g, x - 1, xsquare) - 1) // x
        return pow(lx, -1, x)

    @property
    def hp(self):
        return self._h(self.p)

    @property
    def hq(self):
        return self._h(self.q)

    def __repr__(self):
        return "<PaillierPrivateKey for {}>".format(repr(self.public_key))

    def __eq__(self, other):
        if not isinstance(other, PaillierPrivateKey):
            return NotImplemented
        return self._native.same_key(other._native)

    def __hash__(self):
        # n determines p and q, so equal keys have equal n: no secret enters the hash.
        return hash(("PaillierPrivateKey", self.public_key.n))

    def __reduce__(self):
        p, q = self._native.primes()
        return (PaillierPrivateKey, (self.public_key, p, q))

    def decrypt(self, encrypted_number):
        """The int or float ``encrypted_number`` holds (an int for exponents >= 0).

        Raises:
          TypeError: if it is not an :class:`EncryptedNumber`.
          ValueError: if it was encrypted against a different key.
          OverflowError: if the decrypted value lies in the overflow band.
        """
        return self.decrypt_encoded(encrypted_number).decode()

    def decrypt_encoded(self, encrypted_number, Encoding=None):
        """The :class:`EncodedNumber` (or ``Encoding``) decrypted from ``encrypted_number``."""
        if not isinstance(encrypted_number, EncryptedNumber):
            raise TypeError(
                "Expected encrypted_number to be an EncryptedNumber not: %s"
                % type(encrypted_number)
            )
        if self.public_key != encrypted_number.public_key:
            raise ValueError("encrypted_number was encrypted against a different key!")
        if Encoding is None:
            Encoding = EncodedNumber
        encoded = self._native.raw_decrypt(encrypted_number._c)
        return Encoding(self.public_key, encoded, encrypted_number.exponent)

    def raw_decrypt(self, ciphertext):
        """The plaintext residue in [0, n) of a ciphertext int (validated first)."""
        if not isinstance(ciphertext, int):
            raise TypeError("Expected ciphertext to be an int, not: %s" % type(ciphertext))
        return self._native.raw_decrypt(self.public_key._native.ciphertext(ciphertext))

    def encrypt_many(self, values, precision=None, progress=None):
        """:meth:`PaillierPublicKey.encrypt_many`, done by the key owner (not in phe).

        fl-paillier's CRT encryption: the randomizer rⁿ is built mod p² and q² from the
        primes, so each encryption costs about a quarter of a public-key one, and the
        ciphertexts have exactly the same distribution (they are indistinguishable from, and
        decrypt like, public-key encryptions). For a party that encrypts under its own key,
        as FATE's hetero-NN host does. Constant-time in the secrets. Chunked, interruptible
        and with ``progress`` as the public key's.
        """
        flat, shape = _encryptable(values)
        native = self._native.encrypt_array(flat, _precision(precision), _progress(progress))
        return EncryptedArray._make(self.public_key, native, shape, obfuscated=True)

    def decrypt_many(self, encrypted, dtype=np.float64, progress=None):
        """Decrypt an :class:`EncryptedArray` (or a sequence of numbers) in parallel.

        ``dtype`` float64 (default) decodes as phe does, correctly rounded; int64 requires
        every value to be an integer that fits. Returns an array of the input's shape.
        Chunked with the GIL released: Ctrl-C raises ``KeyboardInterrupt`` between chunks;
        ``progress(done, total)`` is called after each chunk.
        """
        if not isinstance(encrypted, EncryptedArray):
            encrypted = EncryptedArray.from_numbers(list(encrypted))
        if len(encrypted) and encrypted.public_key != self.public_key:
            raise ValueError("encrypted_number was encrypted against a different key!")
        name = np.dtype(dtype).name
        flat = self._native.decrypt_array(encrypted._native, name, _progress(progress))
        return flat.reshape(encrypted.shape)

    def prove_correct(self, context):
        """A proof that this key's modulus n satisfies gcd(n, φ(n)) = 1, as bytes (an
        extension: phe has no such method).

        Send it with the public key; the receiver checks it with
        :meth:`PaillierPublicKey.verify_key_proof` and the same ``context`` before it
        encrypts, masks or re-randomises anything under the key (see there for why, what
        is proved -- soundness 2^-128 in the random-oracle model -- and what is not).

        The proof is fl-paillier's ``KeyCorrectnessProof``: for 8 challenges ρᵢ derived by
        SHA-256 from (n, ``context``, i), the n-th roots σᵢ = ρᵢ^(n⁻¹ mod φ(n)) mod n,
        computed by CRT in constant time in the primes and checked before release (a fault
        in one CRT half would otherwise reveal a prime). The encoding is: version 1 (one
        byte), 8 (one byte), the width w of n in bytes (two bytes, big-endian), then the
        8 roots as w-byte big-endian integers; for a given key and context it is
        deterministic. It reveals nothing the public key does not.

        ``context`` binds the proof to a session (both parties must use the same bytes):
        a session id, both parties' names, a nonce the verifier chose.

        Runs with the GIL released.

        Raises:
          TypeError: if context is not bytes-like (e.g. a str).
        """
        context = _checks.byte_string("context", context)
        return self._native.prove_correct(context)

    def to_jwk(self, kid=None, public_kid=None):
        """This key as pheutil's private JWK (p, q and the public JWK)."""
        return self._native.to_jwk(
            kid if kid is not None else "fl_privacy Paillier private key",
            public_kid if public_kid is not None else "fl_privacy Paillier public key",
        )

    @classmethod
    def from_jwk(cls, jwk):
        """Parse pheutil's private JWK (``p``/``q``, or ``lambda``/``mu``)."""
        if isinstance(jwk, Mapping):
            jwk = json.dumps(jwk)
        native = _with_legacy_hint(_native.NativePrivateKey.from_jwk, jwk)
        return cls._from_native(PaillierPublicKey._from_native(native.public_key()), native)


class PaillierPrivateKeyring(Mapping):
    """Several private keys, indexed by public key (phe's ``PaillierPrivateKeyring``)."""

    def __init__(self, private_keys=None):
        if private_keys is None:
            private_keys = []
        self.__keyring = {}
        for k in private_keys:
            self.add(k)

    def __reduce__(self):
        # Rebuilt through add(), which files each key under its own public key: a pickle
        # cannot file one key under another's public key.
        return (PaillierPrivateKeyring, (list(self.__keyring.values()),))

    __setstate__ = _refuse_pickled_state

    def __getitem__(self, key):
        return self.__keyring[key]

    def __len__(self):
        return len(self.__keyring)

    def __iter__(self):
        return iter(self.__keyring)

    def __delitem__(self, public_key):
        del self.__keyring[public_key]

    def add(self, private_key):
        """Add a key to the keyring."""
        if not isinstance(private_key, PaillierPrivateKey):
            raise TypeError(
                "private_key should be of type PaillierPrivateKey, not %s" % type(private_key)
            )
        self.__keyring[private_key.public_key] = private_key

    def decrypt(self, encrypted_number):
        """Decrypt with the key of ``encrypted_number.public_key`` (KeyError if absent)."""
        return self.__keyring[encrypted_number.public_key].decrypt(encrypted_number)


class InsecureKeyWarning(UserWarning):
    """Warned when a private key under 2048 bits is imported
    (:class:`LegacyPaillierPrivateKey`): such keys give about 80-bit security or less."""


_LEGACY_NO_ENCRYPT = (
    "a legacy key (under 2048 bits) is imported for decryption only: nothing new is "
    "encrypted under it. Move its data to a new key with LegacyPaillierPrivateKey.reencrypt "
    "or reencrypt_many (see python/README.md, 'Legacy keys')"
)


class LegacyPaillierPublicKey(_Frozen):
    """The public half of a :class:`LegacyPaillierPrivateKey`: ``n``, ``g``, ``nsquare`` and
    ``max_int``, for decoding (:class:`EncodedNumber`) only. It cannot encrypt: every
    encryption method raises ``TypeError``."""

    def __init__(self, n, max_int):
        self._init(n=n, g=n + 1, nsquare=n * n, max_int=max_int)

    def __repr__(self):
        return "<LegacyPaillierPublicKey {} bits, decryption only>".format(self.n.bit_length())

    def __eq__(self, other):
        if not isinstance(other, LegacyPaillierPublicKey):
            return NotImplemented
        return self.n == other.n

    def __hash__(self):
        return hash(("LegacyPaillierPublicKey", self.n))

    def __reduce__(self):
        return (LegacyPaillierPublicKey, (self.n, self.max_int))

    def _refuse(self, *args, **kwargs):
        raise TypeError(_LEGACY_NO_ENCRYPT)

    raw_encrypt = encrypt = encrypt_encoded = encrypt_many = _refuse


class LegacyPaillierPrivateKey(_Primes, _Frozen):
    """An existing private key of 1024 to 2047 bits, imported to **decrypt** data that
    already exists under it, and to move that data to a new key. Insecure by today's
    standards (about 80-bit security at 1024 bits): nothing is ever encrypted under it.

    Build it only with :meth:`from_primes_insecure` or :meth:`from_jwk_insecure` (their
    names state the risk; both warn with :class:`InsecureKeyWarning`). Decryption is
    fl-paillier's constant-time CRT, and the key's limbs are zeroized when it is freed.

    Migration::

        legacy = paillier.LegacyPaillierPrivateKey.from_jwk_insecure(old_jwk)
        public_key, private_key = paillier.generate_paillier_keypair()   # 3072 bits
        moved = legacy.reencrypt_many(ciphertexts, exponents, public_key)  # EncryptedArray
        # store moved.ciphertexts() and moved.exponents; discard the old key and ciphertexts

    Ciphertexts are the ints phe's ``ciphertext()`` gives, with phe's exponents (FATE 1.x
    stores its exponents with the opposite sign: pass ``-exponent``).
    """

    def __init__(self, *args, **kwargs):
        raise TypeError(
            "import a legacy key with LegacyPaillierPrivateKey.from_primes_insecure(p, q) or "
            ".from_jwk_insecure(jwk): keys under 2048 bits are for decrypting old data only"
        )

    @classmethod
    def _from_native(cls, native):
        warnings.warn(
            "imported a %d-bit Paillier private key: keys under 2048 bits are insecure; "
            "use it only to decrypt existing data and move it to a new key "
            "(LegacyPaillierPrivateKey.reencrypt_many)" % native.bits,
            InsecureKeyWarning,
            stacklevel=3,
        )
        key = cls.__new__(cls)
        key._init(_native=native, public_key=LegacyPaillierPublicKey(native.n, native.max_int))
        return key

    @classmethod
    def from_primes_insecure(cls, p, q):
        """The legacy key with primes p and q (either order; n = p·q of 1024 to 2047 bits).

        Raises:
          TypeError: if p or q is not an int.
          ValueError: if p or q is not prime, p = q, their lengths differ, or n has fewer
            than 1024 or 2048 and more bits (import such a key with PaillierPrivateKey).
        """
        p = _checks.integer("p", p, 1)
        q = _checks.integer("q", q, 1)
        return cls._from_native(_native.NativeLegacyPrivateKey.from_primes_insecure_legacy(p, q))

    @classmethod
    def from_jwk_insecure(cls, jwk):
        """The legacy key of pheutil's private JWK (a JSON string or dict, with ``p``/``q``
        or ``lambda``/``mu``, and its ``pub`` with ``n``), checked against that ``n``.

        Raises:
          ValueError: for a malformed JWK, or a key that is not a legacy key.
        """
        data = json.loads(jwk) if isinstance(jwk, (str, bytes)) else jwk
        if not isinstance(data, Mapping):
            raise ValueError("a private JWK must be a JSON object")
        if data.get("kty") != "DAJ" or "decrypt" not in data.get("key_ops", ()):
            raise ValueError('a private JWK needs "kty": "DAJ" and "decrypt" in "key_ops"')
        public = data.get("pub")
        if not isinstance(public, Mapping) or not isinstance(public.get("n"), str):
            raise ValueError('a private JWK needs its public key in "pub", with "n"')
        n = base64_to_int(public["n"])
        if isinstance(data.get("p"), str) and isinstance(data.get("q"), str):
            p, q = base64_to_int(data["p"]), base64_to_int(data["q"])
        elif isinstance(data.get("lambda"), str) and isinstance(data.get("mu"), str):
            p, q = _factor_with_lambda(n, base64_to_int(data["lambda"]), base64_to_int(data["mu"]))
        else:
            raise ValueError('a private JWK needs "p" and "q", or "lambda" and "mu"')
        if p * q != n:
            raise ValueError("the private JWK's p * q does not equal its public key's n")
        return cls.from_primes_insecure(p, q)

    @property
    def n(self):
        return self.public_key.n

    def __repr__(self):
        return "<LegacyPaillierPrivateKey %d bits, decryption only>" % self._native.bits

    def __eq__(self, other):
        if not isinstance(other, LegacyPaillierPrivateKey):
            return NotImplemented
        return self._native.same_key(other._native)

    def __hash__(self):
        return hash(("LegacyPaillierPrivateKey", self.public_key.n))

    def __reduce__(self):
        raise TypeError("a legacy private key is not pickled: keep its JWK or primes instead")

    def raw_decrypt(self, ciphertext):
        """The plaintext residue in [0, n) of a ciphertext int (validated first)."""
        if not isinstance(ciphertext, int):
            raise TypeError("Expected ciphertext to be an int, not: %s" % type(ciphertext))
        return self._native.raw_decrypt(ciphertext)

    def decrypt_encoded(self, ciphertext, exponent=0, Encoding=None):
        """The :class:`EncodedNumber` (or ``Encoding``) of a ciphertext int with its phe
        exponent (as phe's ``decrypt_encoded`` of ``EncryptedNumber(pk, ciphertext,
        exponent)``)."""
        exponent = _exponent(exponent)
        if Encoding is None:
            Encoding = EncodedNumber
        return Encoding(self.public_key, self.raw_decrypt(ciphertext), exponent)

    def decrypt(self, ciphertext, exponent=0):
        """The int or float a ciphertext int with its phe exponent holds (phe's decoding).

        Raises:
          TypeError: if ciphertext is not an int.
          ValueError: if it is not a ciphertext of this key (0 < c < n², gcd(c, n) = 1).
          OverflowError: if the value lies in the overflow band.
        """
        return self.decrypt_encoded(ciphertext, exponent).decode()

    def _batch(self, ciphertexts, exponents):
        ciphertexts = list(ciphertexts)
        for i, c in enumerate(ciphertexts):
            if isinstance(c, bool) or not isinstance(c, numbers.Integral):
                raise TypeError("ciphertexts[%d] must be an int, got %s" % (i, type(c).__name__))
        exps = np.asarray(exponents)
        if exps.dtype.kind not in "iu":
            raise TypeError("exponents must be ints, got dtype %s" % exps.dtype)
        exps = np.ascontiguousarray(np.broadcast_to(exps, (len(ciphertexts),)), dtype=np.int64)
        return ciphertexts, exps

    def decrypt_many(self, ciphertexts, exponents=0, dtype=np.float64, progress=None):
        """Decrypt ciphertext ints (phe's exponents: one per ciphertext, or one for all) to
        a float64 (phe's decoding, correctly rounded) or int64 array; chunked, in parallel,
        interruptible, with ``progress(done, total)`` after each chunk."""
        ciphertexts, exps = self._batch(ciphertexts, exponents)
        return self._native.decrypt_array(ciphertexts, exps, np.dtype(dtype).name,
                                          _progress(progress))

    def reencrypt_many(self, ciphertexts, exponents, public_key, progress=None):
        """The migration: each value decrypted under this key and encrypted, with the same
        mantissa and exponent (so exactly the same value), under ``public_key`` (a
        :class:`PaillierPublicKey` of at least 2048 bits) with fresh randomness. Returns an
        :class:`EncryptedArray` of ``public_key``; chunked, interruptible, with
        ``progress``."""
        if not isinstance(public_key, PaillierPublicKey):
            raise TypeError("public_key must be a PaillierPublicKey (at least 2048 bits)")
        ciphertexts, exps = self._batch(ciphertexts, exponents)
        native = self._native.reencrypt_array(ciphertexts, exps, public_key._native,
                                              _progress(progress))
        return EncryptedArray._make(public_key, native, (len(ciphertexts),), obfuscated=True)

    def reencrypt(self, ciphertext, exponent, public_key):
        """:meth:`reencrypt_many` of one number: an :class:`EncryptedNumber` of
        ``public_key``."""
        return self.reencrypt_many([ciphertext], [exponent], public_key)[0]


def _factor_with_lambda(n, lam, mu):
    """p and q from n and λ, a multiple of the Carmichael function λ(n) (phe's private JWK
    form with "lambda" and "mu"; Miller's algorithm: a nontrivial square root of 1 mod n
    gives a factor)."""
    if not (0 < lam < n and 0 < mu < n) or lam * mu % n != 1:
        raise ValueError("the private JWK's lambda and mu are inconsistent")
    twos = (lam & -lam).bit_length() - 1
    odd = lam >> twos
    for a in range(2, 200):
        x = pow(a, odd, n)
        if x in (1, n - 1):
            continue
        for _ in range(twos):
            y = x * x % n
            if y == 1:
                f = math.gcd(x - 1, n)
                if 1 < f < n:
                    return f, n // f
                break
            if y == n - 1:
                break
            x = y
    raise ValueError("the private JWK's lambda does not factor n")


class EncodedNumber:
    """phe's encoding: value = mantissa * BASE**exponent, the mantissa stored mod n.

    ``BASE`` is 16 as in phe; a subclass may set another ``BASE`` (an int >= 2) with its
    ``LOG2_BASE`` = log2(BASE), as phe documents: ``encode``, ``decode`` and
    ``decrease_exponent_to`` then work in that base, exactly as phe's do (the base-16 class
    runs on fl-paillier, other bases in Python on the same rules). Such an encoding can be
    encrypted (``public_key.encrypt(encoded)``) and read back with
    ``private_key.decrypt_encoded(x, TheSubclass)``; it cannot enter ``EncryptedNumber``
    arithmetic, whose exponents are base 16 (``ValueError``, where phe mixes silently).

    Attributes:
      public_key, encoding (int in [0, n)), exponent (int within ±10000).

    Raises:
      TypeError: if encoding or exponent is not an int.
      ValueError: if the exponent is beyond ±10000.
    """

    BASE = _BASE
    LOG2_BASE = math.log(_BASE, 2)
    FLOAT_MANTISSA_BITS = 53

    def __init__(self, public_key, encoding, exponent):
        self.public_key = public_key
        self.encoding = _checks.integer("encoding", encoding)
        self.exponent = _exponent(exponent)

    @classmethod
    def _base(cls):
        """This class's BASE, checked (an int >= 2)."""
        base = cls.BASE
        if isinstance(base, bool) or not isinstance(base, numbers.Integral) or base < 2:
            raise TypeError("%s.BASE must be an int >= 2, got %r" % (cls.__name__, base))
        return int(base)

    @classmethod
    def _is_phe_default(cls):
        """Whether this class encodes as phe's own EncodedNumber (base 16, 53-bit floats),
        which fl-paillier implements."""
        return (cls._base() == _BASE and cls.LOG2_BASE == 4
                and cls.FLOAT_MANTISSA_BITS == 53)

    def _is_native(self):
        return type(self)._is_phe_default() and isinstance(self.public_key, PaillierPublicKey)

    @classmethod
    def encode(cls, public_key, scalar, precision=None, max_exponent=None):
        """phe's encoding of an int or float (exponent from the float's precision or from
        ``precision``, capped by ``max_exponent``; mantissa rounded half to even), in this
        class's ``BASE``.

        Raises:
          ValueError: if |mantissa| > max_int, for NaN or infinity, or a bad precision.
          TypeError: for a value that is neither int nor float.
        """
        scalar = _scalar(scalar)
        precision = _precision(precision)
        if max_exponent is not None:
            max_exponent = _exponent(max_exponent, "max_exponent")
        if cls._is_phe_default() and isinstance(public_key, PaillierPublicKey):
            encoding, exponent = public_key._native.encode(scalar, precision, max_exponent)
            return cls(public_key, encoding, exponent)
        return cls._encode_any_base(public_key, scalar, precision, max_exponent)

    @classmethod
    def _encode_any_base(cls, public_key, scalar, precision, max_exponent):
        """phe's encoding rules in ``cls.BASE``, with exact rational arithmetic."""
        base = cls._base()
        if isinstance(scalar, float) and not math.isfinite(scalar):
            raise ValueError("cannot encode a value that is not finite (NaN or infinity)")
        if precision is not None:
            exponent = math.floor(math.log(precision, base))
        elif isinstance(scalar, int):
            exponent = 0
        else:
            lsb = math.frexp(scalar)[1] - cls.FLOAT_MANTISSA_BITS
            exponent = math.floor(lsb / cls.LOG2_BASE)
        if max_exponent is not None:
            exponent = min(max_exponent, exponent)
        exponent = _exponent(exponent)
        mantissa = round(fractions.Fraction(scalar) * fractions.Fraction(base) ** -exponent)
        if abs(mantissa) > public_key.max_int:
            raise ValueError(
                "value out of range: its mantissa in base %d exceeds max_int = n // 3 - 1" % base
            )
        return cls(public_key, mantissa % public_key.n, exponent)

    def decode(self):
        """The int (exponent >= 0) or float this encodes.

        Raises:
          OverflowError: in the overflow band, or beyond the float range.
          ValueError: for an encoding that is not in [0, n) (a corrupted number).
        """
        if self._is_native():
            return self.public_key._native.decode(self.encoding, self.exponent)
        encoding = _checks.integer("encoding", self.encoding)
        exponent = _exponent(self.exponent)
        n, max_int = self.public_key.n, self.public_key.max_int
        if not 0 <= encoding < n:
            raise ValueError("Attempted to decode corrupted number: encoding out of range [0, n)")
        if encoding <= max_int:
            mantissa = encoding
        elif encoding >= n - max_int:
            mantissa = encoding - n
        else:
            raise OverflowError("Overflow detected in decrypted number")
        base = type(self)._base()
        if exponent >= 0:
            return mantissa * base ** exponent
        try:
            return mantissa / base ** -exponent
        except OverflowError as exc:
            raise OverflowError("decoded result too large for a float") from exc

    def decrease_exponent_to(self, new_exp):
        """The same value with a smaller exponent (ValueError if new_exp is larger)."""
        new_exp = _exponent(new_exp, "new_exp")
        if new_exp > self.exponent:
            raise ValueError(
                "New exponent %i should be more negative than old exponent %i"
                % (new_exp, self.exponent)
            )
        if self._is_native():
            encoding = self.public_key._native.decrease_encoding(
                self.encoding, self.exponent, new_exp
            )
        else:
            factor = type(self)._base() ** (self.exponent - new_exp)
            encoding = self.encoding * factor % self.public_key.n
        return self.__class__(self.public_key, encoding, new_exp)


def _base16_operand(encoded):
    """An EncodedNumber that may enter EncryptedNumber arithmetic (base 16)."""
    base = type(encoded)._base()
    if base != _BASE:
        raise ValueError(
            "an EncodedNumber with BASE = %d cannot be combined with an EncryptedNumber, "
            "whose exponent is base 16 (phe would silently give a wrong value): decrypt with "
            "decrypt_encoded(x, %s) and compute in plaintext, or re-encode in base 16"
            % (base, type(encoded).__name__)
        )
    return encoded


class EncryptedNumber:
    """An encrypted int or float, phe's ``EncryptedNumber(public_key, ciphertext, exponent)``.

    Supports ``+`` and ``-`` with another EncryptedNumber, an :class:`EncodedNumber`, an int
    or a float; ``*`` and ``/`` by an int, a float or an EncodedNumber; ``sum()``.
    Arithmetic results are not obfuscated until :meth:`ciphertext` (or pickling) needs them
    to be, as in phe.

    Raises:
      TypeError: if public_key is not a PaillierPublicKey, or ciphertext or exponent is
        not an int.
      ValueError: if the ciphertext is not a valid ciphertext of the key, or the exponent
        is beyond ±10000.
    """

    def __init__(self, public_key, ciphertext, exponent=0):
        if not isinstance(public_key, PaillierPublicKey):
            raise TypeError("public_key should be a PaillierPublicKey")
        if isinstance(ciphertext, bool) or not isinstance(ciphertext, numbers.Integral):
            raise TypeError("ciphertext should be an integer")
        exponent = _exponent(exponent)
        _refuse_reinit(self)
        self._public_key = public_key
        self._c = public_key._native.ciphertext(int(ciphertext))
        self.exponent = exponent
        self._is_obfuscated = False

    @property
    def public_key(self):
        """The :class:`PaillierPublicKey` the number is encrypted under (read-only: the
        ciphertext is bound to that key, and decryption looks the key up by it)."""
        return self._public_key

    __setstate__ = _refuse_pickled_state

    @property
    def _EncryptedNumber__is_obfuscated(self):
        """phe's private flag, under its name-mangled name (read by phe's own tests)."""
        return self._is_obfuscated

    @classmethod
    def _make(cls, public_key, c, exponent, obfuscated=False):
        number = cls.__new__(cls)
        number._public_key = public_key
        number._c = c
        number.exponent = exponent
        number._is_obfuscated = obfuscated
        return number

    def __repr__(self):
        return "<EncryptedNumber exponent=%d under %r>" % (self.exponent, self.public_key)

    def __reduce__(self):
        # Obfuscated first: a pickle leaves this process.
        return (_restore_number, (self.public_key, self.ciphertext(), self.exponent))

    def _same_key(self, other, what):
        if self.public_key != other.public_key:
            raise ValueError(
                "Attempted to add numbers %s against different public keys!" % what
            )

    def __add__(self, other):
        """Add an int, float, EncryptedNumber or EncodedNumber."""
        if isinstance(other, EncryptedNumber):
            self._same_key(other, "encrypted")
            c, e = self.public_key._native.add(self._c, self.exponent, other._c, other.exponent)
            return EncryptedNumber._make(self.public_key, c, e)
        if isinstance(other, EncodedNumber):
            return self._add_encoded(other)
        if isinstance(other, EncryptedArray):
            return NotImplemented
        return self._add_encoded(
            EncodedNumber.encode(self.public_key, other, max_exponent=self.exponent)
        )

    def __radd__(self, other):
        return self.__add__(other)

    def _add_encoded(self, encoded):
        self._same_key(encoded, "encoded")
        _base16_operand(encoded)
        c, e = self.public_key._native.add_encoded(
            self._c, self.exponent, encoded.encoding, encoded.exponent
        )
        return EncryptedNumber._make(self.public_key, c, e)

    def __mul__(self, other):
        """Multiply by an int, float or EncodedNumber."""
        if isinstance(other, EncryptedNumber):
            raise NotImplementedError(
                "Good luck with that... Paillier cannot multiply two encrypted numbers "
                "(only by a plain int, float or EncodedNumber)"
            )
        if isinstance(other, EncryptedArray):
            return NotImplemented
        if isinstance(other, EncodedNumber):
            encoding = _base16_operand(other)
            if encoding.public_key != self.public_key:
                raise ValueError("the encoding was made for a different public key")
        else:
            encoding = EncodedNumber.encode(self.public_key, other)
        c, e = self.public_key._native.mul_encoded(
            self._c, self.exponent, encoding.encoding, encoding.exponent
        )
        return EncryptedNumber._make(self.public_key, c, e)

    def __rmul__(self, other):
        return self.__mul__(other)

    def __sub__(self, other):
        return self + (other * -1)

    def __rsub__(self, other):
        return other + (self * -1)

    def __neg__(self):
        return self * -1

    def __truediv__(self, scalar):
        return self.__mul__(1 / scalar)

    def ciphertext(self, be_secure=True):
        """The ciphertext int; obfuscated first (c·rⁿ) unless already, or be_secure=False."""
        if be_secure and not self._is_obfuscated:
            self.obfuscate()
        return int(self._c)

    def decrease_exponent_to(self, new_exp):
        """The same value with a smaller exponent (a homomorphic product by 16**Δ)."""
        new_exp = _exponent(new_exp, "new_exp")
        if new_exp > self.exponent:
            raise ValueError(
                "New exponent %i should be more negative than old exponent %i"
                % (new_exp, self.exponent)
            )
        c = self.public_key._native.decrease_exponent(self._c, self.exponent, new_exp)
        return EncryptedNumber._make(self.public_key, c, new_exp)

    def obfuscate(self):
        """Re-randomize the ciphertext (multiply by rⁿ for a fresh r)."""
        self._c = self.public_key._native.obfuscate(self._c)
        self._is_obfuscated = True

    def to_json(self):
        """pheutil's ``{"v": "<ciphertext>", "e": <exponent>}`` (exponent lowered to -32 if
        above, as pheutil writes; the ciphertext is obfuscated first)."""
        if not self._is_obfuscated:
            self.obfuscate()
        return self.public_key._native.number_to_json(self._c, self.exponent)

    @classmethod
    def from_json(cls, public_key, data):
        """Parse pheutil's ``{"v", "e"}`` (a JSON string or dict) under ``public_key``."""
        if not isinstance(public_key, PaillierPublicKey):
            raise TypeError("public_key should be a PaillierPublicKey")
        if isinstance(data, Mapping):
            data = json.dumps(data)
        c, e = public_key._native.number_from_json(data)
        return cls._make(public_key, c, e)


class EncryptedArray:
    """Encrypted numbers of one key in an array shape, for batch work.

    ``+``/``-`` with another EncryptedArray, a numpy array or a scalar; ``*``/``/`` by a
    numpy array or a scalar (phe's rules per element); ``sum()``; indexing gives
    :class:`EncryptedNumber`. Every operation releases the GIL and runs in parallel.
    """

    def __init__(self, numbers_):
        _refuse_reinit(self)
        other = EncryptedArray.from_numbers(list(numbers_))
        self.__dict__.update(other.__dict__)

    __setstate__ = _refuse_pickled_state

    @property
    def public_key(self):
        """The :class:`PaillierPublicKey` every element is encrypted under (read-only)."""
        return self._public_key

    @classmethod
    def _make(cls, public_key, native, shape, obfuscated=False):
        array = cls.__new__(cls)
        array._public_key = public_key
        array._native = native
        array.shape = tuple(shape)
        array._is_obfuscated = obfuscated
        return array

    @classmethod
    def from_numbers(cls, encrypted_numbers):
        """A 1-D array of :class:`EncryptedNumber` (all under one public key)."""
        encrypted_numbers = list(encrypted_numbers)
        if not encrypted_numbers:
            raise ValueError("cannot build an EncryptedArray from no numbers")
        public_key = encrypted_numbers[0].public_key
        for x in encrypted_numbers:
            if not isinstance(x, EncryptedNumber):
                raise TypeError("expected EncryptedNumber, got %s" % type(x))
            if x.public_key != public_key:
                raise ValueError("the numbers are encrypted against different public keys")
        native = _native.NativeArray.from_pairs(
            public_key._native, [(x._c, x.exponent) for x in encrypted_numbers]
        )
        obfuscated = all(x._is_obfuscated for x in encrypted_numbers)
        return cls._make(public_key, native, (len(encrypted_numbers),), obfuscated)

    def __len__(self):
        return len(self._native)

    def __reduce__(self):
        # Obfuscated first, as an EncryptedNumber's pickle: it leaves this process.
        return (_restore_array, (self.public_key, self.ciphertexts(), list(self._native.exponents()),
                                 self.shape))

    @property
    def size(self):
        return len(self._native)

    @property
    def exponents(self):
        """The phe exponents, an int64 array of this shape."""
        return self._native.exponents().reshape(self.shape)

    def __repr__(self):
        return "<EncryptedArray shape=%s under %r>" % (self.shape, self.public_key)

    def __iter__(self):
        for i in range(len(self)):
            yield self._number(i)

    def _number(self, i):
        c, e = self._native.get(i)
        return EncryptedNumber._make(self.public_key, c, e, self._is_obfuscated)

    def __getitem__(self, index):
        positions = np.arange(len(self)).reshape(self.shape)[index]
        if np.ndim(positions) == 0:
            return self._number(int(positions))
        taken = self._native.take(np.ascontiguousarray(positions.reshape(-1), dtype=np.int64))
        return EncryptedArray._make(self.public_key, taken, positions.shape, self._is_obfuscated)

    def to_numbers(self):
        """The elements as a flat list of :class:`EncryptedNumber`."""
        return list(self)

    def _scalars(self, other):
        array = np.asarray(other)
        if array.dtype.kind not in "biuf":
            raise TypeError("expected numbers (floats or ints), got dtype %s" % array.dtype)
        array = np.broadcast_to(array, self.shape).reshape(-1)
        if array.dtype.kind == "f":
            return np.ascontiguousarray(array, dtype=np.float64)
        if array.dtype.kind == "u" and array.size and array.max() > np.iinfo(np.int64).max:
            raise OverflowError("unsigned values above 2**63 - 1 are not supported")
        return np.ascontiguousarray(array, dtype=np.int64)

    def _wrap(self, native):
        return EncryptedArray._make(self.public_key, native, self.shape)

    def __add__(self, other):
        if isinstance(other, EncryptedArray):
            if other.public_key != self.public_key:
                raise ValueError(
                    "Attempted to add numbers encrypted against different public keys!"
                )
            if other.shape != self.shape:
                raise ValueError("shape mismatch: %s vs %s" % (self.shape, other.shape))
            return self._wrap(self._native.add(other._native))
        if isinstance(other, EncryptedNumber):
            return self + EncryptedArray.from_numbers([other] * len(self)).reshape(self.shape)
        return self._wrap(self._native.add_scalars(self._scalars(other)))

    def __radd__(self, other):
        return self.__add__(other)

    def __mul__(self, other):
        if isinstance(other, (EncryptedArray, EncryptedNumber)):
            raise NotImplementedError(
                "Paillier cannot multiply two encrypted numbers (only by plain numbers)"
            )
        return self._wrap(self._native.mul_scalars(self._scalars(other)))

    def __rmul__(self, other):
        return self.__mul__(other)

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-other if isinstance(other, EncryptedArray) else np.negative(other))

    def __rsub__(self, other):
        return (-self) + other

    def __truediv__(self, other):
        return self * (1 / np.asarray(other, dtype=np.float64))

    def reshape(self, *shape):
        """The same numbers in another shape."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        new_shape = np.empty(len(self), dtype=np.int8).reshape(shape).shape
        return EncryptedArray._make(self.public_key, self._native, new_shape, self._is_obfuscated)

    def sum(self, progress=None):
        """The encrypted sum of all elements (an :class:`EncryptedNumber`); chunked and
        interruptible, with ``progress(done, total)`` after each chunk."""
        total = self._native.sum(_progress(progress))
        if total is None:
            return self.public_key.encrypt(0)
        c, e = total
        return EncryptedNumber._make(self.public_key, c, e)

    def obfuscate(self, progress=None):
        """Re-randomize every ciphertext (in parallel; chunked and interruptible, with
        ``progress(done, total)`` after each chunk)."""
        self._native = self._native.obfuscate(_progress(progress))
        self._is_obfuscated = True

    def ciphertexts(self, be_secure=True, progress=None):
        """The ciphertext ints (obfuscated first unless already, or be_secure=False)."""
        if be_secure and not self._is_obfuscated:
            self.obfuscate(progress)
        return self._native.ciphertext_ints()


def _restore_number(public_key, ciphertext, exponent):
    number = EncryptedNumber(public_key, ciphertext, exponent)
    number._is_obfuscated = True
    return number


def _restore_array(public_key, ciphertexts, exponents, shape):
    numbers_ = [_restore_number(public_key, c, int(e)) for c, e in zip(ciphertexts, exponents)]
    return EncryptedArray.from_numbers(numbers_).reshape(shape)


class InvalidKeyProofError(ValueError):
    """A key-correctness proof (:meth:`PaillierPrivateKey.prove_correct`) that is malformed
    or does not verify for the public key and context it was checked against
    (:meth:`PaillierPublicKey.verify_key_proof`). A ``ValueError``; the message names the
    failed check. Do not use the key: its modulus is not proved to satisfy
    gcd(n, φ(n)) = 1."""


class NonPositiveIntError(ValueError, AssertionError):
    """A non-positive int where a positive one is required (:func:`int_to_base64`). A
    ``ValueError``, and also an ``AssertionError``, which phe.util raises there."""


def int_to_base64(x):
    """phe.util's unpadded base64url of a positive int's big-endian bytes.

    Raises:
      TypeError: if x is not an int.
      NonPositiveIntError: (a ValueError and an AssertionError) if x <= 0.
    """
    x = _checks.integer("x", x)
    if x <= 0:
        raise NonPositiveIntError("int_to_base64 takes a positive int, got %d" % x)
    length = (x.bit_length() + 7) // 8
    return base64.urlsafe_b64encode(x.to_bytes(length, "big")).decode("utf-8").rstrip("=")


def base64_to_int(s):
    """phe.util's inverse of :func:`int_to_base64` (padding optional)."""
    if not isinstance(s, str):
        raise TypeError("s must be a str, got %s" % type(s).__name__)
    if len(s) % 4 == 1:
        raise ValueError("Invalid base64 string")
    return int.from_bytes(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)), "big")


def _precision(precision):
    """phe's precision argument: None or a finite number > 0 (checked by the encoder)."""
    if precision is None:
        return None
    precision = _checks.real("precision", precision)
    if not (math.isfinite(precision) and precision > 0):
        raise ValueError("precision must be a finite number > 0, got %r" % precision)
    return precision


def _with_legacy_hint(parse, argument):
    """``parse(argument)``; a refusal for a key under 2048 bits says how to read old data."""
    try:
        return parse(argument)
    except ValueError as exc:
        if "shorter than 2048 bits" in str(exc):
            raise ValueError("%s; %s" % (exc, _LEGACY_HINT)) from None
        raise
