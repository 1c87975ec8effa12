//! Certified empirical lower bounds on the privacy parameter ε of a mechanism, from
//! samples of its outputs under two neighbouring inputs x and x′.
//!
//! For every event S (an output of a finite mechanism, or a threshold event {y ≤ t},
//! {y > t} of a real-valued one) an ε-DP mechanism satisfies
//! P[M(x) ∈ S] ≤ e^ε P[M(x′) ∈ S] and the same with x and x′ swapped. With one-sided
//! Clopper–Pearson bounds L (lower) and U (upper) on these probabilities,
//!
//! ε̂ = max over events S and both orders of ln(L(P[S|x]) / U(P[S|x′])),
//!
//! and, with a Bonferroni split of the error 1 − confidence over the 4·(number of events)
//! one-sided bounds, every bound holds simultaneously with probability ≥ confidence, so
//! P(ε̂ > ε) ≤ 1 − confidence for an ε-DP mechanism: ε̂ is a certified lower bound on the
//! mechanism's true ε. For a finite output space, the single-output events are the
//! Neyman–Pearson-optimal distinguishers, so ε̂ approaches the true ε as samples grow.
//!
//! The events must be fixed before looking at the samples (choose thresholds a priori or
//! on a separate batch of samples), otherwise the guarantee is lost.

use crate::binomial::cp_bounds_at;
use crate::chisquare::count_categories;
use crate::error::{Error, Result};
use crate::test::Confidence;

/// Which ratio attained the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// ln(L(P[S|x]) / U(P[S|x′])).
    FirstOverSecond,
    /// ln(L(P[S|x′]) / U(P[S|x])).
    SecondOverFirst,
}

/// The event and the two Clopper–Pearson bounds that attain [`EpsilonLowerBound::epsilon`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Witness {
    /// Index of the event (the output for finite mechanisms; for thresholds, 2·i for
    /// {y ≤ tᵢ} and 2·i + 1 for {y > tᵢ}).
    pub event: usize,
    /// Which order of the inputs.
    pub direction: Direction,
    /// Lower confidence bound on the numerator probability.
    pub numerator_lower: f64,
    /// Upper confidence bound on the denominator probability.
    pub denominator_upper: f64,
}

/// A certified lower bound on ε.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpsilonLowerBound {
    /// max(0, ε̂): with probability ≥ `confidence`, the true ε is at least this.
    pub epsilon: f64,
    /// The confidence level of the statement.
    pub confidence: f64,
    /// The event attaining the bound (`None` when no event gives a positive bound).
    pub witness: Option<Witness>,
    /// Number of events the Bonferroni correction ran over.
    pub events: usize,
    /// Samples under the first input.
    pub first_samples: u64,
    /// Samples under the second input.
    pub second_samples: u64,
}

impl EpsilonLowerBound {
    /// `true` when the data certify (at the stated confidence) that the mechanism is not
    /// `claimed`-DP for this pair of inputs.
    #[must_use]
    pub fn violates(&self, claimed: f64) -> bool {
        self.epsilon > claimed
    }
}

fn total(counts: &[u64]) -> Result<u64> {
    let mut n: u64 = 0;
    for &c in counts {
        n = n.checked_add(c).ok_or(Error::CountOverflow)?;
    }
    Ok(n)
}

/// The certified ε lower bound for a mechanism with finitely many outputs, from the
/// output counts under x (`first`) and under x′ (`second`); `first[o]` is how often output
/// o was seen under x.
///
/// # Errors
/// [`Error::Empty`], [`Error::LengthMismatch`], [`Error::CountOverflow`],
/// [`Error::TooFewSamples`] when either side has no samples, and
/// [`Error::InvalidParameter`] for more than 2⁵³ samples on a side.
pub fn epsilon_lower_bound(
    first: &[u64],
    second: &[u64],
    confidence: Confidence,
) -> Result<EpsilonLowerBound> {
    if first.is_empty() {
        return Err(Error::Empty {
            what: "output counts",
        });
    }
    if first.len() != second.len() {
        return Err(Error::LengthMismatch {
            what: "output counts under the two inputs",
            expected: first.len(),
            found: second.len(),
        });
    }
    let n1 = total(first)?;
    let n2 = total(second)?;
    let events: Vec<(u64, u64)> = first.iter().copied().zip(second.iter().copied()).collect();
    bound_from_events(&events, n1, n2, confidence)
}

/// [`epsilon_lower_bound`] from categorical output samples (each in `0..outputs`) under
/// the two inputs; the samples are streamed, not stored.
///
/// # Errors
/// [`Error::CategoryOutOfRange`] for a sample ≥ `outputs`, and those of
/// [`epsilon_lower_bound`].
pub fn epsilon_lower_bound_samples(
    first: impl IntoIterator<Item = usize>,
    second: impl IntoIterator<Item = usize>,
    outputs: usize,
    confidence: Confidence,
) -> Result<EpsilonLowerBound> {
    let a = count_categories(first, outputs)?;
    let b = count_categories(second, outputs)?;
    epsilon_lower_bound(&a, &b, confidence)
}

/// The certified ε lower bound for a real-valued mechanism, from its samples under x
/// (`first`) and x′ (`second`) and the threshold events {y ≤ t}, {y > t} for each
/// threshold t (fixed before the samples were drawn).
///
/// # Errors
/// [`Error::TooFewSamples`] for an empty sample, [`Error::Empty`] for no thresholds,
/// [`Error::NotFinite`] for a NaN sample or threshold.
pub fn epsilon_lower_bound_thresholds(
    first: &[f64],
    second: &[f64],
    thresholds: &[f64],
    confidence: Confidence,
) -> Result<EpsilonLowerBound> {
    if thresholds.is_empty() {
        return Err(Error::Empty { what: "thresholds" });
    }
    let sort = |what: &'static str, v: &[f64]| -> Result<Vec<f64>> {
        if v.is_empty() {
            return Err(Error::TooFewSamples {
                what,
                needed: 1,
                found: 0,
            });
        }
        if let Some((index, &value)) = v.iter().enumerate().find(|(_, x)| x.is_nan()) {
            return Err(Error::NotFinite { what, index, value });
        }
        let mut s = v.to_vec();
        s.sort_unstable_by(f64::total_cmp);
        Ok(s)
    };
    let a = sort("samples under the first input", first)?;
    let b = sort("samples under the second input", second)?;
    if let Some((index, &value)) = thresholds.iter().enumerate().find(|(_, x)| x.is_nan()) {
        return Err(Error::NotFinite {
            what: "thresholds",
            index,
            value,
        });
    }
    let (n1, n2) = (a.len() as u64, b.len() as u64);
    let mut events = Vec::with_capacity(2 * thresholds.len());
    for &t in thresholds {
        let below_a = a.partition_point(|&x| x <= t) as u64;
        let below_b = b.partition_point(|&x| x <= t) as u64;
        events.push((below_a, below_b));
        events.push((n1 - below_a, n2 - below_b));
    }
    bound_from_events(&events, n1, n2, confidence)
}

/// The certified ε lower bound from **one** event S and **one** order of the inputs, both
/// fixed before the samples were drawn (for example chosen from the mechanism's exact law
/// as its most distinguishing event): with `k₁` of `n₁` samples under x and `k₂` of `n₂`
/// under x′ in S,
///
/// ε̂ = ln(L(P[S|x]) / U(P[S|x′])),
///
/// where the error 1 − confidence is split over just the two one-sided Clopper–Pearson
/// bounds. Fixing the event in advance removes the Bonferroni factor over events (and the
/// factor 2 for the order) that [`epsilon_lower_bound`] pays for choosing after the fact,
/// so the bound is tighter for the same samples; choosing the event after looking at the
/// samples voids the guarantee.
///
/// # Errors
/// [`Error::TooFewSamples`] when either side has no samples, [`Error::CountExceedsTrials`]
/// when a count exceeds its trials, and [`Error::InvalidParameter`] for more than 2⁵³
/// samples on a side.
pub fn epsilon_lower_bound_event(
    first_in_event: u64,
    first_samples: u64,
    second_in_event: u64,
    second_samples: u64,
    confidence: Confidence,
) -> Result<EpsilonLowerBound> {
    for (k, n) in [
        (first_in_event, first_samples),
        (second_in_event, second_samples),
    ] {
        crate::binomial::check_trials(k, n)?;
    }
    let error_each = confidence.error_probability() / 2.0;
    let (lower, _) = cp_bounds_at(first_in_event, first_samples, error_each);
    let (_, upper) = cp_bounds_at(second_in_event, second_samples, error_each);
    let value = if lower > 0.0 && upper > 0.0 {
        (lower / upper).ln()
    } else {
        0.0
    };
    Ok(EpsilonLowerBound {
        epsilon: value.max(0.0),
        confidence: confidence.value(),
        witness: (value > 0.0).then_some(Witness {
            event: 0,
            direction: Direction::FirstOverSecond,
            numerator_lower: lower,
            denominator_upper: upper,
        }),
        events: 1,
        first_samples,
        second_samples,
    })
}

fn bound_from_events(
    events: &[(u64, u64)],
    n1: u64,
    n2: u64,
    confidence: Confidence,
) -> Result<EpsilonLowerBound> {
    for (what, n) in [
        ("samples under the first input", n1),
        ("samples under the second input", n2),
    ] {
        if n == 0 {
            return Err(Error::TooFewSamples {
                what,
                needed: 1,
                found: 0,
            });
        }
    }
    for n in [n1, n2] {
        if n > crate::binomial::MAX_TRIALS {
            return Err(Error::InvalidParameter {
                name: "samples per input",
                value: n as f64,
                allowed: "at most 2^53 samples",
            });
        }
    }
    let error_each = confidence.error_probability() / (4.0 * events.len() as f64);
    // Candidates: (optimistic value ln(p̂/q̂), event, direction). The certified value never
    // exceeds the optimistic one (L ≤ p̂ and U ≥ q̂), so candidates are examined in
    // decreasing optimistic order until none can beat the best certified value.
    let mut candidates: Vec<(f64, usize, Direction)> = Vec::with_capacity(2 * events.len());
    for (i, &(a, b)) in events.iter().enumerate() {
        let pa = a as f64 / n1 as f64;
        let pb = b as f64 / n2 as f64;
        if a > 0 {
            candidates.push(((pa / pb).ln(), i, Direction::FirstOverSecond));
        }
        if b > 0 {
            candidates.push(((pb / pa).ln(), i, Direction::SecondOverFirst));
        }
    }
    candidates.sort_by(|x, y| y.0.total_cmp(&x.0));
    let mut best = 0.0f64;
    let mut witness = None;
    for &(optimistic, i, direction) in &candidates {
        if optimistic <= best {
            break;
        }
        let Some(&(a, b)) = events.get(i) else {
            continue;
        };
        let (num_k, num_n, den_k, den_n) = match direction {
            Direction::FirstOverSecond => (a, n1, b, n2),
            Direction::SecondOverFirst => (b, n2, a, n1),
        };
        let (lower, _) = cp_bounds_at(num_k, num_n, error_each);
        let (_, upper) = cp_bounds_at(den_k, den_n, error_each);
        if lower > 0.0 && upper > 0.0 {
            let value = (lower / upper).ln();
            if value > best {
                best = value;
                witness = Some(Witness {
                    event: i,
                    direction,
                    numerator_lower: lower,
                    denominator_upper: upper,
                });
            }
        }
    }
    Ok(EpsilonLowerBound {
        epsilon: best,
        confidence: confidence.value(),
        witness,
        events: events.len(),
        first_samples: n1,
        second_samples: n2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_expected_counts_give_a_bound_below_epsilon() {
        // Binary RR at ε = 1 with the expected counts at n = 10^6 per side.
        let p = 1f64.exp() / (1.0 + 1f64.exp());
        let n = 1_000_000u64;
        let k = (p * n as f64).round() as u64;
        let c = Confidence::new(1.0 - 1e-6).unwrap();
        let b = epsilon_lower_bound(&[k, n - k], &[n - k, k], c).unwrap();
        assert!(b.epsilon < 1.0 && b.epsilon > 0.98, "{}", b.epsilon);
        assert!(b.witness.is_some());
        assert!(!b.violates(1.0));
        assert!(b.violates(0.5));
    }

    #[test]
    fn a_fixed_event_is_tighter_than_the_best_of_all_events() {
        // Binary RR at ε = 1, expected counts at n = 10^6 per side: the event fixed in
        // advance pays no Bonferroni factor, so its bound is higher, and still below ε.
        let p = 1f64.exp() / (1.0 + 1f64.exp());
        let n = 1_000_000u64;
        let k = (p * n as f64).round() as u64;
        let c = Confidence::new(1.0 - 1e-6).unwrap();
        let all = epsilon_lower_bound(&[k, n - k], &[n - k, k], c).unwrap();
        let fixed = epsilon_lower_bound_event(k, n, n - k, n, c).unwrap();
        assert!(
            fixed.epsilon > all.epsilon,
            "{} vs {}",
            fixed.epsilon,
            all.epsilon
        );
        assert!(
            fixed.epsilon < 1.0 && fixed.epsilon > 0.98,
            "{}",
            fixed.epsilon
        );
        assert_eq!(fixed.events, 1);
        // Negative control: the same counts certify a violation of ε = 0.9.
        assert!(fixed.violates(0.9));
        // The wrong order (the event is rarer under the first input) certifies nothing.
        let wrong = epsilon_lower_bound_event(n - k, n, k, n, c).unwrap();
        assert_eq!(wrong.epsilon, 0.0);
        assert!(wrong.witness.is_none());
    }

    #[test]
    fn a_fixed_event_validates_its_counts() {
        let c = Confidence::new(0.9).unwrap();
        assert!(epsilon_lower_bound_event(1, 0, 1, 2, c).is_err());
        assert!(epsilon_lower_bound_event(3, 2, 1, 2, c).is_err());
        assert!(epsilon_lower_bound_event(1, 2, 0, 0, c).is_err());
        assert!(epsilon_lower_bound_event(1, 1 << 54, 1, 2, c).is_err());
    }

    #[test]
    fn identical_laws_give_zero() {
        let c = Confidence::new(0.95).unwrap();
        let b = epsilon_lower_bound(&[500, 500], &[500, 500], c).unwrap();
        assert_eq!(b.epsilon, 0.0);
        assert!(b.witness.is_none());
    }

    #[test]
    fn thresholds_count_both_events() {
        let c = Confidence::new(0.9).unwrap();
        let x: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let y: Vec<f64> = (0..1000).map(|i| i as f64 + 500.0).collect();
        let b = epsilon_lower_bound_thresholds(&x, &y, &[499.5], c).unwrap();
        // {y ≤ 499.5}: 500 of 1000 under x, 0 under x′: a large certified ratio.
        assert!(b.epsilon > 3.0, "{}", b.epsilon);
        assert_eq!(b.events, 2);
    }

    #[test]
    fn bad_input() {
        let c = Confidence::new(0.9).unwrap();
        assert!(epsilon_lower_bound(&[], &[], c).is_err());
        assert!(epsilon_lower_bound(&[1], &[1, 2], c).is_err());
        assert!(epsilon_lower_bound(&[0, 0], &[1, 2], c).is_err());
        assert!(epsilon_lower_bound_thresholds(&[1.0], &[f64::NAN], &[0.0], c).is_err());
        assert!(epsilon_lower_bound_thresholds(&[1.0], &[1.0], &[], c).is_err());
        assert!(epsilon_lower_bound_samples([0, 3], [0, 1], 2, c).is_err());
    }
}
