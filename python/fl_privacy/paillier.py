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
``+``, ``*``, ``sum``) release the GIL and run in parallel.

Deliberate deviations from phe (stricter, never silently different):

* keys: n must have 2048 to 8192 bits and pass fl-paillier's validation (odd, not prime,
  not a perfect power, no factor below 2^16); ``generate_paillier_keypair`` makes 2048,
  3072 (the default, as phe) or 4096-bit keys. phe accepts any n.
* ``EncryptedNumber(public_key, ciphertext)`` validates 0 < c < n² and gcd(c, n) = 1
  (phe stores any int); exponents are bounded to ±10000.
* pickling an ``EncryptedNumber`` obfuscates it first (phe pickles the raw, possibly
  unobfuscated ciphertext, which can reveal the scalars applied to it).
* error messages do not include plaintext values.
"""

import json
import math
import numbers
import secrets
from collections.abc import Mapping

import numpy as np

from fl_privacy import _native

__all__ = [
    "DEFAULT_KEYSIZE",
    "EncodedNumber",
    "EncryptedArray",
    "EncryptedNumber",
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

_BASE = 16


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
    if isinstance(n_length, bool) or not isinstance(n_length, numbers.Integral):
        raise TypeError("n_length must be an int, got %s" % type(n_length))
    if int(n_length) not in _native.SUPPORTED_KEY_BITS:
        raise ValueError(
            "unsupported key size %d bits: allowed are 2048, 3072 (default) or 4096"
            % n_length
        )
    native = _native.NativePrivateKey.generate(int(n_length))
    public_key = PaillierPublicKey._from_native(native.public_key())
    private_key = PaillierPrivateKey._from_native(public_key, native)
    if private_keyring is not None:
        private_keyring.add(private_key)
    return public_key, private_key


class PaillierPublicKey:
    """A Paillier public key (g = n + 1), phe's ``PaillierPublicKey``.

    Attributes:
      n (int), g (int) = n + 1, nsquare (int) = n², max_int (int) = n // 3 - 1.

    Raises:
      ValueError: if n fails validation (see the module docs).
    """

    def __init__(self, n):
        self._set_native(_native.NativePublicKey.from_n(n))

    @classmethod
    def _from_native(cls, native):
        key = cls.__new__(cls)
        key._set_native(native)
        return key

    def _set_native(self, native):
        self._native = native
        self.n = native.n
        self.g = self.n + 1
        self.nsquare = self.n * self.n
        self.max_int = native.max_int

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
        """Paillier encryption of an int 0 <= plaintext < n; returns the ciphertext int.

        ``r_value`` fixes the obfuscator r (0 < r < n, gcd(r, n) = 1); by default a fresh
        uniform r is drawn.
        """
        if not isinstance(plaintext, int):
            raise TypeError("Expected int type plaintext but got: %s" % type(plaintext))
        return int(self._native.raw_encrypt(plaintext, r_value))

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
            c, exponent = self._native.encrypt(_scalar(value), precision)
            return EncryptedNumber._make(self, c, exponent, obfuscated=True)
        return self.encrypt_encoded(EncodedNumber.encode(self, value, precision), r_value)

    def encrypt_encoded(self, encoding, r_value):
        """Encrypt an :class:`EncodedNumber` (obfuscated with a fresh r unless r_value)."""
        if encoding.public_key != self:
            raise ValueError("the encoding was made for a different public key")
        c = self._native.raw_encrypt(encoding.encoding, r_value)
        return EncryptedNumber._make(self, c, encoding.exponent, obfuscated=r_value is None)

    def encrypt_many(self, values, precision=None):
        """Encrypt every value of an array (floats or ints, any shape) in parallel.

        Float arrays use phe's float encoding, integer arrays phe's int encoding (exponent
        0, or the one ``precision`` gives). Returns an :class:`EncryptedArray` of the same
        shape. The GIL is released during the work.
        """
        flat, shape = _encryptable(values)
        native = self._native.encrypt_array(flat, precision)
        return EncryptedArray._make(self, native, shape, obfuscated=True)

    def to_jwk(self, kid=None):
        """This key as pheutil's public JWK (a JSON string)."""
        return self._native.to_jwk(kid if kid is not None else "fl_privacy Paillier public key")

    @classmethod
    def from_jwk(cls, jwk):
        """Parse a phe public JWK (``pheutil extract`` output; a JSON string or dict)."""
        if isinstance(jwk, Mapping):
            jwk = json.dumps(jwk)
        return cls._from_native(_native.NativePublicKey.from_jwk(jwk))


class PaillierPrivateKey:
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
        if not p * q == public_key.n:
            raise ValueError("given public key does not match the given p and q.")
        if p == q:
            raise ValueError("p and q have to be different")
        self.public_key = public_key
        self._native = _native.NativePrivateKey.from_primes(p, q)

    @classmethod
    def _from_native(cls, public_key, native):
        key = cls.__new__(cls)
        key.public_key = public_key
        key._native = native
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
    def p(self):
        """The smaller prime (a Python int: not wiped)."""
        return self._native.primes()[0]

    @property
    def q(self):
        """The larger prime (a Python int: not wiped)."""
        return self._native.primes()[1]

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

    def encrypt_many(self, values, precision=None):
        """:meth:`PaillierPublicKey.encrypt_many`, done by the key owner (not in phe).

        fl-paillier's CRT encryption: the randomizer rⁿ is built mod p² and q² from the
        primes, so each encryption costs about a quarter of a public-key one, and the
        ciphertexts have exactly the same distribution (they are indistinguishable from, and
        decrypt like, public-key encryptions). For a party that encrypts under its own key,
        as FATE's hetero-NN host does. Constant-time in the secrets.
        """
        flat, shape = _encryptable(values)
        native = self._native.encrypt_array(flat, precision)
        return EncryptedArray._make(self.public_key, native, shape, obfuscated=True)

    def decrypt_many(self, encrypted, dtype=np.float64):
        """Decrypt an :class:`EncryptedArray` (or a sequence of numbers) in parallel.

        ``dtype`` float64 (default) decodes as phe does, correctly rounded; int64 requires
        every value to be an integer that fits. Returns an array of the input's shape.
        """
        if not isinstance(encrypted, EncryptedArray):
            encrypted = EncryptedArray.from_numbers(list(encrypted))
        if len(encrypted) and encrypted.public_key != self.public_key:
            raise ValueError("encrypted_number was encrypted against a different key!")
        name = np.dtype(dtype).name
        flat = self._native.decrypt_array(encrypted._native, name)
        return flat.reshape(encrypted.shape)

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
        native = _native.NativePrivateKey.from_jwk(jwk)
        return cls._from_native(PaillierPublicKey._from_native(native.public_key()), native)


class PaillierPrivateKeyring(Mapping):
    """Several private keys, indexed by public key (phe's ``PaillierPrivateKeyring``)."""

    def __init__(self, private_keys=None):
        if private_keys is None:
            private_keys = []
        self.__keyring = {k.public_key: k for k in private_keys}

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


class EncodedNumber:
    """phe's encoding: value = mantissa * 16**exponent, the mantissa stored mod n.

    Attributes:
      public_key, encoding (int in [0, n)), exponent (int).
    """

    BASE = _BASE
    LOG2_BASE = math.log(_BASE, 2)
    FLOAT_MANTISSA_BITS = 53

    def __init__(self, public_key, encoding, exponent):
        self.public_key = public_key
        self.encoding = encoding
        self.exponent = exponent

    @classmethod
    def encode(cls, public_key, scalar, precision=None, max_exponent=None):
        """phe's encoding of an int or float (exponent from the float's precision or from
        ``precision``, capped by ``max_exponent``; mantissa rounded half to even).

        Raises:
          ValueError: if |mantissa| > max_int, for NaN or infinity, or a bad precision.
          TypeError: for a value that is neither int nor float.
        """
        encoding, exponent = public_key._native.encode(_scalar(scalar), precision, max_exponent)
        return cls(public_key, encoding, exponent)

    def decode(self):
        """The int (exponent >= 0) or float this encodes.

        Raises:
          OverflowError: in the overflow band, or beyond the float range.
          ValueError: for an encoding that is not below n.
        """
        return self.public_key._native.decode(self.encoding, self.exponent)

    def decrease_exponent_to(self, new_exp):
        """The same value with a smaller exponent (ValueError if new_exp is larger)."""
        if new_exp > self.exponent:
            raise ValueError(
                "New exponent %i should be more negative than old exponent %i"
                % (new_exp, self.exponent)
            )
        encoding = self.public_key._native.decrease_encoding(
            self.encoding, self.exponent, new_exp
        )
        return self.__class__(self.public_key, encoding, new_exp)


class EncryptedNumber:
    """An encrypted int or float, phe's ``EncryptedNumber(public_key, ciphertext, exponent)``.

    Supports ``+`` and ``-`` with another EncryptedNumber, an :class:`EncodedNumber`, an int
    or a float; ``*`` and ``/`` by an int, a float or an EncodedNumber; ``sum()``.
    Arithmetic results are not obfuscated until :meth:`ciphertext` (or pickling) needs them
    to be, as in phe.

    Raises:
      TypeError: if public_key is not a PaillierPublicKey or ciphertext is not an int.
      ValueError: if the ciphertext is not a valid ciphertext of the key.
    """

    def __init__(self, public_key, ciphertext, exponent=0):
        if not isinstance(public_key, PaillierPublicKey):
            raise TypeError("public_key should be a PaillierPublicKey")
        if isinstance(ciphertext, bool) or not isinstance(ciphertext, numbers.Integral):
            raise TypeError("ciphertext should be an integer")
        self.public_key = public_key
        self._c = public_key._native.ciphertext(int(ciphertext))
        self.exponent = exponent
        self._is_obfuscated = False

    @classmethod
    def _make(cls, public_key, c, exponent, obfuscated=False):
        number = cls.__new__(cls)
        number.public_key = public_key
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
            encoding = other
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
        other = EncryptedArray.from_numbers(list(numbers_))
        self.__dict__.update(other.__dict__)

    @classmethod
    def _make(cls, public_key, native, shape, obfuscated=False):
        array = cls.__new__(cls)
        array.public_key = public_key
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
        taken = self._native.take([int(i) for i in positions.reshape(-1)])
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

    def sum(self):
        """The encrypted sum of all elements (an :class:`EncryptedNumber`)."""
        total = self._native.sum()
        if total is None:
            return self.public_key.encrypt(0)
        c, e = total
        return EncryptedNumber._make(self.public_key, c, e)

    def obfuscate(self):
        """Re-randomize every ciphertext (in parallel)."""
        self._native = self._native.obfuscate()
        self._is_obfuscated = True

    def ciphertexts(self, be_secure=True):
        """The ciphertext ints (obfuscated first unless already, or be_secure=False)."""
        if be_secure and not self._is_obfuscated:
            self.obfuscate()
        return self._native.ciphertext_ints()


def _restore_number(public_key, ciphertext, exponent):
    number = EncryptedNumber(public_key, ciphertext, exponent)
    number._is_obfuscated = True
    return number


def _restore_array(public_key, ciphertexts, exponents, shape):
    numbers_ = [_restore_number(public_key, c, int(e)) for c, e in zip(ciphertexts, exponents)]
    return EncryptedArray.from_numbers(numbers_).reshape(shape)


def int_to_base64(x):
    """phe.util's unpadded base64url of an int's big-endian bytes."""
    import base64

    if x <= 0:
        raise ValueError("int_to_base64 takes a positive int")
    length = (x.bit_length() + 7) // 8
    return base64.urlsafe_b64encode(x.to_bytes(length, "big")).decode("utf-8").rstrip("=")


def base64_to_int(s):
    """phe.util's inverse of :func:`int_to_base64` (padding optional)."""
    import base64

    return int.from_bytes(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)), "big")
