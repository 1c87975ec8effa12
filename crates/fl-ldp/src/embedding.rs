//! EmbeddingDP: one-bit quantisation of an embedding followed by per-coordinate
//! randomized response (MindSpore Federated's `EmbeddingDP`, after MistNet).
//!
//! **Privacy claim.** With ε given, each output coordinate is (ε/2)-LDP
//! ([`Neighbouring::OneCoordinate`]: embeddings that differ in one coordinate), and a whole
//! D-dimensional embedding is (D·ε/2)-LDP ([`Neighbouring::AnyTwoInputs`], basic
//! composition; this is tight: two embeddings of opposite signs in every coordinate reach
//! it). Without ε (quantisation only) there is **no** differential privacy. The claim
//! protects the embedding, not the raw features behind it beyond post-processing. Proof:
//! `docs/proofs/fl-ldp/embedding-dp.md`.

use rand::CryptoRng;

use crate::binary::BinaryRandomizedResponse;
use crate::epsilon::Epsilon;
use crate::error::{Error, Result};
use crate::mechanism::{BitProduct, Mechanism, Neighbouring, PrivacyClaim};
use crate::numeric;

/// EmbeddingDP: x > 0 → 1, else 0; then, if ε is given, each bit goes through binary
/// randomized response at ε/2: P(1 → 1) = p = e^(ε/2)/(1 + e^(ε/2)),
/// P(0 → 1) = q = 1/(1 + e^(ε/2)).
///
/// The caller's embedding is never modified (upstream quantises the input tensor in
/// place). NaN coordinates are an error (upstream passes them through quantisation
/// unchanged); ±∞ quantise by sign.
///
/// ```
/// use fl_ldp::{EmbeddingDp, Epsilon};
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// assert_eq!(EmbeddingDp::quantise(&[1.5f32, -0.6, 7.0, -10.0])?, vec![1, 0, 1, 0]);
/// let dp = EmbeddingDp::new(Some(Epsilon::new(2.0)?));
/// assert!((dp.one_to_one_probability().unwrap_or(0.0) - 0.7310585786).abs() < 1e-10);
/// let mut rng = ChaCha20Rng::seed_from_u64(6); // fixed seed: example only
/// let bits = dp.privatize(&[0.3f64, -2.0, 0.0], &mut rng)?;
/// assert!(bits.iter().all(|&b| b <= 1));
/// assert!(dp.per_vector_epsilon(3) <= 3.0);
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmbeddingDp {
    epsilon: Option<Epsilon>,
    rr: Option<BinaryRandomizedResponse>,
}

impl EmbeddingDp {
    /// EmbeddingDP with privacy parameter ε (`None`: quantisation only, no privacy).
    #[must_use]
    pub fn new(epsilon: Option<Epsilon>) -> Self {
        let rr = epsilon.map(|e| {
            // ε/2, rounded down (exact except for subnormal ε).
            let mut half = e.value() * 0.5;
            if half * 2.0 > e.value() {
                half = half.next_down();
            }
            BinaryRandomizedResponse::new(Epsilon::new(half).unwrap_or(Epsilon::ZERO))
        });
        Self { epsilon, rr }
    }

    /// Quantisation only (upstream's `eps=None`): no differential privacy.
    #[must_use]
    pub fn quantise_only() -> Self {
        Self::new(None)
    }

    /// The requested ε, if any.
    #[must_use]
    pub const fn epsilon(&self) -> Option<Epsilon> {
        self.epsilon
    }

    /// p = P(output 1 | quantised 1) = e^(ε/2)/(1 + e^(ε/2)); `None` without ε.
    #[must_use]
    pub fn one_to_one_probability(&self) -> Option<f64> {
        self.rr.map(|rr| rr.keep_probability())
    }

    /// q = P(output 1 | quantised 0) = 1/(1 + e^(ε/2)) (rounded up); `None` without ε.
    #[must_use]
    pub fn zero_to_one_probability(&self) -> Option<f64> {
        self.rr.map(|rr| rr.flip_probability())
    }

    /// The per-coordinate randomized response (at ε/2), if ε was given.
    #[must_use]
    pub const fn coordinate_mechanism(&self) -> Option<&BinaryRandomizedResponse> {
        self.rr.as_ref()
    }

    /// The realised ε of one coordinate (≤ ε/2); infinite without ε.
    #[must_use]
    pub fn per_coordinate_epsilon(&self) -> f64 {
        self.rr.map_or(f64::INFINITY, |rr| rr.realised_epsilon())
    }

    /// The realised ε of a whole `dimension`-coordinate embedding (D times the
    /// per-coordinate ε, rounded up; ≤ D·ε/2); infinite without ε.
    #[must_use]
    pub fn per_vector_epsilon(&self, dimension: usize) -> f64 {
        let per = self.per_coordinate_epsilon();
        if per == 0.0 || dimension == 0 {
            return 0.0;
        }
        numeric::up(per * dimension as f64, 1)
    }

    /// The claim for one whole embedding of `dimension` coordinates.
    #[must_use]
    pub fn per_vector_privacy(&self, dimension: usize) -> PrivacyClaim {
        let requested = self
            .epsilon
            .map_or(f64::INFINITY, |e| e.value() * 0.5 * dimension as f64);
        PrivacyClaim::pure(
            requested,
            self.per_vector_epsilon(dimension).min(requested),
            Neighbouring::AnyTwoInputs,
        )
    }

    /// One-bit quantisation: 1 where x > 0, else 0 (±∞ by sign).
    ///
    /// # Errors
    /// [`Error::NonFiniteInput`] for the first NaN coordinate.
    pub fn quantise<T: Copy + Into<f64>>(embedding: &[T]) -> Result<Vec<u8>> {
        embedding
            .iter()
            .enumerate()
            .map(|(index, &x)| {
                let x: f64 = x.into();
                if x.is_nan() {
                    Err(Error::NonFiniteInput {
                        name: "embedding",
                        index,
                        value: x,
                    })
                } else {
                    Ok(u8::from(x > 0.0))
                }
            })
            .collect()
    }

    /// Quantises and randomizes an embedding of any shape (flattened, row-major); returns
    /// one bit (0 or 1) per coordinate. The input is not modified.
    ///
    /// # Errors
    /// [`Error::NonFiniteInput`] for a NaN coordinate (no partial output).
    pub fn privatize<T: Copy + Into<f64>, R: CryptoRng + ?Sized>(
        &self,
        embedding: &[T],
        rng: &mut R,
    ) -> Result<Vec<u8>> {
        let mut out = vec![0u8; embedding.len()];
        self.privatize_into(embedding, &mut out, rng)?;
        Ok(out)
    }

    /// As [`EmbeddingDp::privatize`], writing into `out` (same length).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::NonFiniteInput`] for a
    /// NaN coordinate. On error `out` holds no output (it is zeroed).
    pub fn privatize_into<T: Copy + Into<f64>, R: CryptoRng + ?Sized>(
        &self,
        embedding: &[T],
        out: &mut [u8],
        rng: &mut R,
    ) -> Result<()> {
        if out.len() != embedding.len() {
            return Err(Error::LengthMismatch {
                name: "output buffer",
                expected: embedding.len(),
                actual: out.len(),
            });
        }
        let mut nan = None;
        match &self.rr {
            Some(rr) => {
                let coin = rr.flip_coin();
                for (i, (o, &x)) in out.iter_mut().zip(embedding).enumerate() {
                    let x: f64 = x.into();
                    if x.is_nan() && nan.is_none() {
                        nan = Some(i);
                    }
                    let r = rng.next_u64();
                    *o = u8::from(x > 0.0) ^ u8::from(coin.flip_with_word(r, rng));
                }
            }
            None => {
                for (i, (o, &x)) in out.iter_mut().zip(embedding).enumerate() {
                    let x: f64 = x.into();
                    if x.is_nan() && nan.is_none() {
                        nan = Some(i);
                    }
                    *o = u8::from(x > 0.0);
                }
            }
        }
        if let Some(index) = nan {
            out.fill(0);
            return Err(Error::NonFiniteInput {
                name: "embedding",
                index,
                value: f64::NAN,
            });
        }
        Ok(())
    }
}

impl Mechanism for EmbeddingDp {
    type Input = [f64];
    type Output = Vec<u8>;

    fn sample<R: CryptoRng + ?Sized>(&self, input: &[f64], rng: &mut R) -> Result<Vec<u8>> {
        self.privatize(input, rng)
    }

    /// Per coordinate: ε/2 (realised) for embeddings differing in one coordinate. See
    /// [`EmbeddingDp::per_vector_privacy`] for the whole-vector claim.
    fn privacy(&self) -> PrivacyClaim {
        let requested = self.epsilon.map_or(f64::INFINITY, |e| e.value() * 0.5);
        PrivacyClaim::pure(
            requested,
            self.per_coordinate_epsilon(),
            Neighbouring::OneCoordinate,
        )
    }
}

impl BitProduct for EmbeddingDp {
    fn one_probabilities(&self, input: &[f64]) -> Result<Vec<f64>> {
        let bits = Self::quantise(input)?;
        Ok(bits
            .iter()
            .map(|&b| match &self.rr {
                Some(rr) => rr.probability(b == 1, true),
                None => f64::from(b),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn dp(eps: f64) -> EmbeddingDp {
        EmbeddingDp::new(Some(Epsilon::new(eps).unwrap()))
    }

    /// MindSpore §2.3 vectors.
    #[test]
    fn upstream_vectors() {
        assert_eq!(
            EmbeddingDp::quantise(&[1.5f64, -0.6, 7.0, -10.0]).unwrap(),
            vec![1, 0, 1, 0]
        );
        assert_eq!(
            EmbeddingDp::quantise(&[-4.0f32, 1.3, -0.02, 32.0, 0.0]).unwrap(),
            vec![0, 1, 0, 1, 0]
        );
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        assert_eq!(
            EmbeddingDp::quantise_only()
                .privatize(&[-4.0f32, 1.3, -0.02, 32.0, 0.0], &mut rng)
                .unwrap(),
            vec![0, 1, 0, 1, 0]
        );
        for (eps, p, q) in [
            (0.0, 0.5, 0.5),
            (1.0, 0.622_459_331_2, 0.377_540_668_8),
            (2.0, 0.731_058_578_6, 0.268_941_421_4),
            (5.0, 0.924_141_820_0, 0.075_858_180_0),
            (10.0, 0.993_307_149_1, 0.006_692_850_9),
        ] {
            let m = dp(eps);
            assert!(
                (m.one_to_one_probability().unwrap() - p).abs() < 1e-10,
                "{eps}"
            );
            assert!(
                (m.zero_to_one_probability().unwrap() - q).abs() < 1e-10,
                "{eps}"
            );
        }
    }

    #[test]
    fn claims_and_validation() {
        let m = dp(2.0);
        assert!(m.per_coordinate_epsilon() <= 1.0);
        assert!(m.per_vector_epsilon(10) <= 10.0);
        assert!(m.per_vector_epsilon(10) > 9.99);
        assert_eq!(m.privacy().neighbouring, Neighbouring::OneCoordinate);
        assert_eq!(
            m.per_vector_privacy(4).neighbouring,
            Neighbouring::AnyTwoInputs
        );
        assert!(m.per_vector_privacy(4).epsilon <= 4.0);
        assert_eq!(
            EmbeddingDp::quantise_only().per_coordinate_epsilon(),
            f64::INFINITY
        );
        assert_eq!(dp(0.0).per_vector_epsilon(1000), 0.0);
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        assert!(matches!(
            m.privatize(&[0.0, f64::NAN], &mut rng),
            Err(Error::NonFiniteInput { index: 1, .. })
        ));
        let mut out = [7u8; 2];
        assert!(
            m.privatize_into(&[0.0, f64::NAN], &mut out, &mut rng)
                .is_err()
        );
        assert_eq!(out, [0, 0]);
        assert!(m.privatize_into(&[0.0], &mut out, &mut rng).is_err());
        assert_eq!(
            m.privatize(&[f64::INFINITY, f64::NEG_INFINITY], &mut rng)
                .unwrap()
                .len(),
            2
        );
        assert!(m.privatize::<f64, _>(&[], &mut rng).unwrap().is_empty());
        let probs = m.one_probabilities(&[1.0, -1.0]).unwrap();
        assert_eq!(probs[0], m.one_to_one_probability().unwrap());
        assert_eq!(probs[1], m.zero_to_one_probability().unwrap());
        assert_eq!(
            EmbeddingDp::quantise_only()
                .one_probabilities(&[1.0, -1.0])
                .unwrap(),
            vec![1.0, 0.0]
        );
    }

    #[test]
    fn input_is_not_mutated() {
        let input = vec![0.5f64, -0.5, 2.0];
        let copy = input.clone();
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let _ = dp(1.0).privatize(&input, &mut rng).unwrap();
        let _ = EmbeddingDp::quantise_only()
            .privatize(&input, &mut rng)
            .unwrap();
        assert_eq!(input, copy);
    }

    #[test]
    fn stable_at_extreme_epsilons() {
        for eps in [0.0, 1e-12, 50.0, 700.0, 1e6] {
            let m = dp(eps);
            let q = m.zero_to_one_probability().unwrap();
            assert!(q > 0.0 && q <= 0.5);
            assert!(m.per_coordinate_epsilon() <= eps / 2.0);
            assert!(m.per_vector_epsilon(1_000_000).is_finite());
        }
    }
}
