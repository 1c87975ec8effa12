//! `embedding-dp`: fl-ldp's EmbeddingDP (sign quantisation, then randomized response at
//! ε/2 per coordinate), on inputs chosen so that every pair of coordinates is seen with
//! each input-bit combination and the sparsity patterns (0, 1, 2, D/2, D − 2, D − 1, D
//! positive coordinates; first, adjacent and far apart) run.

use fl_ldp::{BitProduct, EmbeddingDp, Mechanism};
use rand::{Rng, rngs::ChaCha20Rng};
use serde_json::json;

use super::{EPS, Family, Law, MechanismInfo, Param, Reader, neighbour_pairs};
use crate::{
    analysis::{BitLaw, learned::LearnedSpec, vector_law},
    error::{AuditError, Result},
    protocol::OutputKind,
    report::Branch,
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
    /// The sampler defect `"reuse_offset": c`: coordinate j ≥ c reuses the RR coin of
    /// coordinate j − c (every coordinate keeps its law; pairs c apart do not).
    reuse_offset: Option<usize>,
    /// The sampler defect `"carry_coins": r` (with `"carry_offset": c`, default 1): with
    /// probability r, coordinate j of an output reuses the RR coin of coordinate
    /// (j + c) mod D of the previous output (each output keeps its law; consecutive
    /// outputs do not).
    carry: Option<(u64, usize)>,
    /// The sampler defect `"bias_when_positives": m` (with `"bias": p`, default 0.2): on
    /// inputs with exactly m positive coordinates, each output bit is set to 1 with
    /// probability p (a different law for one sparsity pattern).
    bias_when: Option<(usize, u64)>,
}

/// The inputs of an EmbeddingDP audit of dimension `dim`, chosen so that every pair of
/// coordinates (j, k) is seen with each input-bit combination (bit = x > 0) — a covering
/// array of strength 2:
///
/// | input | bits |
/// |---|---|
/// | positive | 1 1 1 1 … |
/// | negative | 0 0 0 0 … |
/// | alternating | 1 0 1 0 … (bit = NOT bit 0 of j) |
/// | boundary | 0 1 0 1 … (bit = bit 0 of j; ±0 and subnormals) |
/// | period-2^(b+1), inverse, for b = 1.. | bit = bit b of j, and its complement |
///
/// Two coordinates j ≠ k differ in some bit b of their index, so the pair of inputs built
/// on bit b shows them as 01 and 10; positive and negative show 11 and 00. The first two
/// differ in every coordinate: the neighbours of the whole-vector ε claim. The boundary
/// input holds +0.0, −0.0 and −5e-324 (bit 0) and 5e-324 (bit 1), where a sign test
/// written as `x >= 0` or on the sign bit goes wrong.
///
/// Then the sparsity patterns ([`sparsity_patterns`]): a branch on the number or the
/// position of the positive coordinates runs for 1, 2, D − 2 and D − 1 positives (with the
/// covering array's 0, D/2 and D), one positive first, two adjacent, two far apart (first
/// and last), every coordinate but the middle one, every one but the two ends. A pattern an
/// earlier input already has is not repeated (the coverage table names the input that
/// has it).
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
    let mut inputs = vec![
        ("positive".into(), positive.clone()),
        ("negative".into(), negative),
        ("alternating".into(), alternating),
        ("boundary".into(), boundary),
    ];
    let mut b = 1;
    while (1usize << b) < dim {
        let signed = |flip: bool| -> Vec<f64> {
            positive
                .iter()
                .enumerate()
                .map(|(j, &x)| if ((j >> b) & 1 == 1) != flip { x } else { -x })
                .collect()
        };
        let period = 1usize << (b + 1);
        inputs.push((format!("period-{period}"), signed(false)));
        inputs.push((format!("period-{period}-inverse"), signed(true)));
        b += 1;
    }
    for (label, bits) in sparsity_patterns(dim) {
        if inputs
            .iter()
            .any(|(_, x)| x.iter().map(|&v| v > 0.0).eq(bits.iter().copied()))
        {
            continue;
        }
        let x = positive
            .iter()
            .zip(&bits)
            .map(|(&v, &b)| if b { v } else { -v })
            .collect();
        inputs.push((label, x));
    }
    inputs
}

/// The sparsity patterns the inputs exercise (label, bit per coordinate), for D ≥ 2: one
/// positive coordinate (the first); two adjacent (around the middle) and two far apart
/// (the first and the last); D − 1 (all but the middle one) and D − 2 (all but the first
/// and the last). Each is one more input with the suite's sample size, so the list is kept
/// short: it adds at most 5 inputs (4 at D = 4, where two adjacent is `period-4-inverse`).
/// Patterns with no positive or with every coordinate positive are the `negative` and
/// `positive` inputs.
fn sparsity_patterns(dim: usize) -> Vec<(String, Vec<bool>)> {
    if dim < 2 {
        return Vec::new();
    }
    let (last, middle) = (dim - 1, dim / 2);
    let only = |set: &[usize]| -> Vec<bool> { (0..dim).map(|j| set.contains(&j)).collect() };
    let except = |set: &[usize]| -> Vec<bool> { (0..dim).map(|j| !set.contains(&j)).collect() };
    let mut patterns = vec![
        ("one-positive-first".to_string(), only(&[0])),
        (
            "two-positive-adjacent".to_string(),
            only(&[middle - 1, middle]),
        ),
        ("two-positive-far".to_string(), only(&[0, last])),
        (format!("all-but-{middle}-positive"), except(&[middle])),
        ("all-but-ends-positive".to_string(), except(&[0, last])),
    ];
    patterns.retain(|(_, bits)| {
        let ones = bits.iter().filter(|&&b| b).count();
        ones > 0 && ones < dim
    });
    let mut seen = Vec::new();
    patterns.retain(|(_, bits)| {
        let new = !seen.contains(bits);
        seen.push(bits.clone());
        new
    });
    patterns
}

/// An input of the audit, whether its coordinates 0 and 1 have equal bits, its number of
/// positive coordinates and the previous output's coins (for the `carry_coins` defect).
pub(crate) struct EmbeddingInput {
    x: Vec<f64>,
    equal_bits: bool,
    positives: usize,
    coins: Option<Vec<bool>>,
}

/// A sampler probability parameter `key` in [0, 1), as a word threshold.
fn probability(params: &Params, key: &str) -> Result<Option<u64>> {
    match params.get(key) {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(p) if (0.0..1.0).contains(&p) => Ok(Some(word_threshold(p))),
            _ => Err(AuditError::usage(format!(
                "sampler parameter `{key}` must be a probability in [0, 1), got {v}"
            ))),
        },
    }
}

/// A sampler integer parameter `key` from 0 to `max`.
fn count(params: &Params, key: &str, max: usize) -> Result<Option<usize>> {
    match params.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(c) if c as usize <= max => Ok(Some(c as usize)),
            _ => Err(AuditError::usage(format!(
                "sampler parameter `{key}` must be an integer from 0 to {max}, got {v}"
            ))),
        },
    }
}

impl Family for Embedding {
    const INFO: MechanismInfo = MechanismInfo {
        name: "embedding-dp",
        description: "EmbeddingDP: sign quantisation then RR at eps/2 per coordinate, joint law of the vector (fl-ldp EmbeddingDp)",
        params: &[EPS, DIM],
        tests: &[
            "coordinates",
            "independence",
            "epsilon",
            "learned",
            "serial",
        ],
    };
    type Output = Vec<bool>;
    type Drawer = EmbeddingInput;
    type Observer = BitAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let eps = r.epsilon()?;
        let dim = r.int("dim", 1, 4096)?;
        let copy_coin = probability(params, "copy_coin")?;
        let reuse_offset = match count(params, "reuse_offset", dim)? {
            Some(0) => {
                return Err(AuditError::usage(
                    "sampler parameter `reuse_offset` must be at least 1",
                ));
            }
            c => c,
        };
        let carry = probability(params, "carry_coins")?
            .map(|r| Ok::<_, AuditError>((r, count(params, "carry_offset", dim)?.unwrap_or(1))))
            .transpose()?;
        let bias_when = count(params, "bias_when_positives", dim)?
            .map(|m| {
                let p = probability(params, "bias")?.unwrap_or(word_threshold(0.2));
                Ok::<_, AuditError>((m, p))
            })
            .transpose()?;
        Ok(Self {
            m: EmbeddingDp::new(Some(eps)),
            dim,
            inputs: inputs(dim),
            copy_coin,
            reuse_offset,
            carry,
            bias_when,
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
        let positives = x.iter().filter(|&&v| v > 0.0).count();
        Ok(EmbeddingInput {
            x,
            equal_bits,
            positives,
            coins: None,
        })
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
        if self.reuse_offset.is_some() || self.carry.is_some() {
            // The RR coin of coordinate j: whether the output bit differs from the input's.
            let sign: Vec<bool> = input.x.iter().map(|&v| v > 0.0).collect();
            let mut coins: Vec<bool> = y.iter().zip(&sign).map(|(&b, &s)| b != s).collect();
            if let Some(c) = self.reuse_offset {
                for j in c..coins.len() {
                    coins[j] = coins[j - c];
                }
            }
            if let (Some((r, c)), Some(prev)) = (self.carry, &input.coins)
                && rng.next_u64() < r
            {
                let d = prev.len().max(1);
                coins = (0..prev.len()).map(|j| prev[(j + c) % d]).collect();
            }
            y = coins.iter().zip(&sign).map(|(&f, &s)| f != s).collect();
            input.coins = Some(coins);
        }
        if let Some((m, p)) = self.bias_when
            && input.positives == m
        {
            for b in &mut y {
                if rng.next_u64() < p {
                    *b = true;
                }
            }
        }
        Ok(y)
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(bits_space(law))
    }

    /// The sign quantisation's cases: a positive coordinate (bit 1), a negative one, and
    /// the boundary values where `x > 0` differs from `x >= 0` or the sign bit.
    fn coverage(&self) -> Vec<Branch> {
        let with = |what: &str, test: fn(f64) -> bool| {
            Branch::new(
                what,
                self.inputs
                    .iter()
                    .filter(|(_, x)| x.iter().any(|&v| test(v)))
                    .map(|(l, _)| l.clone()),
            )
        };
        let mut branches = vec![
            with("a coordinate > 0 (bit 1)", |v| v > 0.0 && v.is_normal()),
            with("a coordinate < 0 (bit 0)", |v| v < 0.0 && v.is_normal()),
            with("+0.0 (bit 0)", |v| v == 0.0 && v.is_sign_positive()),
            with("-0.0 (bit 0)", |v| v == 0.0 && v.is_sign_negative()),
            with("a positive subnormal (bit 1)", |v| {
                v > 0.0 && v.is_subnormal()
            }),
            with("a negative subnormal (bit 0)", |v| {
                v < 0.0 && v.is_subnormal()
            }),
        ];
        // The sparsity patterns: how many coordinates are positive, and where.
        let bits = |x: &[f64]| -> Vec<bool> { x.iter().map(|&v| v > 0.0).collect() };
        let mut counts: Vec<usize> = self
            .inputs
            .iter()
            .map(|(_, x)| bits(x).iter().filter(|&&b| b).count())
            .collect();
        counts.sort_unstable();
        counts.dedup();
        for m in counts {
            branches.push(Branch::new(
                format!("exactly {m} of {} coordinates positive", self.dim),
                self.inputs
                    .iter()
                    .filter(|(_, x)| bits(x).iter().filter(|&&b| b).count() == m)
                    .map(|(l, _)| l.clone()),
            ));
        }
        for (what, pattern) in sparsity_patterns(self.dim) {
            branches.push(Branch::new(
                format!("sign pattern {what}"),
                self.inputs
                    .iter()
                    .filter(|(_, x)| bits(x) == pattern)
                    .map(|(l, _)| l.clone()),
            ));
        }
        branches
    }
}

/// The learned event of a bit vector: the whole vector (its first 16 bits), every pair of
/// inputs as neighbours of the whole-vector claim, the bits as features.
pub(crate) fn bits_space(law: &Law) -> Option<LearnedSpec> {
    let Law::Bits(l) = law else {
        return None;
    };
    let (_, whole) = l.epsilon?;
    let d = l.dim.min(crate::tally::FULL_VECTOR_MAX_DIM);
    let cells = 1usize << d;
    Some(LearnedSpec {
        cells,
        cell_meaning: if d == l.dim {
            "the whole bit vector".into()
        } else {
            format!("the first {d} bits of the vector")
        },
        features: (0..cells)
            .map(|c| (0..d).map(|j| f64::from(((c >> j) & 1) as u8)).collect())
            .collect(),
        claimed: whole,
        pairs: neighbour_pairs(l.inputs.len()),
        laws: Some(
            l.inputs
                .iter()
                .map(|(_, _, p)| vector_law(&p[..d.min(p.len())]))
                .collect(),
        ),
    })
}
