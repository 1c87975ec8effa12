"""phe.util: the number theory and base64 helpers python-paillier exposes, with phe 1.5's
names and results (written for fl_privacy on Python's own big integers; phe switches to
gmpy2 or PyCrypto when installed, and its tests flip ``HAVE_GMP`` / ``HAVE_CRYPTO`` to
exercise its fallbacks, which here are the only code path).

Randomness (``getprimeover``, Miller–Rabin witnesses) comes from the operating system's
CSPRNG.
"""

import base64
import math
import operator
import secrets

from fl_privacy.paillier import NonPositiveIntError, base64_to_int, int_to_base64

__all__ = [
    "HAVE_CRYPTO",
    "HAVE_GMP",
    "NonPositiveIntError",
    "base64_to_int",
    "base64url_decode",
    "base64url_encode",
    "extended_euclidean_algorithm",
    "first_primes",
    "getprimeover",
    "improved_i_sqrt",
    "int_to_base64",
    "invert",
    "is_prime",
    "isqrt",
    "miller_rabin",
    "mulmod",
    "powmod",
]

#: phe's switches for its optional gmpy2 and PyCrypto back ends. This module uses neither:
#: the flags are kept (False) for code and tests that read or set them.
HAVE_GMP = False
HAVE_CRYPTO = False


def _int(name, value):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("%s must be an int, got %s" % (name, type(value).__name__)) from None


def powmod(a, b, c):
    """a ** b % c (b may be negative when a is invertible mod c). Like phe, 1 for a = 1."""
    a, b, c = _int("a", a), _int("b", b), _int("c", c)
    if a == 1:
        return 1
    return pow(a, b, c)


def mulmod(a, b, c):
    """a * b % c."""
    return _int("a", a) * _int("b", b) % _int("c", c)


def extended_euclidean_algorithm(a, b):
    """(r, s, t) with r = gcd(a, b) = s·a + t·b (the extended Euclidean algorithm)."""
    r0, r1 = _int("a", a), _int("b", b)
    s0, s1, t0, t1 = 1, 0, 0, 1
    while r1:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        s0, s1 = s1, s0 - q * s1
        t0, t1 = t1, t0 - q * t1
    return r0, s0, t0


def invert(a, b):
    """x with a·x ≡ 1 (mod b).

    Raises:
      ZeroDivisionError: if a has no inverse mod b (as phe).
    """
    a, b = _int("a", a), _int("b", b)
    try:
        return pow(a, -1, b)
    except ValueError:
        raise ZeroDivisionError("invert() no inverse exists") from None


def _primes_below(limit):
    sieve = bytearray([1]) * limit
    sieve[0:2] = b"\x00\x00"
    for i in range(2, math.isqrt(limit - 1) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(range(i * i, limit, i)))
    return [i for i in range(limit) if sieve[i]]


#: The primes up to 17863, as phe's list: ``is_prime`` answers below its last entry by
#: look-up and trial-divides by all of them first.
first_primes = _primes_below(17864)


def miller_rabin(n, k):
    """The Miller–Rabin test of n with k random witnesses: False means n is composite;
    True means n is prime except with probability below 4**-k.

    Raises:
      ValueError: if n < 4 (the test needs witnesses in [2, n - 2]).
    """
    n, k = _int("n", n), _int("k", k)
    if n < 4:
        raise ValueError("miller_rabin needs n > 3, got %d" % n)
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for _ in range(k):
        a = 2 + secrets.randbelow(n - 3)
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def is_prime(n, mr_rounds=25):
    """Whether n is (probably) prime: look-up below 17864, trial division by
    :data:`first_primes`, then ``mr_rounds`` Miller–Rabin rounds (a composite passes with
    probability below 4**-mr_rounds). False for n < 2."""
    n = _int("n", n)
    if n <= first_primes[-1]:
        return n in _FIRST_PRIMES
    for p in first_primes:
        if n % p == 0:
            return False
    return miller_rabin(n, mr_rounds)


_FIRST_PRIMES = frozenset(first_primes)


def getprimeover(N):
    """A random prime of at least N bits (N >= 2): a uniform N-bit odd number with its top
    bit set, then the next prime (as phe's gmpy2 path; the result can exceed N bits when no
    prime lies above the start within N bits).

    Raises:
      ValueError: if N < 2.
    """
    N = _int("N", N)
    if N < 2:
        raise ValueError("getprimeover needs N >= 2 bits, got %d" % N)
    candidate = (secrets.randbits(N) | (1 << (N - 1))) | 1
    while not is_prime(candidate):
        candidate += 2
    return candidate


def isqrt(N):
    """⌊√N⌋ for N >= 0 (ValueError for a negative N)."""
    return math.isqrt(_int("N", N))


def improved_i_sqrt(n):
    """⌊√n⌋ for n >= 0 (phe's pure-Python fallback; the same values as :func:`isqrt`)."""
    return math.isqrt(_int("n", n))


def base64url_encode(payload):
    """Unpadded base64url of bytes (a str is UTF-8 encoded first)."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    return base64.urlsafe_b64encode(payload).decode("utf-8").rstrip("=")


def base64url_decode(payload):
    """The bytes of an unpadded (or padded) base64url string.

    Raises:
      ValueError: for an impossible length.
    """
    if isinstance(payload, bytes):
        payload = payload.decode("ascii")
    if len(payload) % 4 == 1:
        raise ValueError("Invalid base64 string")
    return base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
