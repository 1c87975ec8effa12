//! Uniformity of random subsets: are the draws uniformly random subsets of K cells?
//!
//! Each draw is a subset of {0, …, K−1} of some size s (sizes may vary from draw to draw,
//! e.g. a mechanism that first draws s and then a subset of that size, as SignDS's
//! selection does with ν); the data are how often each cell was included. Under H₀ (given
//! its size, every draw is a uniformly random s-subset, independently of the others) the
//! inclusion counts Cⱼ have mean T/K (T = Σ sizes) and covariance σ²·(I − 11ᵀ/K) with
//! σ² = Σ_draws s(K − s)/(K(K − 1)) — sampling *without* replacement, so the counts vary
//! less than Pearson's multinomial model assumes. The statistic
//!
//! Q = Σⱼ (Cⱼ − T/K)² / σ²
//!
//! is asymptotically χ² with K − 1 degrees of freedom (a central limit theorem for the sum
//! of independent draws; the covariance is σ² times a projection of rank K − 1). Pearson's
//! X² on the same counts equals Q·σ²/(T/K) ≤ Q: it is conservative here (its size is below
//! α and it loses power), which is why this test exists.

use crate::chisquare::chi_square_sf;
use crate::error::{Error, Result};
use crate::special::compensated_sum;
use crate::test::{HypothesisTest, clamp_probability};

/// The result of [`subset_inclusion_test`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubsetInclusionTest {
    /// Q (+∞ when the counts contradict H₀ with certainty).
    pub statistic: f64,
    /// Upper-tail p-value P(χ²_{K−1} ≥ Q).
    pub p_value: f64,
    /// K − 1.
    pub degrees_of_freedom: u64,
    /// The number of draws.
    pub draws: u64,
    /// T = Σ sizes = Σ inclusion counts.
    pub inclusions: u64,
    /// σ² = Σ_draws s(K − s)/(K(K − 1)), the variance factor of the counts.
    pub variance: f64,
}

impl HypothesisTest for SubsetInclusionTest {
    fn name(&self) -> &'static str {
        "subset-inclusion-chi-square"
    }
    fn null_hypothesis(&self) -> &'static str {
        "given its size, every draw is a uniformly random subset of the cells, independently"
    }
    fn assumptions(&self) -> &'static str {
        "independent draws; the chi-square approximation needs many draws of sizes strictly \
         between 0 and K (expected inclusions of about 5 or more per cell)"
    }
    fn statistic(&self) -> f64 {
        self.statistic
    }
    fn p_value(&self) -> f64 {
        self.p_value
    }
    fn sample_size(&self) -> u64 {
        self.draws
    }
    fn degrees_of_freedom(&self) -> Option<f64> {
        Some(self.degrees_of_freedom as f64)
    }
}

/// Tests that random subsets of K = `inclusions.len()` cells are uniform given their
/// sizes: `inclusions[j]` is how many draws contained cell j, `sizes[s]` how many draws had
/// size s (entries beyond K must be 0). See the module documentation for the statistic.
///
/// When every draw is empty or full (σ² = 0) the counts are determined: p = 1 if they are
/// all equal, else p = 0 (statistic +∞).
///
/// ```
/// use fl_stats::{HypothesisTest, subset_inclusion_test};
///
/// // 10 draws of 2 cells out of 4; cell 0 was included 8 times.
/// let t = subset_inclusion_test(&[8, 5, 4, 3], &[0, 0, 10])?;
/// assert!((t.statistic - 4.2).abs() < 1e-12);
/// assert_eq!(t.degrees_of_freedom, 3);
/// assert!((t.p_value - 0.240_661_885_209_614_6).abs() < 1e-12);
/// # Ok::<(), fl_stats::Error>(())
/// ```
///
/// # Errors
/// [`Error::TooFewSamples`] for fewer than 2 cells or no draws;
/// [`Error::InvalidParameter`] when a size above K has draws, or when Σ inclusions ≠
/// Σ s·sizes\[s\] (the data cannot come from subsets of those sizes);
/// [`Error::CountOverflow`] when the totals do not fit in 64 bits.
pub fn subset_inclusion_test(inclusions: &[u64], sizes: &[u64]) -> Result<SubsetInclusionTest> {
    let k = inclusions.len();
    if k < 2 {
        return Err(Error::TooFewSamples {
            what: "a subset-inclusion test (cells)",
            needed: 2,
            found: k as u64,
        });
    }
    if let Some(s) = sizes.iter().skip(k + 1).position(|&c| c > 0) {
        return Err(Error::InvalidParameter {
            name: "subset size",
            value: (s + k + 1) as f64,
            allowed: "sizes between 0 and the number of cells K",
        });
    }
    let mut draws = 0u64;
    let mut total = 0u64;
    for (s, &c) in sizes.iter().enumerate().take(k + 1) {
        draws = draws.checked_add(c).ok_or(Error::CountOverflow)?;
        total = (s as u64)
            .checked_mul(c)
            .and_then(|x| total.checked_add(x))
            .ok_or(Error::CountOverflow)?;
    }
    if draws == 0 {
        return Err(Error::TooFewSamples {
            what: "a subset-inclusion test (draws)",
            needed: 1,
            found: 0,
        });
    }
    let mut included = 0u64;
    for &c in inclusions {
        included = included.checked_add(c).ok_or(Error::CountOverflow)?;
    }
    if included != total {
        return Err(Error::InvalidParameter {
            name: "sum of inclusion counts",
            value: included as f64,
            allowed: "the sum of the subset sizes (sum over s of s * sizes[s])",
        });
    }
    let kf = k as f64;
    let variance = compensated_sum(
        sizes
            .iter()
            .enumerate()
            .take(k + 1)
            .map(|(s, &c)| c as f64 * (s as f64) * (kf - s as f64) / (kf * (kf - 1.0))),
    );
    let mean = total as f64 / kf;
    let squares = compensated_sum(inclusions.iter().map(|&c| {
        let d = c as f64 - mean;
        d * d
    }));
    let df = (k - 1) as u64;
    let (statistic, p_value) = if variance > 0.0 {
        let q = squares / variance;
        (q, chi_square_sf(q, df as f64)?)
    } else if inclusions.iter().all(|&c| c == inclusions[0]) {
        (0.0, 1.0)
    } else {
        (f64::INFINITY, 0.0)
    };
    Ok(SubsetInclusionTest {
        statistic,
        p_value: clamp_probability(p_value),
        degrees_of_freedom: df,
        draws,
        inclusions: total,
        variance,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_example_and_pearson_relation() {
        // Σ (C − 5)² = 9 + 0 + 1 + 4 = 14; σ² = 10·2·2/12 = 10/3; Q = 4.2.
        let t = subset_inclusion_test(&[8, 5, 4, 3], &[0, 0, 10]).unwrap();
        assert!((t.statistic - 4.2).abs() < 1e-12);
        assert!((t.variance - 10.0 / 3.0).abs() < 1e-12);
        // Pearson's X² = 14/5 = 2.8 = Q·σ²/(T/K): smaller, hence conservative.
        let pearson = crate::chi_square_gof(&[8, 5, 4, 3], &[0.25; 4]).unwrap();
        assert!((pearson.statistic - t.statistic * t.variance / 5.0).abs() < 1e-12);
        // Singletons are multinomial draws: Q equals Pearson's X².
        let single = subset_inclusion_test(&[8, 5, 4, 3], &[0, 20]).unwrap();
        let pearson = crate::chi_square_gof(&[8, 5, 4, 3], &[0.25; 4]).unwrap();
        assert!((single.statistic - pearson.statistic).abs() < 1e-12);
        assert!((single.p_value - pearson.p_value).abs() < 1e-12);
    }

    #[test]
    fn degenerate_sizes() {
        // Only empty and full draws: the counts are fixed.
        let t = subset_inclusion_test(&[3, 3, 3], &[2, 0, 0, 3]).unwrap();
        assert_eq!((t.statistic, t.p_value), (0.0, 1.0));
        // Unequal counts cannot come from empty and full draws: certain rejection.
        let t = subset_inclusion_test(&[4, 3, 2], &[2, 0, 0, 3]).unwrap();
        assert_eq!((t.statistic, t.p_value), (f64::INFINITY, 0.0));
    }

    #[test]
    fn bad_input() {
        assert!(subset_inclusion_test(&[1], &[0, 1]).is_err());
        assert!(subset_inclusion_test(&[0, 0], &[0]).is_err());
        assert!(subset_inclusion_test(&[1, 1], &[0, 0, 0, 1]).is_err());
        assert!(subset_inclusion_test(&[1, 2], &[0, 2]).is_err());
        assert!(subset_inclusion_test(&[u64::MAX, 1], &[0, u64::MAX, 1]).is_err());
        assert!(subset_inclusion_test(&[1, 1], &[0, 0, 1, 0]).is_ok());
    }
}
