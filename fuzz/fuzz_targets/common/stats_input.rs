//! The byte reader shared by the fl-stats fuzz targets.

/// Reads little-endian values off the fuzzer's bytes (zeros once they run out).
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    pub fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    pub fn u64(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        for b in &mut bytes {
            *b = self.u8();
        }
        u64::from_le_bytes(bytes)
    }
    pub fn f64(&mut self) -> f64 {
        f64::from_bits(self.u64())
    }
    /// A float that is often "nice" (a probability-like value) and sometimes raw bits.
    pub fn value(&mut self) -> f64 {
        match self.u8() % 4 {
            0 => self.f64(),
            _ => f64::from(self.u8()) / 255.0,
        }
    }
    pub fn len(&mut self, max: usize) -> usize {
        usize::from(self.u8()) % (max + 1)
    }
}
