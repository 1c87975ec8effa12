//! `fl_privacy._native`: the PyO3 extension behind the `fl_privacy` Python package.
//!
//! Every computation is done by the workspace crates through their public APIs; this crate
//! only converts between Python objects and the crates' types, maps the crates' typed
//! errors to Python exceptions, and releases the GIL around batch work (which the crates
//! run in parallel with rayon). It contains no `unsafe` code of its own: the workspace's
//! `forbid(unsafe_code)` applies here too (see SECURITY.md).

use pyo3::prelude::*;

mod audit;
mod batch;
mod cluster;
mod convert;
mod ldp;
mod legacy;
mod paillier;
mod signds;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    audit::register(m)?;
    cluster::register(m)?;
    paillier::register(m)?;
    legacy::register(m)?;
    ldp::register(m)?;
    signds::register(m)?;
    Ok(())
}
