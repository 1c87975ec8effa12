//! Conversions between Python objects and the crates' types, and the OS-seeded generator.

use num_bigint::{BigInt, BigUint, Sign};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyTuple};
use rand::SeedableRng;
use rand::rngs::{ChaCha20Rng, SysRng};

/// The longest Python integer accepted from a caller, in bits: a ciphertext of the largest
/// key (n² of 2 × 8192 bits) plus headroom. Longer inputs are refused before any
/// conversion, so a caller cannot make us copy an unbounded integer.
pub(crate) const MAX_INT_BITS: u64 = 20_000;

/// A Python `int` (or any object with `__index__`, e.g. numpy integers) as a `BigInt`.
///
/// # Errors
/// `TypeError` for a non-integer, `ValueError` above [`MAX_INT_BITS`] bits.
pub(crate) fn bigint_from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<BigInt> {
    let int = if obj.is_instance_of::<PyInt>() {
        obj.clone()
    } else if obj.hasattr("__index__")? && !obj.is_instance_of::<PyFloat>() {
        obj.call_method0("__index__")?
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, got {}",
            obj.get_type().name()?
        )));
    };
    let bits: u64 = int.call_method0("bit_length")?.extract()?;
    if bits > MAX_INT_BITS {
        return Err(PyValueError::new_err(format!(
            "{what} has {bits} bits; at most {MAX_INT_BITS} are accepted"
        )));
    }
    let len = usize::try_from(bits / 8 + 1).unwrap_or(usize::MAX);
    let bytes = int.call_method("to_bytes", (len, "little"), Some(&signed_kwargs(int.py())?))?;
    let bytes = bytes.cast::<PyBytes>()?;
    Ok(BigInt::from_signed_bytes_le(bytes.as_bytes()))
}

/// A non-negative Python `int` as a `BigUint`.
///
/// # Errors
/// As [`bigint_from_py`], and `ValueError` for a negative value.
pub(crate) fn biguint_from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<BigUint> {
    let x = bigint_from_py(obj, what)?;
    x.to_biguint()
        .ok_or_else(|| PyValueError::new_err(format!("{what} must be non-negative")))
}

/// A `BigInt` as a Python `int`.
///
/// # Errors
/// Only if the interpreter fails to build the integer.
pub(crate) fn bigint_to_py<'py>(py: Python<'py>, x: &BigInt) -> PyResult<Bound<'py, PyAny>> {
    if x.sign() == Sign::NoSign {
        return Ok(0i64.into_pyobject(py)?.into_any());
    }
    let bytes = PyBytes::new(py, &x.to_signed_bytes_le());
    py.get_type::<PyInt>()
        .call_method("from_bytes", (bytes, "little"), Some(&signed_kwargs(py)?))
}

fn signed_kwargs(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let kw = pyo3::types::PyDict::new(py);
    kw.set_item("signed", true)?;
    Ok(kw)
}

/// A `BigUint` as a Python `int`.
///
/// # Errors
/// Only if the interpreter fails to build the integer.
pub(crate) fn biguint_to_py<'py>(py: Python<'py>, x: &BigUint) -> PyResult<Bound<'py, PyAny>> {
    let bytes = PyBytes::new(py, &x.to_bytes_le());
    py.get_type::<PyInt>()
        .call_method1("from_bytes", (bytes, "little"))
}

/// A private key's primes (p, q), big-endian in zeroizing buffers, as a tuple of Python
/// ints. Python ints cannot be wiped: this copies the secrets out, for export only.
///
/// # Errors
/// Only if the interpreter fails to build the integers.
pub(crate) fn primes_to_py<'py>(
    py: Python<'py>,
    p: &[u8],
    q: &[u8],
) -> PyResult<Bound<'py, PyTuple>> {
    let p = biguint_to_py(py, &BigUint::from_bytes_be(p))?;
    let q = biguint_to_py(py, &BigUint::from_bytes_be(q))?;
    PyTuple::new(py, [p, q])
}

/// A fresh ChaCha20 generator seeded from the operating system (the convenience default of
/// every sampling call; fixed seeds exist only in the crates' tests, audits and benches).
///
/// # Errors
/// `RuntimeError` if the operating system's generator is unavailable.
pub(crate) fn os_rng() -> PyResult<ChaCha20Rng> {
    ChaCha20Rng::try_from_rng(&mut SysRng).map_err(|e| {
        pyo3::exceptions::PyRuntimeError::new_err(format!(
            "operating-system randomness unavailable: {e}"
        ))
    })
}
