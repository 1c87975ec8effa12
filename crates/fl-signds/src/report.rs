//! The report a client uploads — sorted indices, a sign and the MagRR bit — and its
//! compact, versioned wire format.
//!
//! # Wire format, version 1
//!
//! | field | encoding |
//! |---|---|
//! | version | one byte, `0x01` |
//! | flags | one byte: bit 0 = sign (1 = +1, 0 = −1), bit 1 = MagRR bit b̂; bits 2–7 must be 0 |
//! | d | unsigned LEB128, 1 ..= 2^32 − 1 |
//! | h | unsigned LEB128, 1 ..= 100 |
//! | indices | h unsigned LEB128 numbers: the first index, then each gap minus one |
//!
//! Because gaps are stored minus one, a duplicate or unsorted index list cannot be encoded
//! at all. The decoder accepts only canonical LEB128 (no overlong forms, at most 5 bytes, no
//! overflow), checks every index against d, and rejects trailing bytes. For d = 650 and
//! h = 100 a report takes about 105 bytes (a float32 model of d = 650 takes 2,600).

use crate::error::{Error, Result};
use crate::params::{MAX_DIMENSION, MAX_OUTPUT_DIMENSION};

/// The wire-format version this crate writes and reads.
pub const WIRE_VERSION: u8 = 1;

/// The direction of a client's update: the top-k set holds its largest values (`Positive`)
/// or its smallest (`Negative`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sign {
    /// s = +1.
    Positive,
    /// s = −1.
    Negative,
}

impl Sign {
    /// +1 or −1.
    #[must_use]
    pub fn value(self) -> i8 {
        match self {
            Self::Positive => 1,
            Self::Negative => -1,
        }
    }
}

impl TryFrom<i64> for Sign {
    type Error = Error;

    fn try_from(value: i64) -> Result<Self> {
        match value {
            1 => Ok(Self::Positive),
            -1 => Ok(Self::Negative),
            _ => Err(Error::InvalidSign { value }),
        }
    }
}

/// One client's upload: h strictly increasing indices below d, the sign s and the
/// randomized MagRR bit b̂. A `Report` is valid by construction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Report {
    dimension: u32,
    indices: Vec<u32>,
    sign: Sign,
    magrr_bit: bool,
}

impl Report {
    /// Builds a report from its parts, as received from any source, and validates it:
    /// 1 ≤ d ≤ 2^32 − 1, 1 ≤ h ≤ 100 indices, strictly increasing, each < d,
    /// s ∈ {−1, +1}, b̂ ∈ {0, 1}.
    ///
    /// # Errors
    /// [`Error::InvalidDimension`], [`Error::InvalidIndexCount`],
    /// [`Error::IndicesNotIncreasing`], [`Error::IndexOutOfRange`], [`Error::InvalidSign`],
    /// [`Error::InvalidMagRrBit`].
    pub fn new(dimension: u64, indices: &[u64], sign: i64, magrr_bit: u64) -> Result<Self> {
        if dimension == 0 || dimension > MAX_DIMENSION {
            return Err(Error::InvalidDimension {
                dimension: usize::try_from(dimension).unwrap_or(usize::MAX),
                max: MAX_DIMENSION,
            });
        }
        if indices.is_empty() || indices.len() > MAX_OUTPUT_DIMENSION {
            return Err(Error::InvalidIndexCount {
                count: indices.len(),
                max: MAX_OUTPUT_DIMENSION,
            });
        }
        let mut out = Vec::with_capacity(indices.len());
        for (position, &index) in indices.iter().enumerate() {
            if index >= dimension {
                return Err(Error::IndexOutOfRange {
                    position,
                    index,
                    dimension,
                });
            }
            if out
                .last()
                .is_some_and(|&prev: &u32| u64::from(prev) >= index)
            {
                return Err(Error::IndicesNotIncreasing { position });
            }
            out.push(index as u32);
        }
        let sign = Sign::try_from(sign)?;
        let magrr_bit = match magrr_bit {
            0 => false,
            1 => true,
            value => return Err(Error::InvalidMagRrBit { value }),
        };
        Ok(Self {
            dimension: dimension as u32,
            indices: out,
            sign,
            magrr_bit,
        })
    }

    /// Assembles a report from parts the crate has already validated.
    pub(crate) fn from_valid_parts(
        dimension: u32,
        indices: Vec<u32>,
        sign: Sign,
        magrr_bit: bool,
    ) -> Self {
        Self {
            dimension,
            indices,
            sign,
            magrr_bit,
        }
    }

    /// d, the dimension of the update the report is about.
    #[must_use]
    pub fn dimension(&self) -> u32 {
        self.dimension
    }

    /// The selected indices, strictly increasing.
    #[must_use]
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// The sign s.
    #[must_use]
    pub fn sign(&self) -> Sign {
        self.sign
    }

    /// The randomized MagRR bit b̂.
    #[must_use]
    pub fn magrr_bit(&self) -> bool {
        self.magrr_bit
    }

    /// The size of [`Report::encode`]'s output in bytes, without encoding.
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        let mut n =
            2 + leb128_len(u64::from(self.dimension)) + leb128_len(self.indices.len() as u64);
        let mut prev: Option<u32> = None;
        for &i in &self.indices {
            n += leb128_len(delta(prev, i));
            prev = Some(i);
        }
        n
    }

    /// The wire encoding (version 1; see the module docs).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.push(WIRE_VERSION);
        out.push(u8::from(self.sign == Sign::Positive) | (u8::from(self.magrr_bit) << 1));
        write_leb128(&mut out, u64::from(self.dimension));
        write_leb128(&mut out, self.indices.len() as u64);
        let mut prev: Option<u32> = None;
        for &i in &self.indices {
            write_leb128(&mut out, delta(prev, i));
            prev = Some(i);
        }
        out
    }

    /// Decodes and validates a version-1 report.
    ///
    /// # Errors
    /// [`Error::UnsupportedVersion`], [`Error::MalformedReport`] (truncated input, reserved
    /// flag bits, overlong or overflowing LEB128, trailing bytes), and the errors of
    /// [`Report::new`] (count and range).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut reader = Reader { bytes, pos: 0 };
        let version = reader.byte("missing version byte")?;
        if version != WIRE_VERSION {
            return Err(Error::UnsupportedVersion {
                version,
                supported: WIRE_VERSION,
            });
        }
        let flags = reader.byte("missing flags byte")?;
        if flags & !0b11 != 0 {
            return Err(Error::MalformedReport {
                offset: 1,
                reason: "reserved flag bits are set",
            });
        }
        let dimension = reader.leb128()?;
        if dimension == 0 || dimension > MAX_DIMENSION {
            return Err(Error::InvalidDimension {
                dimension: usize::try_from(dimension).unwrap_or(usize::MAX),
                max: MAX_DIMENSION,
            });
        }
        let count = reader.leb128()?;
        if count == 0 || count > MAX_OUTPUT_DIMENSION as u64 {
            return Err(Error::InvalidIndexCount {
                count: usize::try_from(count).unwrap_or(usize::MAX),
                max: MAX_OUTPUT_DIMENSION,
            });
        }
        let mut indices = Vec::with_capacity(count as usize);
        let mut next_min = 0u64;
        for position in 0..count as usize {
            let d = reader.leb128()?;
            let index = next_min.saturating_add(d);
            if index >= dimension {
                return Err(Error::IndexOutOfRange {
                    position,
                    index,
                    dimension,
                });
            }
            indices.push(index as u32);
            next_min = index + 1;
        }
        if reader.pos != bytes.len() {
            return Err(Error::MalformedReport {
                offset: reader.pos,
                reason: "trailing bytes after the last index",
            });
        }
        Ok(Self {
            dimension: dimension as u32,
            indices,
            sign: if flags & 1 == 1 {
                Sign::Positive
            } else {
                Sign::Negative
            },
            magrr_bit: flags & 0b10 != 0,
        })
    }
}

/// The number stored for index `i` after `prev`: the index itself first, then gap − 1.
fn delta(prev: Option<u32>, i: u32) -> u64 {
    match prev {
        None => u64::from(i),
        Some(p) => u64::from(i) - u64::from(p) - 1,
    }
}

fn leb128_len(mut x: u64) -> usize {
    let mut n = 1;
    while x >= 0x80 {
        x >>= 7;
        n += 1;
    }
    n
}

fn write_leb128(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push((x as u8 & 0x7f) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self, reason: &'static str) -> Result<u8> {
        let b = *self.bytes.get(self.pos).ok_or(Error::MalformedReport {
            offset: self.pos,
            reason,
        })?;
        self.pos += 1;
        Ok(b)
    }

    /// Canonical unsigned LEB128 of at most 32 bits (5 bytes).
    fn leb128(&mut self) -> Result<u64> {
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..5 {
            let b = self.byte("truncated number")?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(Error::MalformedReport {
                        offset: start,
                        reason: "overlong number encoding",
                    });
                }
                if value > u64::from(u32::MAX) {
                    return Err(Error::MalformedReport {
                        offset: start,
                        reason: "number larger than 2^32 - 1",
                    });
                }
                return Ok(value);
            }
        }
        Err(Error::MalformedReport {
            offset: start,
            reason: "number longer than 5 bytes",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn new_validates_every_field() {
        assert!(Report::new(8, &[0, 4, 7], 1, 0).is_ok());
        assert_eq!(
            Report::new(8, &[0, 4, 4], 1, 0).unwrap_err(),
            Error::IndicesNotIncreasing { position: 2 }
        );
        assert_eq!(
            Report::new(8, &[4, 0], 1, 0).unwrap_err(),
            Error::IndicesNotIncreasing { position: 1 }
        );
        assert!(matches!(
            Report::new(8, &[0, 8], 1, 0),
            Err(Error::IndexOutOfRange { position: 1, .. })
        ));
        assert!(matches!(
            Report::new(8, &[], 1, 0),
            Err(Error::InvalidIndexCount { count: 0, .. })
        ));
        let many: Vec<u64> = (0..101).collect();
        assert!(matches!(
            Report::new(1000, &many, 1, 0),
            Err(Error::InvalidIndexCount { count: 101, .. })
        ));
        assert_eq!(
            Report::new(8, &[1], 0, 0).unwrap_err(),
            Error::InvalidSign { value: 0 }
        );
        assert_eq!(
            Report::new(8, &[1], -1, 2).unwrap_err(),
            Error::InvalidMagRrBit { value: 2 }
        );
        assert!(Report::new(0, &[0], 1, 0).is_err());
        assert!(Report::new(1 << 32, &[0], 1, 0).is_err());
    }

    #[test]
    fn known_encoding() {
        let r = Report::new(8, &[0, 4, 7], 1, 1).unwrap();
        assert_eq!(r.encode(), vec![1, 0b11, 8, 3, 0, 3, 2]);
        assert_eq!(r.encoded_len(), 7);
        let r = Report::new(300, &[299], -1, 0).unwrap();
        assert_eq!(r.encode(), vec![1, 0, 0xac, 0x02, 1, 0xab, 0x02]);
    }

    #[test]
    fn decoder_rejects_malformed_input() {
        let good = Report::new(300, &[5, 299], 1, 0).unwrap().encode();
        assert!(Report::decode(&good).is_ok());
        // Every strict prefix is truncated.
        for n in 0..good.len() {
            assert!(Report::decode(&good[..n]).is_err(), "prefix {n}");
        }
        let mut extra = good.clone();
        extra.push(0);
        assert!(matches!(
            Report::decode(&extra),
            Err(Error::MalformedReport { .. })
        ));
        let mut v = good.clone();
        v[0] = 2;
        assert!(matches!(
            Report::decode(&v),
            Err(Error::UnsupportedVersion { version: 2, .. })
        ));
        let mut f = good;
        f[1] = 0b100;
        assert!(Report::decode(&f).is_err());
        // Overlong zero, overlong d, 6-byte and > u32 numbers.
        assert!(Report::decode(&[1, 1, 8, 1, 0x80, 0x00]).is_err());
        assert!(Report::decode(&[1, 1, 0x88, 0x00, 1, 0]).is_err());
        assert!(Report::decode(&[1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 0]).is_err());
        assert!(Report::decode(&[1, 1, 0xff, 0xff, 0xff, 0xff, 0x1f, 1, 0]).is_err());
        // Index out of range via a large gap; count 0 and 101.
        assert!(matches!(
            Report::decode(&[1, 1, 8, 2, 3, 4]),
            Err(Error::IndexOutOfRange { position: 1, .. })
        ));
        assert!(Report::decode(&[1, 1, 8, 0]).is_err());
        assert!(Report::decode(&[1, 1, 8, 101]).is_err());
        assert!(Report::decode(&[1, 1, 0, 1, 0]).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(
            set in prop::collection::btree_set(0u64..100_000, 1..=100),
            extra in 0u64..(1 << 31),
            positive: bool,
            bit: bool,
        ) {
            let indices: Vec<u64> = set.into_iter().collect();
            let d = indices[indices.len() - 1] + 1 + extra;
            let r = Report::new(d, &indices, if positive { 1 } else { -1 }, u64::from(bit)).unwrap();
            let bytes = r.encode();
            prop_assert_eq!(bytes.len(), r.encoded_len());
            prop_assert_eq!(Report::decode(&bytes).unwrap(), r);
        }

        #[test]
        fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(r) = Report::decode(&bytes) {
                prop_assert_eq!(r.encode(), bytes);
            }
        }
    }
}
