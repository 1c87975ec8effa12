//! The validation of a shard's counts file before anything of it is summed or analysed.
//!
//! A counts file is untrusted input: anyone can write one. `fl-audit merge` accepts a
//! file only when every table in it is a table the run's own sources could have produced
//! for that shard:
//!
//! - **Shape.** Every input's tables have the shape of the tables the grid point's
//!   observer starts from (its [`Draws`] for no output, built from the run's suites):
//!   the same kind of data (histogram, bit statistics, real outputs), the same lengths,
//!   the same serial and batch alphabets and event cells. A table of another length or
//!   kind is refused, never dropped or padded.
//! - **Totals.** Every table's totals are those `n` outputs give, `n` the shard's share
//!   of the point's samples, drawn as the run's source draws them ([`Pieces`]: the
//!   project's sampler in chunks of 2¹⁸ outputs, an external mechanism as one stream
//!   asked `batch` outputs at a time):
//!   - the law's data: a histogram sums to `n`; bit statistics count `n` vectors, whose
//!     whole-vector histogram (up to 16 coordinates) sums to `n` and gives exactly the
//!     ones and the pairs, and every pair's 2 × 2 table is non-negative; real outputs are
//!     `n` finite numbers per coordinate; the law-specific layouts (SignDS selection and
//!     client, the estimators, hashed OLH) sum, block by block, to what `n` outputs give
//!     (exactly where one output adds a fixed amount to a block, bounded by `n` where it
//!     adds 0 or 1);
//!   - serial pairs: at lag ℓ, each stream holds Σ over the pieces of (size − ℓ)⁺ pairs;
//!   - batches: ⌊n/u⌋ closed batches of `u` outputs and one of n mod u (`u` the sampler's
//!     block of 2¹⁴ outputs, or the external batch size), none left open;
//!   - the learned event's cells: the fitting half holds the outputs at the even blocks
//!     of 2¹⁰ positions of each piece, the certifying half the others (none when the
//!     point learns no event).
//! - **Arithmetic.** Sums are checked: a total that overflows 64 bits is a refusal, and so
//!   is a merge whose sum would ([`checked_merge`]).
//!
//! A file that fails is refused with [`ShardError::Table`]: the file, the grid point, the
//! input and the table, in one line (exit status 2).

use crate::{
    analysis::{estimator::EstimatorAudit, olh::OlhHashedAudit},
    engine::{PointDraws, Shard},
    error::{AuditError, ShardError},
    family::Law,
    progress::Progress,
    source::{BLOCK, internal_pieces},
    suite::{Params, params_label},
    tally::{BitStats, Data, Draws, EVENT_BLOCK, SERIAL_LAGS, pair_design, pair_index},
};

/// How the run's source cuts a shard's outputs: into independent pieces (serial pairs and
/// event blocks restart in each) and into batches (the over-dispersion test's unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pieces {
    /// The project's sampler ([`crate::source::Internal`]): chunks, batches of
    /// [`BLOCK`] outputs.
    Internal,
    /// An external mechanism ([`crate::source::External`]): one stream, batches of the
    /// run's batch size.
    External {
        /// Outputs per request.
        batch: u64,
    },
}

impl Pieces {
    /// The independent pieces `n` outputs are drawn in: (how many full pieces, their
    /// size, the size of the last, shorter one).
    fn split(self, n: u64) -> (u64, u64, u64) {
        match self {
            Self::Internal => internal_pieces(n),
            Self::External { .. } => (0, n, n),
        }
    }

    /// Σ over the pieces of `n` outputs of `f(size)`, `f(0)` = 0 (without listing the
    /// pieces: a crafted file may claim 2⁶⁴ outputs); `None` on overflow.
    fn total(self, n: u64, f: impl Fn(u64) -> u64) -> Option<u64> {
        let (full, size, rest) = self.split(n);
        full.checked_mul(f(size))?.checked_add(f(rest))
    }

    /// Outputs per (full) batch.
    fn batch(self) -> u64 {
        match self {
            Self::Internal => BLOCK,
            Self::External { batch } => batch,
        }
    }
}

/// How a law-specific histogram's blocks add up (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One count per output: the histogram sums to `n`.
    Histogram,
    /// Bit statistics.
    Bits,
    /// Real outputs.
    Reals,
    /// SignDS selection: `[ν (h + 1) | index hits d | sets]`.
    Selection { h: usize, d: usize },
    /// SignDS client: `[cells 4 (h + 1) | hits 4 d]`.
    Client { h: usize, d: usize },
    /// An estimator: `[reports | support per value | true value per value]`.
    Estimator { values: usize },
    /// Hashed OLH: `[support k | own bucket g | offset g | pair 2 k]`.
    OlhHashed { values: usize, buckets: usize },
}

impl Layout {
    fn of(law: &Law) -> Self {
        match law {
            Law::Finite(_) => Self::Histogram,
            Law::Bits(_) => Self::Bits,
            Law::Reals(_) => Self::Reals,
            Law::Selection(l) => Self::Selection {
                h: l.output_dim,
                d: l.dim,
            },
            Law::Client(l) => Self::Client {
                h: l.nu.len().saturating_sub(1),
                d: l.dim,
            },
            Law::Estimator(EstimatorAudit { values, .. }) => Self::Estimator {
                values: values.len(),
            },
            Law::OlhHashed(OlhHashedAudit {
                values, buckets, ..
            }) => Self::OlhHashed {
                values: *values,
                buckets: *buckets,
            },
        }
    }
}

/// What a grid point's tables must be.
struct PointPlan {
    suite: String,
    params: Params,
    seed: u64,
    layout: Layout,
    labels: Vec<String>,
    /// Per input, the observer's tables for no output (the shapes).
    empty: Vec<Draws>,
}

/// What every table of a run's counts files must be: built once from the run's suites,
/// then checked against each file.
pub(crate) struct Plan {
    points: Vec<PointPlan>,
    pieces: Pieces,
}

/// A refusal of one table (the file is added by the caller).
struct Refusal {
    point: String,
    input: String,
    table: String,
    message: String,
}

type Checked<T = ()> = Result<T, Refusal>;

impl Plan {
    /// The plan of the run `run` (its suites built into grid points, each observer's empty
    /// tables drawn).
    ///
    /// # Errors
    /// Suites that do not build, an external run without a valid batch size.
    pub(crate) fn of(run: &super::RunSpec) -> crate::error::Result<Self> {
        let pieces = match run.command {
            super::RunCommand::Run => Pieces::Internal,
            super::RunCommand::External => match run.batch {
                Some(batch @ 1..=super::MAX_BATCH) => Pieces::External { batch },
                other => {
                    return Err(AuditError::usage(format!(
                        "an external run's batch size must be 1 to {}, the counts say {other:?}",
                        super::MAX_BATCH
                    )));
                }
            },
        };
        let suites = run.suites_parsed()?;
        let mut points = Vec::new();
        for mut p in run.points(&suites)? {
            let empty = p.audit.draw(0, 0, &Progress::default())?;
            let suite = suites
                .get(p.suite)
                .map(|s| s.name.clone())
                .unwrap_or_default();
            points.push(PointPlan {
                suite,
                params: p.params.clone(),
                seed: p.seed,
                layout: Layout::of(&p.audit.law),
                labels: p.audit.law.labels(),
                empty,
            });
        }
        Ok(Self { points, pieces })
    }

    /// Checks every table of `counts` (the file `path`).
    ///
    /// # Errors
    /// [`ShardError::Table`] naming the point, the input and the table;
    /// [`ShardError::Corrupt`] for points that are not the run's.
    pub(crate) fn check(&self, path: &str, counts: &super::Counts) -> Result<(), ShardError> {
        let corrupt = |message: String| ShardError::Corrupt {
            path: path.into(),
            message,
        };
        let (index, count) = counts.shard();
        let shard = Shard::new(index, count).map_err(|e| corrupt(e.to_string()))?;
        if counts.points.len() != self.points.len() {
            return Err(corrupt(format!(
                "{} grid points, the run's suites have {}",
                counts.points.len(),
                self.points.len()
            )));
        }
        for (plan, point) in self.points.iter().zip(&counts.points) {
            self.check_point(plan, point, shard)
                .map_err(|r| ShardError::Table {
                    path: path.into(),
                    point: r.point,
                    input: r.input,
                    table: r.table,
                    message: r.message,
                })?;
        }
        Ok(())
    }

    fn check_point(&self, plan: &PointPlan, point: &PointDraws, shard: Shard) -> Checked {
        let name = format!("suite `{}` at {}", plan.suite, params_label(&plan.params));
        let refuse = |input: String, table: &str, message: String| Refusal {
            point: name.clone(),
            input,
            table: table.into(),
            message,
        };
        let whole = |table: &str, message: String| refuse("every input".into(), table, message);
        if point.suite != plan.suite || point.params != plan.params || point.seed != plan.seed {
            return Err(whole(
                "point",
                format!(
                    "the file's point is suite `{}` at {} (seed {}), the run's is seed {}",
                    point.suite,
                    params_label(&point.params),
                    point.seed,
                    plan.seed
                ),
            ));
        }
        if !(point.seconds.is_finite() && point.seconds >= 0.0) {
            return Err(whole(
                "seconds",
                format!("{} is not a duration", point.seconds),
            ));
        }
        if point.inputs.len() != plan.empty.len() {
            return Err(whole(
                "inputs",
                format!(
                    "{} inputs, the law has {}",
                    point.inputs.len(),
                    plan.empty.len()
                ),
            ));
        }
        let n = shard.samples(point.samples);
        let schedule = match self.pieces {
            Pieces::Internal => None,
            Pieces::External { batch } => {
                // The schedule has at least n/32 requests per input; a file that holds fewer
                // batch rows is refused before the schedule is drawn (a crafted file may
                // claim 2⁶⁴ outputs).
                let rows = point
                    .inputs
                    .iter()
                    .map(|d| d.streams.batches.rows().len() / d.streams.batches.alphabet().max(1))
                    .min()
                    .unwrap_or(0) as u64;
                if n / crate::schedule::SINGLE_SHARE > rows {
                    return Err(whole(
                        "streams.batches",
                        format!(
                            "{rows} responses, the schedule of {n} outputs per input asks at \
                             least {}",
                            n / crate::schedule::SINGLE_SHARE
                        ),
                    ));
                }
                Some(crate::schedule::schedule(
                    point.inputs.len(),
                    n,
                    batch,
                    shard.seed(plan.seed),
                ))
            }
        };
        for (i, (draws, empty)) in point.inputs.iter().zip(&plan.empty).enumerate() {
            let label = plan.labels.get(i).map_or("", String::as_str);
            let input = format!("input {i} ({label})");
            let expected = schedule
                .as_deref()
                .map(|s| Expected::of(s, i, point.inputs.len()));
            self.check_draws(draws, empty, plan.layout, n, expected.as_ref())
                .map_err(|(table, message)| refuse(input, &table, message))?;
        }
        Ok(())
    }

    /// Checks one input's tables against its empty tables for `n` outputs; the table and
    /// what is wrong.
    fn check_draws(
        &self,
        d: &Draws,
        empty: &Draws,
        layout: Layout,
        n: u64,
        expected: Option<&Expected>,
    ) -> Result<(), (String, String)> {
        let s = &d.streams;
        if s.position != n {
            return Err((
                "streams.position".into(),
                format!("{} outputs, the shard's share is {n}", s.position),
            ));
        }
        let consecutive = self
            .pieces
            .total(n, |p| p.saturating_sub(1))
            .unwrap_or(u64::MAX);
        check_data(&d.data, &empty.data, layout, n, consecutive)?;
        // Serial pairs.
        let (lags, shape) = (&s.lags, &empty.streams.lags);
        if lags.alphabet() != shape.alphabet() || lags.cells().len() != shape.cells().len() {
            return Err((
                "streams.lags".into(),
                format!(
                    "alphabet {} and {} cells, the observer's are {} and {}",
                    lags.alphabet(),
                    lags.cells().len(),
                    shape.alphabet(),
                    shape.cells().len()
                ),
            ));
        }
        for stream in 0..shape.streams() {
            for lag in 1..=SERIAL_LAGS {
                let want = self.pieces.total(n, |p| p.saturating_sub(lag as u64));
                let got = sum(lags.table(stream, lag));
                if got != want {
                    let (full, size, rest) = self.pieces.split(n);
                    return Err((
                        format!("streams.lags (stream {stream}, lag {lag})"),
                        format!(
                            "{} pairs, {n} outputs ({full} pieces of {size} and one of {rest}) \
                             form {}",
                            show(got),
                            show(want)
                        ),
                    ));
                }
            }
        }
        match expected {
            None => {
                check_batches(d, empty, n, self.pieces.batch())?;
                if s.contexts.is_some() || s.reuse.is_some() {
                    return Err((
                        "streams.contexts".into(),
                        "the project's sampler has no schedule: no contexts or reuse result".into(),
                    ));
                }
            }
            Some(e) => check_schedule(d, empty, n, e)?,
        }
        // The learned event's cells.
        let (e, shape) = (&s.events, &empty.streams.events);
        if e.fit.len() != shape.fit.len() || e.certify.len() != shape.certify.len() {
            return Err((
                "streams.events".into(),
                format!(
                    "{} and {} cells, the observer counts {}",
                    e.fit.len(),
                    e.certify.len(),
                    shape.fit.len()
                ),
            ));
        }
        let (fit, certify) = if shape.fit.is_empty() {
            (0, 0)
        } else {
            // At most n: the fitting half of each piece is at most the piece.
            let fit = self.pieces.total(n, fitting_half).unwrap_or(n).min(n);
            (fit, n - fit)
        };
        for (half, cells, want) in [("fit", &e.fit, fit), ("certify", &e.certify, certify)] {
            let got = sum(cells);
            if got != Some(want) {
                return Err((
                    format!("streams.events.{half}"),
                    format!("{} outputs, the shard's {n} put {want} there", show(got)),
                ));
            }
        }
        Ok(())
    }
}

/// The outputs of a piece of `size` that fall in the learned event's fitting half (the
/// even blocks of [`EVENT_BLOCK`] positions).
fn fitting_half(size: u64) -> u64 {
    let pair = 2 * EVENT_BLOCK;
    (size / pair) * EVENT_BLOCK + (size % pair).min(EVENT_BLOCK)
}

/// The checked sum of `v` (`None` on overflow).
fn sum(v: &[u64]) -> Option<u64> {
    v.iter().try_fold(0u64, |a, &x| a.checked_add(x))
}

fn show(total: Option<u64>) -> String {
    total.map_or_else(|| "more than 2^64".into(), |t| t.to_string())
}

/// `table` must sum to `want`.
fn total(table: &str, v: &[u64], want: u64, what: &str) -> Result<(), (String, String)> {
    let got = sum(v);
    if got == Some(want) {
        Ok(())
    } else {
        Err((
            table.into(),
            format!("sums to {}, {what} give {want}", show(got)),
        ))
    }
}

/// Every entry of `table` at most `bound`.
fn at_most(table: &str, v: &[u64], bound: u64, what: &str) -> Result<(), (String, String)> {
    match v.iter().position(|&x| x > bound) {
        None => Ok(()),
        Some(i) => Err((
            format!("{table}[{i}]"),
            format!("{} exceeds {what} ({bound})", v[i]),
        )),
    }
}

/// The law's data against its empty shape, for `n` outputs.
fn check_data(
    data: &Data,
    empty: &Data,
    layout: Layout,
    n: u64,
    consecutive: u64,
) -> Result<(), (String, String)> {
    let outputs = "the shard's outputs";
    match (data, empty) {
        (Data::Counts(c), Data::Counts(e)) => {
            if c.len() != e.len() {
                return Err((
                    "data.Counts".into(),
                    format!("{} cells, the law's layout has {}", c.len(), e.len()),
                ));
            }
            check_layout(c, layout, n)
        }
        (Data::Bits(b), Data::Bits(e)) => check_bits(b, e, n, consecutive),
        (Data::RealCells(r), Data::RealCells(e)) => {
            if r.cells.len() != e.cells.len() {
                return Err((
                    "data.RealCells".into(),
                    format!(
                        "{} coordinates, the law has {}",
                        r.cells.len(),
                        e.cells.len()
                    ),
                ));
            }
            for (j, (col, shape)) in r.cells.iter().zip(&e.cells).enumerate() {
                if col.len() != shape.len() {
                    return Err((
                        format!("data.RealCells (coordinate {j})"),
                        format!("{} cells, the law's edges make {}", col.len(), shape.len()),
                    ));
                }
                total(&format!("data.RealCells (coordinate {j})"), col, n, outputs)?;
            }
            if r.in_box > n {
                return Err((
                    "data.RealCells.in_box".into(),
                    format!("{} outputs in the box, {outputs} are {n}", r.in_box),
                ));
            }
            Ok(())
        }
        _ => Err((
            "data".into(),
            format!("{} data, the law's are {}", kind(data), kind(empty)),
        )),
    }
}

fn kind(d: &Data) -> &'static str {
    match d {
        Data::Counts(_) => "Counts",
        Data::Bits(_) => "Bits",
        Data::RealCells(_) => "RealCells",
    }
}

/// A law-specific histogram of the right length for `n` outputs.
fn check_layout(c: &[u64], layout: Layout, n: u64) -> Result<(), (String, String)> {
    let outputs = "the shard's outputs";
    let t = "data.Counts";
    let mul = |k: usize| (k as u64).checked_mul(n);
    let overflow = || (t.to_string(), "the outputs' totals overflow".to_string());
    match layout {
        Layout::Histogram | Layout::Bits | Layout::Reals => total(t, c, n, outputs),
        Layout::Selection { h, d } => {
            let (nu, rest) = c.split_at((h + 1).min(c.len()));
            let (hits, sets) = rest.split_at(d.min(rest.len()));
            total("data.Counts (nu)", nu, n, outputs)?;
            total(
                "data.Counts (index hits)",
                hits,
                mul(h).ok_or_else(overflow)?,
                "h indices per output of the shard's outputs",
            )?;
            at_most("data.Counts (index hits)", hits, n, outputs)?;
            if sets.is_empty() {
                Ok(())
            } else {
                total("data.Counts (sets)", sets, n, outputs)
            }
        }
        Layout::Client { h, d } => {
            let (cells, hits) = c.split_at((4 * (h + 1)).min(c.len()));
            total("data.Counts (cells)", cells, n, outputs)?;
            for (combo, (cell, hit)) in cells.chunks(h + 1).zip(hits.chunks(d.max(1))).enumerate() {
                let reports = sum(cell).ok_or_else(overflow)?;
                let want = (h as u64).checked_mul(reports).ok_or_else(overflow)?;
                total(
                    &format!("data.Counts (hits of combination {combo})"),
                    hit,
                    want,
                    "h indices per report of the combination",
                )?;
                at_most(
                    &format!("data.Counts (hits of combination {combo})"),
                    hit,
                    reports,
                    "the combination's reports",
                )?;
            }
            Ok(())
        }
        Layout::Estimator { values } => {
            let reports = c.first().copied().unwrap_or(0);
            if reports != n {
                return Err((
                    "data.Counts (reports)".into(),
                    format!("{reports} reports, {outputs} are {n}"),
                ));
            }
            let rest = c.get(1..).unwrap_or(&[]);
            let (support, truth) = rest.split_at(values.min(rest.len()));
            at_most("data.Counts (support)", support, n, outputs)?;
            match sum(truth) {
                Some(s) if s <= n => Ok(()),
                got => Err((
                    "data.Counts (true values)".into(),
                    format!("{} users, more than {outputs} ({n})", show(got)),
                )),
            }
        }
        Layout::OlhHashed { values, buckets } => {
            let (support, rest) = c.split_at(values.min(c.len()));
            let (own, rest) = rest.split_at(buckets.min(rest.len()));
            let (offset, pairs) = rest.split_at(buckets.min(rest.len()));
            at_most("data.Counts (support)", support, n, outputs)?;
            total("data.Counts (own bucket)", own, n, outputs)?;
            total("data.Counts (offset)", offset, n, outputs)?;
            for (v, pair) in pairs.chunks(2).enumerate() {
                if sum(pair).is_none_or(|s| s > n) {
                    return Err((
                        format!("data.Counts (pair of value {v})"),
                        format!("{pair:?} counts more than {outputs} ({n})"),
                    ));
                }
            }
            Ok(())
        }
    }
}

/// Bit statistics against their empty shape, for `n` vectors.
fn check_bits(
    b: &BitStats,
    e: &BitStats,
    n: u64,
    consecutive: u64,
) -> Result<(), (String, String)> {
    let shape = |t: &str, got: usize, want: usize| {
        if got == want {
            Ok(())
        } else {
            Err((
                format!("data.Bits.{t}"),
                format!("{got} cells, the law's dimension gives {want}"),
            ))
        }
    };
    shape("ones", b.ones.len(), e.ones.len())?;
    shape("both", b.both.len(), e.both.len())?;
    match (&b.full, &e.full) {
        (Some(f), Some(g)) => shape("full", f.len(), g.len())?,
        (None, None) => {}
        (f, _) => {
            return Err((
                "data.Bits.full".into(),
                format!(
                    "{}, the law's dimension {} keeps {}",
                    if f.is_some() { "present" } else { "absent" },
                    e.ones.len(),
                    if f.is_some() { "none" } else { "one" }
                ),
            ));
        }
    }
    if b.n != n {
        return Err((
            "data.Bits.n".into(),
            format!("{} vectors, the shard's outputs are {n}", b.n),
        ));
    }
    at_most("data.Bits.ones", &b.ones, n, "the shard's outputs")?;
    // Every pair's 2 × 2 table is non-negative: both ≤ each one, ones − both ≤ n.
    let design = pair_design(b.ones.len());
    if design.len() != b.both.len() {
        return Err((
            "data.Bits.both".into(),
            format!(
                "{} pairs, the dimension's pair design has {}",
                b.both.len(),
                design.len()
            ),
        ));
    }
    for (&(j, k), &both) in design.iter().zip(&b.both) {
        let (oj, ok) = (b.ones[j], b.ones[k]);
        let fine =
            both <= oj.min(ok) && (oj - both).checked_add(ok).is_some_and(|union| union <= n);
        if !fine {
            return Err((
                format!("data.Bits.both (coordinates {j} and {k})"),
                format!("{both} with both bits of {oj} and {ok} ones in {n} vectors"),
            ));
        }
    }
    // Cross-output tables: two 2 × 2 tables per pair, each over every consecutive pair of
    // outputs of a piece.
    shape("cross", b.cross.len(), e.cross.len())?;
    for (p, tables) in b.cross.chunks_exact(4).enumerate() {
        if sum(tables) != Some(consecutive) {
            return Err((
                format!("data.Bits.cross (table {p})"),
                format!(
                    "{} consecutive pairs, the shard's pieces form {consecutive}",
                    show(sum(tables))
                ),
            ));
        }
    }
    if let Some(full) = &b.full {
        total("data.Bits.full", full, n, "the shard's outputs")?;
        // The whole-vector histogram determines the ones and the pairs exactly.
        let dim = b.ones.len();
        let mut ones = vec![0u64; dim];
        let mut both = vec![0u64; b.both.len()];
        for (v, &c) in full.iter().enumerate() {
            if c == 0 {
                continue;
            }
            for j in 0..dim {
                if v >> j & 1 == 1 {
                    ones[j] += c;
                    for k in j + 1..dim {
                        if v >> k & 1 == 1 {
                            both[pair_index(j, k, dim)] += c;
                        }
                    }
                }
            }
        }
        if ones != b.ones || both != b.both {
            return Err((
                "data.Bits.full".into(),
                "the whole vectors do not give the ones and pairs counted".into(),
            ));
        }
    }
    Ok(())
}

/// What an external run's schedule implies for one input's tables.
pub(crate) struct Expected {
    /// The sizes of the input's requests, in order (its batch rows' totals).
    sizes: Vec<u64>,
    /// The input's outputs by the input of the previous request (the last row: none).
    previous: Vec<u64>,
    /// The input's outputs by request-size class.
    size_class: Vec<u64>,
    /// The input's outputs by place in their response: first, in between, last.
    place: Vec<u64>,
    /// Outputs in the run's whole stream (every input).
    stream: u64,
}

impl Expected {
    fn of(schedule: &[crate::schedule::Request], input: usize, inputs: usize) -> Self {
        let mut e = Self {
            sizes: Vec::new(),
            previous: vec![0; inputs + 1],
            size_class: vec![0; crate::tally::SIZE_CLASSES],
            place: vec![0; 3],
            stream: 0,
        };
        let mut previous = inputs;
        for r in schedule {
            e.stream = e.stream.saturating_add(r.size);
            if r.input == input {
                e.sizes.push(r.size);
                e.previous[previous] += r.size;
                e.size_class[crate::tally::size_class(r.size)] += r.size;
                e.place[0] += u64::from(r.size >= 1);
                e.place[1] += r.size.saturating_sub(2);
                e.place[2] += u64::from(r.size >= 2);
            }
            previous = r.input;
        }
        e
    }
}

/// The batch counts' alphabet, row cells and open batch against the observer's empty ones;
/// the alphabet (at least 1).
fn check_batch_shape(
    b: &crate::tally::BatchCounts,
    shape: &crate::tally::BatchCounts,
) -> Result<usize, (String, String)> {
    let t = "streams.batches";
    let a = shape.alphabet().max(1);
    if b.alphabet() != shape.alphabet() || b.open().len() != a || !b.rows().len().is_multiple_of(a)
    {
        return Err((
            t.into(),
            format!(
                "alphabet {} with {} open and {} row cells, the observer's alphabet is {a}",
                b.alphabet(),
                b.open().len(),
                b.rows().len()
            ),
        ));
    }
    if b.open().iter().any(|&c| c > 0) {
        return Err((
            t.into(),
            "a batch is left open (every shard closes its last batch)".into(),
        ));
    }
    Ok(a)
}

/// An external run's batches, contexts and reuse result against its schedule: one batch
/// per request of the input, of the request's size, in order; the context tables' rows
/// total what the schedule put there and their columns the batches' symbol counts; the
/// reuse result within what the stream allows.
fn check_schedule(d: &Draws, empty: &Draws, n: u64, e: &Expected) -> Result<(), (String, String)> {
    let (b, t) = (&d.streams.batches, "streams.batches");
    let a = check_batch_shape(b, &empty.streams.batches)?;
    let rows: Vec<&[u64]> = b.rows().chunks_exact(a).collect();
    if rows.len() != e.sizes.len() {
        return Err((
            t.into(),
            format!(
                "{} batches, the schedule of {n} outputs sends this input {} requests",
                rows.len(),
                e.sizes.len()
            ),
        ));
    }
    let mut columns = vec![0u64; a];
    for (r, (row, &want)) in rows.iter().zip(&e.sizes).enumerate() {
        if sum(row) != Some(want) {
            return Err((
                format!("{t} (batch {r})"),
                format!(
                    "{} outputs, the schedule's request asks {want}",
                    show(sum(row))
                ),
            ));
        }
        for (c, &x) in columns.iter_mut().zip(row.iter()) {
            *c = c
                .checked_add(x)
                .ok_or_else(|| (t.to_string(), "overflow".to_string()))?;
        }
    }
    let Some(ctx) = d.streams.contexts.as_ref() else {
        return Err((
            "streams.contexts".into(),
            "an external run's counts must hold the schedule's context tables".into(),
        ));
    };
    for (name, table, want) in [
        ("previous_input", &ctx.previous_input, &e.previous),
        ("request_size", &ctx.request_size, &e.size_class),
        ("place", &ctx.place, &e.place),
    ] {
        let t = format!("streams.contexts.{name}");
        if ctx.alphabet != a || table.len() != want.len() * a {
            return Err((
                t,
                format!(
                    "{} cells over {} symbols, the schedule's table is {} x {a}",
                    table.len(),
                    ctx.alphabet,
                    want.len()
                ),
            ));
        }
        let mut cols = vec![0u64; a];
        for (r, (row, &w)) in table.chunks_exact(a).zip(want).enumerate() {
            if sum(row) != Some(w) {
                return Err((
                    format!("{t} (row {r})"),
                    format!("{} outputs, the schedule puts {w} there", show(sum(row))),
                ));
            }
            for (c, &x) in cols.iter_mut().zip(row) {
                *c = c
                    .checked_add(x)
                    .ok_or_else(|| (t.clone(), "overflow".to_string()))?;
            }
        }
        if cols != columns {
            return Err((
                t,
                format!("symbol totals {cols:?}, the batches count {columns:?}"),
            ));
        }
    }
    let Some(r) = d.streams.reuse.as_ref() else {
        return Err((
            "streams.reuse".into(),
            "an external run's counts must hold the reuse-at-any-lag result".into(),
        ));
    };
    let piece = crate::analysis::reuse::PIECE as u64;
    let pieces = crate::analysis::reuse::tested_pieces(e.stream).len() as u64;
    let bad = !(r.max_exponent.is_finite() && r.max_exponent >= 0.0)
        || r.pieces.checked_add(r.short_pieces) != Some(pieces)
        || r.longest_lag >= piece.min(e.stream.max(1))
        || r.at_lag > r.longest_lag
        || r.lags > r.pieces.saturating_mul(r.longest_lag);
    if bad {
        return Err((
            "streams.reuse".into(),
            format!(
                "{r:?} is not a result of {pieces} piece(s) of the run's {} outputs",
                e.stream
            ),
        ));
    }
    Ok(())
}

/// The batch counts against their empty shape: ⌊n/u⌋ batches of `u` outputs and one of
/// n mod u, none open.
fn check_batches(d: &Draws, empty: &Draws, n: u64, u: u64) -> Result<(), (String, String)> {
    let (b, t) = (&d.streams.batches, "streams.batches");
    let a = check_batch_shape(b, &empty.streams.batches)?;
    let (full, rest) = (n / u, n % u);
    let want_rows = full + u64::from(rest > 0);
    let rows = b.rows().len() / a.max(1);
    if rows as u64 != want_rows {
        return Err((
            t.into(),
            format!("{rows} batches, {n} outputs in batches of {u} make {want_rows}"),
        ));
    }
    for (r, row) in b.rows().chunks_exact(a.max(1)).enumerate() {
        let want = if (r as u64) < full { u } else { rest };
        if sum(row) != Some(want) {
            return Err((
                format!("{t} (batch {r})"),
                format!("{} outputs, the batch holds {want}", show(sum(row))),
            ));
        }
    }
    Ok(())
}

/// Adds `piece` to `total` (the draws of one input in two shards) with checked sums.
///
/// # Errors
/// The table whose sum overflows 64 bits.
pub(crate) fn checked_merge(total: &mut Draws, piece: Draws) -> Result<(), String> {
    let fits = |a: &[u64], b: &[u64]| a.iter().zip(b).all(|(x, y)| x.checked_add(*y).is_some());
    let (s, p) = (&total.streams, &piece.streams);
    let mut overflow = None;
    if s.position.checked_add(p.position).is_none() {
        overflow = Some("streams.position");
    } else if !fits(s.lags.cells(), p.lags.cells()) {
        overflow = Some("streams.lags");
    } else if !fits(&s.events.fit, &p.events.fit) || !fits(&s.events.certify, &p.events.certify) {
        overflow = Some("streams.events");
    } else {
        match (&total.data, &piece.data) {
            (Data::Counts(a), Data::Counts(b)) if !fits(a, b) => overflow = Some("data.Counts"),
            (Data::Bits(a), Data::Bits(b)) => {
                let full = match (&a.full, &b.full) {
                    (Some(x), Some(y)) => fits(x, y),
                    _ => true,
                };
                if a.n.checked_add(b.n).is_none()
                    || !fits(&a.ones, &b.ones)
                    || !fits(&a.both, &b.both)
                    || !fits(&a.cross, &b.cross)
                    || !full
                {
                    overflow = Some("data.Bits");
                }
            }
            (Data::RealCells(a), Data::RealCells(b))
                if a.in_box.checked_add(b.in_box).is_none()
                    || a.cells.iter().zip(&b.cells).any(|(x, y)| !fits(x, y)) =>
            {
                overflow = Some("data.RealCells");
            }
            _ => {}
        }
        if let (Some(a), Some(b)) = (&s.contexts, &p.contexts)
            && (!fits(&a.previous_input, &b.previous_input)
                || !fits(&a.request_size, &b.request_size)
                || !fits(&a.place, &b.place))
        {
            overflow = Some("streams.contexts");
        }
        if let (Some(a), Some(b)) = (&s.reuse, &p.reuse)
            && (a.pieces.checked_add(b.pieces).is_none()
                || a.short_pieces.checked_add(b.short_pieces).is_none()
                || a.lags.checked_add(b.lags).is_none())
        {
            overflow = Some("streams.reuse");
        }
    }
    if let Some(table) = overflow {
        return Err(format!("the sum of table {table} overflows 64 bits"));
    }
    total.merge(piece);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::Streams;

    fn draws(cell: u64, position: u64) -> Draws {
        let mut streams = Streams::new(1, 2, 2, 2);
        streams.position = position;
        streams.events.fit[0] = cell;
        Draws {
            data: Data::Counts(vec![cell, 0]),
            streams,
        }
    }

    #[test]
    fn a_merge_whose_sums_overflow_is_refused_and_leaves_the_total_alone() {
        let mut total = draws(u64::MAX - 1, 5);
        let before = total.clone();
        assert!(checked_merge(&mut total, draws(2, 1)).is_err());
        assert_eq!(total, before);
        let mut total = draws(1, u64::MAX);
        assert!(
            checked_merge(&mut total, draws(1, 1))
                .unwrap_err()
                .contains("position")
        );
        // Sums that fit are the plain merge's.
        let mut total = draws(3, 5);
        checked_merge(&mut total, draws(4, 6)).unwrap();
        assert_eq!(total.streams.position, 11);
        assert_eq!(total.data, Data::Counts(vec![7, 0]));
    }

    #[test]
    fn pieces_give_the_pairs_and_halves_of_their_sizes() {
        let chunk = internal_pieces(0).1;
        assert_eq!(Pieces::Internal.split(2 * chunk + 5), (2, chunk, 5));
        assert_eq!(
            Pieces::Internal.total(2 * chunk + 5, |p| p.saturating_sub(8)),
            Some(2 * (chunk - 8))
        );
        assert_eq!(
            Pieces::External { batch: 3 }.total(10, |p| p.saturating_sub(8)),
            Some(2)
        );
        assert_eq!(fitting_half(EVENT_BLOCK + 1), EVENT_BLOCK);
        assert_eq!(fitting_half(3 * EVENT_BLOCK + 7), 2 * EVENT_BLOCK);
        assert_eq!(fitting_half(0), 0);
        // A claimed 2^64 − 1 outputs is computed, not listed.
        assert!(Pieces::Internal.total(u64::MAX, |p| p).is_some());
    }
}
