//! Multiple-testing corrections over a batch of p-values: Holm–Bonferroni (family-wise
//! error rate) and Benjamini–Hochberg (false discovery rate).

use crate::error::{Error, Result};
use crate::test::Alpha;

/// Which correction was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Correction {
    /// Holm's step-down Bonferroni: controls the family-wise error rate under any
    /// dependence between the tests.
    Holm,
    /// Benjamini–Hochberg step-up: controls the false discovery rate for independent or
    /// positively dependent tests.
    BenjaminiHochberg,
}

/// Adjusted p-values, in the order of the input.
#[derive(Debug, Clone, PartialEq)]
pub struct Adjusted {
    /// The correction applied.
    pub correction: Correction,
    /// The raw p-values.
    pub p_values: Vec<f64>,
    /// The adjusted p-values (same order): test i is rejected at level α iff
    /// `adjusted[i] ≤ α`.
    pub adjusted: Vec<f64>,
}

impl Adjusted {
    /// Which hypotheses are rejected at level `alpha` (family-wise for Holm, FDR for BH).
    #[must_use]
    pub fn rejected(&self, alpha: Alpha) -> Vec<bool> {
        self.adjusted.iter().map(|&p| p <= alpha.value()).collect()
    }

    /// `true` when at least one hypothesis is rejected at level `alpha`.
    #[must_use]
    pub fn any_rejected(&self, alpha: Alpha) -> bool {
        self.adjusted.iter().any(|&p| p <= alpha.value())
    }
}

fn check(p_values: &[f64]) -> Result<()> {
    for (index, &p) in p_values.iter().enumerate() {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidProbability {
                what: "p-values",
                index,
                value: p,
            });
        }
    }
    Ok(())
}

fn ascending_order(p: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| {
        let pa = p.get(a).copied().unwrap_or(1.0);
        let pb = p.get(b).copied().unwrap_or(1.0);
        pa.total_cmp(&pb).then(a.cmp(&b))
    });
    order
}

/// Holm–Bonferroni adjusted p-values: for the i-th smallest p (i from 1),
/// p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1) p₍ⱼ₎). Rejecting p̃ ≤ α controls the
/// family-wise error rate at α. An empty batch gives an empty result.
///
/// # Errors
/// [`Error::InvalidProbability`] for a p-value that is NaN or outside `[0, 1]`.
pub fn holm(p_values: &[f64]) -> Result<Adjusted> {
    check(p_values)?;
    let m = p_values.len();
    let order = ascending_order(p_values);
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0f64;
    for (rank, &idx) in order.iter().enumerate() {
        let p = p_values.get(idx).copied().unwrap_or(1.0);
        let value = ((m - rank) as f64 * p).min(1.0);
        running = running.max(value);
        if let Some(slot) = adjusted.get_mut(idx) {
            *slot = running;
        }
    }
    Ok(Adjusted {
        correction: Correction::Holm,
        p_values: p_values.to_vec(),
        adjusted,
    })
}

/// Benjamini–Hochberg adjusted p-values (q-values): for the i-th smallest p,
/// q₍ᵢ₎ = min_{j ≥ i} min(1, m p₍ⱼ₎ / j). Rejecting q ≤ α controls the false discovery
/// rate at α (scipy's `false_discovery_control(p, method='bh')`).
///
/// # Errors
/// [`Error::InvalidProbability`] for a p-value that is NaN or outside `[0, 1]`.
pub fn benjamini_hochberg(p_values: &[f64]) -> Result<Adjusted> {
    check(p_values)?;
    let m = p_values.len();
    let order = ascending_order(p_values);
    let mut adjusted = vec![0.0; m];
    let mut running = 1.0f64;
    for (rank, &idx) in order.iter().enumerate().rev() {
        let p = p_values.get(idx).copied().unwrap_or(1.0);
        let value = (m as f64 * p / (rank + 1) as f64).min(1.0);
        running = running.min(value);
        if let Some(slot) = adjusted.get_mut(idx) {
            *slot = running;
        }
    }
    Ok(Adjusted {
        correction: Correction::BenjaminiHochberg,
        p_values: p_values.to_vec(),
        adjusted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_by_hand() {
        let p = [0.01, 0.04, 0.03, 0.005];
        let a = holm(&p).unwrap();
        // sorted: 0.005 (×4 = 0.02), 0.01 (×3 = 0.03), 0.03 (×2 = 0.06), 0.04 (×1, max → 0.06)
        let expected = [0.03, 0.06, 0.06, 0.02];
        for (x, y) in a.adjusted.iter().zip(expected) {
            assert!((x - y).abs() < 1e-15, "{x} {y}");
        }
        let alpha = Alpha::new(0.05).unwrap();
        assert_eq!(a.rejected(alpha), vec![true, false, false, true]);
    }

    #[test]
    fn bh_by_hand() {
        let p = [0.01, 0.04, 0.03, 0.005];
        let a = benjamini_hochberg(&p).unwrap();
        // sorted 0.005·4/1 = 0.02, 0.01·4/2 = 0.02, 0.03·4/3 = 0.04, 0.04·4/4 = 0.04
        let expected = [0.02, 0.04, 0.04, 0.02];
        for (x, y) in a.adjusted.iter().zip(expected) {
            assert!((x - y).abs() < 1e-15, "{x} {y}");
        }
    }

    #[test]
    fn edge_cases() {
        assert!(holm(&[]).unwrap().adjusted.is_empty());
        assert!(benjamini_hochberg(&[]).unwrap().adjusted.is_empty());
        assert!(holm(&[f64::NAN]).is_err());
        assert!(benjamini_hochberg(&[1.5]).is_err());
        assert_eq!(holm(&[1.0, 1.0]).unwrap().adjusted, vec![1.0, 1.0]);
    }
}
