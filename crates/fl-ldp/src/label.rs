//! LabelDP: label protection for vertical federated learning (MindSpore Federated's
//! `LabelDP`), binary and one-hot labels.
//!
//! **Privacy claim.** [`LabelDp::new`]`(ε)` is ε-label-DP ([`Neighbouring::OneLabel`]):
//! two label vectors that differ in one example's label give output distributions within a
//! factor e^ε (each label is randomized independently by ε-LDP randomized response, binary
//! or k-ary). It protects labels only — not features, not the fact that an example is in
//! the data. Proof: `docs/proofs/fl-ldp/label-dp.md`.

use rand::CryptoRng;

use crate::binary::BinaryRandomizedResponse;
use crate::epsilon::Epsilon;
use crate::error::{Error, Result};
use crate::kary::{KaryRandomizedResponse, one_hot_classes};
use crate::label_value::LabelValue;
use crate::mechanism::{Neighbouring, PrivacyClaim};

/// How a label tensor is interpreted, decided by its shape as upstream does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LabelKind {
    /// Shape `[n]` or `[n, 1]`: one 0/1 label per example, flipped with probability
    /// 1/(1 + e^ε).
    Binary,
    /// Shape `[n, k]` with k ≥ 2: one one-hot row per example, k-ary randomized response
    /// on the hot index.
    OneHot {
        /// The number of classes k (columns).
        classes: usize,
    },
}

impl LabelKind {
    /// The kind of a label tensor of shape `shape` holding `len` elements.
    ///
    /// # Errors
    /// [`Error::InvalidShape`] for a rank other than 1 or 2 (or an element count that
    /// overflows); [`Error::LengthMismatch`] when the shape does not describe `len`
    /// elements; [`Error::EmptyInput`] for zero elements.
    pub fn from_shape(shape: &[usize], len: usize) -> Result<Self> {
        let kind = match *shape {
            [_] | [_, 1] => Self::Binary,
            [_, classes] if classes >= 2 => Self::OneHot { classes },
            _ => {
                return Err(Error::InvalidShape {
                    name: "labels",
                    shape: shape.to_vec(),
                    allowed: "[n], [n, 1] (binary) or [n, k] with k >= 2 (one-hot)",
                });
            }
        };
        let elements = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| Error::InvalidShape {
                name: "labels",
                shape: shape.to_vec(),
                allowed: "a shape whose element count fits in usize",
            })?;
        if elements != len {
            return Err(Error::LengthMismatch {
                name: "labels (product of the shape)",
                expected: elements,
                actual: len,
            });
        }
        if len == 0 {
            return Err(Error::EmptyInput { name: "labels" });
        }
        Ok(kind)
    }
}

/// LabelDP (MindSpore Federated `mindspore_federated.privacy.LabelDP`), with every row
/// validated and the caller's labels never modified.
///
/// ```
/// use fl_ldp::{Epsilon, LabelDp};
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// let dp = LabelDp::new(Epsilon::new(1.0)?);
/// assert!((dp.flip_probability() - 0.2689414214).abs() < 1e-10);
/// let mut rng = ChaCha20Rng::seed_from_u64(5); // fixed seed: example only
/// let binary = dp.privatize(&[0.0f32, 1.0, 1.0, 0.0, 1.0], &[5, 1], &mut rng)?;
/// assert_eq!(binary.len(), 5);
/// let one_hot = dp.privatize(&[1u8, 0, 0, 0, 0, 1], &[2, 3], &mut rng)?;
/// assert_eq!(one_hot.iter().filter(|&&v| v == 1).count(), 2);
/// // Every one-hot row is checked (upstream checks only the total number of ones).
/// assert!(dp.privatize(&[1u8, 1, 0, 0, 0, 0], &[2, 3], &mut rng).is_err());
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelDp {
    binary: BinaryRandomizedResponse,
}

impl LabelDp {
    /// LabelDP with privacy parameter ε (any finite ε ≥ 0; no clamping at 100).
    #[must_use]
    pub fn new(epsilon: Epsilon) -> Self {
        Self {
            binary: BinaryRandomizedResponse::new(epsilon),
        }
    }

    /// The requested ε.
    #[must_use]
    pub const fn epsilon(&self) -> Epsilon {
        self.binary.epsilon()
    }

    /// The binary flip probability 1/(1 + e^ε) (rounded up; exact coin value).
    #[must_use]
    pub fn flip_probability(&self) -> f64 {
        self.binary.flip_probability()
    }

    /// The per-label mechanism for binary labels (its law is the law of one label).
    #[must_use]
    pub const fn binary(&self) -> &BinaryRandomizedResponse {
        &self.binary
    }

    /// The per-label mechanism for one-hot labels with `classes` columns.
    ///
    /// # Errors
    /// As [`KaryRandomizedResponse::new`].
    pub fn one_hot(&self, classes: usize) -> Result<KaryRandomizedResponse> {
        KaryRandomizedResponse::new(self.binary.epsilon(), classes)
    }

    /// The label-DP claim for labels of the given kind.
    ///
    /// # Errors
    /// As [`KaryRandomizedResponse::new`] for one-hot labels.
    pub fn privacy(&self, kind: LabelKind) -> Result<PrivacyClaim> {
        let realised = match kind {
            LabelKind::Binary => self.binary.realised_epsilon(),
            LabelKind::OneHot { classes } => self.one_hot(classes)?.realised_epsilon(),
        };
        Ok(PrivacyClaim::pure(
            self.epsilon().value(),
            realised,
            Neighbouring::OneLabel,
        ))
    }

    /// Privatizes a row-major label tensor of shape `shape` (binary for `[n]` and `[n, 1]`,
    /// one-hot for `[n, k]` with k ≥ 2) and returns a new tensor of the same shape and type.
    ///
    /// # Errors
    /// See [`LabelKind::from_shape`]; for binary labels [`Error::InputOutOfDomain`] when an
    /// element is neither 0 nor 1; for one-hot labels also [`Error::InvalidOneHotRow`] for
    /// a row without exactly one 1. Everything is validated before any sampling.
    pub fn privatize<T: LabelValue, R: CryptoRng + ?Sized>(
        &self,
        labels: &[T],
        shape: &[usize],
        rng: &mut R,
    ) -> Result<Vec<T>> {
        match LabelKind::from_shape(shape, labels.len())? {
            LabelKind::Binary => {
                let bits = labels
                    .iter()
                    .enumerate()
                    .map(|(index, &v)| {
                        if v.is_one() {
                            Ok(true)
                        } else if v.is_zero() {
                            Ok(false)
                        } else {
                            Err(Error::InputOutOfDomain {
                                name: "labels",
                                index,
                                value: v.to_f64(),
                                allowed: "0 or 1",
                            })
                        }
                    })
                    .collect::<Result<Vec<bool>>>()?;
                Ok(self
                    .binary
                    .randomize_bits(&bits, rng)
                    .into_iter()
                    .map(|b| if b { T::one() } else { T::zero() })
                    .collect())
            }
            LabelKind::OneHot { classes } => {
                // Validates every row (values and exactly one 1) before sampling.
                one_hot_classes(labels, classes)?;
                self.one_hot(classes)?.randomize_one_hot(labels, rng)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn dp(eps: f64) -> LabelDp {
        LabelDp::new(Epsilon::new(eps).unwrap())
    }

    /// MindSpore §3.4 validation vectors and shape dispatch.
    #[test]
    fn upstream_validation_vectors() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let m = dp(1.0);
        assert!(matches!(
            m.privatize(&[0.0f32, 1.0, 2.0], &[3], &mut rng),
            Err(Error::InputOutOfDomain { index: 2, .. })
        ));
        assert!(matches!(
            m.privatize(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 0.0], &[2, 3], &mut rng),
            Err(Error::InvalidOneHotRow { row: 1, ones: 2 })
        ));
        // The upstream-accepted [[1,1,0],[0,0,0]] (global count = rows) is rejected here.
        assert!(matches!(
            m.privatize(&[1.0f32, 1.0, 0.0, 0.0, 0.0, 0.0], &[2, 3], &mut rng),
            Err(Error::InvalidOneHotRow { row: 0, ones: 2 })
        ));
        assert!(matches!(
            m.privatize(&[0.0f32; 2], &[2, 2, 1], &mut rng),
            Err(Error::InvalidShape { .. })
        ));
        assert!(m.privatize::<f32, _>(&[], &[0], &mut rng).is_err());
        assert!(m.privatize::<f32, _>(&[], &[0, 3], &mut rng).is_err());
        assert!(m.privatize(&[0.0f32; 3], &[4], &mut rng).is_err());
        assert!(m.privatize(&[f32::NAN], &[1], &mut rng).is_err());
        assert!(m.privatize(&[0u8; 4], &[usize::MAX, 2], &mut rng).is_err());
        for eps in [0.0, 1.0, 10.0] {
            let m = dp(eps);
            let out = m.privatize(&[0.0f32; 5], &[5, 1], &mut rng).unwrap();
            assert_eq!(out.len(), 5);
            let out = m.privatize(&[0.0f64; 5], &[5], &mut rng).unwrap();
            assert!(out.iter().all(|&v| v == 0.0 || v == 1.0));
            let one_hot: Vec<f32> = (0..15)
                .map(|i| if i % 3 == 0 { 1.0 } else { 0.0 })
                .collect();
            let out = m.privatize(&one_hot, &[5, 3], &mut rng).unwrap();
            assert_eq!(out.len(), 15);
            for row in out.chunks(3) {
                assert_eq!(row.iter().filter(|&&v| v == 1.0).count(), 1);
            }
        }
        assert_eq!(
            LabelKind::from_shape(&[4, 2], 8).unwrap(),
            LabelKind::OneHot { classes: 2 }
        );
        assert_eq!(
            LabelKind::from_shape(&[4, 1], 4).unwrap(),
            LabelKind::Binary
        );
    }

    #[test]
    fn never_mutates_and_keeps_types() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let labels = vec![true, false, true];
        let before = labels.clone();
        let out = dp(0.0).privatize(&labels, &[3], &mut rng).unwrap();
        assert_eq!(labels, before);
        assert_eq!(out.len(), 3);
        let ints = vec![0i64, 1, 0, 1];
        let out = dp(3.0).privatize(&ints, &[2, 2], &mut rng).unwrap();
        assert_eq!(out.iter().sum::<i64>(), 2);
        assert!(dp(2.0).privacy(LabelKind::Binary).unwrap().epsilon <= 2.0);
        let claim = dp(2.0).privacy(LabelKind::OneHot { classes: 10 }).unwrap();
        assert!(claim.epsilon <= 2.0);
        assert_eq!(claim.neighbouring, Neighbouring::OneLabel);
    }
}
