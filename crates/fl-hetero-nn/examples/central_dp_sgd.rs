//! What an idealised **central** DP-SGD would reach on default-credit, against LabelDP and
//! the undefended model on the same runs (issue 29's ε = 1 cell).
//!
//! ```text
//! cargo run --release -p fl-hetero-nn --example central_dp_sgd                 # 10 runs
//! cargo run --release -p fl-hetero-nn --example central_dp_sgd -- --runs 4 --first-run 1
//! ```
//!
//! The split protocol's DP-SGD modes release the host's side **per row** (noised error
//! rows, or error rows from labels randomised once), because the host back-propagates row
//! by row; every per-row ε-DP channel on one binary label is a post-processing of RR at ε,
//! which LabelDP already spends in full. A mechanism that noised the **sum** of the host's
//! per-example gradients instead (computed under encryption, with the guest adding the
//! noise) would escape that limit. This program measures the best such a mechanism could
//! do, with none of the protocol's constraints: one party holds the whole model (FATE's
//! `hetero_nn-binary-1`: host bottom Linear(10, 4) + ReLU, guest bottom Linear(13, 4) +
//! ReLU, interactive layer ReLU(a_A·W_A + a_B·W_B + b), top Linear(4, 1) + sigmoid), the
//! per-example gradient direction ∂logit/∂θ of **every** parameter is clipped jointly to C
//! and multiplied by (p − y) (a label change moves it by at most C), the sum gets one
//! discrete Gaussian of σ = z·C per coordinate (on a 2⁻²⁰ lattice; z from
//! [`DpSgd::for_target`] for 150 full-batch releases at δ = 10⁻⁵), and Adam steps on the
//! noisy mean. It is a utility bound for a protocol not built, not a private
//! implementation: floating point, no fixed-point grid, no encryption.
//!
//! The three rows share each run's 80/20 split and initialisation (ChaCha20 seeded by the
//! run number); LabelDP flips each training label with probability 1/(1 + e^ε) and trains
//! the same way without noise. Learning rates: Adam 0.05 (undefended, LabelDP) and 0.02
//! with C = 2 (central DP-SGD), the best of {0.01, 0.02, 0.05, 0.1} × C ∈ {0.1, 0.5, 2, 5}
//! on runs 1–4; the figures in the README are runs 11–20.

// An example program: errors end it with a message.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fl_hetero_nn::Error;
use fl_hetero_nn::config::DpSgd;
use fl_hetero_nn::data::{VerticalData, parse_csv, roc_auc};
use fl_hetero_nn::error::ApiMisuse;
use rand::rngs::ChaCha20Rng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

const GUEST_CSV: &str = include_str!("../data/default_credit_hetero_guest.csv");
const HOST_CSV: &str = include_str!("../data/default_credit_hetero_host.csv");
/// Host features.
const DH: usize = 10;
/// Guest features.
const DG: usize = 13;
/// Bottom width (both parties).
const B: usize = 4;
/// Interactive width.
const M: usize = 4;
/// Offsets of the parameter blocks in θ.
const O_WH: usize = 0;
const O_BH: usize = O_WH + DH * B;
const O_WG: usize = O_BH + B;
const O_BG: usize = O_WG + DG * B;
const O_WA: usize = O_BG + B;
const O_WB: usize = O_WA + B * M;
const O_BZ: usize = O_WB + B * M;
const O_WT: usize = O_BZ + M;
const O_CT: usize = O_WT + M;
/// Number of parameters.
const P: usize = O_CT + 1;
/// Full-batch epochs (releases per example).
const EPOCHS: usize = 150;
const DELTA: f64 = 1e-5;
/// The noise lattice: 2^-20.
const LATTICE_BITS: i32 = 20;

/// How a run trains.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Undefended,
    LabelDp,
    Central,
}

/// θ of the whole model.
struct Net {
    theta: Vec<f64>,
}

impl Net {
    /// torch's default initialisation: U(−1/√fan_in, 1/√fan_in) for weights and biases.
    fn new(rng: &mut ChaCha20Rng) -> Self {
        let mut theta = vec![0.0; P];
        for (lo, hi, fan_in) in [
            (O_WH, O_WG, DH),
            (O_WG, O_WA, DG),
            (O_WA, O_WT, 2 * B),
            (O_WT, P, M),
        ] {
            let b = 1.0 / (fan_in as f64).sqrt();
            for t in &mut theta[lo..hi] {
                *t = rng.random_range(-b..b);
            }
        }
        Self { theta }
    }

    /// The logit of one row, and ∂logit/∂θ into `grad` when given.
    fn forward(&self, xh: &[f64], xg: &[f64], grad: Option<&mut [f64]>) -> f64 {
        let t = &self.theta;
        let (mut uh, mut ug) = ([0.0; B], [0.0; B]);
        for k in 0..B {
            uh[k] = t[O_BH + k] + (0..DH).map(|j| xh[j] * t[O_WH + j * B + k]).sum::<f64>();
            ug[k] = t[O_BG + k] + (0..DG).map(|j| xg[j] * t[O_WG + j * B + k]).sum::<f64>();
        }
        let (ha, hb) = (uh.map(|v| v.max(0.0)), ug.map(|v| v.max(0.0)));
        let mut v = [0.0; M];
        for (j, vj) in v.iter_mut().enumerate() {
            *vj = t[O_BZ + j]
                + (0..B)
                    .map(|k| ha[k] * t[O_WA + k * M + j] + hb[k] * t[O_WB + k * M + j])
                    .sum::<f64>();
        }
        let z = v.map(|x| x.max(0.0));
        let logit = t[O_CT] + (0..M).map(|j| z[j] * t[O_WT + j]).sum::<f64>();
        if let Some(g) = grad {
            g[O_CT] = 1.0;
            let mut e = [0.0; M];
            for j in 0..M {
                g[O_WT + j] = z[j];
                e[j] = if v[j] > 0.0 { t[O_WT + j] } else { 0.0 };
                g[O_BZ + j] = e[j];
            }
            for k in 0..B {
                for j in 0..M {
                    g[O_WA + k * M + j] = ha[k] * e[j];
                    g[O_WB + k * M + j] = hb[k] * e[j];
                }
                let back = |w: usize, u: f64| {
                    if u > 0.0 {
                        (0..M).map(|j| e[j] * t[w + k * M + j]).sum::<f64>()
                    } else {
                        0.0
                    }
                };
                let (fa, fb) = (back(O_WA, uh[k]), back(O_WB, ug[k]));
                g[O_BH + k] = fa;
                g[O_BG + k] = fb;
                for j in 0..DH {
                    g[O_WH + j * B + k] = fa * xh[j];
                }
                for j in 0..DG {
                    g[O_WG + j * B + k] = fb * xg[j];
                }
            }
        }
        logit
    }
}

/// Adam (β = 0.9, 0.999; ε = 10⁻⁸).
struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
    lr: f64,
}

impl Adam {
    fn step(&mut self, theta: &mut [f64], g: &[f64]) {
        self.t += 1;
        let (b1, b2) = (0.9f64, 0.999f64);
        for i in 0..theta.len() {
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g[i];
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g[i] * g[i];
            let m = self.m[i] / (1.0 - b1.powi(self.t));
            let v = self.v[i] / (1.0 - b2.powi(self.t));
            theta[i] -= self.lr * m / (v.sqrt() + 1e-8);
        }
    }
}

/// Test AUC of one run under `mode` at ε (`clip` and `lr` as chosen above).
fn run(data: &VerticalData, run: u64, mode: Mode, eps: f64) -> Result<f64, Error> {
    let mut rng = ChaCha20Rng::seed_from_u64(run.wrapping_mul(7919));
    let n = data.labels.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    let (train, test) = order.split_at(n * 4 / 5);
    let mut net = Net::new(&mut rng);
    // The mechanisms' coins come after the split and the initialisation: the modes share
    // both.
    let mut y: Vec<f64> = train.iter().map(|&i| data.labels[i]).collect();
    if mode == Mode::LabelDp {
        let keep = eps.exp() / (1.0 + eps.exp());
        for v in &mut y {
            if rng.random::<f64>() >= keep {
                *v = 1.0 - *v;
            }
        }
    }
    let (lr, clip) = match mode {
        Mode::Central => (0.02, 2.0),
        _ => (0.05, f64::INFINITY),
    };
    let noise = if mode == Mode::Central {
        let z = DpSgd::for_target(clip, eps, DELTA, 1.0, EPOCHS as u64)?.noise_multiplier;
        let sigma = z * clip * 2f64.powi(LATTICE_BITS);
        Some(
            fl_ldp::DiscreteGaussian::new(sigma).map_err(|e| ApiMisuse::InvalidConfig {
                reason: format!("σ = {sigma}: {e}"),
            })?,
        )
    } else {
        None
    };
    let mut adam = Adam {
        m: vec![0.0; P],
        v: vec![0.0; P],
        t: 0,
        lr,
    };
    let (mut g, mut sum) = (vec![0.0; P], vec![0.0; P]);
    for _ in 0..EPOCHS {
        sum.fill(0.0);
        for (r, &i) in train.iter().enumerate() {
            let p = 1.0
                / (1.0 + (-net.forward(data.host.row(i), data.guest.row(i), Some(&mut g))).exp());
            let norm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
            let scale = (p - y[r]) * (clip / norm).min(1.0);
            for (s, x) in sum.iter_mut().zip(&g) {
                *s += scale * x;
            }
        }
        if let Some(noise) = &noise {
            for s in &mut sum {
                *s += noise.sample(&mut rng) as f64 * 2f64.powi(-LATTICE_BITS);
            }
        }
        let mean: Vec<f64> = sum.iter().map(|s| s / train.len() as f64).collect();
        adam.step(&mut net.theta, &mean);
    }
    let scores: Vec<f64> = test
        .iter()
        .map(|&i| net.forward(data.host.row(i), data.guest.row(i), None))
        .collect();
    let labels: Vec<f64> = test.iter().map(|&i| data.labels[i]).collect();
    roc_auc(&scores, &labels).ok_or_else(|| {
        ApiMisuse::InvalidData {
            reason: "test AUC undefined".into(),
        }
        .into()
    })
}

/// Mean ± sd.
fn pm(x: &[f64]) -> String {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let sd = (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt();
    format!("{m:.4} ± {sd:.4}")
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str, default: u64| -> Result<u64, Error> {
        match args.iter().position(|a| a == name) {
            None => Ok(default),
            Some(k) => args.get(k + 1).and_then(|v| v.parse().ok()).ok_or_else(|| {
                ApiMisuse::InvalidConfig {
                    reason: format!("{name} takes a non-negative integer"),
                }
                .into()
            }),
        }
    };
    let (runs, first) = (value("--runs", 10)?.max(2), value("--first-run", 11)?);
    let data = VerticalData::align(parse_csv(GUEST_CSV, true)?, parse_csv(HOST_CSV, false)?)?;
    println!(
        "default-credit, runs {first}–{}, {EPOCHS} full-batch epochs, test AUC:",
        first + runs - 1
    );
    println!();
    println!(
        "| ε | undefended | LabelDP | central DP-SGD (idealised) | central − LabelDP (paired) |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let ids: Vec<u64> = (first..first + runs).collect();
    let none = ids
        .iter()
        .map(|&r| run(&data, r, Mode::Undefended, 1.0))
        .collect::<Result<Vec<_>, _>>()?;
    for eps in [1.0, 4.0] {
        let label = ids
            .iter()
            .map(|&r| run(&data, r, Mode::LabelDp, eps))
            .collect::<Result<Vec<_>, _>>()?;
        let central = ids
            .iter()
            .map(|&r| run(&data, r, Mode::Central, eps))
            .collect::<Result<Vec<_>, _>>()?;
        let diff: Vec<f64> = central.iter().zip(&label).map(|(a, b)| a - b).collect();
        println!(
            "| {eps} | {} | {} | {} | {} |",
            pm(&none),
            pm(&label),
            pm(&central),
            pm(&diff)
        );
    }
    Ok(())
}
