//! `discrete-gaussian`: fl-ldp's exact discrete Gaussian N_ℤ(μ, σ²) (the noise
//! fl-hetero-nn adds to each integer coordinate of its gradient messages), one integer per
//! output, on integer shifts μ.
//!
//! The mechanism is (α, αΔ²/(2σ²))-Rényi DP — approximate (ε, δ), never pure ε — so the
//! family makes no ε statement: its privacy loss is unbounded on the tails, and a
//! certified lower bound on a pure ε would compare against nothing the crate claims.
//! What is audited is the law itself, from which the RDP bound follows: the exact
//! lattice KS test, the binned chi-square over every integer within 4σ of the shift plus
//! both tails, the tail probabilities at 3σ and 6σ, and (as for every family) serial
//! independence at every lag and over-dispersion across batches.

use fl_ldp::DiscreteGaussian as Law0;
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{Family, Law, MechanismInfo, Param, Reader};
use crate::{
    analysis::{MAX_REAL_CELLS, RealLaw, learned::LearnedSpec},
    error::{AuditError, Result},
    protocol::OutputKind,
    report::Branch,
    source::{CellGrid, RealAccumulator},
    suite::Params,
};

/// Largest σ audited: outputs stay within 2^53 (exact as JSON numbers and `f64`s).
const MAX_SIGMA: f64 = 1_099_511_627_776.0; // 2^40
/// Largest |shift| audited.
const MAX_SHIFT: i64 = 1 << 50;
/// Half-width of the chi-square's singleton bins, in units of σ.
const CHI_SQUARE_SIGMAS: f64 = 4.0;
/// Most bins of the chi-square within 4σ (a larger σ bins runs of ⌈8σ/512⌉ = ⌈σ/64⌉
/// integers).
const MAX_BINS: usize = 512;

/// N_ℤ(μ, σ²) at the audit's shifts μ.
#[derive(Debug, Clone)]
pub(crate) struct DiscreteGaussian {
    m: Law0,
    shifts: Vec<i64>,
}

impl Family for DiscreteGaussian {
    const INFO: MechanismInfo = MechanismInfo {
        name: "discrete-gaussian",
        description: "exact discrete Gaussian N_Z(mu, sigma^2) (fl-ldp DiscreteGaussian, fl-hetero-nn's gradient noise); RDP, not pure eps: no eps statement",
        params: &[
            Param {
                key: "sigma",
                option: "sigma",
                required: true,
                what: "the noise scale sigma, a finite number in (0, 2^40]",
            },
            Param {
                key: "shifts",
                option: "shifts",
                required: false,
                what: "the integer shifts mu the noise is added to, 1 to 16 integers of magnitude at most 2^50 (default 0, 7)",
            },
        ],
        tests: &["ks", "chi-square", "tails", "serial"],
    };
    type Output = Vec<f64>;
    type Drawer = i64;
    type Observer = RealAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let sigma = r.number("sigma")?;
        if !(sigma.is_finite() && sigma > 0.0 && sigma <= MAX_SIGMA) {
            return Err(r.invalid("sigma", &json!(sigma)));
        }
        let m = Law0::new(sigma)?;
        let shifts = match r.optional("shifts") {
            None => vec![0, 7],
            Some(v) => v
                .as_array()
                .and_then(|a| a.iter().map(serde_json::Value::as_i64).collect())
                .filter(|s: &Vec<i64>| {
                    (1..=16).contains(&s.len()) && s.iter().all(|x| x.abs() <= MAX_SHIFT)
                })
                .ok_or_else(|| r.invalid("shifts", v))?,
        };
        Ok(Self { m, shifts })
    }

    fn law(&self) -> Result<Law> {
        let m = self.m.clone();
        let shifts = self.shifts.clone();
        Ok(Law::Reals(RealLaw {
            dim: 1,
            inputs: self
                .shifts
                .iter()
                .map(|&s| (s.to_string(), json!(s), vec![s as f64]))
                .collect(),
            // P(μ + Z ≤ y) = P(Z ≤ ⌊y − μ⌋); P(μ + Z < y) = P(Z ≤ ⌈y − μ⌉ − 1).
            cdf: Box::new(move |i, _, y| match shifts.get(i) {
                Some(&s) => lattice_cdf(&m, (y - s as f64).floor()),
                None => f64::NAN,
            }),
            scale: self.m.sigma(),
            epsilon: None,
            chi_square_edges: self.chi_square_edges(),
            cell_offsets: self.cell_offsets(),
            plan: None,
        }))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Reals(1)))
    }

    /// The serial stream's bins: the octiles of the law around the shift (half-integer
    /// edges, merged where the lattice is coarser than an octile).
    fn observer(&self, input: usize) -> Result<RealAccumulator> {
        let &s = self
            .shifts
            .get(input)
            .ok_or_else(|| AuditError::Mechanism(format!("no input number {input}")))?;
        let mut edges: Vec<f64> = Vec::new();
        for q in 1..8 {
            let z = self.quantile(f64::from(q) / 8.0);
            let e = s as f64 + z as f64 + 0.5;
            if edges.last().is_none_or(|&l| l < e) {
                edges.push(e);
            }
        }
        let Law::Reals(law) = self.law()? else {
            return Err(AuditError::Mechanism(
                "the discrete Gaussian law is real-valued".into(),
            ));
        };
        Ok(RealAccumulator::new(
            vec![edges],
            CellGrid {
                edges: Vec::new(),
                coordinates: 1,
            },
            law.cell_edges(input),
        ))
    }

    fn drawer(&self, input: usize) -> Result<i64> {
        self.shifts
            .get(input)
            .copied()
            .ok_or_else(|| AuditError::Mechanism(format!("no input number {input}")))
    }

    fn draw(&self, shift: &mut i64, rng: &mut ChaCha20Rng) -> Result<Vec<f64>> {
        let y = i128::from(*shift) + self.m.sample(rng);
        Ok(vec![y as f64])
    }

    /// None: the mechanism claims no pure ε (see the module docs).
    fn event_space(&self, _: &Law) -> Result<Option<LearnedSpec>> {
        Ok(None)
    }

    fn coverage(&self) -> Vec<Branch> {
        let labels: Vec<String> = self.shifts.iter().map(ToString::to_string).collect();
        vec![Branch::new(
            "integer shift mu (the sampler's code does not branch on it; each shift is one input)",
            labels,
        )]
    }
}

impl DiscreteGaussian {
    /// The chi-square's edges around the shift: half-integers between the singleton
    /// bins of the integers within 4σ (runs of ⌈σ/64⌉ integers for σ > 64), the
    /// outermost cells being both tails.
    fn chi_square_edges(&self) -> Vec<f64> {
        let l = (CHI_SQUARE_SIGMAS * self.m.sigma()).ceil().max(2.0);
        let width = (2.0 * l / MAX_BINS as f64).ceil().max(1.0);
        let mut edges = Vec::new();
        let mut e = -l - 0.5;
        while e <= l + 0.5 {
            edges.push(e);
            e += width;
        }
        edges
    }

    /// The cells' edges around the shift: the half-integers between every integer
    /// within 40σ of it (the law's whole mass to e^(−800)), so that the KS statistic at
    /// the edges is the exact lattice statistic; for σ > 51, runs of integers, at most
    /// [`MAX_REAL_CELLS`] cells.
    fn cell_offsets(&self) -> Vec<f64> {
        let l = (40.0 * self.m.sigma()).ceil().max(40.0);
        let width = (2.0 * (l + 1.0) / MAX_REAL_CELLS as f64).ceil().max(1.0);
        let mut offsets = Vec::new();
        let mut e = -l - 0.5;
        while e <= l + 0.5 {
            offsets.push(e);
            e += width;
        }
        offsets
    }

    /// The smallest integer z with P(Z ≤ z) ≥ q (bisection on fl-ldp's CDF).
    fn quantile(&self, q: f64) -> i128 {
        let bound = (40.0 * self.m.sigma()).ceil().max(40.0) as i128;
        let (mut lo, mut hi) = (-bound, bound);
        while lo < hi {
            let mid = lo + (hi - lo).div_euclid(2);
            if self.m.cdf(mid) >= q {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }
}

/// P(Z ≤ z) for an integral `z` given as a float (±∞ and values beyond the law's
/// support clamp to 0 and 1).
fn lattice_cdf(m: &Law0, z: f64) -> f64 {
    if z.is_nan() {
        f64::NAN
    } else if z < -1e30 {
        0.0
    } else if z > 1e30 {
        1.0
    } else {
        m.cdf(z as i128)
    }
}
