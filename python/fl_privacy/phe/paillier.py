"""phe.paillier: keys, encrypted numbers and key generation (:mod:`fl_privacy.paillier`'s
objects, under phe's module name)."""

from fl_privacy.paillier import (  # noqa: F401 (re-exported)
    DEFAULT_KEYSIZE,
    EncodedNumber,
    EncryptedNumber,
    PaillierPrivateKey,
    PaillierPrivateKeyring,
    PaillierPublicKey,
    generate_paillier_keypair,
)
from fl_privacy.phe.util import getprimeover, invert, isqrt, mulmod, powmod  # noqa: F401

__all__ = [
    "DEFAULT_KEYSIZE",
    "EncodedNumber",
    "EncryptedNumber",
    "PaillierPrivateKey",
    "PaillierPrivateKeyring",
    "PaillierPublicKey",
    "generate_paillier_keypair",
]
