//! Pearson's chi-square test of independence on a contingency table (rows × columns of
//! counts), with pooling of sparse rows and columns.
//!
//! fl-audit uses it for serial independence: the table of non-overlapping pairs of
//! consecutive outputs (Y₂ₜ, Y₂ₜ₊₁) of a mechanism. Under "the outputs are independent
//! and identically distributed" the pairs are independent draws of a pair of independent
//! variables, whatever their (unknown) marginal law, so the test needs no law at all.

use crate::chisquare::chi_square_sf;
use crate::error::{Error, Result};
use crate::test::{HypothesisTest, clamp_probability};

/// The result of [`chi_square_independence`].
#[derive(Debug, Clone, PartialEq)]
pub struct IndependenceTest {
    /// Pearson's X² = Σ (O − E)²/E with E = row total · column total / n.
    pub statistic: f64,
    /// Upper-tail p-value P(χ²_df ≥ X²); 1 when the table has fewer than two non-empty
    /// rows or columns (nothing can depend on a constant).
    pub p_value: f64,
    /// (rows − 1)(columns − 1) after pooling (0 for a degenerate table).
    pub degrees_of_freedom: u64,
    /// n, the sum of the table.
    pub samples: u64,
    /// Rows and columns the statistic was computed over (after dropping empty ones and
    /// pooling sparse ones).
    pub shape: (usize, usize),
    /// The smallest expected count of the pooled table (below 5 only when a 2 × 2 table
    /// was still sparse: the χ² approximation is then rough).
    pub min_expected: f64,
}

impl HypothesisTest for IndependenceTest {
    fn name(&self) -> &'static str {
        "chi-square-independence"
    }
    fn null_hypothesis(&self) -> &'static str {
        "the row and the column category of each observation are independent"
    }
    fn assumptions(&self) -> &'static str {
        "independent observations; the chi-square approximation needs expected counts of \
         about 5 or more (sparse rows and columns are pooled from the margins only)"
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

/// The minimum expected count the pooling aims for.
const MIN_EXPECTED: f64 = 5.0;

/// Groups of categories (by original index) and their totals, the smallest merged into
/// the next smallest.
fn merge_smallest(groups: &mut Vec<(Vec<usize>, u64)>) {
    groups.sort_by_key(|g| g.1);
    if groups.len() >= 2 {
        let first = groups.remove(0);
        groups[0].0.extend(first.0);
        groups[0].1 += first.1;
    }
}

/// Pearson's chi-square test of independence of the rows and columns of `table`, a
/// `rows` × `columns` contingency table of counts in row-major order.
///
/// Empty rows and columns are dropped. While the smallest expected count
/// (smallest row total × smallest column total / n) is below 5, the smallest row or column
/// (whichever total is smaller, on a side that still has three or more) is pooled with the
/// next smallest. Pooling looks only at the margins, which under independence carry no
/// information about the dependence (the test is conditional on them), so it keeps the
/// level. X² is then compared with χ² at (r − 1)(c − 1) degrees of freedom.
///
/// # Errors
/// [`Error::LengthMismatch`] when `table.len() != rows × columns`, [`Error::Empty`] for
/// zero rows or columns, [`Error::CountOverflow`] when the total does not fit in 64 bits.
pub fn chi_square_independence(
    table: &[u64],
    rows: usize,
    columns: usize,
) -> Result<IndependenceTest> {
    if rows == 0 || columns == 0 {
        return Err(Error::Empty {
            what: "contingency table (rows and columns)",
        });
    }
    let cells = rows.checked_mul(columns).ok_or(Error::CountOverflow)?;
    if table.len() != cells {
        return Err(Error::LengthMismatch {
            what: "contingency table (rows x columns)",
            expected: cells,
            found: table.len(),
        });
    }
    let mut n = 0u64;
    for &c in table {
        n = n.checked_add(c).ok_or(Error::CountOverflow)?;
    }
    let total = |r: usize, c: usize| table[r * columns + c];
    let mut row_groups: Vec<(Vec<usize>, u64)> = (0..rows)
        .map(|r| (vec![r], (0..columns).map(|c| total(r, c)).sum::<u64>()))
        .filter(|g| g.1 > 0)
        .collect();
    let mut column_groups: Vec<(Vec<usize>, u64)> = (0..columns)
        .map(|c| (vec![c], (0..rows).map(|r| total(r, c)).sum::<u64>()))
        .filter(|g| g.1 > 0)
        .collect();
    let degenerate = |rows: usize, columns: usize| IndependenceTest {
        statistic: 0.0,
        p_value: 1.0,
        degrees_of_freedom: 0,
        samples: n,
        shape: (rows, columns),
        min_expected: n as f64,
    };
    let smallest = |g: &[(Vec<usize>, u64)]| g.iter().map(|x| x.1).min().unwrap_or(0);
    loop {
        if row_groups.len() < 2 || column_groups.len() < 2 {
            return Ok(degenerate(row_groups.len(), column_groups.len()));
        }
        let (r_min, c_min) = (smallest(&row_groups), smallest(&column_groups));
        if r_min as f64 * c_min as f64 / n as f64 >= MIN_EXPECTED {
            break;
        }
        let pool_rows = row_groups.len() >= 3 && (r_min <= c_min || column_groups.len() < 3);
        if pool_rows {
            merge_smallest(&mut row_groups);
        } else if column_groups.len() >= 3 {
            merge_smallest(&mut column_groups);
        } else {
            break;
        }
    }
    let nf = n as f64;
    let mut statistic = 0.0;
    let mut min_expected = f64::INFINITY;
    for (rs, rt) in &row_groups {
        for (cs, ct) in &column_groups {
            let observed: u64 = rs
                .iter()
                .flat_map(|&r| cs.iter().map(move |&c| (r, c)))
                .map(|(r, c)| total(r, c))
                .sum();
            let expected = *rt as f64 * *ct as f64 / nf;
            min_expected = min_expected.min(expected);
            let d = observed as f64 - expected;
            statistic += d * d / expected;
        }
    }
    let df = ((row_groups.len() - 1) * (column_groups.len() - 1)) as u64;
    let p_value = clamp_probability(chi_square_sf(statistic, df as f64)?);
    Ok(IndependenceTest {
        statistic,
        p_value,
        degrees_of_freedom: df,
        samples: n,
        shape: (row_groups.len(), column_groups.len()),
        min_expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_by_two_by_hand() {
        // [[30, 10], [20, 40]]: n = 100, rows 40/60, columns 50/50; E = 20, 20, 30, 30.
        // X² = 100/20 + 100/20 + 100/30 + 100/30 = 16.667 on 1 df.
        let t = chi_square_independence(&[30, 10, 20, 40], 2, 2).unwrap();
        assert!((t.statistic - 50.0 / 3.0).abs() < 1e-12, "{t:?}");
        assert_eq!(t.degrees_of_freedom, 1);
        assert!(
            (t.p_value - 4.455_709_060_405_608e-5).abs() < 1e-15,
            "{}",
            t.p_value
        );
        // An exactly independent table.
        let t = chi_square_independence(&[10, 20, 30, 60], 2, 2).unwrap();
        assert_eq!(t.statistic, 0.0);
        assert_eq!(t.p_value, 1.0);
    }

    #[test]
    fn empty_and_sparse_categories_are_dropped_or_pooled() {
        // Column 2 is empty, row 2 is tiny: pooled with the next smallest row.
        let t = chi_square_independence(&[500, 500, 0, 500, 500, 0, 1, 0, 0], 3, 3).unwrap();
        assert_eq!(t.shape, (2, 2));
        assert!(t.min_expected >= 5.0);
        assert!(t.p_value > 0.5);
        // A constant row variable: nothing to test.
        let t = chi_square_independence(&[0, 0, 7, 9], 2, 2).unwrap();
        assert_eq!((t.p_value, t.degrees_of_freedom), (1.0, 0));
    }

    #[test]
    fn bad_input() {
        assert!(matches!(
            chi_square_independence(&[1, 2, 3], 2, 2),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(matches!(
            chi_square_independence(&[], 0, 2),
            Err(Error::Empty { .. })
        ));
        assert!(matches!(
            chi_square_independence(&[u64::MAX, 1], 1, 2),
            Err(Error::CountOverflow)
        ));
    }
}
