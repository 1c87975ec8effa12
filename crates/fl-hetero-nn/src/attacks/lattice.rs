//! The lattice and small dense linear-algebra tools the multi-step attacks need: exact
//! integer lattice bases of a generating set (echelon form, then integral LLL), exact
//! coordinates in such a basis, integral LLL on a Gram matrix with its transformation,
//! floating-point LLL for closest-vector embeddings, and least squares.
//!
//! No well-kept Rust LLL fits here (`lll-rs` is experimental and needs GMP through `rug`;
//! see docs/DEPENDENCIES.md), so this module carries its own, tested against known
//! reductions. Sizes are small (dimensions ≤ a few dozen), so clarity wins over speed.

// Lattice reduction indexes several parallel tables (basis, Gram, λ, d) by the same
// counters; iterator rewrites would hide the algorithm's structure (Cohen 2.6.7).
#![allow(clippy::needless_range_loop)]

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{One, Signed, ToPrimitive, Zero};

/// round(a / b) to the nearest integer (ties away from zero), b ≠ 0.
pub(crate) fn div_round(a: &BigInt, b: &BigInt) -> BigInt {
    let two = BigInt::from(2);
    let (num, den) = if b.is_negative() {
        (-a * &two, -b * &two)
    } else {
        (a * &two, b * &two)
    };
    // floor((2a + b) / 2b) = round(a/b) with ties towards +∞; fine for size reduction.
    let half: BigInt = &den / 2;
    (num + half).div_floor(&den)
}

/// Integral LLL (Cohen, *A Course in Computational Algebraic Number Theory*, Alg. 2.6.7)
/// on the Gram matrix `gram` of n linearly independent vectors, with δ = 99/100.
///
/// Returns the unimodular transformation T (n × n, rows = new basis vectors as integer
/// combinations of the old ones) and the reduced Gram matrix T·G·Tᵀ. `None` when the
/// vectors are linearly dependent (a zero Gram–Schmidt length).
/// A matrix as its rows.
pub(crate) type Rows = Vec<Vec<BigInt>>;

pub(crate) fn lll_gram(gram: &[Vec<BigInt>]) -> Option<(Rows, Rows)> {
    let n = gram.len();
    let mut g: Vec<Vec<BigInt>> = gram.to_vec();
    let mut t: Vec<Vec<BigInt>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if i == j {
                        BigInt::one()
                    } else {
                        BigInt::zero()
                    }
                })
                .collect()
        })
        .collect();
    if n == 0 {
        return Some((t, g));
    }
    // 1-based d (d[0] = 1) and λ[k][j] for j < k, 0-based vector indices.
    let mut d: Vec<BigInt> = vec![BigInt::zero(); n + 1];
    let mut lam: Vec<Vec<BigInt>> = vec![vec![BigInt::zero(); n]; n];
    d[0] = BigInt::one();
    d[1] = g[0][0].clone();
    // Positive definiteness (every d_i > 0) is required; an indefinite form would swap
    // forever.
    if !d[1].is_positive() {
        return None;
    }
    let (dp, dq) = (BigInt::from(99), BigInt::from(100));
    let mut k = 1usize; // 0-based index of the vector being inserted
    let mut k_max = 0usize;

    // b_k ← b_k − q·b_l, with the Gram matrix and λ kept in step.
    let reduce = |k: usize,
                  l: usize,
                  g: &mut Vec<Vec<BigInt>>,
                  t: &mut Vec<Vec<BigInt>>,
                  lam: &mut Vec<Vec<BigInt>>,
                  d: &[BigInt]| {
        let two_l: BigInt = &lam[k][l] * 2;
        if two_l.abs() > d[l + 1] {
            let q = div_round(&lam[k][l], &d[l + 1]);
            for c in 0..n {
                let v = &t[l][c] * &q;
                t[k][c] -= v;
            }
            // Gram: row k and column k.
            let gll = g[l][l].clone();
            let gkl = g[k][l].clone();
            let gkk = &g[k][k] - &gkl * &q * 2 + &gll * &q * &q;
            for c in 0..n {
                if c != k {
                    let v = &g[l][c] * &q;
                    g[k][c] -= v;
                    g[c][k] = g[k][c].clone();
                }
            }
            g[k][k] = gkk;
            let v = &q * &d[l + 1];
            lam[k][l] -= v;
            for i in 0..l {
                let v = &q * &lam[l][i];
                lam[k][i] -= v;
            }
        }
    };

    let mut guard = 0usize;
    while k < n {
        guard += 1;
        if guard > 1_000_000 {
            return None;
        }
        if k > k_max {
            k_max = k;
            for j in 0..=k {
                let mut u = g[k][j].clone();
                for i in 0..j {
                    u = (&d[i + 1] * &u - &lam[k][i] * &lam[j][i]) / &d[i];
                }
                if j < k {
                    lam[k][j] = u;
                } else {
                    if !u.is_positive() {
                        return None;
                    }
                    d[k + 1] = u;
                }
            }
        }
        reduce(k, k - 1, &mut g, &mut t, &mut lam, &d);
        // Lovász: dq·d_{k+1}·d_{k−1} < dp·d_k² − dq·λ²  ⇒ swap.
        let lhs = &dq * &d[k + 1] * &d[k - 1];
        let rhs = &dp * &d[k] * &d[k] - &dq * &lam[k][k - 1] * &lam[k][k - 1];
        if lhs < rhs {
            t.swap(k, k - 1);
            g.swap(k, k - 1);
            for row in g.iter_mut() {
                row.swap(k, k - 1);
            }
            for j in 0..k - 1 {
                let (a, b) = (lam[k][j].clone(), lam[k - 1][j].clone());
                lam[k][j] = b;
                lam[k - 1][j] = a;
            }
            let l = lam[k][k - 1].clone();
            let b = (&d[k - 1] * &d[k + 1] + &l * &l) / &d[k];
            for i in k + 1..=k_max {
                let tt = lam[i][k].clone();
                lam[i][k] = (&d[k + 1] * &lam[i][k - 1] - &l * &tt) / &d[k];
                lam[i][k - 1] = (&b * &tt + &l * &lam[i][k]) / &d[k + 1];
            }
            d[k] = b;
            if k > 1 {
                k -= 1;
            }
        } else {
            for l in (0..k - 1).rev() {
                reduce(k, l, &mut g, &mut t, &mut lam, &d);
            }
            k += 1;
        }
    }
    Some((t, g))
}

/// The Gram matrix of integer vectors.
pub(crate) fn gram(vectors: &[Vec<BigInt>]) -> Vec<Vec<BigInt>> {
    vectors
        .iter()
        .map(|a| vectors.iter().map(|b| dot(a, b)).collect())
        .collect()
}

fn dot(a: &[BigInt], b: &[BigInt]) -> BigInt {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Integer combinations of `vectors` by the rows of `t`.
pub(crate) fn combine(t: &[Vec<BigInt>], vectors: &[Vec<BigInt>]) -> Vec<Vec<BigInt>> {
    let dim = vectors.first().map_or(0, Vec::len);
    t.iter()
        .map(|row| {
            let mut out = vec![BigInt::zero(); dim];
            for (c, v) in row.iter().zip(vectors) {
                if !c.is_zero() {
                    for (o, x) in out.iter_mut().zip(v) {
                        *o += c * x;
                    }
                }
            }
            out
        })
        .collect()
}

/// An LLL-reduced basis of the lattice generated by `rows` (integer vectors of one
/// dimension, possibly dependent): an integer echelon form by Euclid's algorithm on each
/// column (unimodular row operations), then integral LLL on the independent rows. The
/// number of rows returned is the lattice's rank.
pub(crate) fn lattice_basis(rows: &[Vec<BigInt>]) -> Vec<Vec<BigInt>> {
    let dim = rows.first().map_or(0, Vec::len);
    let mut rest: Vec<Vec<BigInt>> = rows
        .iter()
        .filter(|r| r.iter().any(|x| !x.is_zero()))
        .cloned()
        .collect();
    let mut basis = Vec::new();
    for col in 0..dim {
        // The row with the smallest nonzero entry in this column is the pivot.
        while let Some(p) = (0..rest.len())
            .filter(|&i| !rest[i][col].is_zero())
            .min_by(|&a, &b| rest[a][col].abs().cmp(&rest[b][col].abs()))
        {
            let pivot = rest.swap_remove(p);
            let mut all_zero = true;
            for r in rest.iter_mut() {
                if r[col].is_zero() {
                    continue;
                }
                let q = div_round(&r[col], &pivot[col]);
                for (x, y) in r.iter_mut().zip(&pivot) {
                    *x -= &q * y;
                }
                all_zero &= r[col].is_zero();
            }
            if all_zero {
                basis.push(pivot);
                rest.retain(|r| r.iter().any(|x| !x.is_zero()));
                break;
            }
            rest.push(pivot);
        }
    }
    match lll_gram(&gram(&basis)) {
        Some((t, _)) => combine(&t, &basis),
        None => basis,
    }
}

/// The integer coordinates k with Σ kⱼ·basisⱼ = v, or `None` when v is not in the lattice
/// (floating-point least squares with exact integer refinement, verified exactly).
pub(crate) fn coordinates(basis: &[Vec<BigInt>], v: &[BigInt]) -> Option<Vec<BigInt>> {
    let r = basis.len();
    let cols: Vec<Vec<f64>> = basis.iter().map(|b| to_f64(b)).collect();
    let qr = Qr::new(&cols)?;
    let mut k = vec![BigInt::zero(); r];
    let mut residual: Vec<BigInt> = v.to_vec();
    for _ in 0..8 {
        if residual.iter().all(Zero::is_zero) {
            return Some(k);
        }
        let step = qr.solve(&to_f64(&residual));
        let step: Vec<BigInt> = step
            .iter()
            .map(|x| BigInt::from(x.round() as i128))
            .collect();
        if step.iter().all(Zero::is_zero) {
            return None;
        }
        for (j, s) in step.iter().enumerate() {
            if !s.is_zero() {
                for (res, b) in residual.iter_mut().zip(&basis[j]) {
                    *res -= s * b;
                }
                k[j] += s;
            }
        }
    }
    residual.iter().all(Zero::is_zero).then_some(k)
}

/// A BigInt vector as f64 (nearest).
pub(crate) fn to_f64(v: &[BigInt]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64().unwrap_or(f64::NAN)).collect()
}

/// A thin QR factorisation (modified Gram–Schmidt) of the columns `cols`.
pub(crate) struct Qr {
    q: Vec<Vec<f64>>,
    r: Vec<Vec<f64>>,
}

impl Qr {
    /// `None` when the columns are (numerically) dependent.
    pub(crate) fn new(cols: &[Vec<f64>]) -> Option<Self> {
        let k = cols.len();
        let mut q: Vec<Vec<f64>> = cols.to_vec();
        let mut r = vec![vec![0.0; k]; k];
        for j in 0..k {
            for i in 0..j {
                let proj: f64 = q[i].iter().zip(&q[j]).map(|(a, b)| a * b).sum();
                r[i][j] = proj;
                let qi = q[i].clone();
                for (x, y) in q[j].iter_mut().zip(&qi) {
                    *x -= proj * y;
                }
            }
            let norm = q[j].iter().map(|x| x * x).sum::<f64>().sqrt();
            let scale = cols[j].iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm.is_nan() || norm <= 1e-12 * scale || !norm.is_finite() {
                return None;
            }
            r[j][j] = norm;
            for x in q[j].iter_mut() {
                *x /= norm;
            }
        }
        Some(Self { q, r })
    }

    /// The least-squares solution x of Σ xⱼ·colⱼ ≈ b.
    pub(crate) fn solve(&self, b: &[f64]) -> Vec<f64> {
        let k = self.q.len();
        let y: Vec<f64> = self
            .q
            .iter()
            .map(|qi| qi.iter().zip(b).map(|(a, c)| a * c).sum())
            .collect();
        let mut x = vec![0.0; k];
        for i in (0..k).rev() {
            let s: f64 = (i + 1..k).map(|j| self.r[i][j] * x[j]).sum();
            x[i] = (y[i] - s) / self.r[i][i];
        }
        x
    }
}

/// Floating-point LLL (δ = 0.99) on rows of integer-valued f64 entries (|x| < 2^40),
/// Gram–Schmidt recomputed from the exact rows at every step (dimensions are small).
/// Returns the reduced rows and the integer transformation (rows: combinations of the
/// input rows).
pub(crate) fn lll_f64(rows: &[Vec<f64>]) -> (Vec<Vec<f64>>, Vec<Vec<i64>>) {
    let n = rows.len();
    let mut b: Vec<Vec<f64>> = rows.to_vec();
    let mut t: Vec<Vec<i64>> = (0..n)
        .map(|i| (0..n).map(|j| i64::from(i == j)).collect())
        .collect();
    let dotf = |a: &[f64], c: &[f64]| a.iter().zip(c).map(|(x, y)| x * y).sum::<f64>();
    let dim = b.first().map_or(0, Vec::len);
    // Gram–Schmidt kept row by row: star[i] = b*_i, norms[i] = |b*_i|², mu[i][j].
    let mut star = vec![vec![0.0; dim]; n];
    let mut norms = vec![0.0; n];
    let mut mu = vec![vec![0.0; n]; n];
    // Recomputes row i of the Gram–Schmidt data from b_i and b*_0..b*_{i−1}.
    let row = |i: usize,
               b: &[Vec<f64>],
               star: &mut Vec<Vec<f64>>,
               norms: &mut Vec<f64>,
               mu: &mut Vec<Vec<f64>>| {
        let mut v = b[i].clone();
        for j in 0..i {
            let m = if norms[j] > 0.0 {
                dotf(&b[i], &star[j]) / norms[j]
            } else {
                0.0
            };
            mu[i][j] = m;
            for (x, y) in v.iter_mut().zip(&star[j]) {
                *x -= m * y;
            }
        }
        norms[i] = dotf(&v, &v);
        star[i] = v;
    };
    if n > 0 {
        row(0, &b, &mut star, &mut norms, &mut mu);
    }
    let mut k = 1;
    let mut guard = 0usize;
    while k < n && guard < 200_000 {
        guard += 1;
        row(k, &b, &mut star, &mut norms, &mut mu);
        let mut changed = false;
        for j in (0..k).rev() {
            let q = mu[k][j].round();
            if q != 0.0 {
                changed = true;
                let bj = b[j].clone();
                for (x, y) in b[k].iter_mut().zip(&bj) {
                    *x -= q * y;
                }
                let tj = t[j].clone();
                let qi = q as i64;
                for (x, y) in t[k].iter_mut().zip(&tj) {
                    *x = x.saturating_sub(qi.saturating_mul(*y));
                }
                let muj = mu[j].clone();
                for i in 0..j {
                    mu[k][i] -= q * muj[i];
                }
                mu[k][j] -= q;
            }
        }
        if changed {
            row(k, &b, &mut star, &mut norms, &mut mu);
        }
        if norms[k] < (0.99 - mu[k][k - 1] * mu[k][k - 1]) * norms[k - 1] {
            b.swap(k, k - 1);
            t.swap(k, k - 1);
            k = (k - 1).max(1);
            row(k - 1, &b, &mut star, &mut norms, &mut mu);
        } else {
            k += 1;
        }
    }
    (b, t)
}

/// Vectors c (coefficients in −2..=2) with cᵀ·H·c = 1 for a positive definite integer
/// form H of dimension ≤ 8: after LLL on H, one from each ± pair. For H = U·Uᵀ with U
/// unimodular these are m combinations C with C·U a signed permutation.
pub(crate) fn unit_vectors(h: &[Vec<BigInt>]) -> Option<Vec<Vec<BigInt>>> {
    let m = h.len();
    if m == 0 || m > 8 {
        return None;
    }
    let (t, g) = lll_gram(h)?;
    let g: Vec<Vec<i64>> = g
        .iter()
        .map(|r| r.iter().map(|x| x.to_i64()).collect::<Option<Vec<_>>>())
        .collect::<Option<Vec<_>>>()?;
    let mut found: Vec<Vec<i64>> = Vec::new();
    let mut c = vec![-2i64; m];
    loop {
        let q: i128 = (0..m)
            .map(|i| {
                (0..m)
                    .map(|j| i128::from(c[i]) * i128::from(g[i][j]) * i128::from(c[j]))
                    .sum::<i128>()
            })
            .sum();
        if q == 1
            && !found
                .iter()
                .any(|f| f.iter().zip(&c).all(|(a, b)| *a == -*b))
        {
            found.push(c.clone());
        }
        // Next coefficient vector in −2..=2.
        let mut i = 0;
        while i < m && c[i] == 2 {
            c[i] = -2;
            i += 1;
        }
        if i == m {
            break;
        }
        c[i] += 1;
    }
    if found.len() != m {
        return None;
    }
    // Back to combinations of the original basis: c·T.
    Some(
        found
            .iter()
            .map(|f| {
                (0..m)
                    .map(|col| (0..m).map(|i| BigInt::from(f[i]) * &t[i][col]).sum())
                    .collect()
            })
            .collect(),
    )
}

/// The inverse of a unimodular integer matrix (exact; `None` if |det| ≠ 1).
pub(crate) fn unimodular_inverse(u: &[Vec<BigInt>]) -> Option<Vec<Vec<BigInt>>> {
    let n = u.len();
    // Gauss–Jordan over the rationals kept as integers: since det = ±1 every pivot step
    // can be done with unimodular row operations (Euclid on each column).
    let mut a: Vec<Vec<BigInt>> = u
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut row = r.clone();
            row.extend((0..n).map(|j| {
                if i == j {
                    BigInt::one()
                } else {
                    BigInt::zero()
                }
            }));
            row
        })
        .collect();
    for col in 0..n {
        loop {
            let p = (col..n)
                .filter(|&i| !a[i][col].is_zero())
                .min_by(|&x, &y| a[x][col].abs().cmp(&a[y][col].abs()))?;
            a.swap(col, p);
            let mut done = true;
            for r in col + 1..n {
                if a[r][col].is_zero() {
                    continue;
                }
                let q = a[r][col].div_floor(&a[col][col]);
                let pivot = a[col].clone();
                for (x, y) in a[r].iter_mut().zip(&pivot) {
                    *x -= &q * y;
                }
                done &= a[r][col].is_zero();
            }
            if done {
                break;
            }
        }
        if !a[col][col].abs().is_one() {
            return None;
        }
        if a[col][col].is_negative() {
            for x in a[col].iter_mut() {
                *x = -x.clone();
            }
        }
    }
    for col in (0..n).rev() {
        for r in 0..col {
            let q = a[r][col].clone();
            if !q.is_zero() {
                let pivot = a[col].clone();
                for (x, y) in a[r].iter_mut().zip(&pivot) {
                    *x -= &q * y;
                }
            }
        }
    }
    Some(a.into_iter().map(|r| r[n..].to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bi(v: &[i64]) -> Vec<BigInt> {
        v.iter().map(|&x| BigInt::from(x)).collect()
    }

    #[test]
    fn lll_reduces_a_skewed_basis_of_z3_to_unit_vectors() {
        // A unimodular basis of Z³ far from reduced.
        let rows = vec![bi(&[1, 0, 0]), bi(&[4, 1, 0]), bi(&[17, 3, 1])];
        let u = combine(&[bi(&[1, 2, 3]), bi(&[0, 1, 5]), bi(&[0, 0, 1])], &rows);
        let basis = lattice_basis(&u);
        assert_eq!(basis.len(), 3);
        let g = gram(&basis);
        for (i, row) in g.iter().enumerate() {
            for (j, x) in row.iter().enumerate() {
                assert_eq!(*x, BigInt::from(i64::from(i == j)), "{g:?}");
            }
        }
    }

    #[test]
    fn lattice_basis_of_dependent_generators_has_the_rank_and_the_lattice() {
        // 2·Z × 3·Z embedded in Z⁴ along two directions, generated redundantly.
        let a = bi(&[2, 0, 2, 4]);
        let b = bi(&[0, 3, 3, -3]);
        let gens = vec![
            a.iter()
                .zip(&b)
                .map(|(x, y)| x * 5 + y * 7)
                .collect::<Vec<_>>(),
            a.iter().zip(&b).map(|(x, y)| x * 3 + y * 4).collect(),
            a.iter().zip(&b).map(|(x, y)| x * 2 - y).collect(),
        ];
        let basis = lattice_basis(&gens);
        assert_eq!(basis.len(), 2);
        // Every generator has integer coordinates; a and b too (the gcd of the 2×2
        // coefficient minors is 1, so the generators span the whole lattice).
        for v in gens.iter().chain([&a, &b]) {
            assert!(coordinates(&basis, v).is_some(), "{v:?}");
        }
        // A vector outside the lattice has none.
        assert!(coordinates(&basis, &bi(&[1, 0, 1, 2])).is_none());
    }

    #[test]
    fn unit_vectors_recover_a_unimodular_factor_up_to_signed_permutation() {
        // det = 2·(2 − 2) − 1·(2 − 3) = 1.
        let u = vec![bi(&[2, 1, 0]), bi(&[1, 1, 1]), bi(&[3, 2, 2])];
        let inv = unimodular_inverse(&u).unwrap();
        let h = gram(&u);
        let c = unit_vectors(&h).unwrap();
        // C·U is a signed permutation.
        let cu = combine(&c, &u);
        for row in &cu {
            assert_eq!(row.iter().filter(|x| x.abs().is_one()).count(), 1, "{cu:?}");
            assert_eq!(row.iter().filter(|x| x.is_zero()).count(), 2, "{cu:?}");
        }
        let id = combine(&inv, &u);
        for (i, r) in id.iter().enumerate() {
            for (j, x) in r.iter().enumerate() {
                assert_eq!(*x, BigInt::from(i64::from(i == j)));
            }
        }
        assert!(unimodular_inverse(&[bi(&[2, 0]), bi(&[0, 1])]).is_none());
    }

    #[test]
    fn float_lll_finds_a_planted_short_vector() {
        // Knapsack-style embedding: find x with Σ xᵢ·aᵢ = s for x = (1, 0, 1, 1, 0).
        let a = [
            1_234_567.0,
            7_654_321.0,
            2_468_013.0,
            1_357_911.0,
            3_141_592.0,
        ];
        let s = a[0] + a[2] + a[3];
        let mut rows: Vec<Vec<f64>> = (0..5)
            .map(|i| {
                let mut r = vec![0.0; 7];
                r[i] = 2.0;
                r[6] = a[i] * 100.0;
                r
            })
            .collect();
        let mut last = vec![1.0; 7];
        last[5] = 1.0;
        last[6] = s * 100.0;
        rows.push(last);
        let (red, _) = lll_f64(&rows);
        let hit = red
            .iter()
            .any(|r| r[6] == 0.0 && r[..5].iter().all(|x| x.abs() == 1.0) && r[5].abs() == 1.0);
        assert!(hit, "{red:?}");
    }
}
