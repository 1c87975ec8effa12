//! The native half of `fl_privacy.paillier.LegacyPaillierPrivateKey`: fl-paillier's
//! `LegacyDecryptionKey` (an existing 1024–2047-bit key imported to decrypt old data and
//! nothing else), batch decryption, and re-encryption of its values under a new key
//! (the migration path).

use fl_paillier::{
    Ciphertext, LegacyDecryptionKey, PheEncodedNumber, PheEncryptedNumber, Plaintext,
};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::batch::{self, ElementError};
use crate::convert::{biguint_from_py, biguint_to_py, os_rng, primes_to_py};
use crate::paillier::{
    NativeArray, NativePublicKey, ciphertext_heap_bytes, err, exponent, mantissa_to_i64, par_map,
};

/// A legacy private key (decryption only; secrets zeroized on drop).
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeLegacyPrivateKey {
    key: LegacyDecryptionKey,
}

impl NativeLegacyPrivateKey {
    /// Validated ciphertexts of this key from Python ints (checking for signals every
    /// 4096 conversions).
    fn ciphertexts(
        &self,
        py: Python<'_>,
        values: &[Bound<'_, PyAny>],
    ) -> PyResult<Vec<Ciphertext>> {
        let mut out = batch::reserve(values.len(), "ciphertexts")?;
        for (i, v) in values.iter().enumerate() {
            let c = biguint_from_py(v, "ciphertext")
                .and_then(|c| self.key.ciphertext_from_biguint(&c).map_err(err))
                .map_err(|e| batch::prefixed(py, &e, &format!("ciphertexts[{i}]")))?;
            out.push(c);
            if i % 4096 == 4095 {
                py.check_signals()?;
            }
        }
        Ok(out)
    }

    /// Per element: the exponents (one int64 per ciphertext), validated.
    fn exponents(exponents: &PyReadonlyArray1<'_, i64>, len: usize) -> PyResult<Vec<i32>> {
        let e = exponents.as_slice()?;
        if e.len() != len {
            return Err(PyValueError::new_err(format!(
                "exponents has {} elements, ciphertexts {len}",
                e.len()
            )));
        }
        let mut out = batch::reserve(len, "exponents")?;
        for (i, &x) in e.iter().enumerate() {
            out.push(
                exponent(x).map_err(|e| PyValueError::new_err(format!("exponents[{i}]: {e}")))?,
            );
        }
        Ok(out)
    }

    /// Decrypts `cts` chunk by chunk and maps each plaintext with its exponent.
    fn decrypt_map<T: Send>(
        &self,
        py: Python<'_>,
        cts: &[Ciphertext],
        exps: &[i32],
        progress: Option<&Bound<'_, PyAny>>,
        f: impl Fn(&Plaintext, i32) -> PyResult<T> + Sync + Send,
    ) -> PyResult<Vec<T>> {
        let key = &self.key;
        batch::run_chunked(py, cts.len(), "ciphertexts", progress, |range| {
            let chunk = cts.get(range.clone()).unwrap_or_default();
            let es = exps.get(range).unwrap_or_default();
            let ms = key.decrypt_many(chunk).map_err(err)?;
            par_map(0..ms.len(), |i| match (ms.get(i), es.get(i)) {
                (Some(m), Some(&e)) => f(m, e),
                _ => Err(PyValueError::new_err("index out of range")),
            })
        })
    }
}

#[pymethods]
impl NativeLegacyPrivateKey {
    /// Imports the key from its primes (1024 to 2047 bits; see
    /// `LegacyDecryptionKey::from_primes_insecure_legacy`).
    #[staticmethod]
    fn from_primes_insecure_legacy(
        py: Python<'_>,
        p: &Bound<'_, PyAny>,
        q: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let p = biguint_from_py(p, "p")?;
        let q = biguint_from_py(q, "q")?;
        let key = py
            .detach(|| LegacyDecryptionKey::from_primes_insecure_legacy(&p, &q))
            .map_err(err)?;
        Ok(Self { key })
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

    /// The bit length of n.
    #[getter]
    fn bits(&self) -> u32 {
        self.key.bits()
    }

    /// The primes (p, q), p < q, as Python ints (which cannot be wiped: for export only).
    fn primes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (p, q) = self.key.expose_primes();
        primes_to_py(py, &p, &q)
    }

    /// Constant-time equality of two legacy keys.
    fn same_key(&self, other: &Self) -> bool {
        self.key == other.key
    }

    /// The plaintext residue in [0, n) of a ciphertext int (validated: 0 < c < n²,
    /// gcd(c, n) = 1).
    fn raw_decrypt<'py>(
        &self,
        py: Python<'py>,
        ciphertext: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let c = biguint_from_py(ciphertext, "ciphertext")?;
        let c = self.key.ciphertext_from_biguint(&c).map_err(err)?;
        let m = py.detach(|| self.key.decrypt(&c)).map_err(err)?;
        biguint_to_py(py, &m.to_biguint())
    }

    /// Decrypts ciphertext ints with their phe exponents to float64 (phe's decoding,
    /// correctly rounded) or int64 (exact integers only), chunk by chunk.
    #[pyo3(signature = (ciphertexts, exponents, dtype, progress=None))]
    fn decrypt_array<'py>(
        &self,
        py: Python<'py>,
        ciphertexts: Vec<Bound<'py, PyAny>>,
        exponents: PyReadonlyArray1<'py, i64>,
        dtype: &str,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let exps = Self::exponents(&exponents, ciphertexts.len())?;
        let cts = self.ciphertexts(py, &ciphertexts)?;
        drop(ciphertexts);
        let key = &self.key;
        match dtype {
            "float64" => {
                let out = self.decrypt_map(py, &cts, &exps, progress, |m, e| {
                    key.decode_phe_f64(m, e).map_err(err)
                })?;
                Ok(PyArray1::from_vec(py, out).into_any())
            }
            "int64" => {
                let out = self.decrypt_map(py, &cts, &exps, progress, |m, e| {
                    mantissa_to_i64(key.decode_signed(m).map_err(err)?, e)
                })?;
                Ok(PyArray1::from_vec(py, out).into_any())
            }
            other => Err(PyValueError::new_err(format!(
                "dtype must be float64 or int64, got {other}"
            ))),
        }
    }

    /// The migration step: decrypts each value under this key and encrypts the same
    /// mantissa and exponent under `new_key` (fresh randomness), chunk by chunk. Returns
    /// the batch under the new key.
    #[pyo3(signature = (ciphertexts, exponents, new_key, progress=None))]
    fn reencrypt_array<'py>(
        &self,
        py: Python<'py>,
        ciphertexts: Vec<Bound<'py, PyAny>>,
        exponents: PyReadonlyArray1<'py, i64>,
        new_key: &NativePublicKey,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<NativeArray> {
        let exps = Self::exponents(&exponents, ciphertexts.len())?;
        let cts = self.ciphertexts(py, &ciphertexts)?;
        drop(ciphertexts);
        let key = &self.key;
        let target = &new_key.key;
        batch::probe_bytes(cts.len(), ciphertext_heap_bytes(target), "ciphertexts")?;
        let mut rng = os_rng()?;
        let items = batch::run_chunked(py, cts.len(), "ciphertexts", progress, |range| {
            let chunk = cts.get(range.clone()).unwrap_or_default();
            let es = exps.get(range).unwrap_or_default();
            let ms = key.decrypt_many(chunk).map_err(err)?;
            let encoded = par_map(0..ms.len(), |i| match (ms.get(i), es.get(i)) {
                (Some(m), Some(&e)) => {
                    let mantissa = key.decode_signed(m).map_err(err)?;
                    PheEncodedNumber::from_mantissa(target, &mantissa, e).map_err(err)
                }
                _ => Err(PyValueError::new_err("index out of range")),
            })?;
            let pts = encoded
                .iter()
                .map(|e| target.plaintext_from_biguint(&e.encoding))
                .collect::<Result<Vec<Plaintext>, _>>()
                .map_err(err)?;
            let fresh = target
                .encrypt_many(&pts, &mut rng)
                .map_err(|e| ElementError::from(err(e)))?;
            Ok(fresh
                .into_iter()
                .zip(encoded)
                .map(|(ciphertext, e)| PheEncryptedNumber {
                    ciphertext,
                    exponent: e.exponent,
                })
                .collect())
        })?;
        Ok(NativeArray::from_items(target.clone(), items))
    }
}

/// Registers the legacy key class.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeLegacyPrivateKey>()?;
    m.add("LEGACY_MIN_KEY_BITS", fl_paillier::LEGACY_MIN_KEY_BITS)?;
    Ok(())
}
