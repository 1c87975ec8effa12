//! The native half of `fl_privacy.paillier`: keys, ciphertexts and batches of fl-paillier,
//! operated on with python-paillier's (`phe`) encoding rules. The phe-compatible classes
//! themselves (`PaillierPublicKey`, `EncryptedNumber`, ...) are thin Python wrappers in
//! `fl_privacy/paillier.py`; every number-theoretic step happens here, in fl-paillier.
//!
//! Numbers travel as (ciphertext, exponent) pairs, exactly phe's `EncryptedNumber`:
//! value = mantissa · 16^exponent with the mantissa encrypted mod n.

use fl_paillier::encoding::MAX_PHE_EXPONENT;
use fl_paillier::{
    Ciphertext, DecryptionKey, EncryptionKey, KeyCorrectnessProof, PheEncodedNumber,
    PheEncryptedNumber, Plaintext, phe,
};
use num_bigint::{BigInt, BigUint};
use num_integer::Integer;
use num_traits::{One, ToPrimitive, Zero};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyTuple};
use rayon::prelude::*;

use crate::batch::{self, ElementError};
use crate::convert::{
    bigint_from_py, bigint_to_py, biguint_from_py, biguint_to_py, os_rng, primes_to_py,
};
use std::ops::Range;

/// An fl-paillier error as the Python exception a phe user expects: `OverflowError` for a
/// decoded value in the overflow band (phe raises it too), `ValueError` otherwise. The
/// crate's messages carry no secret.
pub(crate) fn err(e: fl_paillier::Error) -> PyErr {
    match e {
        fl_paillier::Error::Overflow => PyOverflowError::new_err(e.to_string()),
        fl_paillier::Error::KeyMismatch => PyValueError::new_err(
            "encrypted_number was encrypted against a different key! (key mismatch: the \
             ciphertext belongs to a different Paillier key than the one used)",
        ),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// A phe exponent from Python, within fl-paillier's bound of ±10000.
pub(crate) fn exponent(e: i64) -> PyResult<i32> {
    i32::try_from(e)
        .ok()
        .filter(|e| e.unsigned_abs() <= MAX_PHE_EXPONENT.unsigned_abs())
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "exponent {e} is out of range: python-paillier exponents must be within \
                 +/-{MAX_PHE_EXPONENT}"
            ))
        })
}

/// phe's exponent for a given `precision`: ⌊log₁₆ precision⌋ (`math.log(precision, 16)`).
fn precision_exponent(precision: f64) -> PyResult<i64> {
    if !(precision.is_finite() && precision > 0.0) {
        return Err(PyValueError::new_err(format!(
            "precision must be a finite number > 0, got {precision}"
        )));
    }
    let e = (precision.ln() / 16f64.ln()).floor();
    if e.abs() > f64::from(MAX_PHE_EXPONENT) {
        return Err(PyValueError::new_err(
            "precision out of range: its base-16 exponent must be within +/-10000",
        ));
    }
    Ok(e as i64)
}

/// round_half_even(x / 16^e) for e > 0 (Python's `round` of a `Fraction`).
fn divide_round_half_even(x: &BigInt, e: u32) -> BigInt {
    let d = BigInt::one() << (4 * e);
    let (q, r) = x.div_mod_floor(&d);
    let twice = &r << 1u32;
    if twice > d || (twice == d && q.is_odd()) {
        q + 1
    } else {
        q
    }
}

/// A scalar to encode: phe encodes `int` exactly and `float` with 53 bits of precision.
enum Scalar {
    Int(BigInt),
    Float(f64),
}

impl Scalar {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyFloat>() {
            Ok(Self::Float(obj.extract()?))
        } else if obj.is_instance_of::<PyInt>() {
            Ok(Self::Int(bigint_from_py(obj, "value")?))
        } else {
            Err(PyTypeError::new_err(format!(
                "Don't know the precision of type {}: encode an int or a float",
                obj.get_type().name()?
            )))
        }
    }
}

/// phe's `EncodedNumber.encode(public_key, scalar, precision, max_exponent)`.
fn encode(
    key: &EncryptionKey,
    scalar: &Scalar,
    precision: Option<f64>,
    max_exponent: Option<i64>,
) -> PyResult<PheEncodedNumber> {
    let max_exponent = max_exponent.map(exponent).transpose()?;
    match scalar {
        Scalar::Float(x) => {
            PheEncodedNumber::encode_f64(key, *x, precision, max_exponent).map_err(err)
        }
        Scalar::Int(x) => {
            let prec = precision.map(precision_exponent).transpose()?.unwrap_or(0);
            let e = match max_exponent {
                Some(m) => prec.min(i64::from(m)),
                None => prec,
            };
            let e = exponent(e)?;
            let mantissa = if e <= 0 {
                x << (4 * e.unsigned_abs())
            } else {
                divide_round_half_even(x, e.unsigned_abs())
            };
            PheEncodedNumber::from_mantissa(key, &mantissa, e).map_err(err)
        }
    }
}

/// The signed scalar phe's `_raw_mul` multiplies by: an encoding in the negative band
/// [n − max_int, n) is −(n − encoding) (phe's inverse trick), anything else itself.
fn signed_scalar(key: &EncryptionKey, encoding: &BigUint) -> PyResult<BigInt> {
    if encoding >= key.n() {
        return Err(PyValueError::new_err(
            "scalar out of bounds: an encoding must satisfy 0 <= encoding < n",
        ));
    }
    let negative_from = key.n() - key.max_int();
    Ok(if encoding >= &negative_from {
        -BigInt::from(key.n() - encoding)
    } else {
        BigInt::from(encoding.clone())
    })
}

/// `a + b` for two encrypted numbers (phe: align to the smaller exponent, add): fl-paillier's
/// `PheEncryptedNumber::add`, which leaves an operand alone when its exponent already is the
/// smaller one.
fn add_encrypted(
    key: &EncryptionKey,
    a: &PheEncryptedNumber,
    b: &PheEncryptedNumber,
) -> PyResult<PheEncryptedNumber> {
    a.add(key, b).map_err(err)
}

/// `a + encoded` (phe's `_add_encoded`: align, then add the trivial encryption 1 + m·n).
fn add_encoded(
    key: &EncryptionKey,
    a: &PheEncryptedNumber,
    b: &PheEncodedNumber,
) -> PyResult<PheEncryptedNumber> {
    let e = a.exponent.min(b.exponent);
    let a = a.decrease_exponent_to(key, e).map_err(err)?;
    let b = b.decrease_exponent_to(key, e).map_err(err)?;
    let m = key.plaintext_from_biguint(&b.encoding).map_err(err)?;
    Ok(PheEncryptedNumber {
        ciphertext: key.add_plain(&a.ciphertext, &m).map_err(err)?,
        exponent: e,
    })
}

/// `a * encoded` (phe's `__mul__`: exponents add, negative scalars via the inverse).
fn mul_encoded(
    key: &EncryptionKey,
    a: &PheEncryptedNumber,
    b: &PheEncodedNumber,
) -> PyResult<PheEncryptedNumber> {
    let k = signed_scalar(key, &b.encoding)?;
    let e = exponent(i64::from(a.exponent) + i64::from(b.exponent))?;
    Ok(PheEncryptedNumber {
        ciphertext: key.mul_bigint(&a.ciphertext, &k).map_err(err)?,
        exponent: e,
    })
}

/// A ciphertext of fl-paillier, valid by construction and bound to its key. Python sees
/// it only inside `EncryptedNumber`; `int(c)` gives the value phe calls the ciphertext.
#[pyclass(module = "fl_privacy._native", frozen)]
#[derive(Clone)]
pub(crate) struct NativeCiphertext {
    pub(crate) inner: Ciphertext,
}

#[pymethods]
impl NativeCiphertext {
    /// The ciphertext value c in (0, n²) as a Python int.
    fn __int__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        biguint_to_py(py, &self.inner.to_biguint())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Self>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

fn ct(c: &Ciphertext) -> NativeCiphertext {
    NativeCiphertext { inner: c.clone() }
}

fn pair(n: PheEncryptedNumber) -> (NativeCiphertext, i32) {
    (
        NativeCiphertext {
            inner: n.ciphertext,
        },
        n.exponent,
    )
}

/// An `EncodedNumber(encoding, exponent)` from Python.
fn encoded(encoding: &Bound<'_, PyAny>, e: i64) -> PyResult<PheEncodedNumber> {
    Ok(PheEncodedNumber {
        encoding: biguint_from_py(encoding, "encoding")?,
        exponent: exponent(e)?,
    })
}

fn number(c: &NativeCiphertext, e: i64) -> PyResult<PheEncryptedNumber> {
    Ok(PheEncryptedNumber {
        ciphertext: c.inner.clone(),
        exponent: exponent(e)?,
    })
}

/// A validated Paillier public key (fl-paillier's `EncryptionKey`).
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativePublicKey {
    pub(crate) key: EncryptionKey,
}

#[pymethods]
impl NativePublicKey {
    /// Imports n, validating it (odd, 2048 to 8192 bits, not prime, not a perfect power,
    /// no prime factor below 2^16).
    #[staticmethod]
    fn from_n(n: &Bound<'_, PyAny>) -> PyResult<Self> {
        let n = biguint_from_py(n, "n")?;
        Ok(Self {
            key: EncryptionKey::from_n(&n).map_err(err)?,
        })
    }

    /// Parses a python-paillier public JWK (`pheutil extract` output).
    #[staticmethod]
    fn from_jwk(json: &str) -> PyResult<Self> {
        Ok(Self {
            key: phe::public_key_from_jwk(json).map_err(err)?,
        })
    }

    /// This key as pheutil's public JWK.
    fn to_jwk(&self, kid: &str) -> String {
        phe::public_key_to_jwk(&self.key, kid)
    }

    /// n as a Python int.
    #[getter]
    fn n<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        biguint_to_py(py, self.key.n())
    }

    /// phe's `max_int` = ⌊n/3⌋ − 1.
    #[getter]
    fn max_int<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        biguint_to_py(py, self.key.max_int())
    }

    /// `EncodedNumber.encode`: (encoding, exponent).
    #[pyo3(signature = (scalar, precision=None, max_exponent=None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        scalar: &Bound<'py, PyAny>,
        precision: Option<f64>,
        max_exponent: Option<i64>,
    ) -> PyResult<(Bound<'py, PyAny>, i32)> {
        let enc = encode(
            &self.key,
            &Scalar::from_py(scalar)?,
            precision,
            max_exponent,
        )?;
        Ok((biguint_to_py(py, &enc.encoding)?, enc.exponent))
    }

    /// `EncodedNumber.decode`: an int for exponents ≥ 0, a correctly rounded float below.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        encoding: &Bound<'py, PyAny>,
        exponent_: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let enc = encoded(encoding, exponent_)?;
        let e = enc.exponent;
        if e >= 0 {
            let m = enc.mantissa(&self.key).map_err(err)?;
            bigint_to_py(py, &(m << (4 * e.unsigned_abs())))
        } else {
            let x = enc.decode_f64(&self.key).map_err(err)?;
            Ok(PyFloat::new(py, x).into_any())
        }
    }

    /// `EncodedNumber.decrease_exponent_to`: the new encoding.
    fn decrease_encoding<'py>(
        &self,
        py: Python<'py>,
        encoding: &Bound<'py, PyAny>,
        exponent_: i64,
        new_exponent: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let enc = encoded(encoding, exponent_)?;
        let out = enc
            .decrease_exponent_to(&self.key, exponent(new_exponent)?)
            .map_err(err)?;
        biguint_to_py(py, &out.encoding)
    }

    /// phe's `raw_encrypt(plaintext, r_value)`: (1 + m·n)·rⁿ mod n² for 0 ≤ m < n; a fresh
    /// uniform r when `r_value` is None.
    #[pyo3(signature = (plaintext, r_value=None))]
    fn raw_encrypt(
        &self,
        py: Python<'_>,
        plaintext: &Bound<'_, PyAny>,
        r_value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<NativeCiphertext> {
        let m = self
            .key
            .plaintext_from_biguint(&biguint_from_py(plaintext, "plaintext")?)
            .map_err(err)?;
        let c = match r_value {
            Some(r) => {
                let r = biguint_from_py(r, "r_value")?;
                if r.is_one() {
                    self.key.encrypt_trivial(&m)
                } else {
                    self.key.encrypt_with_nonce(&m, &r)
                }
            }
            None => {
                let mut rng = os_rng()?;
                py.detach(|| self.key.encrypt(&m, &mut rng))
            }
        };
        Ok(NativeCiphertext {
            inner: c.map_err(err)?,
        })
    }

    /// Encodes (phe's rules) and encrypts `scalar` with fresh randomness: (c, exponent).
    #[pyo3(signature = (scalar, precision=None))]
    fn encrypt(
        &self,
        py: Python<'_>,
        scalar: &Bound<'_, PyAny>,
        precision: Option<f64>,
    ) -> PyResult<(NativeCiphertext, i32)> {
        let enc = encode(&self.key, &Scalar::from_py(scalar)?, precision, None)?;
        let mut rng = os_rng()?;
        let n = py
            .detach(|| PheEncryptedNumber::encrypt(&self.key, &enc, &mut rng))
            .map_err(err)?;
        Ok(pair(n))
    }

    /// Checks a key-correctness proof (`KeyCorrectnessProof::from_bytes`, then `verify`
    /// against this key and `context`), GIL released: None when it verifies, else the
    /// failed check (fl-paillier's message; the proof and key are public). Python raises
    /// `InvalidKeyProofError` with it.
    fn key_proof_failure(
        &self,
        py: Python<'_>,
        proof: &[u8],
        context: &[u8],
    ) -> PyResult<Option<String>> {
        let checked = py.detach(|| {
            KeyCorrectnessProof::from_bytes(proof)
                .and_then(|proof| proof.verify(&self.key, context))
        });
        match checked {
            Ok(()) => Ok(None),
            Err(e @ fl_paillier::Error::InvalidKeyProof { .. }) => Ok(Some(e.to_string())),
            Err(e) => Err(err(e)),
        }
    }

    /// Imports a ciphertext value, validating 0 < c < n² and gcd(c, n) = 1.
    fn ciphertext(&self, c: &Bound<'_, PyAny>) -> PyResult<NativeCiphertext> {
        let c = biguint_from_py(c, "ciphertext")?;
        Ok(NativeCiphertext {
            inner: self.key.ciphertext_from_biguint(&c).map_err(err)?,
        })
    }

    /// phe's `obfuscate`: c·rⁿ for a fresh r.
    fn obfuscate(&self, py: Python<'_>, c: &NativeCiphertext) -> PyResult<NativeCiphertext> {
        let mut rng = os_rng()?;
        let out = py
            .detach(|| self.key.rerandomize(&c.inner, &mut rng))
            .map_err(err)?;
        Ok(NativeCiphertext { inner: out })
    }

    /// `a + b` of two encrypted numbers.
    fn add(
        &self,
        a: &NativeCiphertext,
        a_exp: i64,
        b: &NativeCiphertext,
        b_exp: i64,
    ) -> PyResult<(NativeCiphertext, i32)> {
        let out = add_encrypted(&self.key, &number(a, a_exp)?, &number(b, b_exp)?)?;
        Ok(pair(out))
    }

    /// `a + EncodedNumber(encoding, exponent)`.
    fn add_encoded(
        &self,
        a: &NativeCiphertext,
        a_exp: i64,
        encoding: &Bound<'_, PyAny>,
        enc_exp: i64,
    ) -> PyResult<(NativeCiphertext, i32)> {
        let b = encoded(encoding, enc_exp)?;
        Ok(pair(add_encoded(&self.key, &number(a, a_exp)?, &b)?))
    }

    /// `a * EncodedNumber(encoding, exponent)`.
    fn mul_encoded(
        &self,
        py: Python<'_>,
        a: &NativeCiphertext,
        a_exp: i64,
        encoding: &Bound<'_, PyAny>,
        enc_exp: i64,
    ) -> PyResult<(NativeCiphertext, i32)> {
        let b = encoded(encoding, enc_exp)?;
        let a = number(a, a_exp)?;
        Ok(pair(py.detach(|| mul_encoded(&self.key, &a, &b))?))
    }

    /// `EncryptedNumber.decrease_exponent_to` (a homomorphic multiplication by 16^Δ).
    fn decrease_exponent(
        &self,
        py: Python<'_>,
        a: &NativeCiphertext,
        a_exp: i64,
        new_exponent: i64,
    ) -> PyResult<NativeCiphertext> {
        let a = number(a, a_exp)?;
        let e = exponent(new_exponent)?;
        let out = py
            .detach(|| a.decrease_exponent_to(&self.key, e))
            .map_err(err)?;
        Ok(NativeCiphertext {
            inner: out.ciphertext,
        })
    }

    /// pheutil's `{"v": ..., "e": ...}` (exponents above −32 lowered to −32 first).
    fn number_to_json(&self, c: &NativeCiphertext, e: i64) -> PyResult<String> {
        phe::encrypted_number_to_json(&self.key, &number(c, e)?).map_err(err)
    }

    /// Parses pheutil's `{"v": ..., "e": ...}`, validating the ciphertext.
    fn number_from_json(&self, json: &str) -> PyResult<(NativeCiphertext, i32)> {
        Ok(pair(
            phe::encrypted_number_from_json(&self.key, json).map_err(err)?,
        ))
    }

    /// Encodes (phe's rules: floats with their precision, ints with exponent 0 or
    /// ⌊log₁₆ precision⌋) and encrypts every value (in chunks, GIL released, parallel;
    /// interruptible; `progress(done, total)` between chunks).
    #[pyo3(signature = (values, precision=None, progress=None))]
    fn encrypt_array(
        &self,
        py: Python<'_>,
        values: Scalars<'_>,
        precision: Option<f64>,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<NativeArray> {
        let key = &self.key;
        NativeArray::encrypt(py, key, &values, precision, progress, |pts, rng| {
            key.encrypt_many(pts, rng)
        })
    }
}

/// Scalars of a batch operation: one per element, as numpy gives them.
#[derive(FromPyObject)]
enum Scalars<'py> {
    Float(PyReadonlyArray1<'py, f64>),
    Int(PyReadonlyArray1<'py, i64>),
}

impl Scalars<'_> {
    /// The numbers in place (no copy).
    fn slice(&self) -> PyResult<ScalarSlice<'_>> {
        Ok(match self {
            Self::Float(a) => ScalarSlice::F(a.as_slice()?),
            Self::Int(a) => ScalarSlice::I(a.as_slice()?),
        })
    }
}

/// The numbers of a [`Scalars`], borrowed (sendable to rayon's threads).
#[derive(Clone, Copy)]
enum ScalarSlice<'a> {
    F(&'a [f64]),
    I(&'a [i64]),
}

impl ScalarSlice<'_> {
    fn len(self) -> usize {
        match self {
            Self::F(x) => x.len(),
            Self::I(x) => x.len(),
        }
    }

    /// Element `i` (callers stay below `len`; out of range reads as 0, never a panic).
    fn get(self, i: usize) -> ScalarValue {
        match self {
            Self::F(x) => ScalarValue::F(x.get(i).copied().unwrap_or(0.0)),
            Self::I(x) => ScalarValue::I(x.get(i).copied().unwrap_or(0)),
        }
    }
}

#[derive(Clone, Copy)]
enum ScalarValue {
    F(f64),
    I(i64),
}

impl ScalarValue {
    fn scalar(self) -> Scalar {
        match self {
            Self::F(x) => Scalar::Float(x),
            Self::I(x) => Scalar::Int(BigInt::from(x)),
        }
    }
}

/// `f(i)` for `i` in `range` on rayon's threads, collected in order; an error names its
/// element (by its index within the chunk).
pub(crate) fn par_map<T: Send>(
    range: Range<usize>,
    f: impl Fn(usize) -> PyResult<T> + Sync + Send,
) -> Result<Vec<T>, ElementError> {
    let start = range.start;
    range
        .into_par_iter()
        .map(|i| f(i).map_err(|e| ElementError::at(i - start, e)))
        .collect()
}

/// Heap bytes one ciphertext of `key` owns (its limbs), for the memory probe.
pub(crate) fn ciphertext_heap_bytes(key: &EncryptionKey) -> usize {
    key.ciphertext_len() + 16
}

/// A batch of encrypted numbers under one key: ciphertexts and their phe exponents.
/// Every batch operation runs in chunks with the GIL released, on rayon's threads,
/// checking for signals (Ctrl-C) between chunks; results are allocated fallibly.
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeArray {
    key: EncryptionKey,
    items: Vec<PheEncryptedNumber>,
}

impl NativeArray {
    /// Encodes `values` with phe's rules and encrypts them with `encrypt_many` (an
    /// OS-seeded generator), chunk by chunk.
    fn encrypt(
        py: Python<'_>,
        key: &EncryptionKey,
        values: &Scalars<'_>,
        precision: Option<f64>,
        progress: Option<&Bound<'_, PyAny>>,
        mut encrypt_many: impl FnMut(
            &[Plaintext],
            &mut rand::rngs::ChaCha20Rng,
        ) -> fl_paillier::Result<Vec<Ciphertext>>
        + Send,
    ) -> PyResult<Self> {
        let xs = values.slice()?;
        if let Some(p) = precision {
            precision_exponent(p)?;
        }
        batch::probe_bytes(xs.len(), ciphertext_heap_bytes(key), "values")?;
        let mut rng = os_rng()?;
        let items = batch::run_chunked(py, xs.len(), "values", progress, |range| {
            let encoded = par_map(range, |i| encode(key, &xs.get(i).scalar(), precision, None))?;
            let pts = encoded
                .iter()
                .map(|e| key.plaintext_from_biguint(&e.encoding))
                .collect::<Result<Vec<Plaintext>, _>>()
                .map_err(err)?;
            let cts = encrypt_many(&pts, &mut rng).map_err(err)?;
            Ok(cts
                .into_iter()
                .zip(encoded)
                .map(|(ciphertext, e)| PheEncryptedNumber {
                    ciphertext,
                    exponent: e.exponent,
                })
                .collect())
        })?;
        Ok(Self {
            key: key.clone(),
            items,
        })
    }

    fn same_length(&self, other: usize) -> PyResult<()> {
        if other == self.items.len() {
            Ok(())
        } else {
            Err(PyValueError::new_err(format!(
                "length mismatch: the encrypted array has {} elements, the other operand {other}",
                self.items.len()
            )))
        }
    }

    /// `f(key, a_i, i)` over the elements, chunk by chunk (a new batch of this key).
    fn map_items(
        &self,
        py: Python<'_>,
        arg: &str,
        progress: Option<&Bound<'_, PyAny>>,
        f: impl Fn(&EncryptionKey, &PheEncryptedNumber, usize) -> PyResult<PheEncryptedNumber>
        + Sync
        + Send,
    ) -> PyResult<Self> {
        let key = &self.key;
        let len = self.items.len();
        batch::probe_bytes(len, ciphertext_heap_bytes(key), arg)?;
        let items = batch::run_chunked(py, len, arg, progress, |range| {
            par_map(range, |i| match self.items.get(i) {
                Some(a) => f(key, a, i),
                None => Err(PyValueError::new_err("index out of range")),
            })
        })?;
        Ok(self.with_items(items))
    }

    /// `f(key, a_i, x_i)` over the elements and one scalar each.
    fn map_scalars(
        &self,
        py: Python<'_>,
        scalars: &Scalars<'_>,
        f: impl Fn(&EncryptionKey, &PheEncryptedNumber, ScalarValue) -> PyResult<PheEncryptedNumber>
        + Sync
        + Send,
    ) -> PyResult<Self> {
        let xs = scalars.slice()?;
        self.same_length(xs.len())?;
        self.map_items(py, "other", None, |key, a, i| f(key, a, xs.get(i)))
    }

    /// A batch of `key` from its numbers.
    pub(crate) fn from_items(key: EncryptionKey, items: Vec<PheEncryptedNumber>) -> Self {
        Self { key, items }
    }

    fn with_items(&self, items: Vec<PheEncryptedNumber>) -> Self {
        Self {
            key: self.key.clone(),
            items,
        }
    }

    /// The ciphertexts of `range` (cloned, one chunk at a time).
    fn ciphertexts(&self, range: Range<usize>) -> Vec<Ciphertext> {
        self.items
            .get(range)
            .unwrap_or_default()
            .iter()
            .map(|n| n.ciphertext.clone())
            .collect()
    }
}

#[pymethods]
impl NativeArray {
    /// A batch from (ciphertext, exponent) pairs, all under `key`: a ciphertext bound to
    /// another key is a `ValueError` (key mismatch), whatever its Python wrapper claims.
    #[staticmethod]
    fn from_pairs(
        key: &NativePublicKey,
        pairs: Vec<(PyRef<'_, NativeCiphertext>, i64)>,
    ) -> PyResult<Self> {
        let items = pairs
            .iter()
            .map(|(c, e)| {
                key.key.check_ciphertext(&c.inner).map_err(err)?;
                number(c, *e)
            })
            .collect::<PyResult<_>>()?;
        Ok(Self {
            key: key.key.clone(),
            items,
        })
    }

    fn __len__(&self) -> usize {
        self.items.len()
    }

    /// Element `i` as (ciphertext, exponent).
    fn get(&self, i: usize) -> PyResult<(NativeCiphertext, i32)> {
        self.items
            .get(i)
            .map(|n| (ct(&n.ciphertext), n.exponent))
            .ok_or_else(|| {
                pyo3::exceptions::PyIndexError::new_err(format!(
                    "index {i} out of range for {} elements",
                    self.items.len()
                ))
            })
    }

    /// The elements at `indices` (a gather).
    fn take(&self, indices: PyReadonlyArray1<'_, i64>) -> PyResult<Self> {
        let indices = indices.as_slice()?;
        batch::probe_bytes(indices.len(), ciphertext_heap_bytes(&self.key), "indices")?;
        let mut items = batch::reserve(indices.len(), "indices")?;
        for &i in indices {
            let item = usize::try_from(i)
                .ok()
                .and_then(|i| self.items.get(i))
                .ok_or_else(|| {
                    pyo3::exceptions::PyIndexError::new_err(format!(
                        "index {i} out of range for {} elements",
                        self.items.len()
                    ))
                })?;
            items.push(item.clone());
        }
        Ok(self.with_items(items))
    }

    /// The phe exponents, as an int64 array.
    fn exponents<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let mut e = batch::reserve(self.items.len(), "exponents")?;
        e.extend(self.items.iter().map(|n| i64::from(n.exponent)));
        Ok(PyArray1::from_vec(py, e))
    }

    /// Elementwise sum with another batch (phe's alignment to the smaller exponent).
    fn add(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        self.same_length(other.items.len())?;
        if self.key != other.key {
            return Err(PyValueError::new_err(
                "Attempted to add numbers encrypted against different public keys!",
            ));
        }
        self.map_items(py, "other", None, |key, a, i| match other.items.get(i) {
            Some(b) => add_encrypted(key, a, b),
            None => Err(PyValueError::new_err("index out of range")),
        })
    }

    /// Elementwise `a + x` with plain scalars (phe's `_add_scalar`: x encoded with
    /// max_exponent = a's exponent).
    fn add_scalars(&self, py: Python<'_>, scalars: Scalars<'_>) -> PyResult<Self> {
        self.map_scalars(py, &scalars, |key, a, x| {
            let b = encode(key, &x.scalar(), None, Some(i64::from(a.exponent)))?;
            add_encoded(key, a, &b)
        })
    }

    /// Elementwise `a * x` with plain scalars (phe's `__mul__`).
    fn mul_scalars(&self, py: Python<'_>, scalars: Scalars<'_>) -> PyResult<Self> {
        self.map_scalars(py, &scalars, |key, a, x| {
            mul_encoded(key, a, &encode(key, &x.scalar(), None, None)?)
        })
    }

    /// The sum of all elements (phe's `sum()`), or None for an empty batch: each chunk is
    /// summed in parallel and added to the running total.
    #[pyo3(signature = (progress=None))]
    fn sum(
        &self,
        py: Python<'_>,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<(NativeCiphertext, i32)>> {
        let key = &self.key;
        let mut total: Option<PheEncryptedNumber> = None;
        batch::fold_chunked(py, self.items.len(), "self", progress, |range| {
            let items = self.items.get(range).unwrap_or_default();
            let part = items.par_iter().map(|a| Ok(Some(a.clone()))).try_reduce(
                || None,
                |a, b| match (a, b) {
                    (Some(a), Some(b)) => add_encrypted(key, &a, &b).map(Some),
                    (a, None) => Ok(a),
                    (None, b) => Ok(b),
                },
            )?;
            total = match (total.take(), part) {
                (Some(t), Some(p)) => Some(add_encrypted(key, &t, &p)?),
                (t, None) => t,
                (None, p) => p,
            };
            Ok(())
        })?;
        Ok(total.map(pair))
    }

    /// Re-randomizes every ciphertext (phe's `obfuscate`), chunk by chunk.
    #[pyo3(signature = (progress=None))]
    fn obfuscate(&self, py: Python<'_>, progress: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let mut rng = os_rng()?;
        let key = &self.key;
        batch::probe_bytes(self.items.len(), ciphertext_heap_bytes(key), "self")?;
        let items = batch::run_chunked(py, self.items.len(), "self", progress, |range| {
            let fresh = key
                .rerandomize_many(&self.ciphertexts(range.clone()), &mut rng)
                .map_err(err)?;
            Ok(fresh
                .into_iter()
                .zip(self.items.get(range).unwrap_or_default())
                .map(|(ciphertext, n)| PheEncryptedNumber {
                    ciphertext,
                    exponent: n.exponent,
                })
                .collect())
        })?;
        Ok(self.with_items(items))
    }

    /// The ciphertext values as Python ints.
    fn ciphertext_ints<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut out = batch::reserve(self.items.len(), "self")?;
        for n in &self.items {
            out.push(biguint_to_py(py, &n.ciphertext.to_biguint())?);
        }
        Ok(out)
    }
}

/// How `decrypt_array` returns its values.
fn decode_value_f64(key: &EncryptionKey, n: &PheEncodedNumber) -> PyResult<f64> {
    n.decode_f64(key).map_err(err)
}

fn decode_value_i64(key: &EncryptionKey, n: &PheEncodedNumber) -> PyResult<i64> {
    mantissa_to_i64(n.mantissa(key).map_err(err)?, n.exponent)
}

/// mantissa · 16^exponent as an `i64`, if it is an integer that fits.
pub(crate) fn mantissa_to_i64(m: BigInt, exponent: i32) -> PyResult<i64> {
    let value = if exponent >= 0 {
        m << (4 * exponent.unsigned_abs())
    } else {
        let d = BigInt::one() << (4 * exponent.unsigned_abs());
        let (q, r) = m.div_mod_floor(&d);
        if !r.is_zero() {
            return Err(PyValueError::new_err(
                "a decrypted value is not an integer: decrypt with dtype float64",
            ));
        }
        q
    };
    value.to_i64().ok_or_else(|| {
        PyOverflowError::new_err("a decrypted value does not fit an int64: use dtype float64")
    })
}

/// A Paillier private key (fl-paillier's `DecryptionKey`: constant-time CRT decryption,
/// secrets zeroized on drop).
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativePrivateKey {
    key: DecryptionKey,
}

impl NativePrivateKey {
    /// Decrypts a batch and decodes every value with `decode`, chunk by chunk (GIL
    /// released, parallel, interruptible).
    fn decrypt_decode<'py, T: numpy::Element + Send>(
        &self,
        py: Python<'py>,
        array: &NativeArray,
        decode: fn(&EncryptionKey, &PheEncodedNumber) -> PyResult<T>,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let key = &self.key;
        let out = batch::run_chunked(py, array.items.len(), "encrypted", progress, |range| {
            let ms = key
                .decrypt_many(&array.ciphertexts(range.clone()))
                .map_err(err)?;
            let items = array.items.get(range).unwrap_or_default();
            par_map(0..ms.len(), |i| match (ms.get(i), items.get(i)) {
                (Some(m), Some(n)) => decode(
                    key.encryption_key(),
                    &PheEncodedNumber {
                        encoding: m.to_biguint(),
                        exponent: n.exponent,
                    },
                ),
                _ => Err(PyValueError::new_err("index out of range")),
            })
        })?;
        Ok(PyArray1::from_vec(py, out).into_any())
    }
}

#[pymethods]
impl NativePrivateKey {
    /// Generates a key pair with an n of exactly `bits` bits (2048, 3072 or 4096).
    #[staticmethod]
    fn generate(py: Python<'_>, bits: u32) -> PyResult<Self> {
        let mut rng = os_rng()?;
        let key = py
            .detach(|| fl_paillier::keygen(bits, &mut rng))
            .map_err(err)?;
        Ok(Self { key })
    }

    /// Builds the key from its primes, validating them (see `DecryptionKey::from_primes`).
    #[staticmethod]
    fn from_primes(py: Python<'_>, p: &Bound<'_, PyAny>, q: &Bound<'_, PyAny>) -> PyResult<Self> {
        let p = biguint_from_py(p, "p")?;
        let q = biguint_from_py(q, "q")?;
        let key = py
            .detach(|| DecryptionKey::from_primes(&p, &q))
            .map_err(err)?;
        Ok(Self { key })
    }

    /// Parses pheutil's private JWK (`p`/`q`, or `lambda`/`mu`).
    #[staticmethod]
    fn from_jwk(py: Python<'_>, json: &str) -> PyResult<Self> {
        let key = py.detach(|| phe::private_key_from_jwk(json)).map_err(err)?;
        Ok(Self { key })
    }

    /// This key as pheutil's private JWK.
    fn to_jwk(&self, kid: &str, public_kid: &str) -> String {
        phe::private_key_to_jwk(&self.key, kid, public_kid)
    }

    /// Encodes (phe's rules) and encrypts every value as the key owner: fl-paillier's CRT
    /// encryption, whose ciphertexts have exactly the distribution of public-key encryption
    /// at about a quarter of the cost (GIL released, parallel).
    #[pyo3(signature = (values, precision=None, progress=None))]
    fn encrypt_array(
        &self,
        py: Python<'_>,
        values: Scalars<'_>,
        precision: Option<f64>,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<NativeArray> {
        let key = &self.key;
        NativeArray::encrypt(
            py,
            key.encryption_key(),
            &values,
            precision,
            progress,
            |pts, rng| key.encrypt_crt_many(pts, rng),
        )
    }

    /// The public key.
    fn public_key(&self) -> NativePublicKey {
        NativePublicKey {
            key: self.key.encryption_key().clone(),
        }
    }

    /// The primes (p, q), p < q, as Python ints. Python ints cannot be wiped: this copies
    /// the secrets out of the zeroizing key, for export only.
    fn primes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (p, q) = self.key.expose_primes();
        primes_to_py(py, &p, &q)
    }

    /// `DecryptionKey::prove_correct(context)`'s proof that gcd(n, φ(n)) = 1, encoded
    /// (`KeyCorrectnessProof::to_bytes`); GIL released. The roots are computed in constant
    /// time in the key and checked before they are released.
    fn prove_correct<'py>(&self, py: Python<'py>, context: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let proof = py.detach(|| self.key.prove_correct(context)).map_err(err)?;
        Ok(PyBytes::new(py, &proof.to_bytes()))
    }

    /// Constant-time equality of two private keys.
    fn same_key(&self, other: &Self) -> bool {
        self.key == other.key
    }

    /// phe's `raw_decrypt`: the plaintext residue in [0, n) of a ciphertext of this key
    /// (constant-time CRT decryption).
    fn raw_decrypt<'py>(
        &self,
        py: Python<'py>,
        c: &NativeCiphertext,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = py.detach(|| self.key.decrypt(&c.inner)).map_err(err)?;
        biguint_to_py(py, &m.to_biguint())
    }

    /// Decrypts a batch to float64 (phe's decoding, correctly rounded) or int64 (exact
    /// integers only); GIL released, parallel.
    #[pyo3(signature = (array, dtype, progress=None))]
    fn decrypt_array<'py>(
        &self,
        py: Python<'py>,
        array: &NativeArray,
        dtype: &str,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match dtype {
            "float64" => self.decrypt_decode(py, array, decode_value_f64, progress),
            "int64" => self.decrypt_decode(py, array, decode_value_i64, progress),
            other => Err(PyValueError::new_err(format!(
                "dtype must be float64 or int64, got {other}"
            ))),
        }
    }
}

/// The arithmetic engine fl-paillier's keys run on, on this CPU
/// (`fl_paillier::default_engine()`): "ifma", "x86-64-adx" or "portable" ("avx2" only
/// when named in Rust).
#[pyfunction]
fn engine() -> &'static str {
    fl_paillier::default_engine().name()
}

/// Registers the Paillier classes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(engine, m)?)?;
    m.add_class::<NativeCiphertext>()?;
    m.add_class::<NativePublicKey>()?;
    m.add_class::<NativePrivateKey>()?;
    m.add_class::<NativeArray>()?;
    m.add("MAX_PHE_EXPONENT", MAX_PHE_EXPONENT)?;
    m.add(
        "SUPPORTED_KEY_BITS",
        fl_paillier::SUPPORTED_KEY_BITS.to_vec(),
    )?;
    Ok(())
}
