//! A byte reader shared by the fl-ldp fuzz targets: turns the fuzzer's bytes into the
//! parameters and inputs of the mechanisms (raw f64 bit patterns, so NaN, ±∞, subnormals
//! and negative zero all occur).

// Shared by several targets; each uses a subset.
#![allow(dead_code)]

/// Reads values from the fuzzer's bytes; past the end it yields zeros.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u64(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        for b in &mut bytes {
            *b = self.byte();
        }
        u64::from_le_bytes(bytes)
    }

    /// Any f64 bit pattern.
    pub fn f64(&mut self) -> f64 {
        f64::from_bits(self.u64())
    }

    /// A "parameter-like" f64: half the time a raw bit pattern, half the time a small
    /// value or a special one, so that valid constructions are common.
    pub fn param(&mut self) -> f64 {
        match self.byte() % 8 {
            0 => self.f64(),
            1 => [0.0, -0.0, f64::NAN, f64::INFINITY, -1.0, 1e-320, 800.0, 1e6]
                [usize::from(self.byte() % 8)],
            _ => f64::from(self.byte()) / 16.0,
        }
    }

    /// A length or count below `max` (inclusive of 0).
    pub fn count(&mut self, max: usize) -> usize {
        usize::from(self.byte()) % (max + 1)
    }

    /// An f64 vector of length below `max`, mixing specials, 0/1 and arbitrary values.
    pub fn vector(&mut self, max: usize) -> Vec<f64> {
        let n = self.count(max);
        (0..n)
            .map(|_| match self.byte() % 4 {
                0 => self.f64(),
                1 => f64::from(self.byte() % 2),
                _ => f64::from(self.byte()) / 255.0 / n.max(1) as f64,
            })
            .collect()
    }

    pub fn seed(&mut self) -> u64 {
        self.u64()
    }
}
