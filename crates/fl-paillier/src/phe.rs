//! python-paillier (`phe` 1.5) interop formats, behind the `serde` feature.
//!
//! * Public key JWK: `{"kty": "DAJ", "alg": "PAI-GN1", "key_ops": ["encrypt"], "n": <b64url>,
//!   "kid": "..."}` — n as unpadded base64url of its minimal big-endian bytes.
//! * Private key JWK as `pheutil genpkey` writes it: `{"kty": "DAJ", "key_ops":
//!   ["decrypt"], "p": <b64url>, "q": <b64url>, "pub": {...}, "kid": "..."}`; the form of
//!   phe's serialisation docs with `"lambda"` and `"mu"` instead of p and q is accepted too
//!   (n is then factored from λ, a multiple of the Carmichael function).
//! * Encrypted number: `{"v": "<decimal ciphertext>", "e": <base-16 exponent>}`; like
//!   `pheutil`, writing lowers exponents above −32 to −32.
//!
//! Every parser validates: the public key through [`EncryptionKey::from_n`], the primes
//! through [`DecryptionKey::from_primes`], the ciphertext through
//! [`EncryptionKey::ciphertext_from_biguint`]. Output uses Python's `json.dumps` layout
//! (`", "` and `": "` separators, pheutil's key order), so files are byte-compatible.

use crate::encoding::{MAX_PHE_EXPONENT, PheEncryptedNumber};
use crate::error::{Error, Result};
use crate::private_key::{DecryptionKey, mod_inverse};
use crate::public_key::EncryptionKey;
use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use num_bigint::BigUint;
use num_integer::Integer;
use num_traits::{One, Zero};
use serde_json::{Map, Value};

fn fmt_err(reason: impl Into<String>) -> Error {
    Error::Format {
        reason: reason.into(),
    }
}

const B64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// phe's `int_to_base64`: unpadded base64url of the minimal big-endian bytes.
#[must_use]
pub fn int_to_base64(x: &BigUint) -> String {
    B64.encode(x.to_bytes_be())
}

/// phe's `base64_to_int` (padding optional).
///
/// # Errors
/// [`Error::Format`] for invalid base64url.
pub fn base64_to_int(s: &str) -> Result<BigUint> {
    let bytes = B64
        .decode(s.as_bytes())
        .map_err(|_| fmt_err("invalid base64url integer"))?;
    Ok(BigUint::from_bytes_be(&bytes))
}

/// Renders `(key, value)` pairs as Python's `json.dumps` does by default (in this order).
fn python_json(pairs: &[(&str, Value)]) -> String {
    let rendered: Vec<(&str, String)> = pairs.iter().map(|(k, v)| (*k, python_value(v))).collect();
    python_json_rendered(&rendered)
}

/// Like [`python_json`] with values already rendered (for nested ordered objects).
fn python_json_rendered(pairs: &[(&str, String)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}: {v}", Value::from(*k)))
        .collect();
    format!("{{{}}}", body.join(", "))
}

fn python_value(v: &Value) -> String {
    match v {
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(python_value)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(map) => {
            let pairs: Vec<(&str, Value)> =
                map.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            python_json(&pairs)
        }
        other => other.to_string(),
    }
}

fn parse_object(json: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(fmt_err("expected a JSON object")),
        Err(e) => Err(fmt_err(format!("invalid JSON: {e}"))),
    }
}

fn get_str<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a str> {
    map.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| fmt_err(format!("missing or non-string field \"{key}\"")))
}

fn public_from_map(map: &Map<String, Value>) -> Result<EncryptionKey> {
    if get_str(map, "kty")? != "DAJ" {
        return Err(fmt_err("public key: \"kty\" must be \"DAJ\""));
    }
    if get_str(map, "alg")? != "PAI-GN1" {
        return Err(fmt_err("public key: \"alg\" must be \"PAI-GN1\""));
    }
    let n = base64_to_int(get_str(map, "n")?)?;
    EncryptionKey::from_n(&n)
}

/// Parses and validates a phe public-key JWK.
///
/// # Errors
/// [`Error::Format`] for malformed JSON or fields; [`Error::InvalidModulus`] if n fails
/// validation.
pub fn public_key_from_jwk(json: &str) -> Result<EncryptionKey> {
    public_from_map(&parse_object(json)?)
}

/// The phe public-key JWK of `key` (pheutil's layout, without the trailing newline).
#[must_use]
pub fn public_key_to_jwk(key: &EncryptionKey, kid: &str) -> String {
    python_json(&public_pairs(key, kid))
}

fn public_pairs(key: &EncryptionKey, kid: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("kty", Value::from("DAJ")),
        ("alg", Value::from("PAI-GN1")),
        ("key_ops", Value::from(vec![Value::from("encrypt")])),
        ("n", Value::from(int_to_base64(key.n()))),
        ("kid", Value::from(kid)),
    ]
}

/// Parses and validates a phe private-key JWK (`p`/`q`, or `lambda`/`mu`), checking that
/// it matches its embedded public key.
///
/// # Errors
/// [`Error::Format`], [`Error::InvalidModulus`], [`Error::InvalidPrimes`].
pub fn private_key_from_jwk(json: &str) -> Result<DecryptionKey> {
    let map = parse_object(json)?;
    if get_str(&map, "kty")? != "DAJ" {
        return Err(fmt_err("private key: \"kty\" must be \"DAJ\""));
    }
    let ops_ok = map
        .get("key_ops")
        .and_then(Value::as_array)
        .is_some_and(|ops| ops.iter().any(|o| o.as_str() == Some("decrypt")));
    if !ops_ok {
        return Err(fmt_err("private key: \"key_ops\" must contain \"decrypt\""));
    }
    let public = match map.get("pub") {
        Some(Value::Object(p)) => public_from_map(p)?,
        _ => return Err(fmt_err("private key: missing \"pub\" object")),
    };
    let (p, q) = if map.contains_key("p") || map.contains_key("q") {
        let p = base64_to_int(get_str(&map, "p")?)?;
        let q = base64_to_int(get_str(&map, "q")?)?;
        // Before any arithmetic: a prime of a valid key has at most MAX_KEY_BITS / 2 bits.
        if p.bits().max(q.bits()) > u64::from(crate::public_key::MAX_KEY_BITS / 2) {
            return Err(Error::InvalidPrimes {
                reason: "a prime is longer than 4096 bits",
            });
        }
        (p, q)
    } else {
        let lambda = base64_to_int(get_str(&map, "lambda")?)?;
        let mu = base64_to_int(get_str(&map, "mu")?)?;
        let n = public.n();
        // Before any arithmetic: λ and μ of a key are below n (unbounded exponents would
        // reach modpow).
        if &lambda >= n || &mu >= n {
            return Err(Error::InvalidPrimes {
                reason: "lambda and mu must be below n",
            });
        }
        // μ must be λ⁻¹ mod n (g = n + 1): a cheap consistency check before factoring.
        if (&lambda * &mu) % n != BigUint::one() {
            return Err(Error::InvalidPrimes {
                reason: "lambda and mu are inconsistent (lambda * mu != 1 mod n)",
            });
        }
        factor_with_lambda(n, &lambda)?
    };
    let key = DecryptionKey::from_primes(&p, &q)?;
    if key.encryption_key() != &public {
        return Err(Error::InvalidPrimes {
            reason: "p * q does not equal the public key's n",
        });
    }
    Ok(key)
}

/// Factors n = p·q given λ, a multiple of the Carmichael function λ(n) (Miller's
/// algorithm: a nontrivial square root of 1 reveals a factor). Variable time; import only.
fn factor_with_lambda(n: &BigUint, lambda: &BigUint) -> Result<(BigUint, BigUint)> {
    let bad = Error::InvalidPrimes {
        reason: "lambda does not factor n (not a multiple of the Carmichael function)",
    };
    if lambda.is_zero() {
        return Err(bad);
    }
    let twos = lambda.trailing_zeros().unwrap_or(0);
    let odd = lambda >> twos;
    let n_minus_1 = n - 1u32;
    for a in 2u32..200 {
        let mut x = BigUint::from(a).modpow(&odd, n);
        if x.is_one() || x == n_minus_1 {
            continue;
        }
        for _ in 0..twos {
            let y = x.modpow(&BigUint::from(2u8), n);
            if y.is_one() {
                let f = (&x - 1u32).gcd(n);
                if !f.is_one() && &f != n {
                    let g = n / &f;
                    return Ok((f, g));
                }
                break;
            }
            if y == n_minus_1 {
                break;
            }
            x = y;
        }
    }
    Err(bad)
}

/// The private-key JWK of `key` as pheutil writes it (p, q and the nested public JWK).
#[must_use]
pub fn private_key_to_jwk(key: &DecryptionKey, kid: &str, public_kid: &str) -> String {
    let (p, q) = key.expose_primes();
    let public = python_json(&public_pairs(key.encryption_key(), public_kid));
    let s = |v: Value| python_value(&v);
    python_json_rendered(&[
        ("kty", s(Value::from("DAJ"))),
        ("key_ops", s(Value::from(vec![Value::from("decrypt")]))),
        ("p", s(Value::from(B64.encode(&p[..])))),
        ("q", s(Value::from(B64.encode(&q[..])))),
        ("pub", public),
        ("kid", s(Value::from(kid))),
    ])
}

/// Parses `{"v": "<decimal>", "e": <int>}` under `key`, validating the ciphertext.
///
/// # Errors
/// [`Error::Format`] for malformed JSON or fields; [`Error::InvalidCiphertext`];
/// [`Error::InvalidParameter`] for an exponent beyond ±10000.
pub fn encrypted_number_from_json(key: &EncryptionKey, json: &str) -> Result<PheEncryptedNumber> {
    let map = parse_object(json)?;
    let v = get_str(&map, "v")?;
    if v.is_empty() || v.len() > 20_000 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(fmt_err("\"v\" must be a decimal string of digits"));
    }
    let c = BigUint::parse_bytes(v.as_bytes(), 10)
        .ok_or_else(|| fmt_err("\"v\" must be a decimal string of digits"))?;
    let e = map
        .get("e")
        .and_then(Value::as_i64)
        .ok_or_else(|| fmt_err("missing or non-integer field \"e\""))?;
    let exponent = i32::try_from(e)
        .ok()
        .filter(|e| e.unsigned_abs() <= MAX_PHE_EXPONENT.unsigned_abs())
        .ok_or(Error::InvalidParameter {
            reason: "python-paillier exponent must be within +/-10000",
        })?;
    Ok(PheEncryptedNumber {
        ciphertext: key.ciphertext_from_biguint(&c)?,
        exponent,
    })
}

/// Serialises an encrypted number as `pheutil` does: exponents above −32 are first lowered
/// to −32 (a homomorphic multiplication by 16^Δ).
///
/// # Errors
/// [`Error::KeyMismatch`].
pub fn encrypted_number_to_json(
    key: &EncryptionKey,
    number: &PheEncryptedNumber,
) -> Result<String> {
    let number = if number.exponent > -32 {
        number.decrease_exponent_to(key, -32)?
    } else {
        number.clone()
    };
    Ok(python_json(&[
        ("v", Value::from(number.ciphertext.to_biguint().to_string())),
        ("e", Value::from(number.exponent)),
    ]))
}

/// An `f64` as Python's `repr` prints it (`3.0`, `0.1`, `1e-05`, `1.5e+20`, `-0.0`):
/// the shortest round-tripping digits, scientific notation when the decimal exponent is
/// below −4 or at least 16.
#[must_use]
pub fn python_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sci = format!("{:e}", x.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let body = if point <= 0 {
        format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
    } else if (point as usize) >= digits.len() {
        format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
    } else {
        let (a, b) = digits.split_at(point as usize);
        format!("{a}.{b}")
    };
    format!("{sign}{body}")
}

/// What `pheutil decrypt` prints for a decrypted number: Python's `repr` of the float for
/// negative exponents, the exact integer for exponents ≥ 0.
///
/// # Errors
/// [`Error::KeyMismatch`]; [`Error::Overflow`] for the overflow band or an out-of-range
/// float (Python raises `OverflowError` there too).
pub fn decrypt_to_pheutil_output(
    key: &DecryptionKey,
    number: &PheEncryptedNumber,
) -> Result<String> {
    crate::encoding::check_phe_exponent(i64::from(number.exponent))?;
    let encoded = number.decrypt_encoded(key)?;
    if number.exponent >= 0 {
        let m = encoded.mantissa(key.encryption_key())?;
        let scale = num_bigint::BigInt::one() << (4 * number.exponent.unsigned_abs());
        Ok((m * scale).to_string())
    } else {
        Ok(python_float_repr(encoded.decode_f64(key.encryption_key())?))
    }
}

/// Private key JWK helper: λ and μ of a key (for writing the docs' `lambda`/`mu` form).
///
/// # Errors
/// Never for a valid key.
pub fn lambda_mu(key: &DecryptionKey) -> Result<(BigUint, BigUint)> {
    let (p, q) = key.expose_primes();
    let p = BigUint::from_bytes_be(&p);
    let q = BigUint::from_bytes_be(&q);
    let lambda = (&p - 1u32).lcm(&(&q - 1u32));
    let n = key.encryption_key().n();
    let mu = mod_inverse(&(&lambda % n), n).ok_or(Error::DecryptionFailed)?;
    Ok((lambda, mu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_repr_matches() {
        for (x, want) in [
            (3.0, "3.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.5e20, "1.5e+20"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (-0.0, "-0.0"),
            (123.456, "123.456"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
        ] {
            assert_eq!(python_float_repr(x), want);
        }
    }

    #[test]
    fn base64_round_trip() {
        let x = BigUint::from(0x01_00ffu32);
        let s = int_to_base64(&x);
        assert_eq!(s, "AQD_");
        assert_eq!(base64_to_int(&s).unwrap(), x);
        assert_eq!(base64_to_int("AQD_").unwrap(), x);
        assert!(base64_to_int("!!").is_err());
    }

    #[test]
    fn python_json_layout() {
        let s = python_json(&[("v", Value::from("12")), ("e", Value::from(-32))]);
        assert_eq!(s, r#"{"v": "12", "e": -32}"#);
    }
}
