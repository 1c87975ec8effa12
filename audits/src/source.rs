//! Where samples come from: the project's own mechanisms (drawn in parallel, reproducibly)
//! or an external process.

use rand::{SeedableRng, rngs::ChaCha20Rng};
use rayon::prelude::*;
use serde_json::Value;

use crate::{
    analysis::BitStats,
    error::Result,
    external::Responder,
    progress::Progress,
    protocol::{OutputKind, Outputs},
};

/// Samples drawn for one input.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Draws {
    /// A histogram of a finite output.
    Counts(Vec<u64>),
    /// Statistics of bit vectors.
    Bits(BitStats),
    /// Real-valued outputs, one vector per coordinate.
    Reals(Vec<Vec<f64>>),
}

impl Draws {
    fn merge(&mut self, other: Self) {
        match (self, other) {
            (Self::Counts(a), Self::Counts(b)) => {
                if a.len() < b.len() {
                    a.resize(b.len(), 0);
                }
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
            }
            (Self::Bits(a), Self::Bits(b)) => a.merge(&b),
            (Self::Reals(a), Self::Reals(b)) => {
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

/// A source of samples for the inputs of one grid point.
pub(crate) trait Source: Send {
    /// Draws `n` outputs for input number `input`; `seed` makes internal sources
    /// reproducible (external ones ignore it).
    fn draw(&mut self, input: usize, n: u64, seed: u64, progress: &Progress) -> Result<Draws>;
}

/// SplitMix64 finaliser: mixes seeds so that nearby seeds give unrelated streams.
#[must_use]
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Samples per parallel chunk; fixed, so results do not depend on the number of threads.
const CHUNK: u64 = 1 << 18;

/// The signature of an internal sampler: draw `n` outputs for input `input`.
pub(crate) type DrawFn = dyn Fn(usize, u64, &mut ChaCha20Rng) -> Result<Draws> + Send + Sync;

/// A project mechanism, sampled in fixed-size chunks in parallel with one ChaCha20 stream
/// per chunk (seeded from the point's seed and the chunk number).
pub(crate) struct Internal {
    draw: Box<DrawFn>,
}

impl Internal {
    pub(crate) fn new(
        draw: impl Fn(usize, u64, &mut ChaCha20Rng) -> Result<Draws> + Send + Sync + 'static,
    ) -> Self {
        Self {
            draw: Box::new(draw),
        }
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
}

impl Source for External {
    fn draw(&mut self, input: usize, n: u64, _seed: u64, progress: &Progress) -> Result<Draws> {
        let x = self.inputs.get(input).cloned().unwrap_or(Value::Null);
        let mut draws = match self.kind {
            OutputKind::Class(k) => Draws::Counts(vec![0; k]),
            OutputKind::Bits(d) => Draws::Bits(BitStats::new(d)),
            OutputKind::Reals(d) => Draws::Reals(vec![Vec::new(); d]),
        };
        let mut left = n;
        while left > 0 {
            let b = self.batch.min(left);
            let size = usize::try_from(b).unwrap_or(usize::MAX);
            let outputs = self.mechanism.respond(&x, size, self.kind)?;
            match (&mut draws, outputs) {
                (Draws::Counts(c), Outputs::Classes(v)) => {
                    for o in v {
                        if let Some(slot) = c.get_mut(o) {
                            *slot += 1;
                        }
                    }
                }
                (Draws::Bits(s), Outputs::Bits(v)) => {
                    let d = s.ones.len().max(1);
                    for row in v.chunks_exact(d) {
                        s.add(row);
                    }
                }
                (Draws::Reals(cols), Outputs::Reals(v)) => {
                    let d = cols.len().max(1);
                    for row in v.chunks_exact(d) {
                        for (col, &x) in cols.iter_mut().zip(row) {
                            col.push(x);
                        }
                    }
                }
                _ => {}
            }
            progress.add(b);
            left -= b;
        }
        Ok(draws)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn internal_draws_are_reproducible_and_chunked() {
        let mut s = Internal::new(|_, n, rng| {
            let mut c = vec![0u64; 2];
            for _ in 0..n {
                c[(rng.next_u64() & 1) as usize] += 1;
            }
            Ok(Draws::Counts(c))
        });
        let p = Progress::default();
        let a = s.draw(0, 3 * CHUNK + 5, 9, &p).unwrap();
        let b = s.draw(0, 3 * CHUNK + 5, 9, &p).unwrap();
        let c = s.draw(0, 3 * CHUNK + 5, 10, &p).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let Draws::Counts(v) = a else { panic!() };
        assert_eq!(v.iter().sum::<u64>(), 3 * CHUNK + 5);
        assert_eq!(p.done(), 3 * (3 * CHUNK + 5));
    }

    #[test]
    fn mix_separates_streams() {
        assert_ne!(mix(1, 0), mix(0, 1));
        assert_ne!(mix(1, 2), mix(1, 3));
    }
}
