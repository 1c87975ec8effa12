//! The native half of `fl_privacy.audit`: fl-audit's external audit with the mechanism
//! answered in-process by a Python function instead of a child process.

use std::path::PathBuf;

use fl_audit::AuditError;
use fl_audit::cli::{EXTERNAL_MECHANISMS, ExternalAudit, LawArgs};
use fl_audit::external::{CallbackMechanism, Responder};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// An fl-audit error: usage errors are `ValueError`, a misbehaving mechanism
/// `RuntimeError`, as `fl-audit external` exits 2 for both.
fn err(e: AuditError) -> PyErr {
    match e {
        AuditError::Usage(_) => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// Audits the mechanism answered by `answer` (a Python function from a request line to a
/// response line) exactly as `fl-audit external` audits a child process, with the
/// mechanism's parameters as `fl-audit external`'s options (`--classes`, `--dim`,
/// `--utilities`, ..., `--suite`); `samples` = `None` draws the planner's size, as
/// `fl-audit external` without `--samples`; writes report.json, report.md, report.html and
/// the plot into `out` when given. `progress` draws fl-audit's progress bar on stderr (None:
/// as the command line decides — when stderr is a terminal or `CI` is set). Returns
/// (passed, header line, verdict line, report.json text).
#[pyfunction]
#[allow(clippy::too_many_arguments)] // The command line's options, one by one.
#[pyo3(signature = (
    answer, mechanism, eps, samples, alpha, batch, out, target, *, progress=None,
    classes=None, dim=None, utilities=None, sensitivity=None, form=None, prior=None,
    top_k=None, output_dim=None, eps_rr=None, top_k_fraction=None, olh_hash=None,
    buckets=None, selection_input=None, suite=None
))]
pub(crate) fn audit_external(
    py: Python<'_>,
    answer: Py<PyAny>,
    mechanism: String,
    eps: f64,
    samples: Option<u64>,
    alpha: f64,
    batch: u64,
    out: Option<PathBuf>,
    target: String,
    progress: Option<bool>,
    classes: Option<u64>,
    dim: Option<u64>,
    utilities: Option<Vec<f64>>,
    sensitivity: Option<f64>,
    form: Option<String>,
    prior: Option<Vec<f64>>,
    top_k: Option<u64>,
    output_dim: Option<u64>,
    eps_rr: Option<f64>,
    top_k_fraction: Option<f64>,
    olh_hash: Option<String>,
    buckets: Option<u64>,
    selection_input: Option<String>,
    suite: Option<PathBuf>,
) -> PyResult<(bool, String, String, String)> {
    let audit = ExternalAudit {
        mechanism,
        eps: Some(eps),
        law: LawArgs {
            classes,
            dim,
            utilities,
            sensitivity,
            form,
            prior,
            top_k,
            output_dim,
            eps_rr,
            top_k_fraction,
            olh_hash,
            buckets,
            selection_input,
            suite,
            ..LawArgs::default()
        },
        samples,
        alpha,
        batch,
        out,
        seed: 0,
    };
    py.detach(|| {
        let start = || {
            let respond = move |line: &str| {
                Python::attach(|py| {
                    answer
                        .call1(py, (line,))
                        .and_then(|r| r.extract::<String>(py))
                        .map_err(|e| e.to_string())
                })
            };
            Ok(Box::new(CallbackMechanism::new(respond)) as Box<dyn Responder>)
        };
        let progress = progress.unwrap_or_else(|| {
            use std::io::IsTerminal;
            std::io::stderr().is_terminal() || std::env::var_os("CI").is_some()
        });
        let report = audit.run(start, progress).map_err(err)?;
        let [header, verdict] = audit.summary(&target, &report).map_err(err)?;
        let json = serde_json::to_string_pretty(&report.to_json())
            .map_err(|e| PyRuntimeError::new_err(format!("cannot serialise the report: {e}")))?;
        Ok((report.passed(), header, verdict, json))
    })
}

/// Registers the audit function and the mechanisms it supports.
/// The `fl-audit` command line in this process: `argv` as the binary's (the program's name
/// first), its output on this process's stdout and stderr (file descriptors 1 and 2, not
/// Python's `sys.stdout`); returns the exit status. The GIL is released while it runs.
/// The Python package's `fl-audit` script and `python -m fl_privacy.audit` are this.
#[pyfunction]
fn fl_audit_main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| fl_audit::cli::main_with_args(argv))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(audit_external, m)?)?;
    m.add_function(wrap_pyfunction!(fl_audit_main, m)?)?;
    m.add("EXTERNAL_MECHANISMS", EXTERNAL_MECHANISMS.to_vec())?;
    Ok(())
}
