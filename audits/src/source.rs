//! Where samples come from: the project's own mechanisms (drawn in parallel, reproducibly)
//! or an external process.

use rand::{Rng, SeedableRng, rngs::ChaCha20Rng};
use rayon::prelude::*;
use serde_json::Value;

use std::collections::VecDeque;

use crate::{
    error::{AuditError, Result},
    external::Responder,
    progress::Progress,
    protocol::{OutputKind, Outputs},
    schedule::schedule,
    seeds::mix,
    suite::Params,
    tally::{
        BitStats, Contexts, Data, Draws, FULL_VECTOR_MAX_DIM, MAX_EVENT_CELLS, RealCells,
        SERIAL_ALPHABET, Streams, class_symbol, group,
    },
};

/// What every observer of outputs keeps beside its law's layout: the stream counts.
pub(crate) trait Observer: Send {
    /// The stream counts.
    fn streams(&mut self) -> &mut Streams;

    /// Ends a batch of outputs (a response of an external mechanism, a block of the
    /// project's sampler): the unit of the over-dispersion test.
    fn end_batch(&mut self) {
        self.streams().end_batch();
    }
}

/// Collects one output at a time into [`Draws`].
pub(crate) trait Accumulate<O>: Observer {
    /// Adds the next output (outputs arrive in the order they were drawn).
    ///
    /// # Errors
    /// An output outside the law's layout (another shape, an index out of range).
    fn add(&mut self, output: &O) -> Result<()>;
    /// The draws so far.
    fn finish(self) -> Draws;
}

/// Collects validated protocol outputs (an external mechanism's answers) into [`Draws`].
pub(crate) trait Feed: Observer {
    /// Adds a batch of outputs, in the order the mechanism returned them.
    ///
    /// # Errors
    /// Outputs of the wrong kind for this law.
    fn feed(&mut self, outputs: &Outputs) -> Result<()>;
    /// The draws so far.
    fn finish_boxed(self: Box<Self>) -> Draws;
}

/// The error of a batch of external outputs of another kind than the law's.
pub(crate) fn wrong_outputs() -> AuditError {
    AuditError::Mechanism("the external outputs do not have the law's kind".into())
}

/// A histogram of class indices; the class (grouped into at most 16 symbols) is the
/// serial and the batch symbol, the class (grouped into at most 2¹⁶ cells) the event
/// cell.
#[derive(Debug, Clone)]
pub(crate) struct ClassAccumulator {
    counts: Vec<u64>,
    streams: Streams,
}

impl ClassAccumulator {
    /// For outputs in `0..classes`.
    pub(crate) fn new(classes: usize) -> Self {
        let symbols = classes.min(SERIAL_ALPHABET);
        Self {
            counts: vec![0; classes],
            streams: Streams::new(1, symbols, symbols, classes.min(MAX_EVENT_CELLS)),
        }
    }
}

impl Observer for ClassAccumulator {
    fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }
}

impl Accumulate<usize> for ClassAccumulator {
    #[inline]
    fn add(&mut self, &o: &usize) -> Result<()> {
        let classes = self.counts.len();
        let c = self.counts.get_mut(o).ok_or_else(|| {
            AuditError::Mechanism(format!("output {o} is outside the law's {classes} outputs"))
        })?;
        *c += 1;
        let symbol = class_symbol(o, classes);
        self.streams.symbol(0, symbol);
        self.streams
            .end_output(symbol, group(o, classes, MAX_EVENT_CELLS));
        Ok(())
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            streams: self.streams,
        }
    }
}

impl Feed for ClassAccumulator {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        let Outputs::Classes(v) = outputs else {
            return Err(wrong_outputs());
        };
        for o in v {
            self.add(o)?;
        }
        Ok(())
    }

    fn finish_boxed(self: Box<Self>) -> Draws {
        self.finish()
    }
}

/// An accumulator of fixed-width vector outputs (one row of `Item`s per output), which
/// is thereby both an [`Accumulate`] of `Vec<Item>` and a [`Feed`] of flattened rows.
pub(crate) trait Rows: Observer + Sized {
    /// One coordinate's value.
    type Item: Copy;
    /// Coordinates per output.
    fn width(&self) -> usize;
    /// Adds one output (of [`Rows::width`] coordinates, checked by the caller).
    fn add_row(&mut self, row: &[Self::Item]);
    /// The flattened rows of a batch of external outputs, if they have this kind.
    fn rows(outputs: &Outputs) -> Option<&[Self::Item]>;
    /// The draws so far.
    fn into_draws(self) -> Draws;
}

fn wrong_width(found: usize, expected: usize) -> AuditError {
    AuditError::Mechanism(format!(
        "an output has {found} coordinates, the law has {expected}"
    ))
}

impl<R: Rows> Accumulate<Vec<R::Item>> for R {
    #[inline]
    fn add(&mut self, row: &Vec<R::Item>) -> Result<()> {
        if row.len() != self.width() {
            return Err(wrong_width(row.len(), self.width()));
        }
        self.add_row(row);
        Ok(())
    }

    fn finish(self) -> Draws {
        self.into_draws()
    }
}

impl<R: Rows> Feed for R {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        let rows = R::rows(outputs).ok_or_else(wrong_outputs)?;
        let width = self.width().max(1);
        if rows.len() % width != 0 {
            return Err(wrong_width(rows.len() % width, width));
        }
        for row in rows.chunks_exact(width) {
            self.add_row(row);
        }
        Ok(())
    }

    fn finish_boxed(self: Box<Self>) -> Draws {
        self.into_draws()
    }
}

/// Statistics of bit vectors: one serial stream per coordinate, the first four bits as
/// the batch symbol, the first 16 bits (the whole vector up to D = 16) as the event cell.
#[derive(Debug, Clone)]
pub(crate) struct BitAccumulator {
    stats: BitStats,
    streams: Streams,
}

impl BitAccumulator {
    /// For vectors of `dim` bits.
    pub(crate) fn new(dim: usize) -> Self {
        Self {
            stats: BitStats::new(dim),
            streams: Streams::new(dim, 2, 1 << dim.min(4), 1 << dim.min(FULL_VECTOR_MAX_DIM)),
        }
    }
}

impl Observer for BitAccumulator {
    fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }
}

impl Rows for BitAccumulator {
    type Item = bool;

    fn width(&self) -> usize {
        self.stats.ones.len()
    }

    #[inline]
    fn add_row(&mut self, bits: &[bool]) {
        self.stats.add(bits);
        let mut cell = 0usize;
        for (j, &b) in bits.iter().enumerate() {
            self.streams.symbol(j, usize::from(b));
            if b && j < FULL_VECTOR_MAX_DIM {
                cell |= 1 << j;
            }
        }
        self.streams.end_output(cell & 0xF, cell);
    }

    fn rows(outputs: &Outputs) -> Option<&[bool]> {
        match outputs {
            Outputs::Bits(v) => Some(v),
            _ => None,
        }
    }

    fn into_draws(self) -> Draws {
        Draws {
            data: Data::Bits(self.stats),
            streams: self.streams,
        }
    }
}

/// Bins of a real coordinate for its serial stream: the octiles of a Laplace law of scale
/// `scale` centred at `centre` (any fixed partition gives a valid test; near-equal bins
/// give it power).
#[must_use]
pub(crate) fn laplace_octile_edges(centre: f64, scale: f64) -> Vec<f64> {
    [0.125f64, 0.25, 0.375]
        .iter()
        .map(|&q| centre + scale * (2.0 * q).ln())
        .chain(std::iter::once(centre))
        .chain(
            [0.375f64, 0.25, 0.125]
                .iter()
                .map(|&q| centre - scale * (2.0 * q).ln()),
        )
        .collect()
}

/// Real vectors by coordinate: each coordinate counted in the law's cells
/// ([`RealCellEdges`]; the outputs themselves are not kept), one serial stream per
/// coordinate (the value's bin among its own octile edges), coordinate 0's bin as the
/// batch symbol, and as the event cell the bins of the first coordinates among edges
/// shared by every input.
#[derive(Debug, Clone)]
pub(crate) struct RealAccumulator {
    counts: RealCells,
    cell_edges: RealCellEdges,
    edges: Vec<Vec<f64>>,
    cells: CellGrid,
    streams: Streams,
}

/// The cells a [`RealAccumulator`] counts each coordinate in (the law's, from
/// `analysis::RealLaw::cell_edges`): coordinate j's cells are (−∞, e₀], (e₀, e₁], …,
/// (e_last, ∞) for the edges `sets[of[j]]` (coordinates with the same centre share one
/// list), and the box event {Y₀ > t₀, Y₁ ≤ t₁} is counted when given.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RealCellEdges {
    /// Distinct edge lists (each increasing).
    pub sets: Vec<Vec<f64>>,
    /// Per coordinate, the index of its edge list in `sets`.
    pub of: Vec<usize>,
    /// (t₀, t₁) of the box event, if it is counted.
    pub in_box: Option<(f64, f64)>,
}

/// The event cells of a real vector: the bin of each of the first `coordinates`
/// coordinates among `edges` (increasing; `edges.len() + 1` bins), combined in base
/// `edges.len() + 1`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CellGrid {
    /// Shared bin edges.
    pub edges: Vec<f64>,
    /// Coordinates binned.
    pub coordinates: usize,
}

impl CellGrid {
    /// Cells of the grid.
    pub(crate) fn cells(&self) -> usize {
        (self.edges.len() + 1).pow(self.coordinates as u32)
    }

    /// The cell of `y`.
    pub(crate) fn cell(&self, y: &[f64]) -> usize {
        let base = self.edges.len() + 1;
        y.iter().take(self.coordinates).rev().fold(0, |acc, &v| {
            acc * base + self.edges.partition_point(|&e| e < v)
        })
    }
}

impl RealAccumulator {
    /// For vectors of `edges.len()` coordinates, coordinate j's serial stream binned by
    /// `edges[j]` (increasing), event cells from `cells`, and each coordinate counted in
    /// the law's cells `cell_edges` (a coordinate it has no list for is counted in one
    /// cell).
    pub(crate) fn new(edges: Vec<Vec<f64>>, cells: CellGrid, cell_edges: RealCellEdges) -> Self {
        let alphabet = edges.iter().map(|e| e.len() + 1).max().unwrap_or(1);
        let counts = RealCells {
            cells: (0..edges.len())
                .map(|j| {
                    let edges = cell_edges.of.get(j).and_then(|&s| cell_edges.sets.get(s));
                    vec![0; edges.map_or(0, Vec::len) + 1]
                })
                .collect(),
            in_box: 0,
        };
        Self {
            counts,
            cell_edges,
            streams: Streams::new(edges.len(), alphabet, alphabet, cells.cells()),
            edges,
            cells,
        }
    }
}

impl Observer for RealAccumulator {
    fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }
}

impl Rows for RealAccumulator {
    type Item = f64;

    fn width(&self) -> usize {
        self.counts.cells.len()
    }

    fn add_row(&mut self, y: &[f64]) {
        let mut first = 0;
        let empty: &[f64] = &[];
        for (j, ((counts, edges), &v)) in self
            .counts
            .cells
            .iter_mut()
            .zip(&self.edges)
            .zip(y)
            .enumerate()
        {
            let cells = self
                .cell_edges
                .of
                .get(j)
                .and_then(|&s| self.cell_edges.sets.get(s))
                .map_or(empty, Vec::as_slice);
            // Cell k is (e_{k-1}, e_k]: the first edge ≥ v.
            if let Some(c) = counts.get_mut(cells.partition_point(|&e| e < v)) {
                *c += 1;
            }
            let bin = edges.partition_point(|&e| e < v);
            self.streams.symbol(j, bin);
            if j == 0 {
                first = bin;
            }
        }
        if let (Some((t0, t1)), [y0, y1, ..]) = (self.cell_edges.in_box, y)
            && *y0 > t0
            && *y1 <= t1
        {
            self.counts.in_box += 1;
        }
        let cell = self.cells.cell(y);
        self.streams.end_output(first, cell);
    }

    fn rows(outputs: &Outputs) -> Option<&[f64]> {
        match outputs {
            Outputs::Reals(v) => Some(v),
            _ => None,
        }
    }

    fn into_draws(self) -> Draws {
        Draws {
            data: Data::RealCells(self.counts),
            streams: self.streams,
        }
    }
}

/// Deliberate implementation defects a suite's `sampler` may ask for, to check that the
/// audit notices them (negative controls): `"repeat": r` returns, with probability r, the
/// output drawn `"repeat_lag": ℓ` places earlier (default 1) instead of a new one
/// (randomness reused across calls: every marginal law is unchanged, outputs ℓ apart are
/// correlated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Defects {
    /// P(repeat an earlier output) as a threshold on a uniform 64-bit word.
    pub repeat: Option<u64>,
    /// How far back the repeated output is (1 = the previous one).
    pub lag: usize,
}

/// A probability as a threshold on a uniform 64-bit word (P(word < threshold) = p up to
/// 2⁻⁶⁴).
#[must_use]
pub(crate) fn word_threshold(p: f64) -> u64 {
    (p.clamp(0.0, 1.0) * 18_446_744_073_709_551_616.0) as u64
}

impl Defects {
    /// The defects named in sampler parameters (`repeat`: a probability in [0, 1);
    /// `repeat_lag`: an integer from 1 to 64).
    ///
    /// # Errors
    /// A `repeat` that is not a number in [0, 1), a `repeat_lag` out of range.
    pub(crate) fn from_params(params: &Params) -> Result<Self> {
        let repeat = match params.get("repeat") {
            None => None,
            Some(v) => match v.as_f64() {
                Some(p) if (0.0..1.0).contains(&p) => Some(word_threshold(p)),
                _ => {
                    return Err(AuditError::usage(format!(
                        "sampler parameter `repeat` must be a probability in [0, 1), got {v}"
                    )));
                }
            },
        };
        let lag = match params.get("repeat_lag") {
            None => 1,
            Some(v) => match v.as_u64() {
                Some(l @ 1..=64) => l as usize,
                _ => {
                    return Err(AuditError::usage(format!(
                        "sampler parameter `repeat_lag` must be an integer from 1 to 64, got {v}"
                    )));
                }
            },
        };
        Ok(Self { repeat, lag })
    }
}

/// A source of samples for the inputs of one grid point.
pub(crate) trait Source: Send {
    /// Draws `n` outputs for input number `input`; `seed` makes internal sources
    /// reproducible (external ones ignore it).
    fn draw(&mut self, input: usize, n: u64, seed: u64, progress: &Progress) -> Result<Draws>;

    /// Draws `n` outputs for each of `inputs` inputs, in the source's own order: by
    /// default one input after the other, input i from the seed `mix(seed, i)`.
    fn draw_all(
        &mut self,
        inputs: usize,
        n: u64,
        seed: u64,
        progress: &Progress,
    ) -> Result<Vec<Draws>> {
        (0..inputs)
            .map(|i| self.draw(i, n, mix(seed, i as u64), progress))
            .collect()
    }
}

/// Samples per parallel chunk; fixed, so results do not depend on the number of threads.
const CHUNK: u64 = 1 << 18;

/// The independent pieces [`Internal::draw`] draws `n` outputs per input in: (how many
/// full chunks, their size [`CHUNK`], the size of the last, shorter one, 0 for none). A
/// serial pair never straddles two pieces, and each starts the learned event's blocks
/// afresh; a shard's counts file is checked against them before a merge.
pub(crate) const fn internal_pieces(n: u64) -> (u64, u64, u64) {
    (n / CHUNK, CHUNK, n % CHUNK)
}

/// Outputs per batch of the project's samplers (the over-dispersion test's unit; a chunk
/// holds 16).
pub(crate) const BLOCK: u64 = 1 << 14;

/// The signature of an internal sampler: draw `n` outputs for input `input`.
pub(crate) type DrawFn = dyn Fn(usize, u64, &mut ChaCha20Rng) -> Result<Draws> + Send + Sync;

/// A project mechanism, sampled in fixed-size chunks in parallel with one ChaCha20 stream
/// per chunk (seeded from the point's seed and the chunk number).
pub(crate) struct Internal {
    draw: Box<DrawFn>,
}

impl Internal {
    /// A sampler that draws a chunk of `n` outputs for an input at once.
    pub(crate) fn new(
        draw: impl Fn(usize, u64, &mut ChaCha20Rng) -> Result<Draws> + Send + Sync + 'static,
    ) -> Self {
        Self {
            draw: Box::new(draw),
        }
    }

    /// A sampler built from one output at a time: `prepare(input)` returns the drawing
    /// state of an input (set up once per chunk), `draw` draws one output with it,
    /// `observer(input)` collects the outputs in order (in the law's layout: an output the
    /// law cannot hold is an error; a batch ends every [`BLOCK`] outputs), and `defects`
    /// can make the drawer deliberately faulty.
    pub(crate) fn per_output<S, O, A>(
        prepare: impl Fn(usize) -> Result<S> + Send + Sync + 'static,
        draw: impl Fn(&mut S, &mut ChaCha20Rng) -> Result<O> + Send + Sync + 'static,
        observer: impl Fn(usize) -> Result<A> + Send + Sync + 'static,
        defects: Defects,
    ) -> Self
    where
        O: Clone,
        A: Accumulate<O>,
    {
        let shape = |e: AuditError| {
            AuditError::Mechanism(format!(
                "the sampler's output does not have the law's output shape (sampler overrides \
                 may change calibration parameters such as eps, not the shape): {e}"
            ))
        };
        Self::new(move |i, n, rng| {
            let mut state = prepare(i)?;
            let mut acc = observer(i)?;
            let mut earlier: VecDeque<O> = VecDeque::with_capacity(defects.lag + 1);
            for t in 0..n {
                if t > 0 && t % BLOCK == 0 {
                    acc.end_batch();
                }
                let o = match defects.repeat {
                    None => draw(&mut state, rng)?,
                    Some(threshold) => {
                        let o = match earlier.front() {
                            Some(e)
                                if earlier.len() == defects.lag && rng.next_u64() < threshold =>
                            {
                                e.clone()
                            }
                            _ => draw(&mut state, rng)?,
                        };
                        if earlier.len() == defects.lag {
                            earlier.pop_front();
                        }
                        earlier.push_back(o.clone());
                        o
                    }
                };
                acc.add(&o).map_err(shape)?;
            }
            acc.end_batch();
            Ok(acc.finish())
        })
    }
}

impl Source for Internal {
    fn draw(&mut self, input: usize, n: u64, seed: u64, progress: &Progress) -> Result<Draws> {
        let chunks = n.div_ceil(CHUNK);
        let parts: Vec<Result<Draws>> = (0..chunks)
            .into_par_iter()
            .map(|c| {
                let size = CHUNK.min(n - c * CHUNK);
                let mut rng = ChaCha20Rng::seed_from_u64(mix(seed, c));
                let d = (self.draw)(input, size, &mut rng);
                progress.add(size);
                d
            })
            .collect();
        let mut total: Option<Draws> = None;
        for p in parts {
            let p = p?;
            match total.as_mut() {
                Some(t) => t.merge(p),
                None => total = Some(p),
            }
        }
        match total {
            Some(t) => Ok(t),
            None => (self.draw)(input, 0, &mut ChaCha20Rng::seed_from_u64(seed)),
        }
    }
}

/// Builds, for input number i, the collector of its outputs.
pub(crate) type FeedFactory = dyn Fn(usize) -> Result<Box<dyn Feed>> + Send;

/// An external mechanism, asked in batches.
pub(crate) struct External {
    /// The running child, or an in-process callback.
    pub mechanism: Box<dyn Responder>,
    /// The protocol input for each input number.
    pub inputs: Vec<Value>,
    /// The expected output form.
    pub kind: OutputKind,
    /// Outputs per request.
    pub batch: u64,
    /// The collector of each input's outputs (the same layout as the built-in sampler's).
    pub feed: Box<FeedFactory>,
}

impl Source for External {
    /// The whole point on the schedule drawn from `seed` (`schedule`): requests of random
    /// sizes, the inputs interleaved; each input's draws carry the context tables and the
    /// reuse-at-any-lag result.
    fn draw_all(
        &mut self,
        inputs: usize,
        n: u64,
        seed: u64,
        progress: &Progress,
    ) -> Result<Vec<Draws>> {
        let requests = schedule(inputs, n, self.batch, seed);
        let mut feeds: Vec<Box<dyn Feed>> =
            (0..inputs).map(|i| (self.feed)(i)).collect::<Result<_>>()?;
        let mut contexts = Vec::with_capacity(inputs);
        for f in &mut feeds {
            let streams = f.streams();
            streams.keep_log();
            contexts.push(Contexts::new(inputs, streams.batches.alphabet()));
        }
        let mut previous = inputs;
        for r in &requests {
            let (Some(x), Some(feed), Some(ctx)) = (
                self.inputs.get(r.input),
                feeds.get_mut(r.input),
                contexts.get_mut(r.input),
            ) else {
                continue;
            };
            let size = usize::try_from(r.size).unwrap_or(usize::MAX);
            let outputs = self.mechanism.respond(x, size, self.kind)?;
            let logged = feed.streams().logged();
            feed.feed(&outputs)?;
            if let Some(d) = self.mechanism.take_deviation() {
                feed.streams().deviation.get_or_insert(d);
            }
            let before = feed.streams().batches.rows().len();
            feed.end_batch();
            let batches = &feed.streams().batches;
            let (rows, a) = (batches.rows(), batches.alphabet());
            if rows.len() == before + a {
                let row = rows[before..].to_vec();
                ctx.add(previous, r.size, &row);
                let (first, last) = feed.streams().first_and_last_since(logged);
                if let Some(first) = first {
                    ctx.add_places(first, last, &row);
                }
            }
            progress.add(r.size);
            previous = r.input;
        }
        let logs: Vec<Vec<u8>> = feeds.iter_mut().map(|f| f.streams().take_log()).collect();
        let reuse = crate::analysis::reuse::reuse_stats(&requests, &logs, seed);
        Ok(feeds
            .into_iter()
            .zip(contexts)
            .zip(reuse)
            .map(|((f, ctx), r)| {
                let mut d = f.finish_boxed();
                d.streams.contexts = Some(ctx);
                d.streams.reuse = Some(r);
                d
            })
            .collect())
    }

    /// One input alone is never drawn from an external mechanism: its inputs share one
    /// schedule ([`Source::draw_all`]), so asking for one is an internal error.
    fn draw(&mut self, _: usize, _: u64, _: u64, _: &Progress) -> Result<Draws> {
        Err(AuditError::Mechanism(
            "an external mechanism is drawn for every input at once, on its schedule".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn internal_draws_are_reproducible_and_chunked() {
        let mut s = Internal::per_output(
            |_| Ok(()),
            |(), rng: &mut ChaCha20Rng| Ok((rng.next_u64() & 1) as usize),
            |_| Ok(ClassAccumulator::new(2)),
            Defects::default(),
        );
        let p = Progress::default();
        let mut a = s.draw(0, 3 * CHUNK + 5, 9, &p).unwrap();
        a.streams.flush();
        let b = s.draw(0, 3 * CHUNK + 5, 9, &p).unwrap();
        let c = s.draw(0, 3 * CHUNK + 5, 10, &p).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let Data::Counts(v) = &a.data else { panic!() };
        assert_eq!(v.iter().sum::<u64>(), 3 * CHUNK + 5);
        // Pairs are formed inside each chunk: size − ℓ at lag ℓ.
        for lag in [1, 8] {
            let pairs: u64 = a.streams.lags.table(0, lag).iter().sum();
            assert_eq!(
                pairs,
                3 * (CHUNK - lag as u64) + 5u64.saturating_sub(lag as u64)
            );
        }
        // A batch every BLOCK outputs: 16 per full chunk and the last one.
        assert_eq!(a.streams.batches.rows().len(), 2 * (3 * 16 + 1));
        // Every output is in one half of the event cells.
        let e = &a.streams.events;
        assert_eq!(e.fit.iter().chain(&e.certify).sum::<u64>(), 3 * CHUNK + 5);
        assert_eq!(p.done(), 3 * (3 * CHUNK + 5));
    }

    #[test]
    fn the_repeat_defect_repeats_outputs_at_its_lag() {
        let counter = |repeat: f64, lag: usize| {
            let mut s = Internal::per_output(
                |_| Ok(0usize),
                |next: &mut usize, _: &mut ChaCha20Rng| {
                    *next = (*next + 1) % 4;
                    Ok(*next)
                },
                |_| Ok(ClassAccumulator::new(4)),
                Defects {
                    repeat: Some(word_threshold(repeat)),
                    lag,
                },
            );
            let mut d = s.draw(0, 10_000, 1, &Progress::default()).unwrap();
            d.streams.flush();
            d
        };
        // A drawer cycling through 4 values never repeats at lags 1 to 3; with the defect
        // about half the pairs at its lag are equal, and the other lags stay clean.
        let diagonal = |d: &Draws, lag| {
            (0..4)
                .map(|a| d.streams.lags.table(0, lag)[5 * a])
                .sum::<u64>()
        };
        assert_eq!(diagonal(&counter(0.0, 1), 1), 0);
        for lag in [1, 3] {
            let d = counter(0.5, lag);
            let half = diagonal(&d, lag);
            assert!((4000..6000).contains(&half), "lag {lag}: {half}");
        }
        for (key, value) in [("repeat", 1.5), ("repeat_lag", 0.0)] {
            let p = Params::from([(key.to_string(), serde_json::json!(value))]);
            assert!(Defects::from_params(&p).is_err());
        }
    }

    /// Each coordinate is counted in the cell (e_{k−1}, e_k] of its value (a value on an
    /// edge in the cell it closes), the box event {Y₀ > t₀, Y₁ ≤ t₁} exactly, and the
    /// counts of two pieces add up.
    #[test]
    fn real_outputs_are_counted_in_the_laws_cells() {
        let edges = RealCellEdges {
            sets: vec![vec![-1.0, 0.0, 1.0]],
            of: vec![0, 0],
            in_box: Some((0.0, 0.0)),
        };
        let grid = CellGrid {
            edges: Vec::new(),
            coordinates: 0,
        };
        let mut a = RealAccumulator::new(vec![vec![0.0]; 2], grid, edges);
        for row in [[0.0, 0.0], [0.5, -2.0], [2.0, 1.0], [1.0, 0.0]] {
            a.add(&row.to_vec()).unwrap();
        }
        assert!(a.add(&vec![1.0]).is_err());
        let d = a.finish();
        let expected = RealCells {
            cells: vec![vec![0, 1, 2, 1], vec![1, 2, 1, 0]],
            in_box: 2,
        };
        assert_eq!(d.data, Data::RealCells(expected));
        let mut twice = d.clone();
        twice.merge(d);
        let Data::RealCells(c) = twice.data else {
            panic!("not real cells")
        };
        assert_eq!(c.cells[0], vec![0, 2, 4, 2]);
        assert_eq!(c.in_box, 4);
    }
}
