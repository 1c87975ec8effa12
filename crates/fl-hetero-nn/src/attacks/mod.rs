//! The reference attacks on the interactive layer, each run from one party's recorded
//! view only (what it decrypted or received, its own inputs, its own share of W₀), across
//! all steps. The tests and `examples/privacy_table.rs` use them; every "party P cannot
//! learn X" sentence in this crate's docs is measured against the strongest of them.
//!
//! - [`labels`]: the single-step label-inference scores on δ_A (norm and cosine attacks,
//!   H1) and the label guess from a recovered error (determined up to one global sign,
//!   oriented by the public prior or by known labels).
//! - [`host_multi_step`]: the host recovers the guest's exact error D_t (and the effective
//!   weight W_t) from two or more training steps. See below.
//! - [`guest_multi_step`]: the transposed attack: the guest recovers the host's exact
//!   activations A_t = round(a_A·S) (and W_t).
//!
//! # The host's attack, in lattice form
//!
//! The host decrypts δ_A,t = D_t·W_tᵀ exactly (integers at scale S³) and knows its own
//! A_t; the update W_{t+1} = W_t − A_tᵀ·Dη_t is public and Dη_t = η·D_t + R_t with
//! |R_t| ≤ (1 + η)/2 (the two roundings). Unknown: D_t (n × m) and W_t (d_A × m).
//!
//! 1. **Lattice.** Every row of δ_A,t is an integer combination of W_t's columns, so the
//!    rows generate the lattice L_t = W_t·ℤ^m whenever D_t's rows generate ℤ^m (they do with
//!    overwhelming probability for n > m: the gcd of D_t's m × m minors is 1). An exact
//!    integer basis B_t of L_t follows (echelon form, integral LLL), with the exact integer
//!    coordinates K_t of δ_A,t's rows (δ_A,t = K_t·B_tᵀ). Then W_t = B_t·U_t for some
//!    unimodular U_t, and D_t = K_t·U_t^{−T}.
//! 2. **Dynamics.** Substituting into the update and multiplying by U_tᵀ:
//!    B_{t+1}·Y − B_t·H + η·A_tᵀ·K_t = −A_tᵀ·R_t·U_tᵀ, with the integer unknowns
//!    H = U_t·U_tᵀ (symmetric, positive definite, determinant 1: the *metric* in which L_t
//!    is ℤ^m) and Y = U_{t+1}·U_tᵀ. The right side is tiny (≈ √n·2^f·|a|) against the
//!    left's terms (≈ 2^{2f}), so (H, Y) is the unique short solution of a closed-vector
//!    problem, found by LLL on a Kannan embedding. For d_A ≥ 2m this is the issue's
//!    "stage 1" (projected onto the complement of L_{t+1} it is linear in H and determines
//!    it over the reals); the lattice form also covers m ≤ d_A < 2m and d_A = m, where the
//!    real equations do not determine H but the integer ones do.
//! 3. **Metric → weight.** The m vectors c with cᵀ·H·c = 1 give C with C·U_t a signed
//!    permutation, so W_t = B_t·C^{−1} and D_t = K_t·Cᵀ up to one m × m signed permutation
//!    P (W·P, D·P), which is all any view can determine; U_{t+1} = Y·U_t^{−T} carries the
//!    same P to every later step.
//! 4. **Own share.** W̃₀ = W₀ − acc₀ must lie in the box the agreed initialiser draws the
//!    guest's share from; the host tries the 2^m·m! signed permutations on W₀ and keeps the
//!    ones that put W₀·P − acc₀ in the box. A unique survivor makes D_t exact.
//!
//! The guest's attack is the transpose: z_A,t − b_A,t·S = A_t·W_t is exact, the columns of
//! A_t·W_t generate A_t·ℤ^{d_A} when W_t's columns generate ℤ^{d_A}, and the update is
//! known to the guest without rounding (it knows Dη_t), so its integer equations
//! Y·K_{t+1} − H·K_t = −B_tᵀ·Dη_t are exact.

// The attacks index several parallel matrices by the same counters (equation and unknown
// numbering); iterator rewrites would obscure the equations.
#![allow(clippy::needless_range_loop)]

pub mod labels;
pub(crate) mod lattice;

pub use labels::{
    cosine_scores, error_projection_scores, label_guesses, norm_scores, orient_by_known_labels,
    orient_by_prior,
};

use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive, Zero};

use crate::config::{Profile, ProtocolConfig};
use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;
use crate::protocol::{GuestEvent, HostEvent};
use lattice::{Qr, lattice_basis};

use lattice::Rows;

fn rows_of(m: &Matrix<BigInt>) -> Rows {
    (0..m.rows()).map(|i| m.row(i).to_vec()).collect()
}

fn matrix_from_rows(rows: &Rows, cols: usize) -> Matrix<BigInt> {
    Matrix::from_fn(rows.len(), cols, |i, j| rows[i][j].clone())
}

fn transpose(a: &Rows) -> Rows {
    let c = a.first().map_or(0, Vec::len);
    (0..c)
        .map(|j| a.iter().map(|r| r[j].clone()).collect())
        .collect()
}

fn mul(a: &Rows, b: &Rows) -> Rows {
    let c = b.first().map_or(0, Vec::len);
    a.iter()
        .map(|r| {
            (0..c)
                .map(|j| r.iter().zip(b).map(|(x, row)| x * &row[j]).sum())
                .collect()
        })
        .collect()
}

/// x = num·2^(−exp) exactly, exp ≥ 0 (x a finite f64).
fn dyadic(x: f64) -> (BigInt, usize) {
    let (num, exp) = crate::defences::dyadic(x);
    (BigInt::from(num), exp as usize)
}

/// The host's recorded view of a training run: its configuration, its own share acc₀ of
/// W₀, and per training step the activations it encrypted (A_t at scale S, after
/// EmbeddingDP when configured) and the δ_A,t it decrypted (scale S³).
#[derive(Clone, Debug)]
pub struct HostView {
    config: ProtocolConfig,
    initial_share: Matrix<BigInt>,
    steps: Vec<(Matrix<BigInt>, Matrix<BigInt>)>,
    pending: Option<Matrix<BigInt>>,
}

impl HostView {
    /// An empty view; `initial_share` is acc₀ (`None` in `FateFaithful`, where acc₀ = 0).
    ///
    /// # Errors
    /// A share of the wrong shape or out of the weight bound.
    pub fn new(config: ProtocolConfig, initial_share: Option<&Matrix<f64>>) -> Result<Self, Error> {
        let (d, m) = (config.host_dim, config.out_dim);
        let initial_share = match initial_share {
            Some(w) => {
                w.check_shape("initial_share", (d, m))?;
                config
                    .fixed_point
                    .encode_matrix(w, 2, config.weight_bound_bits, "initial_share")?
            }
            None => Matrix::filled(d, m, BigInt::zero()),
        };
        Ok(Self {
            config,
            initial_share,
            steps: Vec::new(),
            pending: None,
        })
    }

    /// Records one training step: A_t (n × d_A, scale S) and δ_A,t (n × d_A, scale S³).
    ///
    /// # Errors
    /// Shapes that do not match each other or the configuration.
    pub fn push_step(
        &mut self,
        activations: Matrix<BigInt>,
        input_gradient: Matrix<BigInt>,
    ) -> Result<(), Error> {
        let n = activations.rows();
        activations.check_shape("activations", (n, self.config.host_dim))?;
        input_gradient.check_shape("input_gradient", (n, self.config.host_dim))?;
        self.steps.push((activations, input_gradient));
        Ok(())
    }

    /// Records a host event: a training round's `ForwardServed` (its activations) and the
    /// `InputGradient` that ends it.
    pub fn observe(&mut self, event: &HostEvent) -> Result<(), Error> {
        match event {
            HostEvent::ForwardServed {
                purpose: crate::Purpose::Train,
                activations,
                ..
            } => self.pending = Some(activations.clone()),
            HostEvent::InputGradient { exact, .. } => {
                let a = self.pending.take().ok_or(ApiMisuse::WrongState {
                    operation: "HostView::observe",
                    state: "an input gradient without a training forward",
                })?;
                self.push_step(a, exact.clone())?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The recorded training steps.
    pub fn steps(&self) -> usize {
        self.steps.len()
    }

    /// The view with the rows of every A_t rotated by one (misaligned with δ_A,t): the
    /// negative control, on which the attack must fail.
    pub fn misaligned(&self) -> Self {
        let mut v = self.clone();
        for (a, _) in &mut v.steps {
            let n = a.rows();
            let rows: Vec<usize> = (0..n).map(|i| (i + 1) % n).collect();
            if let Ok(r) = a.select_rows(&rows) {
                *a = r;
            }
        }
        v
    }
}

/// The positive control of the host's attack: a host that also holds the guest's share
/// W̃₀ (so W₀; the design an earlier version of this crate had) solves δ_A,0 = D₀·W₀ᵀ by
/// least squares and follows W_t with its own A_t, recovering every D_t up to the
/// rounding of Dη (within 10⁻⁷ in value units). Returns D̂_t at scale S (as f64).
///
/// # Errors
/// A share of the wrong shape or out of bound; a step whose W_t is rank deficient.
pub fn host_with_known_initial_weight(
    view: &HostView,
    guest_share: &Matrix<f64>,
) -> Result<Vec<Matrix<f64>>, Error> {
    let c = &view.config;
    guest_share.check_shape("guest_share", (c.host_dim, c.out_dim))?;
    let share = c
        .fixed_point
        .encode_matrix(guest_share, 2, c.weight_bound_bits, "guest_share")?;
    let mut w: Rows = rows_of(&view.initial_share)
        .iter()
        .zip(rows_of(&share))
        .map(|(a, b)| a.iter().zip(&b).map(|(x, y)| x + y).collect())
        .collect();
    let m = c.out_dim;
    let mut out = Vec::new();
    for (a, da) in &view.steps {
        let qr = Qr::new(
            &transpose(&w)
                .iter()
                .map(|col| lattice::to_f64(col))
                .collect::<Vec<_>>(),
        )
        .ok_or(ApiMisuse::InvalidData {
            reason: "W_t is rank deficient (d_A < m?)".into(),
        })?;
        let d: Vec<Vec<f64>> = rows_of(da)
            .iter()
            .map(|r| qr.solve(&lattice::to_f64(r)))
            .collect();
        let d_eta: Rows = d
            .iter()
            .map(|r| {
                r.iter()
                    .map(|x| BigInt::from((c.learning_rate * x).round() as i128))
                    .collect()
            })
            .collect();
        let g = mul(&transpose(&rows_of(a)), &d_eta);
        for (wr, gr) in w.iter_mut().zip(&g) {
            for (x, y) in wr.iter_mut().zip(gr) {
                *x -= y;
            }
        }
        out.push(Matrix::from_fn(d.len(), m, |i, j| d[i][j]));
    }
    Ok(out)
}

/// The guest's recorded view of a training run: its configuration, its own share W̃₀ and
/// b_A,0, and per training step the z_A,t it obtained (scale S³) and the errors it used,
/// D_t and Dη_t (scale S).
#[derive(Clone, Debug)]
pub struct GuestView {
    config: ProtocolConfig,
    initial_share: Matrix<BigInt>,
    initial_bias: Matrix<BigInt>,
    steps: Vec<(Matrix<BigInt>, Matrix<BigInt>)>,
    pending: Option<Matrix<BigInt>>,
}

impl GuestView {
    /// An empty view: `initial_weight` is W̃₀ (Hardened) or W₀ (FateFaithful),
    /// `initial_bias` b_A,0.
    ///
    /// # Errors
    /// Shapes or values out of the configuration's bounds.
    pub fn new(
        config: ProtocolConfig,
        initial_weight: &Matrix<f64>,
        initial_bias: &[f64],
    ) -> Result<Self, Error> {
        initial_weight.check_shape("initial_weight", (config.host_dim, config.out_dim))?;
        let fp = config.fixed_point;
        let b = Matrix::from_vec(1, initial_bias.len(), initial_bias.to_vec())?;
        b.check_shape("initial_bias", (1, config.out_dim))?;
        Ok(Self {
            initial_share: fp.encode_matrix(
                initial_weight,
                2,
                config.weight_bound_bits,
                "initial_weight",
            )?,
            initial_bias: fp.encode_matrix(&b, 2, config.weight_bound_bits, "initial_bias")?,
            config,
            steps: Vec::new(),
            pending: None,
        })
    }

    /// Records one training step: z_A,t (n × m, scale S³) and the scaled error Dη_t the
    /// guest used in its update (n × m, scale S).
    ///
    /// # Errors
    /// Shapes that do not match.
    pub fn push_step(
        &mut self,
        forward: Matrix<BigInt>,
        scaled_error: Matrix<BigInt>,
    ) -> Result<(), Error> {
        let n = forward.rows();
        forward.check_shape("forward", (n, self.config.out_dim))?;
        scaled_error.check_shape("scaled_error", (n, self.config.out_dim))?;
        self.steps.push((forward, scaled_error));
        Ok(())
    }

    /// Records a guest event: a training `Forward` (z_A) and the `BackwardDone` that
    /// reports the scaled error the guest applied.
    pub fn observe(&mut self, event: &GuestEvent) -> Result<(), Error> {
        match event {
            GuestEvent::Forward {
                purpose: crate::Purpose::Train,
                exact,
                ..
            } => self.pending = Some(exact.clone()),
            GuestEvent::BackwardDone { scaled_error, .. } => {
                let z = self.pending.take().ok_or(ApiMisuse::WrongState {
                    operation: "GuestView::observe",
                    state: "a backward without a training forward",
                })?;
                self.push_step(z, scaled_error.clone())?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The recorded training steps.
    pub fn steps(&self) -> usize {
        self.steps.len()
    }

    /// The view with the rows of every Dη_t rotated by one (misaligned with z_A,t): the
    /// negative control, on which the attack must fail.
    pub fn misaligned(&self) -> Self {
        let mut v = self.clone();
        for (_, d) in &mut v.steps {
            let n = d.rows();
            let rows: Vec<usize> = (0..n).map(|i| (i + 1) % n).collect();
            if let Ok(r) = d.select_rows(&rows) {
                *d = r;
            }
        }
        v
    }
}

/// What an attack recovered at one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// The recovered secret: D_t (host attack, n × m, scale S) or A_t (guest attack,
    /// n × d_A, scale S).
    pub secret: Matrix<BigInt>,
    /// The recovered effective weight W_t (d_A × m, scale S²).
    pub weight: Matrix<BigInt>,
    /// Whether the party's own share singled out the signed permutation (then `secret`
    /// is exact; otherwise it is exact up to the order and signs of D's columns / A's
    /// columns).
    pub resolved: bool,
}

/// The outcome of a multi-step attack: one entry per recorded step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttackOutcome {
    /// `Some` where the step was recovered.
    pub steps: Vec<Option<Recovered>>,
    /// Why steps failed (one line per failed pair of steps).
    pub failures: Vec<String>,
}

impl AttackOutcome {
    /// Number of steps recovered (exactly or up to a signed permutation).
    pub fn recovered(&self) -> usize {
        self.steps.iter().filter(|s| s.is_some()).count()
    }

    /// Number of steps recovered exactly (signed permutation resolved).
    pub fn exact(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.as_ref().is_some_and(|r| r.resolved))
            .count()
    }
}

/// The closed-vector problem of step 2 for one pair of steps: integer unknowns
/// (Y: `y_shape`, H symmetric `h_dim`), equation coefficients per unknown, a target, and
/// the expected size of the error.
struct IntegerSystem {
    /// Rows: one per unknown (Y row-major, then H's upper triangle), each the unknown's
    /// coefficient in every equation.
    coefficients: Vec<Vec<f64>>,
    /// The equations' constant term (must be cancelled).
    target: Vec<f64>,
    /// Magnitude of the allowed residual per equation.
    tolerance: f64,
    y_shape: (usize, usize),
    h_dim: usize,
}

impl IntegerSystem {
    /// The real least-squares solution rounded to integers (exact when the system
    /// determines the unknowns over the reals: d_A ≥ 2m for the host), `None` when the
    /// system is rank deficient.
    fn least_squares(&self) -> Option<(Rows, Rows)> {
        let qr = Qr::new(&self.coefficients)?;
        let minus: Vec<f64> = self.target.iter().map(|x| -x).collect();
        let x: Vec<i64> = qr.solve(&minus).iter().map(|v| v.round() as i64).collect();
        Some(self.unpack(&x))
    }

    fn unpack(&self, x: &[i64]) -> (Rows, Rows) {
        let (ya, yb) = self.y_shape;
        let y: Rows = (0..ya)
            .map(|i| (0..yb).map(|j| BigInt::from(x[i * yb + j])).collect())
            .collect();
        let mut h = vec![vec![BigInt::zero(); self.h_dim]; self.h_dim];
        let mut idx = ya * yb;
        for i in 0..self.h_dim {
            for j in i..self.h_dim {
                h[i][j] = BigInt::from(x[idx]);
                h[j][i] = BigInt::from(x[idx]);
                idx += 1;
            }
        }
        (y, h)
    }

    /// Candidate solutions (Y, H), shortest first, from LLL on the Kannan embedding.
    fn closest_vectors(&self) -> Vec<(Rows, Rows)> {
        let vars = self.coefficients.len();
        let eqs = self.target.len();
        let max_coef = self
            .coefficients
            .iter()
            .flatten()
            .chain(&self.target)
            .fold(0.0f64, |a, &x| a.max(x.abs()));
        // Scale so that the residual is O(1) and every entry stays far below 2^53.
        let mut w = 1.0 / self.tolerance.max(1e-300);
        if max_coef * w > 2f64.powi(30) {
            w = 2f64.powi(30) / max_coef;
        }
        let mut rows: Vec<Vec<f64>> = Vec::with_capacity(vars + 1);
        for (v, c) in self.coefficients.iter().enumerate() {
            let mut r = vec![0.0; vars + 1 + eqs];
            r[v] = 1.0;
            for (e, x) in c.iter().enumerate() {
                r[vars + 1 + e] = (x * w).round();
            }
            rows.push(r);
        }
        let mut t = vec![0.0; vars + 1 + eqs];
        t[vars] = 1.0;
        for (e, x) in self.target.iter().enumerate() {
            t[vars + 1 + e] = (x * w).round();
        }
        rows.push(t);
        let (reduced, _) = lattice::lll_f64(&rows);
        let mut out = Vec::new();
        let mut sorted = reduced;
        sorted.sort_by(|a, b| {
            let na: f64 = a.iter().map(|x| x * x).sum();
            let nb: f64 = b.iter().map(|x| x * x).sum();
            na.total_cmp(&nb)
        });
        for r in sorted {
            let sign = r[vars];
            if sign.abs() != 1.0 {
                continue;
            }
            let x: Vec<i64> = r[..vars].iter().map(|v| (v * sign) as i64).collect();
            let (y, h) = self.unpack(&x);
            out.push((y, h));
        }
        out
    }
}

/// Tries the signed permutations P (of the m columns of a d × m matrix) and returns those
/// for which every entry of W·P − own lies strictly inside (−bound, bound).
fn feasible_permutations(w: &Rows, own: &Rows, bound: &BigInt) -> Vec<(Vec<usize>, Vec<bool>)> {
    let m = w.first().map_or(0, Vec::len);
    let mut perms = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    permutations(m, &mut current, &mut perms);
    let mut out = Vec::new();
    for p in perms {
        for signs in 0u32..(1 << m) {
            let neg: Vec<bool> = (0..m).map(|j| signs >> j & 1 == 1).collect();
            let ok = w.iter().zip(own).all(|(wr, or)| {
                (0..m).all(|j| {
                    let v = if neg[j] { -&wr[p[j]] } else { wr[p[j]].clone() };
                    (v - &or[j]).abs() < *bound
                })
            });
            if ok {
                out.push((p.clone(), neg));
            }
        }
    }
    out
}

fn permutations(m: usize, current: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    if current.len() == m {
        out.push(current.clone());
        return;
    }
    for i in 0..m {
        if !current.contains(&i) {
            current.push(i);
            permutations(m, current, out);
            current.pop();
        }
    }
}

/// Applies a signed column permutation (column j of the result is ±column p[j]).
fn permute_columns(a: &Rows, p: &[usize], neg: &[bool]) -> Rows {
    a.iter()
        .map(|r| {
            p.iter()
                .zip(neg)
                .map(|(&k, &s)| if s { -&r[k] } else { r[k].clone() })
                .collect()
        })
        .collect()
}

/// The bound of the other party's share of W₀ at scale S² under the agreed initialiser
/// ([`crate::nn::weight_share`] with fan-in d_A in `Hardened`; torch's default init,
/// which the guest draws alone, in `FateFaithful`), plus one for the grid rounding.
fn share_bound(config: &ProtocolConfig) -> BigInt {
    let d = config.host_dim.max(1) as f64;
    let b = match config.profile {
        Profile::FateFaithful => 1.0 / d.sqrt(),
        _ => 1.0 / (2.0 * d).sqrt(),
    };
    let f = config.fixed_point.frac_bits() as i32;
    BigInt::from((b * 2f64.powi(2 * f)).ceil() as i128) + 1
}

/// The host's multi-step attack on its view: D_t and W_t at every step it can recover.
pub fn host_multi_step(view: &HostView) -> AttackOutcome {
    let c = &view.config;
    let (d_a, m) = (c.host_dim, c.out_dim);
    let t_steps = view.steps.len();
    let mut steps: Vec<Option<Recovered>> = vec![None; t_steps];
    let mut failures = Vec::new();
    // Lattice bases and coordinates of every step.
    let mut bases: Vec<Option<(Rows, Rows)>> = Vec::with_capacity(t_steps);
    for (t, (_, da)) in view.steps.iter().enumerate() {
        // A few dozen rows generate the lattice with overwhelming probability; all rows
        // only when their coordinates do not follow (large batches stay fast).
        let all = rows_of(da);
        let head = &all[..all.len().min(4 * m + 60)];
        let mut basis = lattice_basis(head);
        if all
            .iter()
            .skip(head.len())
            .any(|r| lattice::coordinates(&basis, r).is_none())
        {
            basis = lattice_basis(&all);
        }
        // Rank r < m: columns of D are zero for the whole batch (dead units); the attack
        // runs on the r visible columns and pads D̂ with zero columns.
        if basis.is_empty() {
            failures.push(format!("step {t}: δ_A = 0"));
            bases.push(None);
            continue;
        }
        let k: Option<Rows> = rows_of(da)
            .iter()
            .map(|r| lattice::coordinates(&basis, r))
            .collect();
        match k {
            Some(k) => bases.push(Some((transpose(&basis), k))),
            None => {
                failures.push(format!("step {t}: coordinates in the lattice basis failed"));
                bases.push(None);
            }
        }
    }
    let eta = c.learning_rate;
    // Chains of consecutive pairs; each chain has one gauge (signed permutation).
    let mut u_prev: Option<Rows> = None; // U_t of the current chain
    let mut chain_start = 0usize;
    let mut chains: Vec<(usize, usize)> = Vec::new();
    let mut weights: Vec<Option<Rows>> = vec![None; t_steps];
    let mut secrets: Vec<Option<Rows>> = vec![None; t_steps];
    for t in 0..t_steps.saturating_sub(1) {
        let (Some((b0, k0)), Some((b1, k1))) = (&bases[t], &bases[t + 1]) else {
            u_prev = None;
            continue;
        };
        // The pair runs on the visible rank (the same at both steps).
        let m = b0.first().map_or(0, Vec::len);
        if b1.first().map_or(0, Vec::len) != m {
            failures.push(format!("steps {t}–{}: the rank of δ_A changed", t + 1));
            u_prev = None;
            continue;
        }
        let a = rows_of(&view.steps[t].0);
        let at_k = mul(&transpose(&a), k0); // d_A × m
        // Unknowns: Y (m × m), then H's upper triangle.
        let mut coefficients = Vec::new();
        for i in 0..m {
            for j in 0..m {
                // Y[i][j] multiplies B_{t+1}[:, i] into equation column j.
                let mut col = vec![0.0; d_a * m];
                for r in 0..d_a {
                    col[r * m + j] = b1[r][i].to_f64().unwrap_or(f64::NAN);
                }
                coefficients.push(col);
            }
        }
        for i in 0..m {
            for j in i..m {
                let mut col = vec![0.0; d_a * m];
                for r in 0..d_a {
                    col[r * m + j] -= b0[r][i].to_f64().unwrap_or(f64::NAN);
                    if i != j {
                        col[r * m + i] -= b0[r][j].to_f64().unwrap_or(f64::NAN);
                    }
                }
                coefficients.push(col);
            }
        }
        let target: Vec<f64> = (0..d_a * m)
            .map(|e| eta * at_k[e / m][e % m].to_f64().unwrap_or(f64::NAN))
            .collect();
        let max_a = a
            .iter()
            .flatten()
            .fold(0.0f64, |x, v| x.max(v.abs().to_f64().unwrap_or(0.0)));
        let n = a.len() as f64;
        let system = IntegerSystem {
            coefficients,
            target,
            tolerance: (1.0 + eta) * max_a * n.sqrt(),
            y_shape: (m, m),
            h_dim: m,
        };
        let mut found = None;
        let mut tried_cvp = false;
        let mut batch: Vec<(Rows, Rows)> = system.least_squares().into_iter().collect();
        while found.is_none() {
            if batch.is_empty() {
                if tried_cvp {
                    break;
                }
                tried_cvp = true;
                batch = system.closest_vectors();
                if batch.is_empty() {
                    break;
                }
            }
            let (y, h) = batch.remove(0);
            let Some(cmat) = lattice::unit_vectors(&h) else {
                continue;
            };
            // U_t = C^{-1} (gauge P = I), unless the chain already fixed U_t.
            let u_t = match &u_prev {
                Some(u) if mul(u, &transpose(u)) == h => u.clone(),
                Some(_) => continue,
                None => match lattice::unimodular_inverse(&cmat) {
                    Some(u) => u,
                    None => continue,
                },
            };
            let Some(u_t_inv) = lattice::unimodular_inverse(&u_t) else {
                continue;
            };
            let u_next = mul(&y, &transpose(&u_t_inv));
            if lattice::unimodular_inverse(&u_next).is_none() {
                continue;
            }
            // The residual of the update must be within the rounding bound, exactly:
            // |W_{t+1} − W_t + η·Aᵀ·D_t| ≤ (1 + η)/2 · Σᵢ|A_ir| entrywise.
            let w_t = mul(b0, &u_t);
            let w_next = mul(b1, &u_next);
            let d_t = mul(k0, &transpose(&u_t_inv));
            let at_d = mul(&transpose(&a), &d_t);
            let (eta_num, eta_exp) = dyadic(eta);
            let ok = (0..d_a).all(|r| {
                let col_a: BigInt = a.iter().map(|row| row[r].abs()).sum();
                (0..m).all(|j| {
                    // Everything times 2^(−eta_exp) ≥ 1 so that η·x is an integer.
                    let lhs = ((&w_next[r][j] - &w_t[r][j]) << eta_exp) + &eta_num * &at_d[r][j];
                    let bound =
                        ((&col_a << eta_exp) + &eta_num * &col_a) / 2 + (BigInt::one() << eta_exp);
                    lhs.abs() <= bound
                })
            });
            if ok {
                found = Some((u_t, u_next, u_t_inv));
            }
        }
        match found {
            Some((u_t, u_next, u_t_inv)) => {
                if u_prev.is_none() {
                    chain_start = t;
                }
                weights[t] = Some(mul(b0, &u_t));
                secrets[t] = Some(mul(k0, &transpose(&u_t_inv)));
                let Some(u_next_inv) = lattice::unimodular_inverse(&u_next) else {
                    u_prev = None;
                    continue;
                };
                weights[t + 1] = Some(mul(b1, &u_next));
                secrets[t + 1] = Some(mul(k1, &transpose(&u_next_inv)));
                u_prev = Some(u_next);
                if chains.last().is_some_and(|&(s, _)| s == chain_start) {
                    if let Some(last) = chains.last_mut() {
                        last.1 = t + 1;
                    }
                } else {
                    chains.push((chain_start, t + 1));
                }
            }
            None => {
                failures.push(format!(
                    "steps {t}–{}: no short integer solution (H, Y)",
                    t + 1
                ));
                u_prev = None;
            }
        }
    }
    // Stage 4: the own share fixes the signed permutation of the chain holding step 0
    // (full rank only); reduced-rank steps are padded with zero columns.
    let own = rows_of(&view.initial_share);
    let bound = share_bound(c);
    let pad = |rows: &Rows| -> Rows {
        rows.iter()
            .map(|r| {
                let mut r = r.clone();
                r.resize(m, BigInt::zero());
                r
            })
            .collect()
    };
    for &(s, e) in &chains {
        let full = weights[s]
            .as_ref()
            .is_some_and(|w| w.first().map_or(0, Vec::len) == m);
        let resolution = match (&weights[s], s) {
            (Some(w0), 0) if full => {
                let f = feasible_permutations(w0, &own, &bound);
                (f.len() == 1).then(|| f[0].clone())
            }
            _ => None,
        };
        for t in s..=e {
            if let (Some(w), Some(d)) = (&weights[t], &secrets[t]) {
                let (w, d, resolved) = match &resolution {
                    Some((p, neg)) => {
                        (permute_columns(w, p, neg), permute_columns(d, p, neg), true)
                    }
                    None => (pad(w), pad(d), false),
                };
                steps[t] = Some(Recovered {
                    secret: matrix_from_rows(&d, m),
                    weight: matrix_from_rows(&w, m),
                    resolved,
                });
            }
        }
    }
    AttackOutcome { steps, failures }
}

/// The guest's multi-step attack on its view: A_t and W_t at every step it can recover.
pub fn guest_multi_step(view: &GuestView) -> AttackOutcome {
    let c = &view.config;
    let (d_a, m) = (c.host_dim, c.out_dim);
    let f = c.fixed_point.frac_bits();
    let t_steps = view.steps.len();
    let mut failures = Vec::new();
    // Z_t = z_A,t − b_A,t·S with b_A tracked through the guest's own updates.
    let mut bias = view.initial_bias.row(0).to_vec();
    let mut bases: Vec<Option<(Rows, Rows)>> = Vec::with_capacity(t_steps);
    for (t, (z, d_eta)) in view.steps.iter().enumerate() {
        let zt: Rows = (0..z.rows())
            .map(|i| {
                z.row(i)
                    .iter()
                    .zip(&bias)
                    .map(|(v, b)| v - (b << f))
                    .collect()
            })
            .collect();
        for (j, b) in bias.iter_mut().enumerate() {
            let s: BigInt = (0..d_eta.rows()).map(|i| d_eta.row(i)[j].clone()).sum();
            *b -= s << f;
        }
        let columns = transpose(&zt);
        let basis = lattice_basis(&columns);
        if basis.len() != d_a {
            failures.push(format!(
                "step {t}: z_A has rank {} ≠ d_A = {d_a} (m < d_A, or a dead activation)",
                basis.len()
            ));
            bases.push(None);
            continue;
        }
        let k: Option<Rows> = columns
            .iter()
            .map(|col| lattice::coordinates(&basis, col))
            .collect();
        match k {
            // K_t: d_A × m (column c = coordinates of Z_t's column c).
            Some(k) => bases.push(Some((basis, transpose(&k)))),
            None => {
                failures.push(format!(
                    "step {t}: z_A's columns do not generate A_t·ℤ^d_A (W_t's columns generate a sublattice)"
                ));
                bases.push(None);
            }
        }
    }
    let mut x_prev: Option<Rows> = None;
    let mut chain_start = 0usize;
    let mut chains: Vec<(usize, usize)> = Vec::new();
    let mut weights: Vec<Option<Rows>> = vec![None; t_steps];
    let mut secrets: Vec<Option<Rows>> = vec![None; t_steps];
    for t in 0..t_steps.saturating_sub(1) {
        let (Some((b0, k0)), Some((b1, k1))) = (&bases[t], &bases[t + 1]) else {
            x_prev = None;
            continue;
        };
        let d_eta = rows_of(&view.steps[t].1);
        let target_rows = mul(b0, &d_eta); // B_tᵀ·Dη_t with B_t's rows as basis vectors: d_A × m
        let mut coefficients = Vec::new();
        for i in 0..d_a {
            for l in 0..d_a {
                // Y[i][l]·K_{t+1}[l][c] in equation (i, c).
                let mut col = vec![0.0; d_a * m];
                for cc in 0..m {
                    col[i * m + cc] = k1[l][cc].to_f64().unwrap_or(f64::NAN);
                }
                coefficients.push(col);
            }
        }
        for i in 0..d_a {
            for l in i..d_a {
                let mut col = vec![0.0; d_a * m];
                for cc in 0..m {
                    col[i * m + cc] -= k0[l][cc].to_f64().unwrap_or(f64::NAN);
                    if i != l {
                        col[l * m + cc] -= k0[i][cc].to_f64().unwrap_or(f64::NAN);
                    }
                }
                coefficients.push(col);
            }
        }
        let target: Vec<f64> = (0..d_a * m)
            .map(|e| target_rows[e / m][e % m].to_f64().unwrap_or(f64::NAN))
            .collect();
        let system = IntegerSystem {
            coefficients,
            target,
            tolerance: 1.0,
            y_shape: (d_a, d_a),
            h_dim: d_a,
        };
        let mut found = None;
        let mut tried_cvp = false;
        let mut batch: Vec<(Rows, Rows)> = system.least_squares().into_iter().collect();
        while found.is_none() {
            if batch.is_empty() {
                if tried_cvp {
                    break;
                }
                tried_cvp = true;
                batch = system.closest_vectors();
                if batch.is_empty() {
                    break;
                }
            }
            let (y, h) = batch.remove(0);
            // Exact check: Y·K_{t+1} − H·K_t + B_tᵀ·Dη_t = 0.
            let lhs = mul(&y, k1);
            let rhs = mul(&h, k0);
            let exact = lhs.iter().zip(&rhs).zip(&target_rows).all(|((l, r), tr)| {
                l.iter()
                    .zip(r)
                    .zip(tr)
                    .all(|((a, b), c)| (a - b + c).is_zero())
            });
            if !exact {
                continue;
            }
            // H = X_tᵀ·X_t = U·Uᵀ with U = X_tᵀ.
            let Some(cmat) = lattice::unit_vectors(&h) else {
                continue;
            };
            let x_t = match &x_prev {
                Some(x) if mul(&transpose(x), x) == h => x.clone(),
                Some(_) => continue,
                None => lattice::unimodular_inverse(&transpose(&cmat)).unwrap_or_default(),
            };
            if x_t.is_empty() {
                continue;
            }
            let Some(x_t_inv) = lattice::unimodular_inverse(&x_t) else {
                continue;
            };
            // X_{t+1} = X_t^{−T}·Y.
            let x_next = mul(&transpose(&x_t_inv), &y);
            let Some(x_next_inv) = lattice::unimodular_inverse(&x_next) else {
                continue;
            };
            found = Some((x_t, x_t_inv, x_next, x_next_inv));
            break;
        }
        match found {
            Some((x_t, x_t_inv, x_next, x_next_inv)) => {
                if x_prev.is_none() {
                    chain_start = t;
                }
                // A_t = B_t(as columns)·X_t^{−1}; W_t = X_t·K_t.
                secrets[t] = Some(mul(&transpose(b0), &x_t_inv));
                weights[t] = Some(mul(&x_t, k0));
                secrets[t + 1] = Some(mul(&transpose(b1), &x_next_inv));
                weights[t + 1] = Some(mul(&x_next, k1));
                x_prev = Some(x_next);
                if chains.last().is_some_and(|&(s, _)| s == chain_start) {
                    if let Some(last) = chains.last_mut() {
                        last.1 = t + 1;
                    }
                } else {
                    chains.push((chain_start, t + 1));
                }
            }
            None => {
                failures.push(format!("steps {t}–{}: no integer solution (H, Y)", t + 1));
                x_prev = None;
            }
        }
    }
    // The own share W̃₀: acc₀ = W₀ − W̃₀ must lie in the host share's box. The ambiguity
    // is a signed permutation of W's rows (A's columns): permute the transposes.
    let own = transpose(&rows_of(&view.initial_share));
    let bound = share_bound(c);
    let mut steps: Vec<Option<Recovered>> = vec![None; t_steps];
    for &(s, e) in &chains {
        let resolution = match (&weights[s], s) {
            (Some(w0), 0) => {
                let f = feasible_permutations(&transpose(w0), &own, &bound);
                (f.len() == 1).then(|| f[0].clone())
            }
            _ => None,
        };
        for t in s..=e {
            if let (Some(w), Some(a)) = (&weights[t], &secrets[t]) {
                let (w, a, resolved) = match &resolution {
                    Some((p, neg)) => (
                        transpose(&permute_columns(&transpose(w), p, neg)),
                        permute_columns(a, p, neg),
                        true,
                    ),
                    None => (w.clone(), a.clone(), false),
                };
                steps[t] = Some(Recovered {
                    secret: matrix_from_rows(&a, d_a),
                    weight: matrix_from_rows(&w, m),
                    resolved,
                });
            }
        }
    }
    AttackOutcome { steps, failures }
}

#[cfg(test)]
mod hand_made_views {
    use super::*;

    #[test]
    fn guest_equations_hold_on_a_hand_made_view() {
        // d_A = 1, m = 2, n = 3: A = (5, −3, 7)ᵀ, W₀ = (11, 4), Dη₀ = rows (1, 2), (−1, 0), (2, 1).
        let mut c = ProtocolConfig::new(Profile::Hardened, 1, 2);
        c.min_key_bits = 64;
        c.fixed_point = crate::FixedPoint::new(1).unwrap();
        let a0 = [5i64, -3, 7];
        let w0 = [11i64, 4];
        let d0 = [[1i64, 2], [-1, 0], [2, 1]];
        let a1 = [2i64, 9, -4];
        // W₁ = W₀ − A₀ᵀ·Dη₀.
        let w1: Vec<i64> = (0..2)
            .map(|j| w0[j] - (0..3).map(|i| a0[i] * d0[i][j]).sum::<i64>())
            .collect();
        let z = |a: &[i64], w: &[i64]| Matrix::from_fn(3, 2, |i, j| BigInt::from(a[i] * w[j]));
        let mut view = GuestView::new(c, &Matrix::filled(1, 2, 0.0), &[0.0, 0.0]).unwrap();
        view.push_step(
            z(&a0, &w0),
            Matrix::from_fn(3, 2, |i, j| BigInt::from(d0[i][j])),
        )
        .unwrap();
        // b_A,1 = −S·ΣᵢDη₀ (scale S²), entering z at scale S³: ×2^(2f) = ×4.
        let z1 = Matrix::from_fn(3, 2, |i, j| {
            BigInt::from(a1[i] * w1[j] - 4 * (0..3).map(|r| d0[r][j]).sum::<i64>())
        });
        view.push_step(z1, Matrix::filled(3, 2, BigInt::zero()))
            .unwrap();
        let o = guest_multi_step(&view);
        assert_eq!(o.recovered(), 2, "{:?}", o.failures);
    }
}
