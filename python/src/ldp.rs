//! The native half of `fl_privacy.ldp`: fl-ldp's exact mechanisms over numpy arrays.
//!
//! Arrays are cut into fixed chunks of rows; each chunk is sampled by the crate's own
//! batch path with its own ChaCha20 stream, seeded in order from an OS-seeded ChaCha20
//! (`fl_ldp::system_rng`), on rayon's threads with the GIL released. Every output element
//! is therefore drawn exactly from the crate's law, independently of the others. When a
//! chunk reports invalid input, the whole input is run once more through the crate's
//! sequential call, so that the error names the element by its index in the whole array.

use fl_ldp::{
    BinaryRandomizedResponse, EmbeddingDp, Epsilon, ExponentialForm, ExponentialMechanism,
    KaryRandomizedResponse, LabelDp, LabelKind, LaplaceCalibration, LaplaceOptions, Mechanism,
    PrivacyClaim, ProbabilityVectorLaplace, TimingMode,
};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;
use rayon::prelude::*;

use crate::batch;

/// An fl-ldp error as a `ValueError` (its message names the parameter, the value and what
/// is allowed).
pub(crate) fn err(e: fl_ldp::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn epsilon(eps: f64) -> PyResult<Epsilon> {
    Epsilon::new(eps).map_err(err)
}

/// A privacy claim as (requested ε, realised ε, δ, what is protected).
pub(crate) fn claim(c: &PrivacyClaim) -> (f64, f64, f64, String) {
    (
        c.requested_epsilon,
        c.epsilon,
        c.delta,
        c.neighbouring.to_string(),
    )
}

/// Input elements per parallel chunk.
const CHUNK: usize = 1 << 16;

fn os_rng() -> PyResult<ChaCha20Rng> {
    fl_ldp::system_rng().map_err(err)
}

/// A deterministic ChaCha20 stream for tests, audits and benchmarks (`SeededRng` in
/// Python). Each call that uses it derives a child stream from it, so successive calls
/// draw different randomness; the same seed and the same calls give the same outputs.
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeSeededRng {
    rng: std::sync::Mutex<ChaCha20Rng>,
}

#[pymethods]
impl NativeSeededRng {
    #[new]
    fn new(seed: u64) -> Self {
        Self {
            rng: std::sync::Mutex::new(ChaCha20Rng::seed_from_u64(seed)),
        }
    }
}

/// The stream a call samples from: a child of `seeded` if given, else OS-seeded.
pub(crate) fn master_rng(seeded: Option<&NativeSeededRng>) -> PyResult<ChaCha20Rng> {
    match seeded {
        None => os_rng(),
        Some(s) => {
            let mut parent = s
                .rng
                .lock()
                .map_err(|_| PyValueError::new_err("the seeded generator is poisoned"))?;
            Ok(ChaCha20Rng::from_rng(&mut *parent))
        }
    }
}

/// Chunks sampled per release of the GIL: the signal check (Ctrl-C) between two groups
/// comes every 64 chunks of 2^16 elements (a few tens of milliseconds of work).
const CHUNKS_PER_CHECK: usize = 64;

/// Samples `input` (rows of `in_row` elements) into rows of `out_row` outputs, chunk by
/// chunk in parallel, each chunk with its own ChaCha20 stream drawn in order from
/// `master` (so a seeded run is reproducible). The output is allocated fallibly
/// (`MemoryError`), and groups of chunks run with the GIL released with a signal check
/// (`KeyboardInterrupt`) between groups. The inner result is the mechanism's verdict on
/// the input.
fn sample_chunks<T: Sync, U: Send + Clone + Default>(
    py: Python<'_>,
    mut master: ChaCha20Rng,
    input: &[T],
    in_row: usize,
    out_row: usize,
    sample: impl Fn(&[T], &mut [U], &mut ChaCha20Rng) -> fl_ldp::Result<()> + Sync,
) -> PyResult<fl_ldp::Result<Vec<U>>> {
    let in_row = in_row.max(1);
    let out_row = out_row.max(1);
    let rows = input.len() / in_row;
    let chunk_rows = (CHUNK / in_row.max(out_row)).max(1);
    let total = rows
        .checked_mul(out_row)
        .ok_or_else(|| batch::memory_error("output", rows))?;
    let mut out: Vec<U> = batch::reserve(total, "output")?;
    out.resize(total, U::default());
    let chunks = rows.div_ceil(chunk_rows);
    let mut first = 0;
    while first < chunks {
        let group = CHUNKS_PER_CHECK.min(chunks - first);
        let rngs: Vec<ChaCha20Rng> = (0..group)
            .map(|_| ChaCha20Rng::from_rng(&mut master))
            .collect();
        let rows_from = first * chunk_rows;
        let rows_to = ((first + group) * chunk_rows).min(rows);
        let x = input
            .get(rows_from * in_row..rows_to * in_row)
            .unwrap_or_default();
        let o = out
            .get_mut(rows_from * out_row..rows_to * out_row)
            .unwrap_or_default();
        let verdict = py.detach(|| {
            x.par_chunks(chunk_rows * in_row)
                .zip(o.par_chunks_mut(chunk_rows * out_row))
                .zip(rngs)
                .try_for_each(|((x, o), mut rng)| sample(x, o, &mut rng))
        });
        if let Err(e) = verdict {
            return Ok(Err(e));
        }
        py.check_signals()?;
        first += group;
    }
    Ok(Ok(out))
}

/// After a chunk failed: runs `f` on the rows of `x` in order and returns the first
/// error, naming its row in the whole array.
fn first_row_error<T>(
    x: &[f64],
    row_len: usize,
    what: &str,
    f: impl Fn(&[f64], &mut ChaCha20Rng) -> fl_ldp::Result<T>,
) -> PyErr {
    let mut rng = match os_rng() {
        Ok(rng) => rng,
        Err(e) => return e,
    };
    for (r, row) in x.chunks_exact(row_len.max(1)).enumerate() {
        if let Err(e) = f(row, &mut rng) {
            return PyValueError::new_err(format!("{what} (row) {r}: {e}"));
        }
    }
    PyValueError::new_err(format!("invalid {what}"))
}

/// Binary randomized response.
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeBinaryRr {
    m: BinaryRandomizedResponse,
}

#[pymethods]
impl NativeBinaryRr {
    #[new]
    fn new(eps: f64) -> PyResult<Self> {
        Ok(Self {
            m: BinaryRandomizedResponse::new(epsilon(eps)?),
        })
    }

    #[getter]
    fn keep_probability(&self) -> f64 {
        self.m.keep_probability()
    }

    #[getter]
    fn flip_probability(&self) -> f64 {
        self.m.flip_probability()
    }

    fn claim(&self) -> (f64, f64, f64, String) {
        claim(&self.m.privacy())
    }

    /// Randomizes every bit (exact coins, one per bit).
    fn randomize<'py>(
        &self,
        py: Python<'py>,
        bits: PyReadonlyArray1<'py, bool>,
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let out = sample_chunks(py, master_rng(rng)?, bits.as_slice()?, 1, 1, |x, o, rng| {
            self.m.randomize_into(x, o, rng)
        })?
        .map_err(err)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// The de-biased count of true ones and its variance.
    fn estimate_ones(&self, reported_ones: u64, total: u64) -> PyResult<(f64, f64)> {
        let e = self.m.estimate_ones(reported_ones, total).map_err(err)?;
        Ok((e.value, e.variance))
    }
}

/// k-ary randomized response.
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeKaryRr {
    m: KaryRandomizedResponse,
}

/// Class indices from numpy's int64, checked against k (a negative index is as wrong as
/// one ≥ k; the error gives the element's index in the whole array).
fn class_indices(classes: &[i64], k: usize) -> PyResult<Vec<usize>> {
    let mut out = batch::reserve(classes.len(), "classes")?;
    for (i, &c) in classes.iter().enumerate() {
        out.push(usize::try_from(c).ok().filter(|&c| c < k).ok_or_else(|| {
            PyValueError::new_err(format!(
                "classes[{i}] = {c} is out of range: classes are integers in 0..{k}"
            ))
        })?);
    }
    Ok(out)
}

#[pymethods]
impl NativeKaryRr {
    #[new]
    fn new(eps: f64, k: usize) -> PyResult<Self> {
        Ok(Self {
            m: KaryRandomizedResponse::new(epsilon(eps)?, k).map_err(err)?,
        })
    }

    #[getter]
    fn keep_probability(&self) -> f64 {
        self.m.keep_probability()
    }

    #[getter]
    fn other_probability(&self) -> f64 {
        self.m.other_probability()
    }

    #[getter]
    fn categories(&self) -> usize {
        self.m.categories()
    }

    fn claim(&self) -> (f64, f64, f64, String) {
        claim(&self.m.privacy())
    }

    /// Randomizes every class index.
    fn randomize<'py>(
        &self,
        py: Python<'py>,
        classes: PyReadonlyArray1<'py, i64>,
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let xs = class_indices(classes.as_slice()?, self.m.categories())?;
        let out = sample_chunks(py, master_rng(rng)?, &xs, 1, 1, |x, o: &mut [i64], rng| {
            let ys = self.m.randomize_classes(x, rng)?;
            for (o, y) in o.iter_mut().zip(ys) {
                *o = y as i64;
            }
            Ok(())
        })?
        .map_err(err)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Randomizes a row-major one-hot matrix with k columns (float64 0/1 values).
    fn randomize_one_hot<'py>(
        &self,
        py: Python<'py>,
        one_hot: PyReadonlyArray1<'py, f64>,
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let x = one_hot.as_slice()?;
        let k = self.m.categories();
        if x.is_empty() || x.len() % k != 0 {
            return Err(PyValueError::new_err(format!(
                "one-hot labels must be a non-empty matrix with {k} columns, got {} values",
                x.len()
            )));
        }
        let out = sample_chunks(py, master_rng(rng)?, x, k, k, |x, o, rng| {
            o.copy_from_slice(&self.m.randomize_one_hot(x, rng)?);
            Ok(())
        })?;
        let out = match out {
            Ok(v) => v,
            Err(_) => {
                let mut rng = os_rng()?;
                self.m.randomize_one_hot(x, &mut rng).map_err(err)?
            }
        };
        Ok(PyArray1::from_vec(py, out))
    }
}

/// EmbeddingDP.
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeEmbeddingDp {
    m: EmbeddingDp,
}

/// A float array of either precision.
#[derive(FromPyObject)]
enum Floats<'py> {
    F32(PyReadonlyArray1<'py, f32>),
    F64(PyReadonlyArray1<'py, f64>),
}

#[pymethods]
impl NativeEmbeddingDp {
    #[new]
    #[pyo3(signature = (eps=None))]
    fn new(eps: Option<f64>) -> PyResult<Self> {
        Ok(Self {
            m: EmbeddingDp::new(eps.map(epsilon).transpose()?),
        })
    }

    #[getter]
    fn one_to_one_probability(&self) -> Option<f64> {
        self.m.one_to_one_probability()
    }

    #[getter]
    fn zero_to_one_probability(&self) -> Option<f64> {
        self.m.zero_to_one_probability()
    }

    fn claim(&self) -> (f64, f64, f64, String) {
        claim(&self.m.privacy())
    }

    fn vector_claim(&self, dimension: usize) -> (f64, f64, f64, String) {
        claim(&self.m.per_vector_privacy(dimension))
    }

    /// Quantises (x > 0) and randomizes every coordinate: 0/1 bytes.
    fn privatize<'py>(
        &self,
        py: Python<'py>,
        embedding: Floats<'py>,
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let out = match &embedding {
            Floats::F32(a) => self.privatize_slice(py, a.as_slice()?, rng)?,
            Floats::F64(a) => self.privatize_slice(py, a.as_slice()?, rng)?,
        };
        Ok(PyArray1::from_vec(py, out))
    }
}

impl NativeEmbeddingDp {
    fn privatize_slice<T: Copy + Into<f64> + Sync>(
        &self,
        py: Python<'_>,
        x: &[T],
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Vec<u8>> {
        match sample_chunks(py, master_rng(rng)?, x, 1, 1, |x, o, rng| {
            self.m.privatize_into(x, o, rng)
        })? {
            Ok(v) => Ok(v),
            Err(_) => {
                let mut rng = os_rng()?;
                self.m.privatize(x, &mut rng).map_err(err)
            }
        }
    }
}

/// LabelDP (binary or one-hot labels).
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeLabelDp {
    m: LabelDp,
}

#[pymethods]
impl NativeLabelDp {
    #[new]
    fn new(eps: f64) -> PyResult<Self> {
        Ok(Self {
            m: LabelDp::new(epsilon(eps)?),
        })
    }

    #[getter]
    fn flip_probability(&self) -> f64 {
        self.m.flip_probability()
    }

    /// The label-DP claim for labels of `shape`.
    fn claim(&self, shape: Vec<usize>) -> PyResult<(f64, f64, f64, String)> {
        let len = shape.iter().product();
        let kind = LabelKind::from_shape(&shape, len).map_err(err)?;
        Ok(claim(&self.m.privacy(kind).map_err(err)?))
    }

    /// Privatizes a row-major label tensor (float64 0/1 values) of `shape`.
    fn privatize<'py>(
        &self,
        py: Python<'py>,
        labels: PyReadonlyArray1<'py, f64>,
        shape: Vec<usize>,
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let x = labels.as_slice()?;
        let kind = LabelKind::from_shape(&shape, x.len()).map_err(err)?;
        let row = match kind {
            LabelKind::OneHot { classes } => classes,
            _ => 1,
        };
        let out = sample_chunks(py, master_rng(rng)?, x, row, row, |x, o, rng| {
            let chunk_shape = if row == 1 {
                vec![x.len()]
            } else {
                vec![x.len() / row, row]
            };
            o.copy_from_slice(&self.m.privatize(x, &chunk_shape, rng)?);
            Ok(())
        })?;
        let out = match out {
            Ok(v) => v,
            Err(_) => {
                let mut rng = os_rng()?;
                self.m.privatize(x, &shape, &mut rng).map_err(err)?
            }
        };
        Ok(PyArray1::from_vec(py, out))
    }
}

/// The Laplace mechanism on probability vectors.
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeLaplace {
    m: ProbabilityVectorLaplace,
}

#[pymethods]
impl NativeLaplace {
    #[new]
    #[pyo3(signature = (eps, dimension, calibration, tolerance, granularity_exponent, timing))]
    fn new(
        eps: f64,
        dimension: usize,
        calibration: &str,
        tolerance: f64,
        granularity_exponent: Option<i32>,
        timing: &str,
    ) -> PyResult<Self> {
        let calibration = match calibration {
            "simplex" => LaplaceCalibration::Simplex,
            "mindspore" => LaplaceCalibration::MindSporeCompatible,
            other => {
                return Err(PyValueError::new_err(format!(
                    "calibration must be \"simplex\" or \"mindspore\", got {other:?}"
                )));
            }
        };
        let timing = match timing {
            "exact" => TimingMode::Exact,
            "bounded" => TimingMode::Bounded,
            other => {
                return Err(PyValueError::new_err(format!(
                    "timing must be \"exact\" or \"bounded\", got {other:?}"
                )));
            }
        };
        let mut options = LaplaceOptions::default()
            .with_calibration(calibration)
            .with_tolerance(tolerance)
            .with_timing(timing);
        if let Some(k) = granularity_exponent {
            options = options.with_granularity_exponent(k);
        }
        Ok(Self {
            m: ProbabilityVectorLaplace::new(epsilon(eps)?, dimension, options).map_err(err)?,
        })
    }

    #[getter]
    fn dimension(&self) -> usize {
        self.m.dimension()
    }

    #[getter]
    fn noise_scale(&self) -> f64 {
        self.m.noise_scale()
    }

    #[getter]
    fn spacing(&self) -> f64 {
        self.m.spacing()
    }

    fn claim(&self) -> (f64, f64, f64, String) {
        claim(&self.m.privacy())
    }

    /// Privatizes every row (a probability vector of `dimension` values).
    fn privatize<'py>(
        &self,
        py: Python<'py>,
        rows: PyReadonlyArray1<'py, f64>,
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let x = rows.as_slice()?;
        let d = self.m.dimension();
        if x.is_empty() || x.len() % d != 0 {
            return Err(PyValueError::new_err(format!(
                "expected probability vectors of {d} values (an array of shape (n, {d})), \
                 got {} values",
                x.len()
            )));
        }
        let out = sample_chunks(py, master_rng(rng)?, x, d, d, |x, o, rng| {
            for (xi, oi) in x.chunks_exact(d).zip(o.chunks_exact_mut(d)) {
                oi.copy_from_slice(&self.m.privatize(xi, rng)?);
            }
            Ok(())
        })?;
        let out = out.map_err(|_| {
            first_row_error(x, d, "probability vector", |row, rng| {
                self.m.privatize(row, rng)
            })
        })?;
        Ok(PyArray1::from_vec(py, out))
    }
}

/// The exponential mechanism.
#[pyclass(module = "fl_privacy._native", frozen)]
pub(crate) struct NativeExponential {
    m: ExponentialMechanism,
}

#[pymethods]
impl NativeExponential {
    #[new]
    fn new(eps: f64, sensitivity: f64, form: &str) -> PyResult<Self> {
        let form = match form {
            "standard" => ExponentialForm::Standard,
            "monotone" => ExponentialForm::Monotone,
            other => {
                return Err(PyValueError::new_err(format!(
                    "form must be \"standard\" or \"monotone\", got {other:?}"
                )));
            }
        };
        Ok(Self {
            m: ExponentialMechanism::new(epsilon(eps)?, sensitivity, form).map_err(err)?,
        })
    }

    fn claim(&self) -> (f64, f64, f64, String) {
        claim(&self.m.privacy())
    }

    /// The exact selection probabilities for `utilities`.
    fn probabilities(&self, utilities: PyReadonlyArray1<'_, f64>) -> PyResult<Vec<f64>> {
        self.m.probabilities(utilities.as_slice()?).map_err(err)
    }

    /// `size` independent selections over the same utilities.
    fn sample<'py>(
        &self,
        py: Python<'py>,
        utilities: PyReadonlyArray1<'py, f64>,
        size: usize,
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let law = self.m.categorical(utilities.as_slice()?).map_err(err)?;
        let slots = vec![(); size];
        let out = sample_chunks(
            py,
            master_rng(rng)?,
            &slots,
            1,
            1,
            |x, o: &mut [i64], rng| {
                for o in o.iter_mut().take(x.len()) {
                    *o = law.sample(rng) as i64;
                }
                Ok(())
            },
        )?
        .map_err(err)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// One selection per row of a row-major utility matrix with `candidates` columns.
    fn select_rows<'py>(
        &self,
        py: Python<'py>,
        utilities: PyReadonlyArray1<'py, f64>,
        candidates: usize,
        rng: Option<&NativeSeededRng>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let u = utilities.as_slice()?;
        if candidates == 0 || u.is_empty() || u.len() % candidates != 0 {
            return Err(PyValueError::new_err(format!(
                "expected a utility matrix with {candidates} columns, got {} values",
                u.len()
            )));
        }
        let out = sample_chunks(
            py,
            master_rng(rng)?,
            u,
            candidates,
            1,
            |x, o: &mut [i64], rng| {
                for (row, o) in x.chunks_exact(candidates).zip(o.iter_mut()) {
                    *o = self.m.select(row, rng)? as i64;
                }
                Ok(())
            },
        )?
        .map_err(|_| {
            first_row_error(u, candidates, "utilities", |row, rng| {
                self.m.select(row, rng)
            })
        })?;
        Ok(PyArray1::from_vec(py, out))
    }
}

/// Registers the LDP classes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeSeededRng>()?;
    m.add_class::<NativeBinaryRr>()?;
    m.add_class::<NativeKaryRr>()?;
    m.add_class::<NativeEmbeddingDp>()?;
    m.add_class::<NativeLabelDp>()?;
    m.add_class::<NativeLaplace>()?;
    m.add_class::<NativeExponential>()?;
    m.add_function(wrap_pyfunction!(crate_baseline_seconds, m)?)?;
    Ok(())
}

/// The baseline of `python/bench.py`: seconds that fl-ldp's own batch call takes on `n`
/// elements (rows of `dimension` for Laplace), on one thread, from a ChaCha20 stream, with
/// no Python in the loop. The inputs are built before the clock starts.
#[pyfunction]
pub(crate) fn crate_baseline_seconds(
    py: Python<'_>,
    mechanism: &str,
    n: usize,
    eps: f64,
) -> PyResult<f64> {
    let eps = epsilon(eps)?;
    let mut rng = ChaCha20Rng::seed_from_u64(20_261_124);
    py.detach(|| {
        let start;
        match mechanism {
            "rr-binary" => {
                let m = BinaryRandomizedResponse::new(eps);
                let bits: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
                let mut out = vec![false; n];
                start = std::time::Instant::now();
                m.randomize_into(&bits, &mut out, &mut rng).map_err(err)?;
            }
            "rr-kary" => {
                let m = KaryRandomizedResponse::new(eps, 10).map_err(err)?;
                let classes: Vec<usize> = (0..n).map(|i| i % 10).collect();
                start = std::time::Instant::now();
                m.randomize_classes(&classes, &mut rng).map_err(err)?;
            }
            "embedding-dp" => {
                let m = EmbeddingDp::new(Some(eps));
                let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
                let mut out = vec![0u8; n];
                start = std::time::Instant::now();
                m.privatize_into(&x, &mut out, &mut rng).map_err(err)?;
            }
            "laplace" => {
                let d = 10;
                let m = ProbabilityVectorLaplace::new(eps, d, LaplaceOptions::default())
                    .map_err(err)?;
                let row = vec![0.1; d];
                start = std::time::Instant::now();
                for _ in 0..n / d {
                    m.privatize(&row, &mut rng).map_err(err)?;
                }
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "no baseline for {other:?}: rr-binary, rr-kary, embedding-dp, laplace"
                )));
            }
        }
        Ok(start.elapsed().as_secs_f64())
    })
}
