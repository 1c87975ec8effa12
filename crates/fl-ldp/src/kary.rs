//! k-ary randomized response (generalised randomized response, GRR / direct encoding), in
//! index form and one-hot form.
//!
//! **Privacy claim.** [`KaryRandomizedResponse::new`]`(ε, k)` is ε-LDP for any two input
//! classes ([`Neighbouring::AnyTwoInputs`]); used on labels it is ε-label-DP. The realised
//! ε is reported and never exceeds ε. Proof: `docs/proofs/fl-ldp/randomized-response.md`.

use rand::CryptoRng;

use crate::coin::{Bernoulli, uniform_below_u32};
use crate::epsilon::{Epsilon, Probability};
use crate::error::{Error, Result};
use crate::label_value::LabelValue;
use crate::mechanism::{
    FiniteInputs, FiniteOutputs, Mechanism, Neighbouring, PrivacyClaim, check_law_size,
};
use crate::numeric;

/// The largest number of categories (the uniform draw uses 32-bit Lemire reduction).
pub const MAX_CATEGORIES: usize = 1 << 32;

/// k-ary randomized response: keep the input class with probability
/// p1 = e^ε/(k − 1 + e^ε), report each other class with probability p2 = 1/(k − 1 + e^ε).
///
/// Implemented as "with probability μ = k·p2 replace the input by a class drawn uniformly
/// from all k classes (the input included)", which has exactly this law
/// (p1 = 1 − μ + μ/k, p2 = μ/k) and lets the sampler draw the coin and the uniform class
/// for every input and combine them branch-free, so the running time depends on neither
/// the input nor on whether it was kept. μ is rounded **up** (realised ε ≤ requested) and
/// is exactly 1 at ε = 0 (uniform output).
///
/// ```
/// use fl_ldp::{Epsilon, KaryRandomizedResponse};
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// let rr = KaryRandomizedResponse::new(Epsilon::new(1.0)?, 3)?;
/// assert!((rr.keep_probability() - 0.5761168848).abs() < 1e-10);
/// assert!((rr.other_probability() - 0.2119415576).abs() < 1e-10);
/// let mut rng = ChaCha20Rng::seed_from_u64(4); // fixed seed: example only
/// let out = rr.randomize(2, &mut rng)?;
/// assert!(out < 3);
/// let one_hot = rr.randomize_one_hot(&[0.0f32, 0.0, 1.0, 1.0, 0.0, 0.0], &mut rng)?;
/// assert_eq!(one_hot.iter().filter(|&&v| v == 1.0).count(), 2);
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KaryRandomizedResponse {
    epsilon: Epsilon,
    categories: u64,
    randomise: Bernoulli,
    realised: f64,
}

impl KaryRandomizedResponse {
    /// k-ary randomized response over `categories` = k classes with privacy parameter ε.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] unless 2 ≤ k ≤ 2^32.
    pub fn new(epsilon: Epsilon, categories: usize) -> Result<Self> {
        if !(2..=MAX_CATEGORIES).contains(&categories) {
            return Err(Error::InvalidCount {
                name: "categories",
                value: categories as i128,
                allowed: "between 2 and 2^32",
            });
        }
        let k = categories as u64;
        let mu = numeric::randomisation_probability(epsilon.value(), k);
        let realised = numeric::kary_realised_epsilon(mu, k).min(epsilon.value());
        let randomise = Bernoulli::new(Probability::new("randomisation_probability", mu)?);
        Ok(Self {
            epsilon,
            categories: k,
            randomise,
            realised,
        })
    }

    /// The requested ε.
    #[must_use]
    pub const fn epsilon(&self) -> Epsilon {
        self.epsilon
    }

    /// The realised ε: an upper bound on ln(p1/p2) for the probabilities in use; never
    /// above [`Self::epsilon`].
    #[must_use]
    pub const fn realised_epsilon(&self) -> f64 {
        self.realised
    }

    /// The number of classes k.
    #[must_use]
    pub const fn categories(&self) -> usize {
        self.categories as usize
    }

    /// μ: the probability of replacing the input by a uniform class (exact coin value).
    #[must_use]
    pub fn randomisation_probability(&self) -> f64 {
        self.randomise.probability()
    }

    /// p1 = P(output = input) = 1 − μ + μ/k (rounded to the nearest `f64`).
    #[must_use]
    pub fn keep_probability(&self) -> f64 {
        let mu = self.randomise.probability();
        (1.0 - mu) + mu / self.categories as f64
    }

    /// p2 = P(output = y) for each y ≠ input: μ/k (rounded to the nearest `f64`).
    #[must_use]
    pub fn other_probability(&self) -> f64 {
        self.randomise.probability() / self.categories as f64
    }

    /// P(output = `output` | input = `input`); 0 for an output outside `0..k`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `input ≥ k`.
    pub fn probability(&self, input: usize, output: usize) -> Result<f64> {
        self.check(input, "class")?;
        Ok(if output as u64 >= self.categories {
            0.0
        } else if input == output {
            self.keep_probability()
        } else {
            self.other_probability()
        })
    }

    fn check(&self, class: usize, name: &'static str) -> Result<()> {
        if class as u64 >= self.categories {
            return Err(Error::IndexOutOfRange {
                name,
                index: class,
                bound: self.categories(),
            });
        }
        Ok(())
    }

    /// One draw for a valid class (no check).
    #[inline(always)]
    fn draw<R: CryptoRng + ?Sized>(&self, class: u64, rng: &mut R) -> u64 {
        let r = rng.next_u64();
        let randomise = self.randomise.flip_with_word(r, rng);
        let uniform = uniform_below_u32(rng.next_u32(), self.categories, rng);
        let mask = u64::from(randomise).wrapping_neg();
        (uniform & mask) | (class & !mask)
    }

    /// A class drawn uniformly from `0..k` (the replacement draw of [`Self::randomize`]).
    pub(crate) fn randomize_uniform<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> usize {
        uniform_below_u32(rng.next_u32(), self.categories, rng) as usize
    }

    /// Randomizes one class index.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `class ≥ k`.
    pub fn randomize<R: CryptoRng + ?Sized>(&self, class: usize, rng: &mut R) -> Result<usize> {
        self.check(class, "class")?;
        Ok(self.draw(class as u64, rng) as usize)
    }

    /// Randomizes every class of `classes` independently (index form, batch path).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for the first class ≥ k (checked before any sampling: no
    /// partial output).
    pub fn randomize_classes<R: CryptoRng + ?Sized>(
        &self,
        classes: &[usize],
        rng: &mut R,
    ) -> Result<Vec<usize>> {
        if let Some(&bad) = classes.iter().find(|&&c| c as u64 >= self.categories) {
            return Err(Error::IndexOutOfRange {
                name: "classes",
                index: bad,
                bound: self.categories(),
            });
        }
        Ok(classes
            .iter()
            .map(|&c| self.draw(c as u64, rng) as usize)
            .collect())
    }

    /// Randomizes a row-major one-hot matrix with k columns (one row per example, exactly
    /// one 1 per row) and returns a one-hot matrix of the same shape and element type.
    ///
    /// # Errors
    /// [`Error::EmptyInput`] for no rows; [`Error::LengthMismatch`] when the length is not
    /// a multiple of k; [`Error::InputOutOfDomain`] for an element that is neither 0 nor 1;
    /// [`Error::InvalidOneHotRow`] for a row without exactly one 1. Every row is validated
    /// before any sampling.
    pub fn randomize_one_hot<T: LabelValue, R: CryptoRng + ?Sized>(
        &self,
        one_hot: &[T],
        rng: &mut R,
    ) -> Result<Vec<T>> {
        let classes = one_hot_classes(one_hot, self.categories())?;
        let mut out = vec![T::zero(); one_hot.len()];
        for (row, &class) in out.chunks_exact_mut(self.categories()).zip(&classes) {
            let y = self.draw(class as u64, rng) as usize;
            if let Some(cell) = row.get_mut(y) {
                *cell = T::one();
            }
        }
        Ok(out)
    }
}

/// The hot index of every row of a row-major one-hot matrix with `k` columns.
pub(crate) fn one_hot_classes<T: LabelValue>(one_hot: &[T], k: usize) -> Result<Vec<usize>> {
    if one_hot.is_empty() {
        return Err(Error::EmptyInput {
            name: "one-hot labels",
        });
    }
    if k == 0 || !one_hot.len().is_multiple_of(k) {
        return Err(Error::LengthMismatch {
            name: "one-hot labels (a multiple of the number of classes)",
            expected: (one_hot.len() / k.max(1) + 1) * k,
            actual: one_hot.len(),
        });
    }
    let mut classes = Vec::with_capacity(one_hot.len() / k);
    for (row_index, row) in one_hot.chunks_exact(k).enumerate() {
        let mut ones = 0usize;
        let mut hot = 0usize;
        for (j, &v) in row.iter().enumerate() {
            if v.is_one() {
                ones += 1;
                hot = j;
            } else if !v.is_zero() {
                return Err(Error::InputOutOfDomain {
                    name: "one-hot labels",
                    index: row_index * k + j,
                    value: v.to_f64(),
                    allowed: "0 or 1",
                });
            }
        }
        if ones != 1 {
            return Err(Error::InvalidOneHotRow {
                row: row_index,
                ones,
            });
        }
        classes.push(hot);
    }
    Ok(classes)
}

impl Mechanism for KaryRandomizedResponse {
    type Input = usize;
    type Output = usize;

    fn sample<R: CryptoRng + ?Sized>(&self, input: &usize, rng: &mut R) -> Result<usize> {
        self.randomize(*input, rng)
    }

    fn sample_many<R: CryptoRng + ?Sized>(
        &self,
        input: &usize,
        n: usize,
        rng: &mut R,
    ) -> Result<Vec<usize>> {
        self.check(*input, "class")?;
        Ok((0..n)
            .map(|_| self.draw(*input as u64, rng) as usize)
            .collect())
    }

    fn privacy(&self) -> PrivacyClaim {
        PrivacyClaim::pure(
            self.epsilon.value(),
            self.realised,
            Neighbouring::AnyTwoInputs,
        )
    }
}

impl FiniteOutputs for KaryRandomizedResponse {
    fn output_count(&self, _input: &usize) -> Result<usize> {
        Ok(self.categories())
    }

    fn output_index(&self, output: &usize) -> Result<usize> {
        self.check(*output, "output")?;
        Ok(*output)
    }

    fn output_probabilities(&self, input: &usize) -> Result<Vec<f64>> {
        self.check(*input, "class")?;
        check_law_size(self.categories())?;
        let mut law = vec![self.other_probability(); self.categories()];
        if let Some(p) = law.get_mut(*input) {
            *p = self.keep_probability();
        }
        Ok(law)
    }

    fn sample_counts<R: CryptoRng + ?Sized>(
        &self,
        input: &usize,
        n: u64,
        rng: &mut R,
    ) -> Result<Vec<u64>> {
        self.check(*input, "class")?;
        check_law_size(self.categories())?;
        let mut counts = vec![0u64; self.categories()];
        for _ in 0..n {
            if let Some(c) = counts.get_mut(self.draw(*input as u64, rng) as usize) {
                *c += 1;
            }
        }
        Ok(counts)
    }
}

impl FiniteInputs for KaryRandomizedResponse {
    fn inputs(&self) -> Result<Vec<usize>> {
        check_law_size(self.categories())?;
        Ok((0..self.categories()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::law_epsilon;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn rr(eps: f64, k: usize) -> KaryRandomizedResponse {
        KaryRandomizedResponse::new(Epsilon::new(eps).unwrap(), k).unwrap()
    }

    /// Upstream one-hot LabelDP vectors (MindSpore §3.4).
    #[test]
    fn upstream_keep_and_other_probabilities() {
        for (k, eps, p1, p2) in [
            (2, 1.0, 0.731_058_578_6, 0.268_941_421_4),
            (3, 0.0, 1.0 / 3.0, 1.0 / 3.0),
            (3, 1.0, 0.576_116_884_8, 0.211_941_557_6),
            (3, 5.0, 0.986_703_291_0, 0.006_648_354_5),
            (10, 1.0, 0.231_969_316_7, 0.085_336_742_6),
            (10, 5.0, 0.942_825_618_6, 0.006_352_709_0),
        ] {
            let m = rr(eps, k);
            assert!((m.keep_probability() - p1).abs() < 1e-10, "{k} {eps}");
            assert!((m.other_probability() - p2).abs() < 1e-10, "{k} {eps}");
            let total = m.keep_probability() + (k as f64 - 1.0) * m.other_probability();
            assert!((total - 1.0).abs() < 1e-14);
        }
    }

    #[test]
    fn validation() {
        use crate::mechanism::law_epsilon;
        let e = Epsilon::new(1.0).unwrap();
        assert!(matches!(
            KaryRandomizedResponse::new(e, 1),
            Err(Error::InvalidCount { .. })
        ));
        assert!(KaryRandomizedResponse::new(e, 0).is_err());
        assert!(KaryRandomizedResponse::new(e, MAX_CATEGORIES + 1).is_err());
        let m = rr(1.0, 3);
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        assert!(m.randomize(3, &mut rng).is_err());
        assert!(m.randomize_classes(&[0, 1, 7], &mut rng).is_err());
        assert!(m.probability(3, 0).is_err());
        assert_eq!(m.probability(0, 3).unwrap(), 0.0);
        assert!(matches!(
            m.randomize_one_hot(&[1.0f64, 0.0, 0.0, 1.0, 1.0, 0.0], &mut rng),
            Err(Error::InvalidOneHotRow { row: 1, ones: 2 })
        ));
        assert!(matches!(
            m.randomize_one_hot(&[0.0f64, 0.0, 0.0], &mut rng),
            Err(Error::InvalidOneHotRow { row: 0, ones: 0 })
        ));
        assert!(matches!(
            m.randomize_one_hot(&[1.0f64, 0.0], &mut rng),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(matches!(
            m.randomize_one_hot(&[1.0f64, 0.0, 2.0], &mut rng),
            Err(Error::InputOutOfDomain { index: 2, .. })
        ));
        assert!(m.randomize_one_hot::<f64, _>(&[], &mut rng).is_err());
        // Huge k samples but refuses to materialise its law.
        let huge = rr(1.0, MAX_CATEGORIES);
        assert!(huge.randomize(MAX_CATEGORIES - 1, &mut rng).unwrap() < MAX_CATEGORIES);
        assert!(huge.output_probabilities(&0).is_err());
        assert!(huge.inputs().is_err());
        assert!(huge.sample_counts(&0, 1, &mut rng).is_err());
        assert!(law_epsilon(&huge).is_err());
    }

    #[test]
    fn stable_at_extreme_epsilons() {
        for k in [2, 3, 10, 1000] {
            for eps in [0.0, 1e-12, 50.0, 700.0, 1e6] {
                let m = rr(eps, k);
                let mu = m.randomisation_probability();
                assert!(mu > 0.0 && mu <= 1.0);
                assert!(m.realised_epsilon() <= eps && m.realised_epsilon() >= 0.0);
                if k <= 10 {
                    let le = law_epsilon(&m).unwrap();
                    assert!(le.is_finite());
                    assert!(le <= eps + 1e-9 * eps.max(1.0), "{k} {eps} {le}");
                }
            }
            assert_eq!(rr(0.0, k).randomisation_probability(), 1.0);
            assert_eq!(rr(0.0, k).realised_epsilon(), 0.0);
        }
    }

    #[test]
    fn index_and_one_hot_forms_agree_in_shape() {
        let m = rr(2.0, 4);
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let out = m.randomize_classes(&[0, 1, 2, 3, 3], &mut rng).unwrap();
        assert_eq!(out.len(), 5);
        assert!(out.iter().all(|&c| c < 4));
        let labels: Vec<i32> = vec![0, 0, 1, 0, 1, 0, 0, 0];
        let oh = m.randomize_one_hot(&labels, &mut rng).unwrap();
        assert_eq!(oh.len(), 8);
        for row in oh.chunks(4) {
            assert_eq!(row.iter().filter(|&&v| v == 1).count(), 1);
            assert!(row.iter().all(|&v| v == 0 || v == 1));
        }
        let counts = m.sample_counts(&1, 10_000, &mut rng).unwrap();
        assert_eq!(counts.iter().sum::<u64>(), 10_000);
        assert!(counts[1] > counts[0] && counts[1] > counts[2]);
    }
}
