//! The native half of the server-side clustering scores of `fl_privacy.flower`'s Laplace
//! evaluation: fl-stats' argmax labelling, Calinski–Harabasz and mean silhouette (the
//! scores MindSpore Federated's server computes on the clients' noisy probability vectors).

use numpy::PyReadonlyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn err(e: fl_stats::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// (argmax labels, Calinski–Harabasz, silhouette) of the row-major `points` with
/// `dimension` columns, each point labelled by its first maximal coordinate.
#[pyfunction]
pub(crate) fn cluster_scores(
    py: Python<'_>,
    points: PyReadonlyArray1<'_, f64>,
    dimension: usize,
) -> PyResult<(Vec<usize>, f64, f64)> {
    let x = points.as_slice()?;
    if dimension == 0 || x.is_empty() || x.len() % dimension != 0 {
        return Err(PyValueError::new_err(format!(
            "points must be a non-empty matrix with {dimension} columns (dimension >= 1), got {} values",
            x.len()
        )));
    }
    py.detach(|| {
        let rows: Vec<&[f64]> = x.chunks_exact(dimension).collect();
        let labels = fl_stats::argmax_labels(&rows).map_err(err)?;
        let ch = fl_stats::calinski_harabasz(&rows, &labels).map_err(err)?;
        let s = fl_stats::silhouette(&rows, &labels).map_err(err)?;
        Ok((labels, ch, s))
    })
}

/// Registers the clustering scores.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cluster_scores, m)?)?;
    Ok(())
}
