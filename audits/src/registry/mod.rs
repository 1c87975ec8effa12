//! The mechanism registry: for each audited mechanism, its exact law at a grid point (from
//! the mechanism crate's law functions), the inputs the audit uses, and its sampler (the
//! mechanism crate's sampler). No formula is written here: probabilities come from
//! fl-ldp / fl-signds, statistics from fl-stats.

use serde_json::{Value, json};

pub(crate) mod frequency;
pub(crate) mod signds;

use crate::{
    analysis::{
        BitLaw, BitStats, FiniteLaw, PointResult, RealLaw, TestSet,
        estimator::EstimatorAudit,
        neighbour_pairs,
        olh::OlhHashedAudit,
        serial_note, serial_outcomes,
        signds::{ClientAudit, SelectionAudit},
    },
    error::{AuditError, Result},
    progress::Progress,
    protocol::OutputKind,
    source::{
        BitAccumulator, ClassAccumulator, Data, Defects, Feed, FeedFactory, Internal,
        RealAccumulator, Source, laplace_octile_edges, mix, word_threshold,
    },
    suite::Params,
};

use fl_ldp::{
    BinaryRandomizedResponse, BitProduct, CoordinateCdf, EmbeddingDp, Epsilon, ExponentialForm,
    ExponentialMechanism, FiniteInputs, FiniteOutputs, KaryRandomizedResponse, LabelDp,
    LaplaceOptions, Mechanism, ProbabilityVectorLaplace, RrWithPrior,
};

/// What `fl-audit list` and the suite validator know about a mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MechanismInfo {
    /// Registry name used in suite files and on the command line.
    pub name: &'static str,
    /// One line.
    pub description: &'static str,
    /// Parameters (suite `params`/`grid` keys).
    pub params: &'static str,
    /// Tests a suite may ask for.
    pub tests: &'static [&'static str],
}

/// Every mechanism the tool can audit.
pub const MECHANISMS: &[MechanismInfo] = &[
    MechanismInfo {
        name: "rr-binary",
        description: "binary randomized response (fl-ldp BinaryRandomizedResponse)",
        params: "eps",
        tests: &["cells", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "rr-kary",
        description: "k-ary randomized response / GRR (fl-ldp KaryRandomizedResponse)",
        params: "eps, k",
        tests: &["cells", "chi-square", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "label-dp-binary",
        description: "LabelDP on binary labels, through LabelDp::privatize (shape [n])",
        params: "eps",
        tests: &["cells", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "label-dp-onehot",
        description: "LabelDP on one-hot labels, through LabelDp::privatize (shape [n, classes])",
        params: "eps, classes",
        tests: &["cells", "chi-square", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "embedding-dp",
        description: "EmbeddingDP: sign quantisation then RR at eps/2 per coordinate (fl-ldp EmbeddingDp)",
        params: "eps, dim",
        tests: &["coordinates", "independence", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "exponential",
        description: "exponential mechanism over a utility vector and its worst-case neighbour (fl-ldp ExponentialMechanism)",
        params: "eps, utilities, sensitivity?, form?",
        tests: &["cells", "chi-square", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "rr-with-prior",
        description: "RR-with-prior for label DP (Ghazi et al. 2021; fl-ldp RrWithPrior)",
        params: "eps, prior",
        tests: &["cells", "chi-square", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "laplace",
        description: "Laplace on a probability vector, exact lattice sampler (fl-ldp ProbabilityVectorLaplace)",
        params: "eps, dim, granularity_exponent?",
        tests: &["ks", "tails", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "signds-selection",
        description: "SignDS dimension selection on chosen top-k sets (fl-signds SelectionLaw, exact profile)",
        params: "eps, dim, top_k, output_dim",
        tests: &["nu", "boost", "inclusion", "sets", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "signds-magrr",
        description: "SignDS MagRR randomizer as the client holds it (binary RR at eps = eps_RR)",
        params: "eps",
        tests: &["cells", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "signds-client",
        description: "the whole SignDS client (Client::encode): sign, MagRR bit, nu",
        params: "eps, eps_rr, dim, top_k_fraction, output_dim?",
        tests: &["sign", "magrr", "nu", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "frequency-grr",
        description: "frequency oracle GRR (fl-ldp FrequencyOracle): support probabilities, report law",
        params: "eps, k",
        tests: &["support", "law", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "frequency-oue",
        description: "frequency oracle OUE (fl-ldp FrequencyOracle): support bits, independence",
        params: "eps, k",
        tests: &["support", "law", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "frequency-olh",
        description: "frequency oracle OLH (fl-ldp FrequencyOracle): support probabilities, (seed, bucket) law",
        params: "eps, k",
        tests: &["support", "law", "epsilon", "serial"],
    },
    MechanismInfo {
        name: "estimator-rr-binary",
        description: "unbiasedness of binary RR's de-biasing (BinaryRandomizedResponse::estimate_ones), z-test",
        params: "eps",
        tests: &["estimate"],
    },
    MechanismInfo {
        name: "estimator-grr",
        description: "unbiasedness of GRR's count estimator (FrequencyOracle::estimate), z-test",
        params: "eps, k",
        tests: &["estimate"],
    },
    MechanismInfo {
        name: "estimator-oue",
        description: "unbiasedness of OUE's count estimator (FrequencyOracle::estimate), z-test",
        params: "eps, k",
        tests: &["estimate"],
    },
    MechanismInfo {
        name: "estimator-olh",
        description: "unbiasedness of OLH's count estimator (FrequencyOracle::estimate), z-test",
        params: "eps, k",
        tests: &["estimate"],
    },
];

/// Looks a mechanism up by name.
///
/// # Errors
/// [`AuditError::Usage`] naming the known mechanisms.
pub fn info(name: &str) -> Result<&'static MechanismInfo> {
    MECHANISMS.iter().find(|m| m.name == name).ok_or_else(|| {
        let names: Vec<&str> = MECHANISMS.iter().map(|m| m.name).collect();
        AuditError::usage(format!(
            "unknown mechanism `{name}`; known mechanisms: {}",
            names.join(", ")
        ))
    })
}

fn param<'a>(params: &'a Params, name: &str, what: &str) -> Result<&'a Value> {
    params
        .get(name)
        .ok_or_else(|| AuditError::usage(format!("missing parameter `{name}` ({what})")))
}

/// A finite, non-negative ε parameter.
pub(crate) fn eps_param(params: &Params) -> Result<Epsilon> {
    let v = param(params, "eps", "the claimed epsilon, a finite number >= 0")?;
    let x = v
        .as_f64()
        .ok_or_else(|| AuditError::usage(format!("parameter `eps` must be a number, got {v}")))?;
    Epsilon::new(x).map_err(|e| AuditError::usage(format!("parameter `eps`: {e}")))
}

/// An integer parameter in `lo..=hi`.
pub(crate) fn int_param(params: &Params, name: &str, lo: u64, hi: u64) -> Result<usize> {
    let what = format!("an integer from {lo} to {hi}");
    let v = param(params, name, &what)?;
    match v.as_u64() {
        Some(x) if (lo..=hi).contains(&x) => usize::try_from(x)
            .map_err(|_| AuditError::usage(format!("parameter `{name}` is too large"))),
        _ => Err(AuditError::usage(format!(
            "parameter `{name}` must be {what}, got {v}"
        ))),
    }
}

/// The law of a grid point.
#[derive(Debug)]
pub(crate) enum Law {
    /// Finite outputs.
    Finite(FiniteLaw),
    /// Bit vectors.
    Bits(BitLaw),
    /// Real vectors.
    Reals(RealLaw),
    /// SignDS's selection (counts in its own layout).
    Selection(SelectionAudit),
    /// SignDS's client pipeline (counts in its own layout).
    Client(ClientAudit),
    /// A de-biasing estimator (counts in its own layout).
    Estimator(EstimatorAudit),
    /// OLH through reported hashes (counts in its own layout).
    OlhHashed(OlhHashedAudit),
}

impl Law {
    fn inputs(&self) -> usize {
        match self {
            Self::Finite(l) => l.inputs.len(),
            Self::Bits(l) => l.inputs.len(),
            Self::Reals(l) => l.inputs.len(),
            Self::Selection(l) => l.inputs.len(),
            Self::Client(l) => l.inputs.len(),
            Self::Estimator(l) => l.inputs.len(),
            Self::OlhHashed(l) => l.inputs.len(),
        }
    }

    /// The input labels, in input order.
    pub(crate) fn labels(&self) -> Vec<String> {
        match self {
            Self::Finite(l) => l.inputs.iter().map(|(l, _, _)| l.clone()).collect(),
            Self::Bits(l) => l.inputs.iter().map(|(l, _, _)| l.clone()).collect(),
            Self::Reals(l) => l.inputs.iter().map(|(l, _, _)| l.clone()).collect(),
            Self::Selection(l) => l.inputs.iter().map(|(l, _, _)| l.clone()).collect(),
            Self::Client(l) => l.inputs.iter().map(|(l, _, _)| l.clone()).collect(),
            Self::Estimator(l) => l.inputs.iter().map(|(l, _, _)| l.clone()).collect(),
            Self::OlhHashed(l) => l.inputs.iter().map(|(l, _)| l.clone()).collect(),
        }
    }

    /// Serial streams per input: one for a finite output, one per coordinate of a vector;
    /// none for an estimator (its users hold different values in a fixed order, so its
    /// reports are not one identically distributed stream; the frequency-oracle suites
    /// test the same randomizers' streams).
    pub(crate) fn serial_streams(&self) -> usize {
        match self {
            Self::Finite(_) | Self::Selection(_) | Self::Client(_) | Self::OlhHashed(_) => 1,
            Self::Bits(l) => l.dim,
            Self::Reals(l) => l.dim,
            Self::Estimator(_) => 0,
        }
    }

    /// The protocol inputs, in input order.
    pub(crate) fn protocol_inputs(&self) -> Vec<Value> {
        match self {
            Self::Finite(l) => l.inputs.iter().map(|(_, v, _)| v.clone()).collect(),
            Self::Bits(l) => l.inputs.iter().map(|(_, v, _)| v.clone()).collect(),
            Self::Reals(l) => l.inputs.iter().map(|(_, v, _)| v.clone()).collect(),
            Self::Selection(l) => l.inputs.iter().map(|(_, v, _)| v.clone()).collect(),
            Self::Client(l) => l.inputs.iter().map(|(_, v, _)| v.clone()).collect(),
            Self::Estimator(l) => l.inputs.iter().map(|(_, v, _)| v.clone()).collect(),
            Self::OlhHashed(l) => l.inputs.iter().map(|(_, v)| v.clone()).collect(),
        }
    }
}

/// One grid point ready to run: its law, its tests and where its samples come from.
pub(crate) struct PointAudit {
    /// The expected law.
    pub law: Law,
    /// The tests asked for.
    pub tests: TestSet,
    /// The sample source.
    pub source: Box<dyn Source>,
}

fn wrong_kind() -> AuditError {
    AuditError::Mechanism("sampler returned the wrong kind of output".into())
}

impl PointAudit {
    /// Hypothesis tests this point will run (used to split α before sampling).
    pub(crate) fn test_count(&self) -> usize {
        let serial = if self.tests.has("serial") {
            self.law.serial_streams() * self.inputs()
        } else {
            0
        };
        serial
            + match &self.law {
                Law::Finite(l) => l.test_count(&self.tests),
                Law::Bits(l) => l.test_count(&self.tests),
                Law::Reals(l) => l.test_count(&self.tests),
                Law::Selection(l) => l.test_count(&self.tests),
                Law::Client(l) => l.test_count(&self.tests),
                Law::Estimator(l) => l.test_count(&self.tests),
                Law::OlhHashed(l) => l.test_count(&self.tests),
            }
    }

    /// ε statements this point will make.
    pub(crate) fn epsilon_count(&self) -> usize {
        match &self.law {
            Law::Finite(l) => usize::from(self.tests.has("epsilon") && l.epsilon.is_some()),
            Law::Bits(l) => l.epsilon_count(&self.tests),
            Law::Reals(l) => l.epsilon_count(&self.tests),
            Law::Selection(l) => l.epsilon_count(&self.tests),
            Law::Client(l) => l.epsilon_count(&self.tests),
            Law::Estimator(_) => 0,
            Law::OlhHashed(l) => l.epsilon_count(&self.tests),
        }
    }

    /// Probabilities in which a relative error must be detectable (planning).
    pub(crate) fn plan_probabilities(&self) -> Vec<f64> {
        match &self.law {
            Law::Finite(l) => l.plan_probabilities(),
            Law::Bits(l) => l.plan_probabilities(),
            Law::Reals(l) => l.plan_probabilities(),
            Law::Selection(l) => l.plan_probabilities(),
            Law::Client(l) => l.plan_probabilities(),
            Law::Estimator(l) => l.plan_probabilities(),
            Law::OlhHashed(l) => l.plan_probabilities(),
        }
    }

    /// Number of inputs (each gets `n` samples).
    pub(crate) fn inputs(&self) -> usize {
        self.law.inputs()
    }

    /// Draws `n` samples per input and runs the tests.
    pub(crate) fn run(&mut self, n: u64, seed: u64, progress: &Progress) -> Result<PointResult> {
        let mut data = Vec::with_capacity(self.inputs());
        let mut serial = Vec::with_capacity(self.inputs());
        for i in 0..self.inputs() {
            let d = self.source.draw(i, n, mix(seed, i as u64), progress)?;
            data.push(d.data);
            serial.push(d.serial);
        }
        let counts = |data: Vec<Data>| -> Result<Vec<Vec<u64>>> {
            data.into_iter()
                .map(|d| match d {
                    Data::Counts(c) => Ok(c),
                    _ => Err(wrong_kind()),
                })
                .collect()
        };
        let mut result = match &self.law {
            Law::Finite(l) => l.analyze(&counts(data)?, &self.tests),
            Law::Selection(l) => l.analyze(&counts(data)?, &self.tests),
            Law::Client(l) => l.analyze(&counts(data)?, &self.tests),
            Law::Estimator(l) => l.analyze(&counts(data)?, &self.tests),
            Law::OlhHashed(l) => l.analyze(&counts(data)?, &self.tests),
            Law::Bits(l) => {
                let stats: Vec<BitStats> = data
                    .into_iter()
                    .map(|d| match d {
                        Data::Bits(s) => Ok(s),
                        _ => Err(wrong_kind()),
                    })
                    .collect::<Result<_>>()?;
                l.analyze(&stats, &self.tests)
            }
            Law::Reals(l) => {
                let cols: Vec<Vec<Vec<f64>>> = data
                    .into_iter()
                    .map(|d| match d {
                        Data::Reals(c) => Ok(c),
                        _ => Err(wrong_kind()),
                    })
                    .collect::<Result<_>>()?;
                l.analyze(&cols, &self.tests)
            }
        }?;
        if self.tests.has("serial") {
            let labels = self.law.labels();
            for (label, pairs) in labels.iter().zip(&serial) {
                result.outcomes.extend(serial_outcomes(label, pairs)?);
            }
            if let Some(first) = serial.first() {
                result.notes.push(serial_note(first));
            }
        }
        Ok(result)
    }
}

fn class_labels(k: usize) -> Vec<String> {
    (0..k).map(|c| c.to_string()).collect()
}

/// The most probabilities (inputs × outputs) an audit materialises for one grid point
/// (2^24, 128 MiB of `f64`): a larger grid point is a usage error, not an out-of-memory
/// abort.
pub(crate) const MAX_LAW_CELLS: usize = 1 << 24;

/// [`AuditError::Usage`] when `inputs` × `outputs` exceeds [`MAX_LAW_CELLS`].
pub(crate) fn check_law_cells(inputs: usize, outputs: usize) -> Result<()> {
    if inputs.saturating_mul(outputs) > MAX_LAW_CELLS {
        return Err(AuditError::usage(format!(
            "the law has {inputs} inputs x {outputs} outputs; an audit handles at most 2^24 \
             (choose fewer classes or a smaller dimension)"
        )));
    }
    Ok(())
}

/// The finite law of `m` on `inputs` (with every pair of inputs a pair of neighbours).
pub(crate) fn finite_law<M>(
    m: &M,
    inputs: &[&M::Input],
    json_inputs: Vec<Value>,
) -> Result<FiniteLaw>
where
    M: FiniteOutputs,
{
    let first = *inputs
        .first()
        .ok_or_else(|| AuditError::Mechanism("a finite law needs at least one input".into()))?;
    let count = m.output_count(first)?;
    check_law_cells(inputs.len(), count)?;
    let outputs = class_labels(count);
    let mut rows = Vec::with_capacity(inputs.len());
    for (x, j) in inputs.iter().zip(json_inputs) {
        let label = match &j {
            Value::Number(n) => n.to_string(),
            other => other.to_string(),
        };
        rows.push((label, j, m.output_probabilities(*x)?));
    }
    Ok(FiniteLaw::new(
        outputs,
        rows,
        Some((m.privacy().epsilon, neighbour_pairs(inputs.len()))),
    ))
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
pub(crate) fn embedding_inputs(dim: usize) -> Vec<(String, Vec<f64>)> {
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

fn embedding(params: &Params) -> Result<(EmbeddingDp, usize)> {
    let eps = eps_param(params)?;
    let dim = int_param(params, "dim", 1, 4096)?;
    Ok((EmbeddingDp::new(Some(eps)), dim))
}

fn f64_list(params: &Params, name: &str, what: &str) -> Result<Vec<f64>> {
    let v = param(params, name, what)?;
    let list = v
        .as_array()
        .and_then(|a| a.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>());
    match list {
        Some(l) if !l.is_empty() && l.iter().all(|x| x.is_finite()) => Ok(l),
        _ => Err(AuditError::usage(format!(
            "parameter `{name}` must be {what}, got {v}"
        ))),
    }
}

/// The exponential mechanism and its two neighbouring utility vectors: `utilities` (u)
/// and its worst-case neighbour u′ for the claimed relation (‖u − u′‖∞ ≤ Δ), built around
/// the lowest-utility candidate j (the first one when several tie):
///
/// - standard form, P(o) ∝ exp(ε·u(o)/(2Δ)): u′(j) = u(j) + Δ and u′(o) = u(o) − Δ for every
///   other o, so P[j|u′]/P[j|u] = e^(ε/2)·Z(u)/Z(u′) with Z(u′) ≥ e^(−ε/2)·Z(u): the ratio
///   approaches e^ε as j's share of Z(u) shrinks;
/// - monotone form (utilities move in one direction between neighbours), P(o) ∝
///   exp(ε·u(o)/Δ): u′(j) = u(j) + Δ, the rest unchanged, with the same limit e^ε.
///
/// The realised ε at (u, u′) — what the report shows beside the claim — is below ε by j's
/// share of the normaliser; no pair of neighbours reaches ε exactly at finite utilities.
fn exponential(params: &Params) -> Result<(ExponentialMechanism, Vec<Vec<f64>>)> {
    let eps = eps_param(params)?;
    let u = f64_list(params, "utilities", "a non-empty array of finite numbers")?;
    let sensitivity = match params.get("sensitivity") {
        None => 1.0,
        Some(v) => v.as_f64().ok_or_else(|| {
            AuditError::usage(format!("parameter `sensitivity` must be a number, got {v}"))
        })?,
    };
    let form = match params.get("form").and_then(Value::as_str) {
        None | Some("standard") => ExponentialForm::Standard,
        Some("monotone") => ExponentialForm::Monotone,
        Some(other) => {
            return Err(AuditError::usage(format!(
                "parameter `form` must be \"standard\" or \"monotone\", got {other}"
            )));
        }
    };
    let m = ExponentialMechanism::new(eps, sensitivity, form)?;
    let low = u
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(j, _)| j);
    let v: Vec<f64> = u
        .iter()
        .enumerate()
        .map(|(o, &x)| match form {
            _ if o == low => x + sensitivity,
            ExponentialForm::Standard => x - sensitivity,
            _ => x,
        })
        .collect();
    Ok((m, vec![u, v]))
}

fn prior(params: &Params) -> Result<RrWithPrior> {
    let p = f64_list(
        params,
        "prior",
        "an array of at least 2 non-negative numbers",
    )?;
    Ok(RrWithPrior::new(eps_param(params)?, &p)?)
}

/// The Laplace mechanism at `params`: `eps`, `dim` and, optionally, the lattice exponent
/// `granularity_exponent` (spacing 2^k, −60..=60; default: fl-ldp's fine lattice). A
/// coarse lattice (k near 0) makes the output law visibly discrete.
fn laplace(params: &Params) -> Result<(ProbabilityVectorLaplace, usize)> {
    let eps = eps_param(params)?;
    let dim = int_param(params, "dim", 2, 1024)?;
    let mut options = LaplaceOptions::default();
    if let Some(v) = params.get("granularity_exponent") {
        let k = v
            .as_i64()
            .and_then(|k| i32::try_from(k).ok())
            .filter(|k| (-60..=60).contains(k))
            .ok_or_else(|| {
                AuditError::usage(format!(
                    "parameter `granularity_exponent` must be an integer from -60 to 60, got {v}"
                ))
            })?;
        options = options.with_granularity_exponent(k);
    }
    Ok((ProbabilityVectorLaplace::new(eps, dim, options)?, dim))
}

/// Laplace inputs: the one-hot neighbours e_0 and e_1 (L1 distance 2, the sensitivity)
/// and the uniform vector.
fn laplace_inputs(dim: usize) -> Vec<(String, Vec<f64>)> {
    let mut e0 = vec![0.0; dim];
    let mut e1 = vec![0.0; dim];
    e0[0] = 1.0;
    e1[1] = 1.0;
    vec![
        ("e0".into(), e0),
        ("e1".into(), e1),
        ("uniform".into(), vec![1.0 / dim as f64; dim]),
    ]
}

/// The law and output form of `mechanism` at `params`.
///
/// # Errors
/// Unknown mechanism, missing or invalid parameters.
pub(crate) fn law(mechanism: &str, params: &Params) -> Result<(Law, Option<OutputKind>)> {
    match info(mechanism)?.name {
        "rr-binary" => {
            let m = BinaryRandomizedResponse::new(eps_param(params)?);
            let l = finite_law(&m, &[&false, &true], vec![json!(0), json!(1)])?;
            Ok((Law::Finite(l), Some(OutputKind::Class(2))))
        }
        "label-dp-binary" => {
            let m = LabelDp::new(eps_param(params)?);
            let l = finite_law(m.binary(), &[&false, &true], vec![json!(0), json!(1)])?;
            Ok((Law::Finite(l), Some(OutputKind::Class(2))))
        }
        "rr-kary" => {
            let k = int_param(params, "k", 2, 1 << 16)?;
            let m = KaryRandomizedResponse::new(eps_param(params)?, k)?;
            let xs: Vec<usize> = (0..k).collect();
            let refs: Vec<&usize> = xs.iter().collect();
            let l = finite_law(&m, &refs, xs.iter().map(|&c| json!(c)).collect())?;
            Ok((Law::Finite(l), Some(OutputKind::Class(k))))
        }
        "label-dp-onehot" => {
            let k = int_param(params, "classes", 2, 1 << 16)?;
            let m = LabelDp::new(eps_param(params)?).one_hot(k)?;
            let xs: Vec<usize> = (0..k).collect();
            let refs: Vec<&usize> = xs.iter().collect();
            let l = finite_law(&m, &refs, xs.iter().map(|&c| json!(c)).collect())?;
            Ok((Law::Finite(l), Some(OutputKind::Class(k))))
        }
        "embedding-dp" => {
            let (m, dim) = embedding(params)?;
            let mut inputs = Vec::new();
            let mut input_bits = Vec::new();
            for (label, x) in embedding_inputs(dim) {
                let p = m.one_probabilities(&x)?;
                input_bits.push(x.iter().map(|&v| v > 0.0).collect());
                inputs.push((label, json!(x), p));
            }
            let l = BitLaw {
                dim,
                inputs,
                input_bits,
                epsilon: Some((m.per_coordinate_epsilon(), m.per_vector_epsilon(dim))),
            };
            Ok((Law::Bits(l), Some(OutputKind::Bits(dim))))
        }
        "exponential" => {
            let (m, inputs) = exponential(params)?;
            let refs: Vec<&[f64]> = inputs.iter().map(Vec::as_slice).collect();
            let l = finite_law(&m, &refs, inputs.iter().map(|u| json!(u)).collect())?;
            let k = inputs.first().map_or(0, Vec::len);
            Ok((Law::Finite(l), Some(OutputKind::Class(k))))
        }
        "rr-with-prior" => {
            let m = prior(params)?;
            let xs = m.inputs()?;
            let refs: Vec<&usize> = xs.iter().collect();
            let l = finite_law(&m, &refs, xs.iter().map(|&c| json!(c)).collect())?;
            Ok((Law::Finite(l), Some(OutputKind::Class(xs.len()))))
        }
        "laplace" => {
            let (m, dim) = laplace(params)?;
            let inputs = laplace_inputs(dim);
            for (_, x) in &inputs {
                m.coordinate_cdf(x, 0, 0.0)?;
            }
            let xs: Vec<Vec<f64>> = inputs.iter().map(|(_, x)| x.clone()).collect();
            let claimed = m.privacy().epsilon;
            let scale = m.noise_scale();
            let (m_left, xs_left) = (m, xs.clone());
            let law = RealLaw {
                dim,
                inputs: inputs.into_iter().map(|(l, x)| (l, json!(x), x)).collect(),
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
                scale,
                epsilon: Some(claimed),
            };
            Ok((Law::Reals(law), Some(OutputKind::Reals(dim))))
        }
        "signds-selection" => Ok((
            signds::selection_law(params)?,
            Some(signds::selection_output(params)?),
        )),
        "signds-magrr" => Ok((signds::magrr_law(params)?, Some(OutputKind::Class(2)))),
        "signds-client" => Ok((
            signds::client_law(params)?,
            Some(signds::client_output(params)?),
        )),
        name @ ("frequency-grr" | "frequency-oue" | "frequency-olh") => {
            let law = frequency::oracle_law(name, params)?;
            let kind = match &law {
                Law::Finite(l) if name == "frequency-grr" => OutputKind::Class(l.outputs.len()),
                Law::Bits(l) => OutputKind::Bits(l.dim),
                _ => frequency::olh_output_kind(params)?,
            };
            Ok((law, Some(kind)))
        }
        name @ ("estimator-rr-binary" | "estimator-grr" | "estimator-oue" | "estimator-olh") => {
            Ok((frequency::estimator_law(name, params)?, None))
        }
        other => Err(AuditError::usage(format!("no law for mechanism `{other}`"))),
    }
}

/// Labels per privatize call when sampling LabelDP (bounded memory).
const LABEL_BATCH: usize = 1 << 14;

/// A drawer of single outputs that privatizes `batch` inputs at a time (LabelDP's
/// `privatize` is a batch API) and hands the outputs out in order.
fn buffered<O>(
    mut refill: impl FnMut(&mut rand::rngs::ChaCha20Rng) -> Result<Vec<O>>,
) -> impl FnMut(&mut rand::rngs::ChaCha20Rng) -> Result<O> {
    let mut buffer: std::vec::IntoIter<O> = Vec::new().into_iter();
    move |rng| loop {
        if let Some(o) = buffer.next() {
            return Ok(o);
        }
        buffer = refill(rng)?.into_iter();
        if buffer.len() == 0 {
            return Err(AuditError::Mechanism(
                "the sampler returned an empty batch".into(),
            ));
        }
    }
}

/// The EmbeddingDP defect of a suite's `sampler`: `"copy_coin": c` makes coordinate 1
/// reuse coordinate 0's coin with probability c when their input bits are equal (each
/// coordinate keeps its law; the pair's joint law does not).
fn copy_coin(params: &Params) -> Result<Option<u64>> {
    match params.get("copy_coin") {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(p) if (0.0..1.0).contains(&p) => Ok(Some(word_threshold(p))),
            _ => Err(AuditError::usage(format!(
                "sampler parameter `copy_coin` must be a probability in [0, 1), got {v}"
            ))),
        },
    }
}

/// The bins of a Laplace audit's serial streams: per input and coordinate, the octiles of
/// a Laplace law of the mechanism's scale centred at the input.
pub(crate) fn laplace_edges(inputs: &[Vec<f64>], scale: f64) -> Vec<Vec<Vec<f64>>> {
    inputs
        .iter()
        .map(|x| x.iter().map(|&c| laplace_octile_edges(c, scale)).collect())
        .collect()
}

/// The project's sampler for `mechanism` at `params` (which may differ from the law's
/// parameters in a mis-calibrated or deliberately defective variant: see [`Defects`]).
///
/// # Errors
/// Unknown mechanism, missing or invalid parameters.
pub(crate) fn sampler(mechanism: &str, params: &Params) -> Result<Internal> {
    let defects = Defects::from_params(params)?;
    match info(mechanism)?.name {
        "rr-binary" => {
            let m = BinaryRandomizedResponse::new(eps_param(params)?);
            Ok(Internal::per_output(
                move |i| {
                    Ok(move |rng: &mut rand::rngs::ChaCha20Rng| {
                        Ok(usize::from(m.randomize(i == 1, rng)))
                    })
                },
                |_| ClassAccumulator::new(2),
                defects,
            ))
        }
        "rr-kary" => {
            let k = int_param(params, "k", 2, 1 << 16)?;
            let m = KaryRandomizedResponse::new(eps_param(params)?, k)?;
            Ok(Internal::per_output(
                move |i| Ok(move |rng: &mut rand::rngs::ChaCha20Rng| Ok(m.randomize(i, rng)?)),
                move |_| ClassAccumulator::new(k),
                defects,
            ))
        }
        "label-dp-binary" => {
            let m = LabelDp::new(eps_param(params)?);
            Ok(Internal::per_output(
                move |i| {
                    let labels = vec![u8::from(i == 1); LABEL_BATCH];
                    Ok(buffered(move |rng| {
                        let out = m.privatize(&labels, &[LABEL_BATCH], rng)?;
                        Ok(out.into_iter().map(|y| usize::from(y == 1)).collect())
                    }))
                },
                |_| ClassAccumulator::new(2),
                defects,
            ))
        }
        "label-dp-onehot" => {
            let k = int_param(params, "classes", 2, 1 << 16)?;
            let m = LabelDp::new(eps_param(params)?);
            Ok(Internal::per_output(
                move |i| {
                    let rows = (LABEL_BATCH / k).max(1);
                    let mut labels = vec![0u8; rows * k];
                    for r in 0..rows {
                        if let Some(l) = labels.get_mut(r * k + i) {
                            *l = 1;
                        }
                    }
                    Ok(buffered(move |rng| {
                        let out = m.privatize(&labels, &[rows, k], rng)?;
                        Ok(out
                            .chunks_exact(k)
                            .map(|row| row.iter().position(|&v| v == 1).unwrap_or(k))
                            .collect())
                    }))
                },
                move |_| ClassAccumulator::new(k),
                defects,
            ))
        }
        "embedding-dp" => {
            let (m, dim) = embedding(params)?;
            let copy = copy_coin(params)?;
            let inputs: Vec<Vec<f64>> = embedding_inputs(dim).into_iter().map(|(_, x)| x).collect();
            Ok(Internal::per_output(
                move |i| {
                    let x = inputs.get(i).cloned().unwrap_or_default();
                    let equal_bits = x.len() >= 2 && (x[0] > 0.0) == (x[1] > 0.0);
                    Ok(move |rng: &mut rand::rngs::ChaCha20Rng| {
                        let mut y: Vec<bool> = m.sample(&x, rng)?.iter().map(|&v| v == 1).collect();
                        if let (Some(c), true) = (copy, equal_bits)
                            && rand::Rng::next_u64(rng) < c
                        {
                            y[1] = y[0];
                        }
                        Ok(y)
                    })
                },
                move |_| BitAccumulator::new(dim),
                defects,
            ))
        }
        "exponential" => {
            let (m, inputs) = exponential(params)?;
            let k = inputs.first().map_or(0, Vec::len);
            Ok(Internal::per_output(
                move |i| {
                    let c = m.categorical(inputs.get(i).map_or(&[][..], Vec::as_slice))?;
                    Ok(move |rng: &mut rand::rngs::ChaCha20Rng| Ok(c.sample(rng)))
                },
                move |_| ClassAccumulator::new(k),
                defects,
            ))
        }
        "rr-with-prior" => {
            let m = prior(params)?;
            let k = m.inputs()?.len();
            Ok(Internal::per_output(
                move |i| {
                    let m = m.clone();
                    Ok(move |rng: &mut rand::rngs::ChaCha20Rng| Ok(m.randomize(i, rng)?))
                },
                move |_| ClassAccumulator::new(k),
                defects,
            ))
        }
        "laplace" => {
            let (m, dim) = laplace(params)?;
            let inputs: Vec<Vec<f64>> = laplace_inputs(dim).into_iter().map(|(_, x)| x).collect();
            let edges = laplace_edges(&inputs, m.noise_scale());
            Ok(Internal::per_output(
                move |i| {
                    let x = inputs.get(i).cloned().unwrap_or_default();
                    Ok(move |rng: &mut rand::rngs::ChaCha20Rng| Ok(m.sample(&x, rng)?))
                },
                move |i| RealAccumulator::new(edges.get(i).cloned().unwrap_or_default()),
                defects,
            ))
        }
        "signds-selection" => signds::selection_sampler(params, defects),
        "signds-magrr" => signds::magrr_sampler(params, defects),
        "signds-client" => signds::client_sampler(params, defects),
        name @ ("frequency-grr" | "frequency-oue" | "frequency-olh") => {
            frequency::oracle_sampler(name, params, defects)
        }
        name @ ("estimator-rr-binary" | "estimator-grr" | "estimator-oue" | "estimator-olh") => {
            frequency::estimator_sampler(name, params)
        }
        other => Err(AuditError::usage(format!(
            "no sampler for mechanism `{other}`"
        ))),
    }
}

/// The collectors of an external mechanism's outputs for `law` (of `mechanism` at
/// `params`): the same layouts and serial symbols as the project's samplers.
///
/// # Errors
/// Invalid parameters (as [`law`]).
pub(crate) fn feeder(mechanism: &str, params: &Params, law: &Law) -> Result<Box<FeedFactory>> {
    Ok(match law {
        Law::Finite(l) => {
            let k = l.outputs.len();
            Box::new(move |_| Box::new(ClassAccumulator::new(k)) as Box<dyn Feed>)
        }
        Law::Bits(l) => {
            let d = l.dim;
            Box::new(move |_| Box::new(BitAccumulator::new(d)) as Box<dyn Feed>)
        }
        Law::Reals(l) => {
            let centres: Vec<Vec<f64>> = l.inputs.iter().map(|(_, _, c)| c.clone()).collect();
            let edges = laplace_edges(&centres, l.scale);
            Box::new(move |i| {
                Box::new(RealAccumulator::new(
                    edges.get(i).cloned().unwrap_or_default(),
                )) as Box<dyn Feed>
            })
        }
        Law::Selection(_) => signds::selection_feeder(params)?,
        Law::Client(_) => signds::client_feeder(params)?,
        Law::OlhHashed(_) => frequency::hashed_feeder(params)?,
        Law::Estimator(_) => {
            return Err(AuditError::usage(format!(
                "mechanism `{mechanism}` has no external protocol"
            )));
        }
    })
}

/// A grid point of a suite: law at `params`, sampler at `sampler_params`.
///
/// # Errors
/// Unknown mechanism or test, invalid parameters.
pub(crate) fn point(
    mechanism: &str,
    params: &Params,
    sampler_params: &Params,
    tests: &[String],
) -> Result<PointAudit> {
    let info = info(mechanism)?;
    for t in tests {
        if !info.tests.contains(&t.as_str()) {
            return Err(AuditError::usage(format!(
                "mechanism `{mechanism}` has no test `{t}`; its tests: {}",
                info.tests.join(", ")
            )));
        }
    }
    let (law, _) = law(mechanism, params)?;
    signds::check_selection_tests(&law, tests)?;
    let source = sampler(mechanism, sampler_params)?;
    Ok(PointAudit {
        tests: law_tests(mechanism, &law, tests),
        law,
        source: Box::new(source),
    })
}

/// The suite's test names as `law` knows them (a frequency oracle's `support` and `law`
/// are its finite or bit law's tests; see [`frequency::internal_tests`]).
pub(crate) fn law_tests(mechanism: &str, law: &Law, tests: &[String]) -> TestSet {
    TestSet(match law {
        Law::Finite(_) | Law::Bits(_) if mechanism.starts_with("frequency-") => {
            frequency::internal_tests(mechanism, tests)
        }
        _ => tests.to_vec(),
    })
}
