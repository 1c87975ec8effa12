//! Batch work as a Python user expects it: in chunks, each computed with the GIL released
//! (in parallel on rayon's threads), with `Ctrl-C` honoured between chunks
//! (`Python::check_signals`: KeyboardInterrupt), an optional progress callback called
//! between chunks, and `MemoryError` — never an abort — when the result cannot be allocated.
//!
//! Chunk sizes adapt to the work: the first chunk is one element per thread, and each next
//! chunk is sized from the measured cost per element to take about [`TARGET_CHUNK`]; so
//! an interrupt is handled within about that time whatever the key size or the CPU.
//!
//! Memory: the result vector is reserved up front with `try_reserve_exact` (fallible), and
//! where each element also owns heap memory (a ciphertext's limbs), [`probe_bytes`] first
//! reserves and releases the whole amount, so that a request the address space cannot hold
//! (a memory cap, or more than RAM and swap) is refused before any work. What is left —
//! one chunk's temporaries — is bounded by the chunk size.

use std::ops::Range;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;

/// The time one chunk should take: short enough that Ctrl-C and progress feel immediate,
/// long enough that the per-chunk overhead (a GIL round trip, a signal check) is noise.
pub(crate) const TARGET_CHUNK: Duration = Duration::from_millis(100);

/// The largest chunk, in elements (bounds a chunk's temporaries for very cheap work).
const MAX_CHUNK: usize = 1 << 16;

/// A batch operation's failure, naming the element it is about when there is one.
pub(crate) struct ElementError {
    /// The element's index within the chunk, if the failure is about one element.
    pub(crate) index: Option<usize>,
    /// The exception.
    pub(crate) err: PyErr,
}

impl From<PyErr> for ElementError {
    fn from(err: PyErr) -> Self {
        Self { index: None, err }
    }
}

impl ElementError {
    /// The failure of element `index` (within the chunk).
    pub(crate) fn at(index: usize, err: PyErr) -> Self {
        Self {
            index: Some(index),
            err,
        }
    }

    /// The exception, its message prefixed with `arg[i]` (i: the index in the whole batch)
    /// when it is about one element; same exception type.
    fn into_pyerr(self, py: Python<'_>, arg: &str, offset: usize) -> PyErr {
        match self.index {
            None => self.err,
            Some(i) => prefixed(py, &self.err, &format!("{arg}[{}]", offset + i)),
        }
    }
}

/// `err` with its message prefixed by `what: ` (same exception type).
pub(crate) fn prefixed(py: Python<'_>, err: &PyErr, what: &str) -> PyErr {
    let msg = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    PyErr::from_type(err.get_type(py), format!("{what}: {msg}"))
}

/// `MemoryError` for a batch of `count` elements of the argument `arg`.
pub(crate) fn memory_error(arg: &str, count: usize) -> PyErr {
    PyMemoryError::new_err(format!(
        "not enough memory for the result of a batch of {count} elements ({arg}): \
         process it in smaller batches"
    ))
}

/// An empty vector with room for exactly `count` elements, or `MemoryError`.
pub(crate) fn reserve<T>(count: usize, what: &str) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(count)
        .map_err(|_| memory_error(what, count))?;
    Ok(v)
}

/// Checks that `count` elements of `bytes_each` heap bytes each can be allocated, by
/// reserving (untouched, so never paged in) and releasing that much; `MemoryError` if not.
pub(crate) fn probe_bytes(count: usize, bytes_each: usize, what: &str) -> PyResult<()> {
    let total = count
        .checked_mul(bytes_each)
        .ok_or_else(|| memory_error(what, count))?;
    let mut probe: Vec<u8> = Vec::new();
    probe
        .try_reserve_exact(total)
        .map_err(|_| memory_error(what, count))?;
    drop(probe);
    Ok(())
}

/// Calls `progress(done, total)` (a Python callable) if given; its exception propagates.
fn report(progress: Option<&Bound<'_, PyAny>>, done: usize, total: usize) -> PyResult<()> {
    if let Some(callback) = progress {
        callback.call1((done, total))?;
    }
    Ok(())
}

/// Chunk sizes: one element per thread first, then sized from the measured cost.
pub(crate) struct Chunker {
    threads: usize,
    next: usize,
}

impl Chunker {
    pub(crate) fn new() -> Self {
        let threads = rayon::current_num_threads().max(1);
        Self {
            threads,
            next: threads,
        }
    }

    /// The next chunk's length, at most `left`.
    fn take(&self, left: usize) -> usize {
        self.next.min(left).max(1)
    }

    /// Learns from a chunk of `len` elements that took `took`.
    fn learn(&mut self, len: usize, took: Duration) {
        let per = took.as_secs_f64() / len.max(1) as f64;
        let ideal = if per > 0.0 {
            (TARGET_CHUNK.as_secs_f64() / per) as usize
        } else {
            MAX_CHUNK
        };
        // Grow at most 8-fold per chunk (a first measurement can be noisy); whole rounds
        // of 8 lanes per thread once large enough (the multi-buffer kernels work in 8s).
        let lanes = 8 * self.threads;
        let mut next = ideal
            .min(len.saturating_mul(8))
            .clamp(self.threads, MAX_CHUNK);
        if next >= lanes {
            next -= next % lanes;
        }
        self.next = next;
    }
}

/// Runs `work` over `0..total` in chunks (each with the GIL released), appending each
/// chunk's results to a vector reserved up front; checks for signals and reports progress
/// between chunks. `arg` names the batch argument in errors (`values[17]: ...`).
///
/// # Errors
/// `MemoryError` if the result cannot be reserved; `KeyboardInterrupt` (or whatever a
/// signal handler raises) between chunks; the progress callback's exception; `work`'s.
pub(crate) fn run_chunked<T: Send>(
    py: Python<'_>,
    total: usize,
    arg: &str,
    progress: Option<&Bound<'_, PyAny>>,
    mut work: impl FnMut(Range<usize>) -> Result<Vec<T>, ElementError> + Send,
) -> PyResult<Vec<T>> {
    let mut out = reserve(total, arg)?;
    let mut chunker = Chunker::new();
    let mut start = 0;
    while start < total {
        let end = start + chunker.take(total - start);
        let began = Instant::now();
        let part = py
            .detach(|| work(start..end))
            .map_err(|e| e.into_pyerr(py, arg, start))?;
        chunker.learn(end - start, began.elapsed());
        out.extend(part);
        start = end;
        py.check_signals()?;
        report(progress, start, total)?;
    }
    Ok(out)
}

/// Runs `step` over `0..total` in chunks as [`run_chunked`], for work that folds into a
/// state instead of producing one result per element (a sum).
///
/// # Errors
/// As [`run_chunked`].
pub(crate) fn fold_chunked(
    py: Python<'_>,
    total: usize,
    arg: &str,
    progress: Option<&Bound<'_, PyAny>>,
    mut step: impl FnMut(Range<usize>) -> Result<(), ElementError> + Send,
) -> PyResult<()> {
    let mut chunker = Chunker::new();
    let mut start = 0;
    while start < total {
        let end = start + chunker.take(total - start);
        let began = Instant::now();
        py.detach(|| step(start..end))
            .map_err(|e| e.into_pyerr(py, arg, start))?;
        chunker.learn(end - start, began.elapsed());
        start = end;
        py.check_signals()?;
        report(progress, start, total)?;
    }
    Ok(())
}
