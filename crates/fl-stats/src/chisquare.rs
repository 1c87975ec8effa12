//! Pearson's chi-square (and the G-test) goodness of fit against given probabilities,
//! with merging of sparse cells and the p-value from the upper tail.

use statrs::function::gamma::{checked_gamma_lr, checked_gamma_ur};

use crate::error::{Error, PROBABILITY_SUM_TOLERANCE, Result};
use crate::special::compensated_sum;
use crate::test::{HypothesisTest, clamp_probability};

/// What to do with cells whose expected count is below
/// [`ChiSquareOptions::min_expected`] (the χ² approximation needs expected counts of
/// about 5 or more).
///
/// Merging depends only on the expected counts (n and the probabilities), never on the
/// observed counts, so the test keeps its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SparseCells {
    /// Merge neighbouring cells, in the given order, until every merged cell reaches the
    /// minimum (a short last group joins its predecessor). For ordered outputs (counts,
    /// discrete noise) this is tail merging. The default.
    #[default]
    MergeAdjacent,
    /// Pool the smallest cells (in expected count) into one cell until the pool and every
    /// remaining cell reach the minimum. Suits unordered categories.
    Pool,
    /// No merging (scipy's `chisquare`); the caller vouches for the approximation.
    Keep,
}

/// The divergence the statistic measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Divergence {
    /// Pearson's X² = Σ (O − E)² / E. The default.
    #[default]
    Pearson,
    /// The likelihood-ratio G = 2 Σ O ln(O / E) (G-test), same χ² limit.
    LogLikelihoodRatio,
}

/// Options of the chi-square goodness-of-fit test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChiSquareOptions {
    /// Sparse-cell policy (default: [`SparseCells::MergeAdjacent`]).
    pub sparse_cells: SparseCells,
    /// Minimum expected count per cell after merging (default 5).
    pub min_expected: f64,
    /// Which statistic (default: Pearson).
    pub divergence: Divergence,
    /// Parameters estimated from the data, subtracted from the degrees of freedom
    /// (default 0: the probabilities are fully specified).
    pub estimated_parameters: u64,
}

impl Default for ChiSquareOptions {
    fn default() -> Self {
        Self {
            sparse_cells: SparseCells::MergeAdjacent,
            min_expected: 5.0,
            divergence: Divergence::Pearson,
            estimated_parameters: 0,
        }
    }
}

/// Marks a cell of [`ChiSquareTest::cell_of`] that was dropped because both its
/// probability and its count are zero.
pub const DROPPED_CELL: usize = usize::MAX;

/// The result of a chi-square goodness-of-fit test.
#[derive(Debug, Clone, PartialEq)]
pub struct ChiSquareTest {
    /// X² (or G).
    pub statistic: f64,
    /// Upper-tail p-value P(χ²_df ≥ statistic), 0 when an impossible cell was observed.
    pub p_value: f64,
    /// Degrees of freedom: merged cells − 1 − estimated parameters.
    pub degrees_of_freedom: u64,
    /// Total number of observations n.
    pub samples: u64,
    /// Number of cells the statistic was computed over (after merging).
    pub cells: usize,
    /// For each input cell, the merged cell it went to ([`DROPPED_CELL`] for dropped ones).
    pub cell_of: Vec<usize>,
    /// The smallest expected count among the merged cells.
    pub min_expected: f64,
    /// Number of cells with probability 0 but a positive count: each proves the data did
    /// not come from the hypothesised law (statistic +∞, p-value 0).
    pub impossible_cells: usize,
    /// The statistic used.
    pub divergence: Divergence,
}

impl HypothesisTest for ChiSquareTest {
    fn name(&self) -> &'static str {
        match self.divergence {
            Divergence::Pearson => "pearson-chi-square",
            Divergence::LogLikelihoodRatio => "g-test",
        }
    }
    fn null_hypothesis(&self) -> &'static str {
        "the observations are independent draws from the given categorical law"
    }
    fn assumptions(&self) -> &'static str {
        "independent observations; the chi-square approximation needs expected counts of \
         about 5 or more per cell (sparse cells are merged unless SparseCells::Keep)"
    }
    fn statistic(&self) -> f64 {
        self.statistic
    }
    fn p_value(&self) -> f64 {
        self.p_value
    }
    fn sample_size(&self) -> u64 {
        self.samples
    }
    fn degrees_of_freedom(&self) -> Option<f64> {
        Some(self.degrees_of_freedom as f64)
    }
}

/// Largest number of degrees of freedom [`chi_square_sf`] accepts. The incomplete-gamma
/// series and continued fraction need O(√df) iterations, and beyond ~10¹⁶ the series'
/// counter stops advancing in f64 (it would never terminate); 10¹⁰ is far above any
/// number of cells a test can hold in memory.
pub const MAX_DEGREES_OF_FREEDOM: f64 = 1e10;

/// Upper tail of the chi-square law with `df` degrees of freedom at `x`: Q(df/2, x/2)
/// (statrs's continued fraction, accurate to ~10⁻¹³ relative far into the tail; never
/// computed as 1 − cdf).
///
/// # Errors
/// [`Error::InvalidParameter`] when `df` is not in (0, [`MAX_DEGREES_OF_FREEDOM`]] or `x`
/// is NaN.
pub fn chi_square_sf(x: f64, df: f64) -> Result<f64> {
    check_chi_square(x, df)?;
    if x <= 0.0 {
        return Ok(1.0);
    }
    if x == f64::INFINITY {
        return Ok(0.0);
    }
    Ok(clamp_probability(
        checked_gamma_ur(df / 2.0, x / 2.0).unwrap_or(0.0),
    ))
}

/// The arguments of [`chi_square_sf`] and [`chi_square_cdf`]: 0 < `df` ≤
/// [`MAX_DEGREES_OF_FREEDOM`] and `x` not NaN.
fn check_chi_square(x: f64, df: f64) -> Result<()> {
    if !(df > 0.0 && df <= MAX_DEGREES_OF_FREEDOM) {
        return Err(Error::InvalidParameter {
            name: "degrees of freedom",
            value: df,
            allowed: "a number in (0, 1e10]",
        });
    }
    if x.is_nan() {
        return Err(Error::InvalidParameter {
            name: "chi-square statistic",
            value: x,
            allowed: "a number (not NaN)",
        });
    }
    Ok(())
}

/// Lower tail of the chi-square law with `df` degrees of freedom at `x`: P(df/2, x/2)
/// (statrs's series, accurate far into the lower tail; never computed as 1 − sf). A
/// statistic in the lower tail means counts *less* variable than independent draws allow
/// (a sampler that forces its counts towards their expectation).
///
/// # Errors
/// [`Error::InvalidParameter`] when `df` is not in (0, [`MAX_DEGREES_OF_FREEDOM`]] or `x`
/// is NaN.
pub fn chi_square_cdf(x: f64, df: f64) -> Result<f64> {
    check_chi_square(x, df)?;
    if x <= 0.0 {
        return Ok(0.0);
    }
    if x == f64::INFINITY {
        return Ok(1.0);
    }
    Ok(clamp_probability(
        checked_gamma_lr(df / 2.0, x / 2.0).unwrap_or(1.0),
    ))
}

/// Validates a probability vector and returns its compensated sum.
pub(crate) fn check_probabilities(probabilities: &[f64]) -> Result<f64> {
    if probabilities.is_empty() {
        return Err(Error::Empty {
            what: "expected probabilities",
        });
    }
    for (index, &p) in probabilities.iter().enumerate() {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidProbability {
                what: "expected probabilities",
                index,
                value: p,
            });
        }
    }
    let sum = compensated_sum(probabilities.iter().copied());
    if (sum - 1.0).abs() > PROBABILITY_SUM_TOLERANCE {
        return Err(Error::ProbabilitiesDoNotSumToOne {
            sum,
            tolerance: PROBABILITY_SUM_TOLERANCE,
        });
    }
    Ok(sum)
}

/// Counts categorical samples (each in `0..categories`) into a histogram.
///
/// # Errors
/// [`Error::CategoryOutOfRange`] for a sample ≥ `categories`.
pub fn count_categories(
    samples: impl IntoIterator<Item = usize>,
    categories: usize,
) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; categories];
    for (index, category) in samples.into_iter().enumerate() {
        match counts.get_mut(category) {
            Some(c) => *c += 1,
            None => {
                return Err(Error::CategoryOutOfRange {
                    index,
                    category,
                    categories,
                });
            }
        }
    }
    Ok(counts)
}

/// Chi-square goodness of fit of observed counts against expected probabilities, with
/// the default options (Pearson, adjacent merging to expected counts ≥ 5).
///
/// # Errors
/// See [`chi_square_gof_with`].
pub fn chi_square_gof(observed: &[u64], probabilities: &[f64]) -> Result<ChiSquareTest> {
    chi_square_gof_with(observed, probabilities, &ChiSquareOptions::default())
}

/// Chi-square goodness of fit of categorical samples (each in
/// `0..probabilities.len()`) against expected probabilities, default options.
///
/// # Errors
/// [`Error::CategoryOutOfRange`] for a sample outside the categories, and those of
/// [`chi_square_gof_with`].
pub fn chi_square_gof_samples(
    samples: impl IntoIterator<Item = usize>,
    probabilities: &[f64],
) -> Result<ChiSquareTest> {
    let counts = count_categories(samples, probabilities.len())?;
    chi_square_gof(&counts, probabilities)
}

/// Chi-square goodness of fit of `observed` counts against `probabilities`.
///
/// H₀: the n = Σ observed observations are independent draws from the categorical law
/// `probabilities`. Expected counts are n·pᵢ/Σp; cells with pᵢ = 0 and no observation are
/// dropped; cells are merged per `options.sparse_cells`; the statistic is compared with
/// the χ² law with (cells − 1 − estimated parameters) degrees of freedom through its upper
/// tail. A cell with pᵢ = 0 but a positive count makes the statistic +∞ and p = 0 (a
/// result, not an error: the data contradict H₀ with certainty).
///
/// # Errors
/// [`Error::Empty`], [`Error::LengthMismatch`], [`Error::InvalidProbability`],
/// [`Error::ProbabilitiesDoNotSumToOne`] (tolerance [`PROBABILITY_SUM_TOLERANCE`]),
/// [`Error::CountOverflow`], [`Error::InvalidParameter`] for a negative or NaN
/// `min_expected`, and [`Error::TooFewSamples`] when n = 0 or fewer than
/// 2 + estimated parameters cells remain after merging.
pub fn chi_square_gof_with(
    observed: &[u64],
    probabilities: &[f64],
    options: &ChiSquareOptions,
) -> Result<ChiSquareTest> {
    if observed.len() != probabilities.len() {
        return Err(Error::LengthMismatch {
            what: "observed counts vs expected probabilities",
            expected: probabilities.len(),
            found: observed.len(),
        });
    }
    let sum_p = check_probabilities(probabilities)?;
    if !(options.min_expected >= 0.0 && options.min_expected.is_finite()) {
        return Err(Error::InvalidParameter {
            name: "min_expected",
            value: options.min_expected,
            allowed: "a finite number >= 0",
        });
    }
    let mut n: u64 = 0;
    for &o in observed {
        n = n.checked_add(o).ok_or(Error::CountOverflow)?;
    }
    if n == 0 {
        return Err(Error::TooFewSamples {
            what: "a chi-square test (observations)",
            needed: 1,
            found: 0,
        });
    }
    let nf = n as f64;
    let mut impossible_cells = 0usize;
    // Cells kept: (original index, observed, expected).
    let mut kept: Vec<(usize, u64, f64)> = Vec::with_capacity(observed.len());
    for (i, (&o, &p)) in observed.iter().zip(probabilities).enumerate() {
        if p == 0.0 {
            if o > 0 {
                impossible_cells += 1;
            }
            continue;
        }
        kept.push((i, o, nf * (p / sum_p)));
    }
    let groups = merge_cells(&kept, options);
    let cells = groups.len();
    let mut cell_of = vec![DROPPED_CELL; observed.len()];
    let mut merged: Vec<(u64, f64)> = Vec::with_capacity(cells);
    for (g, members) in groups.iter().enumerate() {
        let mut o_sum = 0u64;
        let mut e_parts = Vec::with_capacity(members.len());
        for &m in members {
            if let Some(&(orig, o, e)) = kept.get(m) {
                if let Some(slot) = cell_of.get_mut(orig) {
                    *slot = g;
                }
                o_sum += o;
                e_parts.push(e);
            }
        }
        merged.push((o_sum, compensated_sum(e_parts)));
    }
    let min_expected = merged.iter().map(|&(_, e)| e).fold(f64::INFINITY, f64::min);
    let df = (cells as u64).saturating_sub(1 + options.estimated_parameters);
    let (statistic, p_value) = if impossible_cells > 0 {
        (f64::INFINITY, 0.0)
    } else {
        if df == 0 {
            return Err(Error::TooFewSamples {
                what: "a chi-square test (cells after merging)",
                needed: 2 + options.estimated_parameters,
                found: cells as u64,
            });
        }
        let statistic = divergence(&merged, options.divergence);
        (statistic, chi_square_sf(statistic, df as f64)?)
    };
    Ok(ChiSquareTest {
        statistic,
        p_value,
        degrees_of_freedom: df,
        samples: n,
        cells,
        cell_of,
        min_expected,
        impossible_cells,
        divergence: options.divergence,
    })
}

/// X² or G over merged (observed, expected) cells.
fn divergence(merged: &[(u64, f64)], which: Divergence) -> f64 {
    match which {
        Divergence::Pearson => compensated_sum(merged.iter().map(|&(o, e)| {
            let d = o as f64 - e;
            d * d / e
        })),
        Divergence::LogLikelihoodRatio => {
            2.0 * compensated_sum(merged.iter().map(|&(o, e)| {
                if o == 0 {
                    0.0
                } else {
                    let of = o as f64;
                    of * (of / e).ln()
                }
            }))
        }
    }
    .max(0.0)
}

/// Groups of indices into `kept`, per the sparse-cell policy.
fn merge_cells(kept: &[(usize, u64, f64)], options: &ChiSquareOptions) -> Vec<Vec<usize>> {
    let min = options.min_expected;
    match options.sparse_cells {
        SparseCells::Keep => (0..kept.len()).map(|i| vec![i]).collect(),
        SparseCells::MergeAdjacent => {
            let mut groups: Vec<Vec<usize>> = Vec::new();
            let mut current: Vec<usize> = Vec::new();
            let mut current_e = 0.0;
            for (i, &(_, _, e)) in kept.iter().enumerate() {
                current.push(i);
                current_e += e;
                if current_e >= min {
                    groups.push(core::mem::take(&mut current));
                    current_e = 0.0;
                }
            }
            if !current.is_empty() {
                match groups.last_mut() {
                    Some(last) => last.append(&mut current),
                    None => groups.push(current),
                }
            }
            groups
        }
        SparseCells::Pool => {
            let mut order: Vec<usize> = (0..kept.len()).collect();
            order.sort_by(|&a, &b| {
                let ea = kept.get(a).map_or(0.0, |c| c.2);
                let eb = kept.get(b).map_or(0.0, |c| c.2);
                ea.total_cmp(&eb).then(a.cmp(&b))
            });
            let mut pool: Vec<usize> = Vec::new();
            let mut pool_e = 0.0;
            let mut rest: Vec<usize> = Vec::new();
            for &i in &order {
                let e = kept.get(i).map_or(0.0, |c| c.2);
                if e < min || (!pool.is_empty() && pool_e < min) {
                    pool.push(i);
                    pool_e += e;
                } else {
                    rest.push(i);
                }
            }
            rest.sort_unstable();
            pool.sort_unstable();
            let mut groups: Vec<Vec<usize>> = rest.into_iter().map(|i| vec![i]).collect();
            if !pool.is_empty() {
                groups.push(pool);
            }
            groups
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_tail_is_the_complement_of_the_upper_and_exact_far_out() {
        for (x, df) in [(0.5, 1.0), (3.0, 4.0), (90.0, 100.0), (1e4, 1e4)] {
            let (lo, hi) = (
                chi_square_cdf(x, df).unwrap(),
                chi_square_sf(x, df).unwrap(),
            );
            assert!((lo + hi - 1.0).abs() < 1e-12, "x = {x}, df = {df}");
        }
        // Far in the lower tail: P(χ²₂ ≤ x) = 1 − e^(−x/2) ≈ x/2 (not 0 from 1 − sf).
        let p = chi_square_cdf(2e-12, 2.0).unwrap();
        assert!((p / 1e-12 - 1.0).abs() < 1e-6, "{p}");
        // P(χ²₁₀₀ ≤ 40) ≈ 1.3e-7: tiny and positive.
        let p = chi_square_cdf(40.0, 100.0).unwrap();
        assert!(p > 1e-8 && p < 1e-6, "{p}");
        assert_eq!(chi_square_cdf(0.0, 3.0).unwrap(), 0.0);
        assert!(chi_square_cdf(f64::NAN, 3.0).is_err());
        assert!(chi_square_cdf(1.0, 0.0).is_err());
    }

    #[test]
    fn scipy_reference_small() {
        // scipy.stats.chisquare([16, 18, 16, 14, 12, 12]) = (2.0, 0.8491450360846096)
        let obs = [16u64, 18, 16, 14, 12, 12];
        let p = [1.0 / 6.0; 6];
        let t = chi_square_gof(&obs, &p).unwrap();
        assert!((t.statistic - 2.0).abs() < 1e-12);
        assert!((t.p_value - 0.849_145_036_084_609_6).abs() < 1e-14);
        assert_eq!(t.degrees_of_freedom, 5);
    }

    #[test]
    fn impossible_cell_gives_p_zero() {
        let t = chi_square_gof(&[10, 5, 1], &[0.5, 0.5, 0.0]).unwrap();
        assert_eq!(t.p_value, 0.0);
        assert_eq!(t.impossible_cells, 1);
        assert!(t.statistic.is_infinite());
        // A zero-probability cell with no observation is simply dropped.
        let t = chi_square_gof(&[10, 12, 0], &[0.5, 0.5, 0.0]).unwrap();
        assert_eq!(t.cells, 2);
        assert_eq!(t.cell_of[2], DROPPED_CELL);
    }

    #[test]
    fn adjacent_merging_reaches_the_minimum() {
        // Geometric-like tail: expected counts 50, 25, 12.5, 6.25, 3.125, 1.5625, ...
        let k = 12;
        let mut p: Vec<f64> = (0..k).map(|i| 0.5f64.powi(i + 1)).collect();
        let last = 1.0 - p.iter().take(k as usize - 1).sum::<f64>();
        p[k as usize - 1] = last;
        let obs: Vec<u64> = p.iter().map(|&x| (x * 100.0).round() as u64).collect();
        let t = chi_square_gof(&obs, &p).unwrap();
        assert!(t.min_expected >= 5.0);
        assert!(t.cells < k as usize);
        // Groups are contiguous and ordered.
        for w in t.cell_of.windows(2) {
            assert!(w[1] == w[0] || w[1] == w[0] + 1);
        }
        let pooled = chi_square_gof_with(
            &obs,
            &p,
            &ChiSquareOptions {
                sparse_cells: SparseCells::Pool,
                ..ChiSquareOptions::default()
            },
        )
        .unwrap();
        assert!(pooled.min_expected >= 5.0);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            chi_square_gof(&[1, 2], &[1.0]),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(matches!(chi_square_gof(&[], &[]), Err(Error::Empty { .. })));
        assert!(matches!(
            chi_square_gof(&[1, 2], &[0.6, 0.6]),
            Err(Error::ProbabilitiesDoNotSumToOne { .. })
        ));
        assert!(matches!(
            chi_square_gof(&[1, 2], &[f64::NAN, 0.5]),
            Err(Error::InvalidProbability { .. })
        ));
        assert!(matches!(
            chi_square_gof(&[0, 0], &[0.5, 0.5]),
            Err(Error::TooFewSamples { .. })
        ));
        // One cell only after merging.
        assert!(matches!(
            chi_square_gof(&[1, 2], &[0.5, 0.5]),
            Err(Error::TooFewSamples { .. })
        ));
        assert!(matches!(
            chi_square_gof_samples([0, 1, 7], &[0.5, 0.5]),
            Err(Error::CategoryOutOfRange { index: 2, .. })
        ));
        assert!(matches!(
            chi_square_gof(&[u64::MAX, 1], &[0.5, 0.5]),
            Err(Error::CountOverflow)
        ));
    }

    #[test]
    fn huge_degrees_of_freedom_are_rejected_not_looped_on() {
        // statrs's series would spin forever at df = x = 1e20 (1e20 + 1 == 1e20 in f64).
        assert!(chi_square_sf(1e20, 1e20).is_err());
        assert!(chi_square_sf(7.556e78, 7.556e78).is_err());
        let p = chi_square_sf(1e10, 1e10).unwrap();
        assert!((0.4..0.6).contains(&p), "{p}");
    }

    #[test]
    fn g_test_is_close_to_pearson_near_the_null() {
        let obs = [1010u64, 990, 1003, 997];
        let p = [0.25; 4];
        let x2 = chi_square_gof(&obs, &p).unwrap();
        let g = chi_square_gof_with(
            &obs,
            &p,
            &ChiSquareOptions {
                divergence: Divergence::LogLikelihoodRatio,
                ..ChiSquareOptions::default()
            },
        )
        .unwrap();
        assert!((x2.statistic - g.statistic).abs() < 1e-3);
        assert_eq!(g.name(), "g-test");
    }
}
