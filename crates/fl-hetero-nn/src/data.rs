//! Vertically split CSV data in FATE's format and the ROC AUC metric.
//!
//! The guest file has `id,y,x0,..`; the host file has `id,x0,..`. Rows are joined on `id`;
//! both files must hold the same ids (FATE's demo files do, in the same order).

use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;

fn bad(reason: String) -> Error {
    ApiMisuse::InvalidData { reason }.into()
}

/// One party's table: ids, optional labels, features.
#[derive(Debug, Clone, PartialEq)]
pub struct PartyTable {
    /// Join keys, in file order.
    pub ids: Vec<String>,
    /// Labels (guest only), 0 or 1.
    pub labels: Option<Vec<f64>>,
    /// Features (rows in file order).
    pub features: Matrix<f64>,
}

/// Parses a FATE CSV; `with_label` says whether column 2 is the label `y`.
pub fn parse_csv(text: &str, with_label: bool) -> Result<PartyTable, Error> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| bad("empty file".into()))?
        .split(',')
        .map(str::trim)
        .collect();
    let first_feature = if with_label { 2 } else { 1 };
    if header.first() != Some(&"id")
        || (with_label && header.get(1) != Some(&"y"))
        || header.len() <= first_feature
    {
        return Err(bad(format!(
            "header must be `id,{}x0,...`",
            if with_label { "y," } else { "" }
        )));
    }
    let d = header.len() - first_feature;
    let mut ids = Vec::new();
    let mut labels = Vec::new();
    let mut feats = Vec::new();
    for (lineno, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if cells.len() != header.len() {
            return Err(bad(format!(
                "line {}: {} fields, header has {}",
                lineno + 2,
                cells.len(),
                header.len()
            )));
        }
        ids.push(cells[0].to_string());
        if with_label {
            let y: f64 = cells[1].parse().map_err(|_| {
                bad(format!(
                    "line {}: label `{}` is not a number",
                    lineno + 2,
                    cells[1]
                ))
            })?;
            if y != 0.0 && y != 1.0 {
                return Err(bad(format!(
                    "line {}: label {y}; only 0 and 1 are allowed",
                    lineno + 2
                )));
            }
            labels.push(y);
        }
        for c in &cells[first_feature..] {
            let v: f64 = c
                .parse()
                .map_err(|_| bad(format!("line {}: `{c}` is not a number", lineno + 2)))?;
            if !v.is_finite() {
                return Err(bad(format!("line {}: non-finite value", lineno + 2)));
            }
            feats.push(v);
        }
    }
    if ids.is_empty() {
        return Err(bad("no data rows".into()));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = ids.iter().find(|id| !seen.insert(id.as_str())) {
        return Err(bad(format!("duplicate id `{dup}`")));
    }
    let n = ids.len();
    Ok(PartyTable {
        ids,
        labels: with_label.then_some(labels),
        features: Matrix::from_vec(n, d, feats)?,
    })
}

/// A vertically split data set aligned on ids (the guest's order).
#[derive(Debug, Clone, PartialEq)]
pub struct VerticalData {
    /// Labels (guest).
    pub labels: Vec<f64>,
    /// Guest features.
    pub guest: Matrix<f64>,
    /// Host features, reordered to the guest's ids.
    pub host: Matrix<f64>,
    /// The record of each row: the row ids both parties pass to the protocol
    /// ([`crate::Host::start_round`], [`crate::Guest::backward`]), which count the
    /// releases of each record. [`Self::align`] numbers the aligned rows 0, 1, …; a subset
    /// ([`Self::subset`]) keeps its rows' ids, so that a record keeps its id in every
    /// split of the set.
    pub row_ids: Vec<u64>,
}

impl VerticalData {
    /// Joins the guest's and host's tables on `id`.
    pub fn align(guest: PartyTable, host: PartyTable) -> Result<Self, Error> {
        let labels = guest
            .labels
            .ok_or_else(|| bad("the guest table has no labels".into()))?;
        if guest.ids.len() != host.ids.len() {
            return Err(bad(format!(
                "guest has {} ids, host has {}",
                guest.ids.len(),
                host.ids.len()
            )));
        }
        let pos: std::collections::HashMap<&str, usize> = host
            .ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let order = guest
            .ids
            .iter()
            .map(|id| {
                pos.get(id.as_str())
                    .copied()
                    .ok_or_else(|| bad(format!("id `{id}` missing from the host")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            row_ids: (0..labels.len() as u64).collect(),
            labels,
            guest: guest.features,
            host: host.features.select_rows(&order)?,
        })
    }

    /// The rows `rows` (indices into this set), with their labels and row ids.
    ///
    /// # Errors
    /// An index out of range, or a set whose fields disagree in length.
    pub fn subset(&self, rows: &[usize]) -> Result<Self, Error> {
        Ok(Self {
            labels: pick(&self.labels, rows)?,
            guest: self.guest.select_rows(rows)?,
            host: self.host.select_rows(rows)?,
            row_ids: pick(&self.row_ids, rows)?,
        })
    }

    /// The row ids of rows `lo..hi`.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidRowIds`] unless there is one id per row and `lo..hi` lies in
    /// the set.
    pub fn batch_ids(&self, lo: usize, hi: usize) -> Result<&[u64], Error> {
        if self.row_ids.len() != self.len() {
            return Err(ApiMisuse::InvalidRowIds {
                reason: format!(
                    "{} row ids for {} rows; a VerticalData needs one id per row",
                    self.row_ids.len(),
                    self.len()
                ),
            }
            .into());
        }
        self.row_ids
            .get(lo..hi)
            .ok_or_else(|| ApiMisuse::IndexOutOfRange {
                index: hi,
                len: self.len(),
            })
            .map_err(Error::from)
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

fn pick<T: Copy>(v: &[T], rows: &[usize]) -> Result<Vec<T>, Error> {
    rows.iter()
        .map(|&i| {
            v.get(i).copied().ok_or_else(|| {
                ApiMisuse::IndexOutOfRange {
                    index: i,
                    len: v.len(),
                }
                .into()
            })
        })
        .collect()
}

/// Area under the ROC curve (Mann–Whitney, ties count ½). `None` if a class is missing or a
/// score is NaN.
pub fn roc_auc(scores: &[f64], labels: &[f64]) -> Option<f64> {
    if scores.len() != labels.len() || scores.iter().any(|s| s.is_nan()) {
        return None;
    }
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut ranks = vec![0.0; scores.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && scores[idx[j + 1]] == scores[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for k in &idx[i..=j] {
            ranks[*k] = r;
        }
        i = j + 1;
    }
    let pos = labels.iter().filter(|&&y| y == 1.0).count() as f64;
    let neg = labels.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return None;
    }
    let sum: f64 = ranks
        .iter()
        .zip(labels)
        .filter(|(_, y)| **y == 1.0)
        .map(|(r, _)| r)
        .sum();
    Some((sum - pos * (pos + 1.0) / 2.0) / (pos * neg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_aligns_and_rejects_bad_files() {
        let g = parse_csv("id,y,x0\n2,1,0.5\n1,0,-1\n", true).unwrap();
        let h = parse_csv("id,x0,x1\n1,1,2\n2,3,4\n", false).unwrap();
        let v = VerticalData::align(g.clone(), h).unwrap();
        assert_eq!(v.host.as_slice(), &[3.0, 4.0, 1.0, 2.0]);
        assert_eq!(v.labels, vec![1.0, 0.0]);
        assert_eq!(v.row_ids, vec![0, 1]);
        let s = v.subset(&[1]).unwrap();
        assert_eq!((s.labels, s.row_ids), (vec![0.0], vec![1]));
        assert!(v.subset(&[2]).is_err());
        assert_eq!(v.batch_ids(0, 2).unwrap(), &[0, 1]);
        assert!(v.batch_ids(1, 3).is_err());
        assert!(parse_csv("", true).is_err());
        assert!(parse_csv("id,y,x0\n1,2,0\n", true).is_err());
        assert!(parse_csv("id,y,x0\n1,1,abc\n", true).is_err());
        assert!(parse_csv("id,y,x0\n1,1\n", true).is_err());
        assert!(parse_csv("id,y,x0\n1,1,1\n1,0,1\n", true).is_err());
        assert!(parse_csv("id,y,x0\n1,1,NaN\n", true).is_err());
        let h2 = parse_csv("id,x0\n1,1\n3,3\n", false).unwrap();
        assert!(VerticalData::align(g, h2).is_err());
    }

    #[test]
    fn auc_matches_hand_computed_values() {
        assert_eq!(
            roc_auc(&[0.1, 0.4, 0.35, 0.8], &[0.0, 0.0, 1.0, 1.0]),
            Some(0.75)
        );
        assert_eq!(roc_auc(&[0.5, 0.5], &[0.0, 1.0]), Some(0.5));
        assert_eq!(roc_auc(&[0.1, 0.9], &[0.0, 1.0]), Some(1.0));
        assert_eq!(roc_auc(&[0.1, 0.9], &[1.0, 1.0]), None);
        assert_eq!(roc_auc(&[f64::NAN, 0.9], &[0.0, 1.0]), None);
    }
}
