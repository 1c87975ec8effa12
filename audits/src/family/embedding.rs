//! `embedding-dp`: fl-ldp's EmbeddingDP (sign quantisation, then randomized response at
//! ε/2 per coordinate), on inputs chosen so that every adjacent pair of coordinates is
//! seen with each input-bit combination.

use fl_ldp::{BitProduct, EmbeddingDp, Mechanism};
use rand::{Rng, rngs::ChaCha20Rng};
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader};
use crate::{
    analysis::BitLaw,
    error::{AuditError, Result},
    protocol::OutputKind,
    source::{BitAccumulator, word_threshold},
    suite::Params,
};

/// The dimension D of a vector mechanism.
pub(crate) const DIM: Param = Param {
    key: "dim",
    option: "dim",
    required: true,
    what: "the dimension D, an integer from 1 to 4096",
};

/// EmbeddingDP at ε on vectors of dimension D.
#[derive(Debug, Clone)]
pub(crate) struct Embedding {
    m: EmbeddingDp,
    dim: usize,
    inputs: Vec<(String, Vec<f64>)>,
    /// The sampler defect `"copy_coin": c`: coordinate 1 reuses coordinate 0's coin with
    /// probability c when their input bits are equal (each coordinate keeps its law; the
    /// pair's joint law does not). A threshold on a uniform 64-bit word.
    copy_coin: Option<u64>,
}

/// The inputs of an EmbeddingDP audit of dimension `dim`, chosen so that every adjacent
/// pair of coordinates (j, j + 1) is seen with each input-bit combination (bit = x > 0):
///
/// | input | bits | pair (j, j + 1), j even / odd |
/// |---|---|---|
/// | positive | 1 1 1 1 … | 11 / 11 |
/// | negative | 0 0 0 0 … | 00 / 00 |
/// | alternating | 1 0 1 0 … | 10 / 01 |
/// | boundary | 0 1 0 1 … (±0 and subnormals) | 01 / 10 |
///
/// The first two differ in every coordinate: the neighbours of the whole-vector ε claim.
/// The boundary input holds +0.0, −0.0 and −5e-324 (bit 0) and 5e-324 (bit 1), where a
/// sign test written as `x >= 0` or on the sign bit goes wrong.
fn inputs(dim: usize) -> Vec<(String, Vec<f64>)> {
    let positive: Vec<f64> = (0..dim).map(|j| 0.25 + j as f64).collect();
    let negative: Vec<f64> = positive.iter().map(|x| -x).collect();
    let alternating: Vec<f64> = positive
        .iter()
        .enumerate()
        .map(|(j, &x)| if j % 2 == 0 { x } else { -x })
        .collect();
    let boundary: Vec<f64> = (0..dim)
        .map(|j| match j % 6 {
            0 => 0.0,
            2 => -0.0,
            4 => -5e-324,
            _ => 5e-324,
        })
        .collect();
    vec![
        ("positive".into(), positive),
        ("negative".into(), negative),
        ("alternating".into(), alternating),
        ("boundary".into(), boundary),
    ]
}

/// An input of the audit and whether its coordinates 0 and 1 have equal bits.
pub(crate) struct EmbeddingInput {
    x: Vec<f64>,
    equal_bits: bool,
}

impl Family for Embedding {
    const INFO: MechanismInfo = MechanismInfo {
        name: "embedding-dp",
        description: "EmbeddingDP: sign quantisation then RR at eps/2 per coordinate (fl-ldp EmbeddingDp)",
        params: &[EPS, DIM],
        tests: &["coordinates", "independence", "epsilon", "serial"],
    };
    type Output = Vec<bool>;
    type Drawer = EmbeddingInput;
    type Observer = BitAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let eps = r.epsilon()?;
        let dim = r.int("dim", 1, 4096)?;
        let copy_coin = match params.get("copy_coin") {
            None => None,
            Some(v) => match v.as_f64() {
                Some(p) if (0.0..1.0).contains(&p) => Some(word_threshold(p)),
                _ => {
                    return Err(AuditError::usage(format!(
                        "sampler parameter `copy_coin` must be a probability in [0, 1), got {v}"
                    )));
                }
            },
        };
        Ok(Self {
            m: EmbeddingDp::new(Some(eps)),
            dim,
            inputs: inputs(dim),
            copy_coin,
        })
    }

    fn law(&self) -> Result<Law> {
        let mut inputs = Vec::new();
        let mut input_bits = Vec::new();
        for (label, x) in &self.inputs {
            let p = self.m.one_probabilities(x)?;
            input_bits.push(x.iter().map(|&v| v > 0.0).collect());
            inputs.push((label.clone(), json!(x), p));
        }
        Ok(Law::Bits(BitLaw {
            dim: self.dim,
            inputs,
            input_bits,
            epsilon: Some((
                self.m.per_coordinate_epsilon(),
                self.m.per_vector_epsilon(self.dim),
            )),
        }))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Bits(self.dim)))
    }

    fn observer(&self, _: usize) -> Result<BitAccumulator> {
        Ok(BitAccumulator::new(self.dim))
    }

    fn drawer(&self, input: usize) -> Result<EmbeddingInput> {
        let x = self
            .inputs
            .get(input)
            .map(|(_, x)| x.clone())
            .unwrap_or_default();
        let equal_bits = x.len() >= 2 && (x[0] > 0.0) == (x[1] > 0.0);
        Ok(EmbeddingInput { x, equal_bits })
    }

    fn draw(&self, input: &mut EmbeddingInput, rng: &mut ChaCha20Rng) -> Result<Vec<bool>> {
        let mut y: Vec<bool> = self
            .m
            .sample(&input.x, rng)?
            .iter()
            .map(|&v| v == 1)
            .collect();
        if let (Some(c), true) = (self.copy_coin, input.equal_bits)
            && rng.next_u64() < c
        {
            y[1] = y[0];
        }
        Ok(y)
    }
}
