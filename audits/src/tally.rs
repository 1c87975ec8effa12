//! What a run counts: the sufficient statistics of each input's outputs, as plain count
//! tables that add up (`merge`), kept apart from the tests that read them (`analysis`) and
//! from where the outputs come from (`source`). Both of those depend on this module, and
//! it depends on neither.

/// The data drawn for one input, in the layout of its law.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Data {
    /// A histogram of a finite output (or a law-specific layout of counts).
    Counts(Vec<u64>),
    /// Statistics of bit vectors.
    Bits(BitStats),
    /// Real-valued outputs, one vector per coordinate.
    Reals(Vec<Vec<f64>>),
}

/// Samples drawn for one input: the data the law's tests read and the serial statistics
/// (pairs of consecutive outputs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Draws {
    /// The law's data.
    pub data: Data,
    /// Non-overlapping pairs of consecutive outputs, per stream.
    pub serial: SerialPairs,
}

impl Draws {
    /// Data without serial statistics (a layout whose outputs are not one stream, e.g. an
    /// estimator's population).
    pub(crate) fn without_serial(data: Data) -> Self {
        Self {
            data,
            serial: SerialPairs::new(0, 1),
        }
    }

    pub(crate) fn merge(&mut self, other: Self) {
        self.serial.merge(&other.serial);
        match (&mut self.data, other.data) {
            (Data::Counts(a), Data::Counts(b)) => {
                if a.len() < b.len() {
                    a.resize(b.len(), 0);
                }
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
            }
            (Data::Bits(a), Data::Bits(b)) => a.merge(&b),
            (Data::Reals(a), Data::Reals(b)) => {
                if a.len() < b.len() {
                    a.resize(b.len(), Vec::new());
                }
                for (x, y) in a.iter_mut().zip(b) {
                    x.extend(y);
                }
            }
            // Kinds never mix: a source returns one kind.
            _ => {}
        }
    }
}

/// The most symbols a serial-independence stream distinguishes (larger output spaces are
/// grouped into this many symbols).
pub(crate) const SERIAL_ALPHABET: usize = 16;

/// Serial statistics of an output stream: the outputs are mapped to symbols in
/// `0..alphabet`, and consecutive outputs are cut into non-overlapping pairs
/// (Y₁, Y₂), (Y₃, Y₄), … whose joint counts are kept. If the outputs are independent and
/// identically distributed, the pairs are independent draws of two independent symbols,
/// which fl-stats' `chi_square_independence` tests without knowing the law. A vector
/// output has one stream per coordinate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SerialPairs {
    alphabet: usize,
    /// streams × alphabet × alphabet counts, indexed (stream, first, second).
    table: Vec<u64>,
    /// Per stream: the first symbol of an incomplete pair, or [`NO_SYMBOL`].
    pending: Vec<usize>,
}

const NO_SYMBOL: usize = usize::MAX;

impl SerialPairs {
    /// Empty statistics for `streams` streams of symbols in `0..alphabet`.
    pub(crate) fn new(streams: usize, alphabet: usize) -> Self {
        let alphabet = alphabet.max(1);
        Self {
            alphabet,
            table: vec![0; streams * alphabet * alphabet],
            pending: vec![NO_SYMBOL; streams],
        }
    }

    /// The next output's symbol on `stream` (clamped into the alphabet).
    #[inline]
    pub(crate) fn push(&mut self, stream: usize, symbol: usize) {
        let a = self.alphabet;
        let symbol = symbol.min(a - 1);
        if let Some(p) = self.pending.get_mut(stream) {
            if *p == NO_SYMBOL {
                *p = symbol;
            } else {
                if let Some(c) = self.table.get_mut((stream * a + *p) * a + symbol) {
                    *c += 1;
                }
                *p = NO_SYMBOL;
            }
        }
    }

    /// Streams kept.
    pub(crate) fn streams(&self) -> usize {
        self.pending.len()
    }

    /// Symbols per stream.
    pub(crate) fn alphabet(&self) -> usize {
        self.alphabet
    }

    /// The alphabet × alphabet pair table of `stream` (row: first output of the pair).
    pub(crate) fn table(&self, stream: usize) -> &[u64] {
        let size = self.alphabet * self.alphabet;
        self.table
            .get(stream * size..(stream + 1) * size)
            .unwrap_or(&[])
    }

    /// Adds another batch's pairs (its incomplete pair, if any, is dropped: pairs never
    /// straddle two independently seeded chunks).
    pub(crate) fn merge(&mut self, other: &Self) {
        if self.table.len() == other.table.len() && self.alphabet == other.alphabet {
            for (a, b) in self.table.iter_mut().zip(&other.table) {
                *a += b;
            }
        } else if self.table.is_empty() {
            *self = other.clone();
        }
    }
}

/// The serial symbol of class `index` of `classes`: the class itself up to
/// [`SERIAL_ALPHABET`] classes, else one of [`SERIAL_ALPHABET`] groups of consecutive
/// classes.
#[must_use]
pub(crate) fn class_symbol(index: usize, classes: usize) -> usize {
    if classes <= SERIAL_ALPHABET {
        index
    } else {
        ((index as u128 * SERIAL_ALPHABET as u128) / classes.max(1) as u128) as usize
    }
}

/// Whole-vector histograms (and the whole-vector ε bound) are kept up to this dimension.
pub(crate) const FULL_VECTOR_MAX_DIM: usize = 10;

/// Sufficient statistics of `n` bit vectors.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct BitStats {
    /// Vectors observed.
    pub n: u64,
    /// Ones per coordinate.
    pub ones: Vec<u64>,
    /// Joint counts of coordinates (j, j+1), indexed 2·b_j + b_{j+1}.
    pub pairs: Vec<[u64; 4]>,
    /// Histogram of whole vectors (index Σ b_j 2^j) when D ≤ [`FULL_VECTOR_MAX_DIM`].
    pub full: Option<Vec<u64>>,
}

impl BitStats {
    /// Empty statistics for dimension `dim`.
    pub(crate) fn new(dim: usize) -> Self {
        Self {
            n: 0,
            ones: vec![0; dim],
            pairs: vec![[0; 4]; dim.saturating_sub(1)],
            full: (dim <= FULL_VECTOR_MAX_DIM).then(|| vec![0; 1 << dim]),
        }
    }

    /// Adds one vector.
    pub(crate) fn add(&mut self, bits: &[bool]) {
        self.n += 1;
        let mut index = 0usize;
        for (j, &b) in bits.iter().enumerate() {
            if b {
                if let Some(o) = self.ones.get_mut(j) {
                    *o += 1;
                }
                index |= 1 << j.min(usize::BITS as usize - 1);
            }
            if let (Some(p), Some(&next)) = (self.pairs.get_mut(j), bits.get(j + 1)) {
                p[2 * usize::from(b) + usize::from(next)] += 1;
            }
        }
        if let Some(c) = self.full.as_mut().and_then(|f| f.get_mut(index)) {
            *c += 1;
        }
    }

    /// Merges another batch.
    pub(crate) fn merge(&mut self, other: &Self) {
        self.n += other.n;
        for (a, b) in self.ones.iter_mut().zip(&other.ones) {
            *a += b;
        }
        for (a, b) in self.pairs.iter_mut().zip(&other.pairs) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        if let (Some(a), Some(b)) = (self.full.as_mut(), other.full.as_ref()) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_pairs_cut_the_stream_into_non_overlapping_pairs() {
        let mut s = SerialPairs::new(2, 3);
        for (stream, symbol) in [(0, 0), (1, 2), (0, 1), (0, 2), (1, 1), (0, 2), (0, 9)] {
            s.push(stream, symbol);
        }
        // Stream 0: 0 1 2 2 9→2: pairs (0,1), (2,2), 2 pending. Stream 1: (2,1).
        assert_eq!(s.table(0), &[0, 1, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(s.table(1), &[0, 0, 0, 0, 0, 0, 0, 1, 0]);
        let mut t = SerialPairs::new(2, 3);
        t.merge(&s);
        t.merge(&s);
        assert_eq!(t.table(0)[1], 2);
        assert_eq!(class_symbol(5, 10), 5);
        assert_eq!(class_symbol(99, 100), 15);
        assert_eq!(class_symbol(0, 100), 0);
    }

    #[test]
    fn bit_stats_count_pairs_and_vectors() {
        let mut s = BitStats::new(3);
        s.add(&[true, false, true]);
        s.add(&[true, true, true]);
        assert_eq!(s.ones, vec![2, 1, 2]);
        assert_eq!(s.pairs, vec![[0, 0, 1, 1], [0, 1, 0, 1]]);
        let full = s.full.clone().unwrap();
        assert_eq!(full[0b101], 1);
        assert_eq!(full[0b111], 1);
        let mut t = BitStats::new(3);
        t.merge(&s);
        assert_eq!(t, s);
    }
}
