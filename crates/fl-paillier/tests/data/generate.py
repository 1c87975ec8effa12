"""Generates the python-paillier known-answer files in this directory.

Run from this directory with phe 1.5.0 installed (`pip install phe==1.5.0`), after
creating the key pair with pheutil (see README.md). Randomness comes from phe itself
(SystemRandom), so every run produces different ciphertexts; the files are data, the
tests only require that they decrypt and encode as phe says.
"""
import json
import math
import struct

import phe
from phe import paillier
from phe.command_line import serialise_encrypted
from phe.util import base64_to_int, int_to_base64


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


priv_jwk = json.load(open("phe_private_2048.json"))
pub = paillier.PaillierPublicKey(base64_to_int(priv_jwk["pub"]["n"]))
priv = paillier.PaillierPrivateKey(pub, base64_to_int(priv_jwk["p"]), base64_to_int(priv_jwk["q"]))

floats = [0.0, -0.0, 1.0, -1.0, 3.14, -2.5, 0.1, 1e-5, -1e-300, 5e-324, 123456789.125,
          -9.87654321e15, 1e100, -1.7976931348623157e308, 2.0 ** -1074, 1.5, 1.0 / 3.0,
          0.30000000000000004, 65536.0, -0.0001]

# 1. Encodings (phe.EncodedNumber.encode), with and without precision / max_exponent.
encodings = []
for x in floats:
    for precision, max_exponent in [(None, None), (1e-6, None), (None, -20), (0.5, -3)]:
        if precision is not None and abs(x) > 1e300:
            continue
        try:
            e = paillier.EncodedNumber.encode(pub, x, precision=precision, max_exponent=max_exponent)
        except ValueError:
            continue
        encodings.append({"x": repr(x), "x_bits": bits(x), "precision": precision,
                          "max_exponent": max_exponent, "encoding": str(e.encoding),
                          "exponent": e.exponent, "decoded_bits": bits(float(e.decode()))})

# 2. Ciphertexts as pheutil writes them, and with phe's own exponent.
ciphertexts = []
for x in floats:
    enc = pub.encrypt(x)
    ciphertexts.append({"x": repr(x), "x_bits": bits(x),
                        "pheutil": json.loads(serialise_encrypted(enc)),
                        "raw": {"v": str(enc.ciphertext()), "e": enc.exponent},
                        "decrypted_bits": bits(float(priv.decrypt(enc)))})

# 3. Deterministic encryption: raw_encrypt(m, r_value=r).
raw = []
for m, r in [(0, 1), (1, 2), (42, 12345678901234567890), (pub.n - 1, 7), (pub.max_int, pub.n - 2)]:
    raw.append({"m": str(m), "r": str(r), "c": str(pub.raw_encrypt(m, r_value=r))})

# 4. Homomorphic operations done by phe.
homomorphic = []
for a, b in [(1.5, 2.25), (-3.75, 0.001), (1e6, -1e-6), (0.0, 7.0)]:
    ea, eb = pub.encrypt(a), pub.encrypt(b)
    for op, res in [("add", ea + eb), ("add_plain", ea + b), ("mul_plain", ea * b)]:
        homomorphic.append({"a": repr(a), "b": repr(b), "op": op,
                            "result": {"v": str(res.ciphertext()), "e": res.exponent},
                            "decrypted_bits": bits(float(priv.decrypt(res)))})

# 5. The private key in the serialisation docs' lambda/mu form.
lam = (priv.p - 1) * (priv.q - 1) // math.gcd(priv.p - 1, priv.q - 1)
mu = pow(lam, -1, pub.n)
lambda_mu = {"kty": "DAJ", "key_ops": ["decrypt"], "lambda": int_to_base64(lam),
             "mu": int_to_base64(mu), "pub": priv_jwk["pub"], "kid": "lambda/mu form"}

for name, obj in [("phe_encodings.json", encodings), ("phe_ciphertexts.json", ciphertexts),
                  ("phe_raw_encrypt.json", raw), ("phe_homomorphic.json", homomorphic),
                  ("phe_private_lambda_mu_2048.json", lambda_mu)]:
    with open(name, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
print("phe", phe.__version__, "max_int bits", pub.max_int.bit_length())
