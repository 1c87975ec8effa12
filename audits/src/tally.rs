//! What a run counts: the sufficient statistics of each input's outputs, as plain count
//! tables that add up (`merge`), kept apart from the tests that read them (`analysis`) and
//! from where the outputs come from (`source`). Both of those depend on this module, and
//! it depends on neither.
//!
//! Per input, [`Draws`] holds the law's own layout ([`Data`]) and the law-free
//! [`Streams`]: the pair counts of each serial stream at lags 1..=[`SERIAL_LAGS`]
//! ([`SerialLags`]), the counts of one symbol per batch ([`BatchCounts`], for the
//! over-dispersion test) and the counts of each output cell in the two halves the learned
//! distinguishing event is fitted on and certified on ([`EventCells`]). Every table is a
//! sum over outputs, so the tables of two runs on the same input (two chunks, two shards)
//! add up to the tables of both; the one exception is a serial pair or a batch that would
//! straddle them, which is simply not counted (the pieces are independent draws).

use serde::{Deserialize, Serialize};

/// The data drawn for one input, in the layout of its law.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Data {
    /// A histogram of a finite output (or a law-specific layout of counts).
    Counts(Vec<u64>),
    /// Statistics of bit vectors.
    Bits(BitStats),
    /// Real-valued outputs as per-coordinate histograms over cells fixed by the law before
    /// sampling ([`RealCells`]): bounded memory whatever the sample size, and tables that
    /// add up across chunks and shards like every other count.
    RealCells(RealCells),
}

/// Real vectors counted per coordinate in the cells (−∞, e₀], (e₀, e₁], …, (e_last, ∞) of
/// the law's edges for that coordinate (`analysis::RealLaw::edges`), and in the law's box
/// event (the ε statement's event, when it has one). The law's tests read nothing else:
/// every threshold they test (the tails, the chi-square's bins, the central mass) is one
/// of the edges, so their counts are exact.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct RealCells {
    /// Per coordinate, the counts of its cells (one more than its edges).
    pub cells: Vec<Vec<u64>>,
    /// Outputs in the box event.
    pub in_box: u64,
}

impl Data {
    fn merge(&mut self, other: Self) {
        match (self, other) {
            (Self::Counts(a), Self::Counts(b)) => add_into(a, &b),
            (Self::Bits(a), Self::Bits(b)) => a.merge(&b),
            (Self::RealCells(a), Self::RealCells(b)) => {
                if a.cells.len() < b.cells.len() {
                    a.cells.resize(b.cells.len(), Vec::new());
                }
                for (x, y) in a.cells.iter_mut().zip(&b.cells) {
                    add_into(x, y);
                }
                a.in_box += b.in_box;
            }
            // Kinds never mix: a source returns one kind.
            _ => {}
        }
    }
}

/// `a += b` element-wise, `a` grown to `b`'s length.
fn add_into(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Samples drawn for one input: the data the law's tests read and the law-free counts of
/// the output stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Draws {
    /// The law's data.
    pub data: Data,
    /// Serial pairs, batch counts and event cells.
    pub streams: Streams,
}

impl Draws {
    /// Outputs observed.
    pub(crate) fn outputs(&self) -> u64 {
        self.streams.position
    }

    /// Adds another piece of the same input's draws.
    pub(crate) fn merge(&mut self, other: Self) {
        self.streams.merge(&other.streams);
        self.data.merge(other.data);
    }
}

/// The most symbols a serial stream distinguishes (larger output spaces are grouped into
/// this many symbols).
pub(crate) const SERIAL_ALPHABET: usize = 16;

/// The lags 1..=L at which each serial stream is tested.
pub(crate) const SERIAL_LAGS: usize = 8;

/// The most cells of the learned event's output space (2¹⁶).
pub(crate) const MAX_EVENT_CELLS: usize = 1 << 16;

/// Outputs per block of the learned event's halves: blocks alternate between the half
/// the event is fitted on (even blocks) and the half it is certified on (odd blocks).
pub(crate) const EVENT_BLOCK: u64 = 1 << 10;

/// The symbol of class `index` of `classes`: the class itself up to [`SERIAL_ALPHABET`]
/// classes, else one of [`SERIAL_ALPHABET`] groups of consecutive classes.
#[must_use]
pub(crate) fn class_symbol(index: usize, classes: usize) -> usize {
    group(index, classes, SERIAL_ALPHABET)
}

/// Index `index` of `count` mapped into `groups` groups of consecutive indices (itself
/// when `count` ≤ `groups`).
#[must_use]
pub(crate) fn group(index: usize, count: usize, groups: usize) -> usize {
    if count <= groups {
        index
    } else if let (Ok(i), Ok(g), Ok(c)) = (
        u32::try_from(index),
        u32::try_from(groups),
        u64::try_from(count),
    ) {
        // Fits in 64 bits: 128-bit division is several times slower.
        ((u64::from(i) * u64::from(g)) / c) as usize
    } else {
        ((index as u128 * groups as u128) / count.max(1) as u128) as usize
    }
}

/// Serial statistics of output streams: each output is mapped to one symbol per stream in
/// `0..alphabet`, and for every lag ℓ = 1..=[`SERIAL_LAGS`] the counts of the pairs
/// (Yₜ, Yₜ₊ℓ) over all t are kept. If the outputs are independent and identically
/// distributed, the first and the second symbol of the pairs at any lag are independent,
/// which fl-stats' `chi_square_independence` tests without knowing the law (the overlapping
/// pairs' centred products are uncorrelated, so Pearson's statistic keeps its χ² limit). A
/// vector output has one stream per coordinate.
///
/// Symbols are buffered per stream and counted a block at a time (tight loops over the
/// block, with interleaved partial tables so that runs of equal symbols do not serialise
/// the increments); [`SerialLags::flush`] counts what is buffered, and the tables are read
/// (or merged, or serialised) only after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SerialLags {
    alphabet: usize,
    /// streams × lags × alphabet × alphabet counts, indexed (stream, lag − 1, first,
    /// second).
    table: Vec<u64>,
    /// Per stream, the last [`SERIAL_LAGS`] counted symbols followed by the symbols not
    /// counted yet (not part of the counts).
    #[serde(skip)]
    pending: Vec<Vec<u8>>,
    /// Per stream, how many of `pending`'s first symbols are already counted (at most
    /// [`SERIAL_LAGS`]; not part of the counts).
    #[serde(skip)]
    counted: Vec<usize>,
}

/// Symbols buffered per stream before they are counted.
const SERIAL_BLOCK: usize = 4096;

impl SerialLags {
    /// Empty statistics for `streams` streams of symbols in `0..alphabet` (at most
    /// [`SERIAL_ALPHABET`]).
    pub(crate) fn new(streams: usize, alphabet: usize) -> Self {
        let alphabet = alphabet.clamp(1, SERIAL_ALPHABET);
        Self {
            alphabet,
            table: vec![0; streams * SERIAL_LAGS * alphabet * alphabet],
            pending: vec![Vec::new(); streams],
            counted: vec![0; streams],
        }
    }

    /// The next output's symbol on `stream` (clamped into the alphabet).
    #[inline]
    pub(crate) fn push(&mut self, stream: usize, symbol: usize) {
        let symbol = symbol.min(self.alphabet - 1) as u8;
        let Some(p) = self.pending.get_mut(stream) else {
            return;
        };
        if p.capacity() == 0 {
            p.reserve_exact(SERIAL_LAGS + SERIAL_BLOCK);
        }
        p.push(symbol);
        if p.len() >= SERIAL_LAGS + SERIAL_BLOCK {
            self.count(stream);
        }
    }

    /// Counts the pairs that end at the pending symbols of `stream`.
    fn count(&mut self, stream: usize) {
        let a = self.alphabet;
        let (Some(p), Some(done)) = (self.pending.get_mut(stream), self.counted.get_mut(stream))
        else {
            return;
        };
        let base = stream * SERIAL_LAGS * a * a;
        let Some(table) = self.table.get_mut(base..base + SERIAL_LAGS * a * a) else {
            return;
        };
        if a <= 4 {
            count_small_alphabet(p, *done, a, table);
        } else {
            count_pairs(p, *done, a, table);
        }
        // Keep the last SERIAL_LAGS symbols as the context of the next block.
        let keep = p.len().min(SERIAL_LAGS);
        let from = p.len() - keep;
        p.copy_within(from.., 0);
        p.truncate(keep);
        *done = keep;
    }

    /// Counts every buffered symbol (before the tables are read, merged or serialised).
    pub(crate) fn flush(&mut self) {
        for s in 0..self.pending.len() {
            self.count(s);
        }
    }

    /// Streams kept.
    pub(crate) fn streams(&self) -> usize {
        self.table.len() / (SERIAL_LAGS * self.alphabet * self.alphabet)
    }

    /// Symbols per stream.
    pub(crate) fn alphabet(&self) -> usize {
        self.alphabet
    }

    /// The whole table, streams × lags × alphabet × alphabet (what a counts file holds;
    /// read by its validation before a merge).
    pub(crate) fn cells(&self) -> &[u64] {
        &self.table
    }

    /// The alphabet × alphabet table of the pairs (Yₜ, Yₜ₊ℓ) of `stream` at lag `lag`
    /// (1..=[`SERIAL_LAGS`]; row: the earlier output), of the symbols flushed so far.
    pub(crate) fn table(&self, stream: usize, lag: usize) -> &[u64] {
        let size = self.alphabet * self.alphabet;
        let at = (stream * SERIAL_LAGS + lag.saturating_sub(1)) * size;
        self.table.get(at..at + size).unwrap_or(&[])
    }

    /// Adds another piece's pairs (pairs never straddle two independently drawn pieces).
    fn merge(&mut self, other: &Self) {
        self.flush();
        let mut other = other.clone();
        other.flush();
        if self.table.len() == other.table.len() && self.alphabet == other.alphabet {
            add_into(&mut self.table, &other.table);
        } else if self.table.is_empty() {
            *self = other;
        }
    }
}

/// Adds to `table` (lags × a × a) the pairs (p[t − ℓ], p[t]) for t ≥ max(`done`, ℓ): a
/// tight loop per lag over four interleaved partial tables (runs of equal symbols then
/// increment different counters).
fn count_pairs(p: &[u8], done: usize, a: usize, table: &mut [u64]) {
    let mut partial = vec![0u32; 4 * a * a];
    for (lag, lane) in (1..=SERIAL_LAGS).zip(table.chunks_exact_mut(a * a)) {
        let start = done.max(lag);
        if start >= p.len() {
            continue;
        }
        partial.iter_mut().for_each(|c| *c = 0);
        let firsts = &p[start - lag..p.len() - lag];
        let seconds = &p[start..];
        for (k, (&x, &y)) in firsts.iter().zip(seconds).enumerate() {
            partial[(k & 3) * a * a + usize::from(x) * a + usize::from(y)] += 1;
        }
        for part in partial.chunks_exact(a * a) {
            for (c, &add) in lane.iter_mut().zip(part) {
                *c += u64::from(add);
            }
        }
    }
}

/// [`count_pairs`] for alphabets of at most 4 symbols, with one bitset per symbol: the
/// pairs (v, w) at lag ℓ are popcount(Bᵥ shifted by ℓ & B_w), a few word operations per
/// 64 symbols instead of one increment per symbol and lag.
fn count_small_alphabet(p: &[u8], done: usize, a: usize, table: &mut [u64]) {
    let words = p.len().div_ceil(64);
    let mut sets = vec![0u64; a * words];
    for (t, &x) in p.iter().enumerate() {
        sets[usize::from(x) * words + t / 64] |= 1 << (t % 64);
    }
    for (lag, lane) in (1..=SERIAL_LAGS).zip(table.chunks_exact_mut(a * a)) {
        let start = done.max(lag);
        if start >= p.len() {
            continue;
        }
        // Positions t in [start, len): the second element of each pair.
        let mask = |i: usize| -> u64 {
            let lo = i * 64;
            let from = start.saturating_sub(lo).min(64);
            let to = p.len().saturating_sub(lo).min(64);
            if from >= to {
                0
            } else {
                (u64::MAX >> (64 - (to - from))) << from
            }
        };
        for v in 0..a {
            let bv = &sets[v * words..(v + 1) * words];
            // Bit t of the shifted set is bit t − ℓ of Bᵥ.
            let shifted = |i: usize| -> u64 {
                let low = bv[i] << lag;
                let carry = if i > 0 { bv[i - 1] >> (64 - lag) } else { 0 };
                low | carry
            };
            for w in 0..a {
                let bw = &sets[w * words..(w + 1) * words];
                let n: u64 = (start / 64..words)
                    .zip(&bw[start / 64..])
                    .map(|(i, &word)| u64::from((shifted(i) & word & mask(i)).count_ones()))
                    .sum();
                lane[v * a + w] += n;
            }
        }
    }
}

/// The counts of one symbol per output in each batch of consecutive outputs (a response
/// of an external mechanism, or a block of the project's sampler), in stream order: the
/// over-dispersion test compares the batches' counts with the multinomial variation a
/// fresh, independent sampler must have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BatchCounts {
    alphabet: usize,
    /// Closed batches × alphabet counts, row-major.
    rows: Vec<u64>,
    /// The batch being filled.
    open: Vec<u64>,
}

impl BatchCounts {
    /// No batch yet, for symbols in `0..alphabet` (at most [`SERIAL_ALPHABET`]).
    pub(crate) fn new(alphabet: usize) -> Self {
        let alphabet = alphabet.clamp(1, SERIAL_ALPHABET);
        Self {
            alphabet,
            rows: Vec::new(),
            open: vec![0; alphabet],
        }
    }

    /// The next output's symbol (clamped into the alphabet).
    #[inline]
    pub(crate) fn push(&mut self, symbol: usize) {
        if let Some(c) = self.open.get_mut(symbol.min(self.alphabet - 1)) {
            *c += 1;
        }
    }

    /// Closes the batch being filled (an empty one is not kept).
    pub(crate) fn end_batch(&mut self) {
        if self.open.iter().any(|&c| c > 0) {
            self.rows.extend_from_slice(&self.open);
            self.open.iter_mut().for_each(|c| *c = 0);
        }
    }

    /// Symbols per output.
    pub(crate) fn alphabet(&self) -> usize {
        self.alphabet
    }

    /// The closed batches' counts (batches × alphabet, row-major, in stream order).
    pub(crate) fn rows(&self) -> &[u64] {
        &self.rows
    }

    /// The counts of the batch being filled (all zero once a batch is closed; read by a
    /// counts file's validation before a merge).
    pub(crate) fn open(&self) -> &[u64] {
        &self.open
    }

    /// Appends another piece's batches after this one's (each closes its own batch).
    fn merge(&mut self, other: &Self) {
        self.end_batch();
        if self.alphabet == other.alphabet {
            self.rows.extend_from_slice(&other.rows);
            if other.open.iter().any(|&c| c > 0) {
                self.rows.extend_from_slice(&other.open);
            }
        }
    }
}

/// The counts of each output cell (the learned event's output space) in two halves: the
/// outputs are cut, in stream order, into blocks of [`EVENT_BLOCK`]; even blocks are the
/// half the event is fitted on, odd blocks the half it is certified on. Which half an
/// output falls in depends on its position only, never on its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EventCells {
    /// Counts per cell of the fitting half.
    pub fit: Vec<u64>,
    /// Counts per cell of the certifying half.
    pub certify: Vec<u64>,
}

impl EventCells {
    /// Empty counts over `cells` cells (none: no learned event).
    pub(crate) fn new(cells: usize) -> Self {
        Self {
            fit: vec![0; cells],
            certify: vec![0; cells],
        }
    }

    /// The output at stream position `position` fell in `cell`.
    #[inline]
    pub(crate) fn push(&mut self, position: u64, cell: usize) {
        let half = if (position / EVENT_BLOCK).is_multiple_of(2) {
            &mut self.fit
        } else {
            &mut self.certify
        };
        if let Some(c) = half.get_mut(cell) {
            *c += 1;
        }
    }

    fn merge(&mut self, other: &Self) {
        add_into(&mut self.fit, &other.fit);
        add_into(&mut self.certify, &other.certify);
    }
}

/// The request-size classes of an external run's schedule: 1, 2–15, 16–255, 256 or more
/// outputs per request.
pub(crate) const SIZE_CLASSES: usize = 4;

/// The class of a request of `size` outputs (see [`SIZE_CLASSES`]).
#[must_use]
pub(crate) const fn size_class(size: u64) -> usize {
    match size {
        0 | 1 => 0,
        2..=15 => 1,
        16..=255 => 2,
        _ => 3,
    }
}

/// What an external run's schedule knows about each response beside its outputs, as
/// count tables of the batch symbol (the symbol [`BatchCounts`] counts): by the input of
/// the request just before (memory across callers) and by the request's size class
/// ([`size_class`]). Under the protocol's contract (fresh, independent draws whatever was
/// asked before and however many are asked at once) every row has the same law, so each
/// table is tested for homogeneity; the schedule that fills them is drawn from the run's
/// seed, independently of the outputs. Tables add up across shards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Contexts {
    /// Batch symbols per output.
    pub alphabet: usize,
    /// (inputs + 1) × alphabet: the counts of this input's outputs by the input of the
    /// previous request of the run (row `inputs`: the run's first request).
    pub previous_input: Vec<u64>,
    /// [`SIZE_CLASSES`] × alphabet: the counts by the size class of the request.
    pub request_size: Vec<u64>,
    /// 3 × alphabet: the counts by the output's place in its response: first, in between,
    /// last (a response of one output has only a first).
    #[serde(default)]
    pub place: Vec<u64>,
}

impl Contexts {
    /// Empty tables for `inputs` inputs and batch symbols in `0..alphabet`.
    pub(crate) fn new(inputs: usize, alphabet: usize) -> Self {
        Self {
            alphabet,
            previous_input: vec![0; (inputs + 1) * alphabet],
            request_size: vec![0; SIZE_CLASSES * alphabet],
            place: vec![0; 3 * alphabet],
        }
    }

    /// Adds the places of one response's outputs: the symbols of its first and last output
    /// (`last` is `None` for a response of one output) and its symbol counts `row`.
    pub(crate) fn add_places(&mut self, first: usize, last: Option<usize>, row: &[u64]) {
        let a = self.alphabet;
        let mut middle = row.to_vec();
        for (r, s) in [(0, Some(first)), (2, last)] {
            if let Some(s) = s.filter(|&s| s < a) {
                if let Some(c) = self.place.get_mut(r * a + s) {
                    *c = c.saturating_add(1);
                }
                if let Some(m) = middle.get_mut(s) {
                    *m = m.saturating_sub(1);
                }
            }
        }
        if let Some(cells) = self.place.get_mut(a..2 * a) {
            for (c, &x) in cells.iter_mut().zip(&middle) {
                *c = c.saturating_add(x);
            }
        }
    }

    /// Adds one response's symbol counts `row` under its contexts.
    pub(crate) fn add(&mut self, previous: usize, size: u64, row: &[u64]) {
        let a = self.alphabet;
        for (table, r) in [
            (&mut self.previous_input, previous),
            (&mut self.request_size, size_class(size)),
        ] {
            if let Some(cells) = table.get_mut(r * a..(r + 1) * a) {
                for (c, &x) in cells.iter_mut().zip(row) {
                    *c = c.saturating_add(x);
                }
            }
        }
    }

    fn merge(&mut self, other: &Self) {
        if self.alphabet == other.alphabet {
            add_into(&mut self.previous_input, &other.previous_input);
            add_into(&mut self.request_size, &other.request_size);
            add_into(&mut self.place, &other.place);
        }
    }
}

/// The result of the reuse-at-any-lag test on one input's outputs (see
/// `analysis::reuse`): the largest tail exponent (p = 2·e^(−exponent) at one lag) over
/// every lag tested, in every piece of the run's output stream, and how many lags were
/// tested (the Bonferroni factor). Pieces of a sharded run add up.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct ReuseStat {
    /// Pieces of the output stream tested.
    pub pieces: u64,
    /// Pieces too short to test (fewer same-input pairs than the normal limit needs).
    pub short_pieces: u64,
    /// Lags tested, over every piece.
    pub lags: u64,
    /// The largest tail exponent over them (0 when none was tested).
    pub max_exponent: f64,
    /// The lag (in outputs of the run's stream, all inputs) where it was reached.
    pub at_lag: u64,
    /// The longest lag tested.
    pub longest_lag: u64,
}

impl ReuseStat {
    /// Adds another piece's result.
    pub(crate) fn merge(&mut self, other: &Self) {
        self.pieces += other.pieces;
        self.short_pieces += other.short_pieces;
        self.lags += other.lags;
        self.longest_lag = self.longest_lag.max(other.longest_lag);
        if other.max_exponent > self.max_exponent {
            self.max_exponent = other.max_exponent;
            self.at_lag = other.at_lag;
        }
    }
}

/// The law-free counts of one input's output stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Streams {
    /// Serial pairs at every lag.
    pub lags: SerialLags,
    /// Per-batch counts.
    pub batches: BatchCounts,
    /// The learned event's cells.
    pub events: EventCells,
    /// Outputs observed (the stream position of the next one).
    pub position: u64,
    /// An external run's response contexts (none for the project's samplers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contexts: Option<Contexts>,
    /// An external run's reuse-at-any-lag result (none for the project's samplers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse: Option<ReuseStat>,
    /// The batch symbol of every output in order, kept only while an external run's
    /// reuse test needs it (never serialised).
    #[serde(skip)]
    log: Option<Vec<u8>>,
    /// The first deviation of an external mechanism's responses from the canonical form
    /// of the output as sent (`protocol::Canon`), if any: the audit's `output-as-sent`
    /// test fails on it. Absent from a counts file without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<String>,
}

impl Streams {
    /// Empty counts: `streams` serial streams of symbols in `0..alphabet`, one batch
    /// symbol in `0..batch_alphabet` and `cells` event cells per output.
    pub(crate) fn new(
        streams: usize,
        alphabet: usize,
        batch_alphabet: usize,
        cells: usize,
    ) -> Self {
        Self {
            lags: SerialLags::new(streams, alphabet),
            batches: BatchCounts::new(batch_alphabet),
            events: EventCells::new(cells),
            position: 0,
            contexts: None,
            reuse: None,
            log: None,
            deviation: None,
        }
    }

    /// Keeps every output's batch symbol from now on (see [`Streams::take_log`]).
    pub(crate) fn keep_log(&mut self) {
        if self.log.is_none() {
            self.log = Some(Vec::new());
        }
    }

    /// How many batch symbols are kept so far.
    pub(crate) fn logged(&self) -> usize {
        self.log.as_ref().map_or(0, Vec::len)
    }

    /// The first and (for two or more) the last batch symbol kept after the first `from`.
    pub(crate) fn first_and_last_since(&self, from: usize) -> (Option<usize>, Option<usize>) {
        let Some(new) = self.log.as_ref().and_then(|l| l.get(from..)) else {
            return (None, None);
        };
        let first = new.first().map(|&s| usize::from(s));
        let last = if new.len() >= 2 {
            new.last().map(|&s| usize::from(s))
        } else {
            None
        };
        (first, last)
    }

    /// The batch symbols kept since [`Streams::keep_log`], in order (and stops keeping).
    pub(crate) fn take_log(&mut self) -> Vec<u8> {
        self.log.take().unwrap_or_default()
    }

    /// The current output's symbol on serial stream `stream`.
    #[inline]
    pub(crate) fn symbol(&mut self, stream: usize, symbol: usize) {
        self.lags.push(stream, symbol);
    }

    /// Ends the current output: its batch symbol and its event cell.
    #[inline]
    pub(crate) fn end_output(&mut self, batch_symbol: usize, cell: usize) {
        self.batches.push(batch_symbol);
        if let Some(log) = self.log.as_mut() {
            log.push(batch_symbol.min(self.batches.alphabet() - 1) as u8);
        }
        self.events.push(self.position, cell);
        self.position += 1;
    }

    /// Ends the current batch.
    pub(crate) fn end_batch(&mut self) {
        self.batches.end_batch();
    }

    /// Counts everything buffered (see [`SerialLags::flush`]).
    pub(crate) fn flush(&mut self) {
        self.lags.flush();
    }

    fn merge(&mut self, other: &Self) {
        self.lags.merge(&other.lags);
        self.batches.merge(&other.batches);
        self.events.merge(&other.events);
        self.position += other.position;
        match (self.contexts.as_mut(), other.contexts.as_ref()) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.contexts = Some(b.clone()),
            _ => {}
        }
        match (self.reuse.as_mut(), other.reuse.as_ref()) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.reuse = Some(*b),
            _ => {}
        }
        if self.deviation.is_none() {
            self.deviation.clone_from(&other.deviation);
        }
    }
}

/// Whole-vector histograms (the full joint law, its test and the whole-vector ε bound) are
/// kept up to this dimension (2¹⁶ cells).
pub(crate) const FULL_VECTOR_MAX_DIM: usize = 16;

/// Up to this dimension every pair of coordinates is counted ([`pair_design`]).
pub(crate) const PAIR_MAX_DIM: usize = 64;

/// Seed of the sampled part of [`pair_design`] (fixed: the design must be the same in every
/// chunk, shard and analysis of a run, and those know the dimension only).
const PAIR_DESIGN_SEED: u64 = 0x5EED_C0DE_00FA_1E00;

/// The pairs of coordinates (j, k), j < k, whose joint law (and cross-output law) the
/// audit counts for vectors of dimension `dim`, in increasing order:
///
/// - up to [`PAIR_MAX_DIM`] coordinates, every pair (D(D − 1)/2);
/// - above, every pair at a power-of-two offset (j, j + 2^b) — the adjacent pairs
///   (b = 0) and a block of coordinates that reuses the coins of an earlier block at any
///   power-of-two distance — and, for every other offset δ in 3..D, one pair (j, j + δ)
///   with j drawn from a fixed seed: a coordinate that reuses the coins of the one δ
///   before it, at any fixed offset, shows in some tested pair. At most
///   D·(⌈log₂ D⌉ + 1) pairs.
#[must_use]
pub(crate) fn pair_design(dim: usize) -> Vec<(usize, usize)> {
    if dim <= PAIR_MAX_DIM {
        return (0..dim)
            .flat_map(|j| (j + 1..dim).map(move |k| (j, k)))
            .collect();
    }
    let mut pairs = Vec::new();
    for delta in 1..dim {
        if delta.is_power_of_two() {
            pairs.extend((0..dim - delta).map(|j| (j, j + delta)));
        } else {
            let span = (dim - delta) as u64;
            let j = (splitmix(PAIR_DESIGN_SEED ^ delta as u64) % span) as usize;
            pairs.push((j, j + delta));
        }
    }
    pairs.sort_unstable();
    pairs
}

/// SplitMix64's output function (the design's sampled pairs).
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Sufficient statistics of `n` bit vectors (equal when their counts are equal).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct BitStats {
    /// Vectors observed.
    pub n: u64,
    /// Ones per coordinate.
    pub ones: Vec<u64>,
    /// For every pair (j, k) of [`pair_design`] (in its order), the vectors with both bits
    /// set; up to [`PAIR_MAX_DIM`] coordinates the pairs (0,1), (0,2), …, (1,2), …
    pub both: Vec<u64>,
    /// Histogram of whole vectors (index Σ b_j 2^j) when D ≤ [`FULL_VECTOR_MAX_DIM`].
    pub full: Option<Vec<u64>>,
    /// Cross-output pairs: for every pair (j, k) of [`pair_design`], 8 counts over the
    /// consecutive outputs (Xₜ, Xₜ₊₁) of the stream: the 2 × 2 table of (Xₜ[j], Xₜ₊₁[k])
    /// indexed 2·Xₜ[j] + Xₜ₊₁[k], then that of (Xₜ[k], Xₜ₊₁[j]). A pair never straddles
    /// two pieces (chunks, shards), so the tables add up like the serial lag tables.
    #[serde(default)]
    pub cross: Vec<u64>,
    /// The pairs of [`pair_design`] (not part of the counts).
    #[serde(skip)]
    design: Vec<(u32, u32)>,
    /// The previous vector of this piece, if any (not part of the counts).
    #[serde(skip)]
    previous: Option<Vec<bool>>,
    /// The previous vector of this piece as a bit mask, up to [`PAIR_MAX_DIM`]
    /// coordinates (not part of the counts).
    #[serde(skip)]
    previous_mask: Option<u64>,
}

impl PartialEq for BitStats {
    fn eq(&self, other: &Self) -> bool {
        (self.n, &self.ones, &self.both, &self.full, &self.cross)
            == (other.n, &other.ones, &other.both, &other.full, &other.cross)
    }
}

/// The position of the pair (j, k), j < k, among the pairs of `d` coordinates.
#[must_use]
pub(crate) fn pair_index(j: usize, k: usize, d: usize) -> usize {
    j * (2 * d - j - 1) / 2 + (k - j - 1)
}

impl BitStats {
    /// Empty statistics for dimension `dim`.
    pub(crate) fn new(dim: usize) -> Self {
        let design: Vec<(u32, u32)> = pair_design(dim)
            .into_iter()
            .map(|(j, k)| (j as u32, k as u32))
            .collect();
        Self {
            n: 0,
            ones: vec![0; dim],
            both: vec![0; design.len()],
            full: (dim <= FULL_VECTOR_MAX_DIM).then(|| vec![0; 1 << dim]),
            cross: vec![0; 8 * design.len()],
            design,
            previous: None,
            previous_mask: None,
        }
    }

    /// Adds one vector.
    pub(crate) fn add(&mut self, bits: &[bool]) {
        self.n += 1;
        let mut index = 0usize;
        let all_pairs = self.ones.len() <= PAIR_MAX_DIM;
        let mut set = [0usize; PAIR_MAX_DIM];
        let mut count = 0;
        let d = self.ones.len();
        let mut mask = 0u64;
        for (j, &b) in bits.iter().enumerate() {
            if b {
                if all_pairs && j < 64 {
                    mask |= 1 << j;
                }
                if let Some(o) = self.ones.get_mut(j) {
                    *o += 1;
                }
                index |= 1 << j.min(usize::BITS as usize - 1);
                if all_pairs && j < d {
                    for &i in &set[..count] {
                        if let Some(c) = self.both.get_mut(pair_index(i, j, d)) {
                            *c += 1;
                        }
                    }
                    if let Some(s) = set.get_mut(count) {
                        *s = j;
                        count += 1;
                    }
                }
            }
        }
        let bit = |v: &[bool], i: u32| v.get(i as usize).copied().unwrap_or(false);
        if !all_pairs {
            for (c, &(j, k)) in self.both.iter_mut().zip(&self.design) {
                *c += u64::from(bit(bits, j) && bit(bits, k));
            }
        }
        if all_pairs {
            // Bit masks: a few shifts per pair.
            if let Some(prev) = self.previous_mask {
                let b = |m: u64, i: u32| ((m >> (i & 63)) & 1) as usize;
                for (cells, &(j, k)) in self.cross.chunks_exact_mut(8).zip(&self.design) {
                    cells[2 * b(prev, j) + b(mask, k)] += 1;
                    cells[4 + 2 * b(prev, k) + b(mask, j)] += 1;
                }
            }
            self.previous_mask = Some(mask);
        } else {
            if let Some(prev) = &self.previous {
                for (cells, &(j, k)) in self.cross.chunks_exact_mut(8).zip(&self.design) {
                    let forward = 2 * usize::from(bit(prev, j)) + usize::from(bit(bits, k));
                    let backward = 4 + 2 * usize::from(bit(prev, k)) + usize::from(bit(bits, j));
                    cells[forward] += 1;
                    cells[backward] += 1;
                }
            }
            match &mut self.previous {
                Some(p) if p.len() == bits.len() => p.copy_from_slice(bits),
                p => *p = Some(bits.to_vec()),
            }
        }
        if let Some(c) = self.full.as_mut().and_then(|f| f.get_mut(index)) {
            *c += 1;
        }
    }

    /// The 2 × 2 joint counts of the pair number `pair` of [`pair_design`], (j, k),
    /// indexed 2·b_j + b_k.
    pub(crate) fn pair_table(&self, pair: usize, j: usize, k: usize) -> [u64; 4] {
        let both = self.both.get(pair).copied().unwrap_or(0);
        let oj = self.ones.get(j).copied().unwrap_or(0);
        let ok = self.ones.get(k).copied().unwrap_or(0);
        [
            (self.n + both).saturating_sub(oj + ok),
            ok.saturating_sub(both),
            oj.saturating_sub(both),
            both,
        ]
    }

    /// The cross-output tables of the pair number `pair` of [`pair_design`], (j, k):
    /// (Xₜ[j], Xₜ₊₁[k]) and (Xₜ[k], Xₜ₊₁[j]), each indexed 2·first + second.
    pub(crate) fn cross_tables(&self, pair: usize) -> ([u64; 4], [u64; 4]) {
        let mut t = ([0u64; 4], [0u64; 4]);
        if let Some(c) = self.cross.get(8 * pair..8 * pair + 8) {
            t.0.copy_from_slice(&c[..4]);
            t.1.copy_from_slice(&c[4..]);
        }
        t
    }

    /// Merges another batch (its first vector is not paired with this one's last).
    pub(crate) fn merge(&mut self, other: &Self) {
        self.n += other.n;
        add_into(&mut self.ones, &other.ones);
        add_into(&mut self.both, &other.both);
        add_into(&mut self.cross, &other.cross);
        if let (Some(a), Some(b)) = (self.full.as_mut(), other.full.as_ref()) {
            add_into(a, b);
        }
        self.previous = None;
        self.previous_mask = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_lags_count_every_pair_at_every_lag() {
        let mut s = SerialLags::new(2, 3);
        // Stream 0: 0 1 2 2 9→2; stream 1: 2 1.
        for (stream, symbol) in [(0, 0), (1, 2), (0, 1), (0, 2), (1, 1), (0, 2), (0, 9)] {
            s.push(stream, symbol);
        }
        s.flush();
        // Lag 1 of stream 0: (0,1), (1,2), (2,2), (2,2).
        assert_eq!(s.table(0, 1), &[0, 1, 0, 0, 0, 1, 0, 0, 2]);
        // Lag 2: (0,2), (1,2), (2,2). Lag 4: (0,2).
        assert_eq!(s.table(0, 2), &[0, 0, 1, 0, 0, 1, 0, 0, 1]);
        assert_eq!(s.table(0, 4), &[0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(s.table(0, 5).iter().sum::<u64>(), 0);
        assert_eq!(s.table(1, 1), &[0, 0, 0, 0, 0, 0, 0, 1, 0]);
        // Lags beyond the ring wrap correctly: a stream of 20 equal symbols has 20 − ℓ
        // pairs at lag ℓ.
        let mut long = SerialLags::new(1, 2);
        for _ in 0..20 {
            long.push(0, 1);
        }
        long.flush();
        for lag in 1..=SERIAL_LAGS {
            assert_eq!(long.table(0, lag)[3], 20 - lag as u64);
        }
        // Across blocks and flushes: the same counts as one pass over the stream.
        let stream: Vec<usize> = (0..3 * SERIAL_BLOCK + 77)
            .map(|t| (t * t + t / 7) % 3)
            .collect();
        let mut blocked = SerialLags::new(1, 3);
        for (t, &x) in stream.iter().enumerate() {
            blocked.push(0, x);
            if t == 5 || t == 1000 {
                blocked.flush();
            }
        }
        blocked.flush();
        for lag in 1..=SERIAL_LAGS {
            let mut direct = [0u64; 9];
            for t in lag..stream.len() {
                direct[stream[t - lag] * 3 + stream[t]] += 1;
            }
            assert_eq!(blocked.table(0, lag), &direct[..], "lag {lag}");
        }
        let mut t = SerialLags::new(2, 3);
        t.merge(&s);
        t.merge(&s);
        assert_eq!(t.table(0, 1)[8], 4);
        assert_eq!(class_symbol(5, 10), 5);
        assert_eq!(class_symbol(99, 100), 15);
        assert_eq!(class_symbol(0, 100), 0);
    }

    #[test]
    fn the_bitset_count_equals_the_direct_count() {
        for a in 2..=4usize {
            let p: Vec<u8> = (0..300u32)
                .map(|t| (t.wrapping_mul(2_654_435_761) >> 7) as u8 % a as u8)
                .collect();
            for done in [0, 3, 8, 70] {
                let mut direct = vec![0u64; SERIAL_LAGS * a * a];
                let mut bits = direct.clone();
                count_pairs(&p, done, a, &mut direct);
                count_small_alphabet(&p, done, a, &mut bits);
                assert_eq!(direct, bits, "a = {a}, done = {done}");
            }
        }
    }

    #[test]
    fn batches_close_and_append_in_order() {
        let mut b = BatchCounts::new(3);
        for s in [0, 1, 1] {
            b.push(s);
        }
        b.end_batch();
        b.end_batch();
        b.push(2);
        let mut c = BatchCounts::new(3);
        c.push(0);
        c.end_batch();
        b.merge(&c);
        assert_eq!(b.rows(), &[1, 2, 0, 0, 0, 1, 1, 0, 0]);
    }

    #[test]
    fn event_halves_alternate_by_block() {
        let mut e = EventCells::new(2);
        for position in 0..4 * EVENT_BLOCK {
            e.push(position, usize::from(position % 2 == 1));
        }
        assert_eq!(e.fit, vec![EVENT_BLOCK, EVENT_BLOCK]);
        assert_eq!(e.certify, vec![EVENT_BLOCK, EVENT_BLOCK]);
    }

    #[test]
    fn the_pair_design_covers_every_offset_and_coordinate() {
        assert_eq!(pair_design(64).len(), 64 * 63 / 2);
        for d in [65usize, 200, 1000] {
            let pairs = pair_design(d);
            assert!(pairs.windows(2).all(|w| w[0] < w[1]));
            assert!(pairs.iter().all(|&(j, k)| j < k && k < d));
            let bound = d * (d.ilog2() as usize + 2);
            assert!(pairs.len() <= bound, "{d}: {}", pairs.len());
            for delta in 1..d {
                let at: Vec<_> = pairs.iter().filter(|&&(j, k)| k - j == delta).collect();
                if delta.is_power_of_two() {
                    assert_eq!(at.len(), d - delta, "{d}, offset {delta}");
                } else {
                    assert_eq!(at.len(), 1, "{d}, offset {delta}");
                }
            }
        }
        assert_eq!(pair_design(200).len(), 1536);
        // Past 64 coordinates the pair counts come from the design's list: the same
        // tables as counting each pair directly, and the cross tables over consecutive
        // vectors.
        let d = 70;
        let vectors: Vec<Vec<bool>> = (0..50u64)
            .map(|t| {
                (0..d)
                    .map(|j| splitmix(t * 131 + j as u64) & 1 == 1)
                    .collect()
            })
            .collect();
        let mut s = BitStats::new(d);
        for v in &vectors {
            s.add(v);
        }
        for (p, &(j, k)) in pair_design(d).iter().enumerate() {
            let both = vectors.iter().filter(|v| v[j] && v[k]).count() as u64;
            assert_eq!(s.pair_table(p, j, k)[3], both);
            let (f, b) = s.cross_tables(p);
            let mut direct = ([0u64; 4], [0u64; 4]);
            for w in vectors.windows(2) {
                direct.0[2 * usize::from(w[0][j]) + usize::from(w[1][k])] += 1;
                direct.1[2 * usize::from(w[0][k]) + usize::from(w[1][j])] += 1;
            }
            assert_eq!((f, b), direct, "pair ({j}, {k})");
        }
    }

    #[test]
    fn bit_stats_count_every_pair_and_vectors() {
        let mut s = BitStats::new(3);
        s.add(&[true, false, true]);
        s.add(&[true, true, true]);
        assert_eq!(s.ones, vec![2, 1, 2]);
        assert_eq!(s.both, vec![1, 2, 1]);
        assert_eq!(s.pair_table(0, 0, 1), [0, 0, 1, 1]);
        assert_eq!(s.pair_table(1, 0, 2), [0, 0, 0, 2]);
        assert_eq!(s.pair_table(2, 1, 2), [0, 1, 0, 1]);
        // One consecutive pair: (1 0 1) then (1 1 1).
        assert_eq!(s.cross_tables(0), ([0, 0, 0, 1], [0, 1, 0, 0]));
        assert_eq!(s.cross_tables(2), ([0, 1, 0, 0], [0, 0, 0, 1]));
        let full = s.full.clone().unwrap();
        assert_eq!(full[0b101], 1);
        assert_eq!(full[0b111], 1);
        let mut t = BitStats::new(3);
        t.merge(&s);
        assert_eq!(t, s);
        for d in [2usize, 5, 64] {
            let mut next = 0;
            for j in 0..d {
                for k in j + 1..d {
                    assert_eq!(pair_index(j, k, d), next);
                    next += 1;
                }
            }
        }
    }
}
