//! `laplace`: fl-ldp's Laplace mechanism on a probability vector (exact lattice sampler),
//! on the one-hot neighbours e0, e1 and the uniform vector.

use fl_ldp::{CoordinateCdf, LaplaceOptions, Mechanism, ProbabilityVectorLaplace};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader, neighbour_pairs};
use crate::{
    analysis::{MAX_REAL_CELLS, RealLaw, learned::LearnedSpec},
    error::{AuditError, Result},
    protocol::OutputKind,
    report::Branch,
    source::{CellGrid, RealAccumulator, laplace_octile_edges},
    suite::Params,
};

/// The most cells of one input's coordinates together.
const MAX_REAL_CELLS_PER_INPUT: usize = 1 << 20;

/// The coordinates the learned event bins.
const EVENT_COORDINATES: usize = 3;

/// The Laplace mechanism at ε on vectors of dimension D.
#[derive(Debug, Clone)]
pub(crate) struct Laplace {
    m: ProbabilityVectorLaplace,
    dim: usize,
    inputs: Vec<(String, Vec<f64>)>,
}

impl Family for Laplace {
    const INFO: MechanismInfo = MechanismInfo {
        name: "laplace",
        description: "Laplace on a probability vector, exact lattice sampler (fl-ldp ProbabilityVectorLaplace)",
        params: &[
            EPS,
            Param {
                key: "dim",
                option: "dim",
                required: true,
                what: "the dimension D, an integer from 2 to 1024",
            },
            Param {
                key: "granularity_exponent",
                option: "",
                required: false,
                what: "the lattice spacing 2^k, an integer k from -60 to 60 (default: fl-ldp's fine lattice)",
            },
        ],
        tests: &["ks", "tails", "epsilon", "learned", "serial"],
    };
    type Output = Vec<f64>;
    type Drawer = Vec<f64>;
    type Observer = RealAccumulator;

    /// `eps`, `dim` and, optionally, the lattice exponent `granularity_exponent` (a coarse
    /// lattice, k near 0, makes the output law visibly discrete).
    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let eps = r.epsilon()?;
        let dim = r.int("dim", 2, 1024)?;
        let mut options = LaplaceOptions::default();
        if let Some(v) = r.optional("granularity_exponent") {
            let k = v
                .as_i64()
                .and_then(|k| i32::try_from(k).ok())
                .filter(|k| (-60..=60).contains(k))
                .ok_or_else(|| r.invalid("granularity_exponent", v))?;
            options = options.with_granularity_exponent(k);
        }
        let m = ProbabilityVectorLaplace::new(eps, dim, options)?;
        // The one-hot neighbours e0 and e1 (L1 distance 2, the sensitivity) and the
        // uniform vector.
        let mut e0 = vec![0.0; dim];
        let mut e1 = vec![0.0; dim];
        e0[0] = 1.0;
        e1[1] = 1.0;
        let inputs = vec![
            ("e0".into(), e0),
            ("e1".into(), e1),
            ("uniform".into(), vec![1.0 / dim as f64; dim]),
        ];
        for (_, x) in &inputs {
            m.coordinate_cdf(x, 0, 0.0)?;
        }
        Ok(Self { m, dim, inputs })
    }

    fn law(&self) -> Result<Law> {
        let xs: Vec<Vec<f64>> = self.inputs.iter().map(|(_, x)| x.clone()).collect();
        let m = self.m;
        Ok(Law::Reals(RealLaw {
            dim: self.dim,
            inputs: self
                .inputs
                .iter()
                .map(|(l, x)| (l.clone(), json!(x), x.clone()))
                .collect(),
            cdf: Box::new(move |i, j, y| {
                xs.get(i)
                    .and_then(|x| m.coordinate_cdf(x, j, y).ok())
                    .unwrap_or(f64::NAN)
            }),
            scale: self.m.noise_scale(),
            epsilon: Some(self.m.privacy().epsilon),
            chi_square_edges: Vec::new(),
            cell_offsets: self.cell_offsets(),
            plan: None,
        }))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Reals(self.dim)))
    }

    /// The bins of each coordinate's serial stream: the octiles of a Laplace law of the
    /// mechanism's scale centred at the input's coordinate.
    fn observer(&self, input: usize) -> Result<RealAccumulator> {
        let (_, x) = self
            .inputs
            .get(input)
            .ok_or_else(|| AuditError::Mechanism(format!("no input number {input}")))?;
        let scale = self.m.noise_scale();
        let Law::Reals(law) = self.law()? else {
            return Err(AuditError::Mechanism(
                "the Laplace law is real-valued".into(),
            ));
        };
        Ok(RealAccumulator::new(
            x.iter().map(|&c| laplace_octile_edges(c, scale)).collect(),
            self.grid(),
            law.cell_edges(input),
        ))
    }

    fn drawer(&self, input: usize) -> Result<Vec<f64>> {
        Ok(self
            .inputs
            .get(input)
            .map(|(_, x)| x.clone())
            .unwrap_or_default())
    }

    fn draw(&self, x: &mut Vec<f64>, rng: &mut ChaCha20Rng) -> Result<Vec<f64>> {
        Ok(self.m.sample(x, rng)?)
    }

    /// The bins of the first three coordinates among edges every input shares; the law of
    /// each cell is the product of the coordinates' bin probabilities (independent
    /// coordinates).
    fn event_space(&self, _: &Law) -> Result<Option<LearnedSpec>> {
        let grid = self.grid();
        let bins = grid.edges.len() + 1;
        let cells = grid.cells();
        let mut laws = Vec::with_capacity(self.inputs.len());
        for (_, x) in &self.inputs {
            let mut per_coordinate = Vec::with_capacity(grid.coordinates);
            for j in 0..grid.coordinates {
                let mut cdf = Vec::with_capacity(bins + 1);
                cdf.push(0.0);
                for &e in &grid.edges {
                    cdf.push(self.m.coordinate_cdf(x, j, e)?);
                }
                cdf.push(1.0);
                per_coordinate.push(cdf.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>());
            }
            laws.push(
                (0..cells)
                    .map(|c| {
                        let mut rest = c;
                        per_coordinate
                            .iter()
                            .map(|p| {
                                let bin = rest % bins;
                                rest /= bins;
                                p[bin]
                            })
                            .product()
                    })
                    .collect(),
            );
        }
        Ok(Some(LearnedSpec {
            cells,
            cell_meaning: format!(
                "the bins of the first {} coordinates among {} shared edges",
                grid.coordinates,
                grid.edges.len()
            ),
            features: (0..cells)
                .map(|c| {
                    let mut rest = c;
                    (0..grid.coordinates)
                        .map(|_| {
                            let bin = rest % bins;
                            rest /= bins;
                            bin as f64 / (bins - 1) as f64
                        })
                        .collect()
                })
                .collect(),
            claimed: self.m.privacy().epsilon,
            // Any two probability vectors are within L1 distance 2: all neighbours.
            pairs: neighbour_pairs(self.inputs.len()),
            laws: Some(laws),
        }))
    }

    fn coverage(&self) -> Vec<Branch> {
        vec![
            Branch::new(
                "one-hot input (one coordinate 1, the others 0; the neighbours at L1 distance 2)",
                ["e0".to_string(), "e1".to_string()],
            ),
            Branch::new(
                "uniform input (every coordinate 1/D)",
                ["uniform".to_string()],
            ),
        ]
    }
}

impl Laplace {
    /// The cells' edges around a coordinate's centre: the quantiles k/K, k = 1..K−1, of
    /// the continuous Laplace law of the mechanism's scale b (closed form; the lattice
    /// law's own CDF gives each cell's probability), K = 2¹² cells for up to 256
    /// coordinates and fewer above (2²⁰/D, at least 2⁸), so that the counts of one input
    /// stay within 2²⁰ cells.
    fn cell_offsets(&self) -> Vec<f64> {
        let b = self.m.noise_scale();
        let k = (MAX_REAL_CELLS_PER_INPUT / self.dim.max(1)).clamp(1 << 8, MAX_REAL_CELLS);
        (1..k)
            .map(|i| {
                let q = i as f64 / k as f64;
                if q < 0.5 {
                    b * (2.0 * q).ln()
                } else {
                    -b * (2.0 * (1.0 - q)).ln()
                }
            })
            .collect()
    }

    /// The learned event's grid: edges at −2b, −b, −b/2, 0, ½, 1, 1 + b/2, 1 + b, 1 + 2b
    /// (the inputs' coordinates lie in [0, 1]), on the first three coordinates.
    fn grid(&self) -> CellGrid {
        let b = self.m.noise_scale();
        CellGrid {
            edges: vec![
                -2.0 * b,
                -b,
                -0.5 * b,
                0.0,
                0.5,
                1.0,
                1.0 + 0.5 * b,
                1.0 + b,
                1.0 + 2.0 * b,
            ],
            coordinates: self.dim.min(EVENT_COORDINATES),
        }
    }
}
