//! Clustering scores used by the Laplace-evaluation flow (the server clusters the clients'
//! noisy probability vectors): Calinski–Harabasz and mean silhouette, matching
//! scikit-learn's `calinski_harabasz_score` and `silhouette_score` (Euclidean).
//!
//! Differences from upstream MindSpore Federated (`unsupervised_eval.cc`), on purpose:
//! invalid label counts (fewer than 2 or more than n − 1 distinct labels) are an error, not
//! a silent score of 0; and in the silhouette a point whose cluster has several identical
//! points (a = 0) scores 1 as in scikit-learn (MindSpore gives 0). Computations are in f64.

use crate::error::{Error, Result};

/// The index of the first maximal coordinate of each vector (MindSpore's labelling of a
/// probability vector by its argmax; ties go to the lowest index). NaN coordinates are
/// never chosen.
///
/// # Errors
/// [`Error::Empty`] when a vector is empty.
pub fn argmax_labels<P: AsRef<[f64]>>(points: &[P]) -> Result<Vec<usize>> {
    points
        .iter()
        .map(|p| {
            let v = p.as_ref();
            if v.is_empty() {
                return Err(Error::Empty { what: "a point" });
            }
            let mut best = 0usize;
            let mut best_v = f64::NEG_INFINITY;
            for (i, &x) in v.iter().enumerate() {
                if x > best_v {
                    best = i;
                    best_v = x;
                }
            }
            Ok(best)
        })
        .collect()
}

/// Largest accepted coordinate magnitude: squared distances of such points stay finite.
pub const MAX_COORDINATE: f64 = 1e100;

/// Validated input: dimension and the labels mapped to 0..k.
struct Clustering {
    dim: usize,
    labels: Vec<usize>,
    clusters: usize,
}

fn validate<P: AsRef<[f64]>>(points: &[P], labels: &[usize]) -> Result<Clustering> {
    if points.is_empty() {
        return Err(Error::Empty { what: "points" });
    }
    if points.len() != labels.len() {
        return Err(Error::LengthMismatch {
            what: "points vs labels",
            expected: points.len(),
            found: labels.len(),
        });
    }
    let dim = points.first().map_or(0, |p| p.as_ref().len());
    if dim == 0 {
        return Err(Error::Empty { what: "a point" });
    }
    for (i, p) in points.iter().enumerate() {
        let p = p.as_ref();
        if p.len() != dim {
            return Err(Error::LengthMismatch {
                what: "point dimensions",
                expected: dim,
                found: p.len(),
            });
        }
        if let Some(&value) = p.iter().find(|x| !x.is_finite()) {
            return Err(Error::NotFinite {
                what: "points",
                index: i,
                value,
            });
        }
        if let Some(&value) = p.iter().find(|x| x.abs() > MAX_COORDINATE) {
            return Err(Error::InvalidParameter {
                name: "point coordinate",
                value,
                allowed: "a magnitude of at most 1e100 (so that squared distances are finite)",
            });
        }
    }
    let mut distinct: Vec<usize> = labels.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let clusters = distinct.len();
    if clusters < 2 || clusters > points.len() - 1 {
        return Err(Error::InvalidClusterCount {
            clusters,
            samples: points.len(),
        });
    }
    let mapped = labels
        .iter()
        .map(|l| distinct.binary_search(l).unwrap_or(0))
        .collect();
    Ok(Clustering {
        dim,
        labels: mapped,
        clusters,
    })
}

/// The Calinski–Harabasz score: (between-cluster dispersion / (k − 1)) /
/// (within-cluster dispersion / (n − k)); 1.0 when the within-cluster dispersion is 0 (as
/// scikit-learn).
///
/// # Errors
/// [`Error::Empty`], [`Error::LengthMismatch`] (points vs labels, or ragged points),
/// [`Error::NotFinite`], [`Error::InvalidParameter`] for a coordinate above
/// [`MAX_COORDINATE`] in magnitude, [`Error::InvalidClusterCount`].
pub fn calinski_harabasz<P: AsRef<[f64]>>(points: &[P], labels: &[usize]) -> Result<f64> {
    let c = validate(points, labels)?;
    let n = points.len();
    let mut mean = vec![0.0; c.dim];
    let mut sums = vec![vec![0.0; c.dim]; c.clusters];
    let mut sizes = vec![0usize; c.clusters];
    for (p, &l) in points.iter().zip(&c.labels) {
        for (m, &x) in mean.iter_mut().zip(p.as_ref()) {
            *m += x;
        }
        if let (Some(s), Some(sz)) = (sums.get_mut(l), sizes.get_mut(l)) {
            for (a, &x) in s.iter_mut().zip(p.as_ref()) {
                *a += x;
            }
            *sz += 1;
        }
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    let centroids: Vec<Vec<f64>> = sums
        .iter()
        .zip(&sizes)
        .map(|(s, &sz)| s.iter().map(|x| x / sz as f64).collect())
        .collect();
    let mut extra = 0.0;
    for (cen, &sz) in centroids.iter().zip(&sizes) {
        let d2: f64 = cen.iter().zip(&mean).map(|(a, b)| (a - b) * (a - b)).sum();
        extra += sz as f64 * d2;
    }
    let mut intra = 0.0;
    for (p, &l) in points.iter().zip(&c.labels) {
        if let Some(cen) = centroids.get(l) {
            intra += p
                .as_ref()
                .iter()
                .zip(cen)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>();
        }
    }
    if intra == 0.0 {
        return Ok(1.0);
    }
    let k = c.clusters as f64;
    Ok(extra * (n as f64 - k) / (intra * (k - 1.0)))
}

/// The mean silhouette coefficient with Euclidean distances: for each point,
/// s = (b − a)/max(a, b) with a the mean distance to the other points of its cluster and b
/// the smallest mean distance to another cluster; s = 0 for singletons (and when
/// a = b = 0). O(n²) distances.
///
/// # Errors
/// As [`calinski_harabasz`].
pub fn silhouette<P: AsRef<[f64]>>(points: &[P], labels: &[usize]) -> Result<f64> {
    let c = validate(points, labels)?;
    let n = points.len();
    let mut sizes = vec![0usize; c.clusters];
    for &l in &c.labels {
        if let Some(s) = sizes.get_mut(l) {
            *s += 1;
        }
    }
    let mut total = 0.0;
    let mut dist_sums = vec![0.0f64; c.clusters];
    for (i, p) in points.iter().enumerate() {
        dist_sums.iter_mut().for_each(|d| *d = 0.0);
        for (j, q) in points.iter().enumerate() {
            if i == j {
                continue;
            }
            let d: f64 = p
                .as_ref()
                .iter()
                .zip(q.as_ref())
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
            if let Some(slot) = c.labels.get(j).and_then(|&l| dist_sums.get_mut(l)) {
                *slot += d;
            }
        }
        let li = c.labels.get(i).copied().unwrap_or(0);
        let own = sizes.get(li).copied().unwrap_or(0);
        if own <= 1 {
            continue; // s = 0
        }
        let a = dist_sums.get(li).copied().unwrap_or(0.0) / (own - 1) as f64;
        let b = dist_sums
            .iter()
            .zip(&sizes)
            .enumerate()
            .filter(|&(k, (_, &sz))| k != li && sz > 0)
            .map(|(_, (&d, &sz))| d / sz as f64)
            .fold(f64::INFINITY, f64::min);
        let m = a.max(b);
        if m > 0.0 {
            total += (b - a) / m;
        }
    }
    Ok(total / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// Test vectors from the MindSpore Federated notes (§4.2), scikit-learn semantics.
    #[test]
    fn reference_vectors() {
        let x = [[0.9, 0.1], [0.8, 0.2], [0.2, 0.8], [0.1, 0.9]];
        let l = argmax_labels(&x).unwrap();
        assert_eq!(l, vec![0, 0, 1, 1]);
        assert!(close(calinski_harabasz(&x, &l).unwrap(), 98.0));
        assert!(close(silhouette(&x, &l).unwrap(), 0.856_410_256_4));

        // Identical points: CH = 1 (intra = 0); silhouette 1 (scikit-learn; MindSpore 0).
        let x = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]];
        let l = argmax_labels(&x).unwrap();
        assert_eq!(calinski_harabasz(&x, &l).unwrap(), 1.0);
        assert_eq!(silhouette(&x, &l).unwrap(), 1.0);

        let x = [[0.5, 0.5], [0.6, 0.4], [0.2, 0.8]];
        let l = argmax_labels(&x).unwrap();
        assert_eq!(l, vec![0, 0, 1]);
        assert!(close(
            calinski_harabasz(&x, &l).unwrap(),
            16.333_333_333_333_33
        ));
        assert!((silhouette(&x, &l).unwrap() - 0.472_222_2).abs() < 1e-6);

        let x = [
            [0.7, 0.2, 0.1],
            [0.6, 0.3, 0.1],
            [0.1, 0.8, 0.1],
            [0.2, 0.2, 0.6],
            [0.1, 0.1, 0.8],
        ];
        let l = argmax_labels(&x).unwrap();
        assert_eq!(l, vec![0, 0, 1, 2, 2]);
        assert!(close(calinski_harabasz(&x, &l).unwrap(), 26.3));
        assert!(close(silhouette(&x, &l).unwrap(), 0.598_973_958_0));
    }

    #[test]
    fn invalid_label_counts_are_errors() {
        let x = [[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]];
        let same = argmax_labels(&x).unwrap();
        assert!(matches!(
            silhouette(&x, &same),
            Err(Error::InvalidClusterCount { clusters: 1, .. })
        ));
        assert!(matches!(
            calinski_harabasz(&x, &[0, 1, 2]),
            Err(Error::InvalidClusterCount { clusters: 3, .. })
        ));
        assert!(calinski_harabasz(&x, &[0, 1]).is_err());
        assert!(calinski_harabasz(&[[0.0, f64::NAN], [1.0, 0.0], [0.0, 1.0]], &[0, 1, 1]).is_err());
        let ragged: Vec<Vec<f64>> = vec![vec![0.0, 1.0], vec![1.0], vec![0.5, 0.5]];
        assert!(silhouette(&ragged, &[0, 1, 1]).is_err());
    }
}
