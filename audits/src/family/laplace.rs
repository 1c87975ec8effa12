//! `laplace`: fl-ldp's Laplace mechanism on a probability vector (exact lattice sampler),
//! on the one-hot neighbours e0, e1 and the uniform vector.

use fl_ldp::{CoordinateCdf, LaplaceOptions, Mechanism, ProbabilityVectorLaplace};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader};
use crate::{
    analysis::RealLaw,
    error::{AuditError, Result},
    protocol::OutputKind,
    source::{RealAccumulator, laplace_octile_edges},
    suite::Params,
};

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
        tests: &["ks", "tails", "epsilon", "serial"],
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
        let (m, m_left, xs_left) = (self.m, self.m, xs.clone());
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
            cdf_left: Box::new(move |i, j, y| {
                xs_left
                    .get(i)
                    .and_then(|x| m_left.coordinate_cdf_left(x, j, y).ok())
                    .unwrap_or(f64::NAN)
            }),
            scale: self.m.noise_scale(),
            epsilon: Some(self.m.privacy().epsilon),
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
        Ok(RealAccumulator::new(
            x.iter().map(|&c| laplace_octile_edges(c, scale)).collect(),
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
}
