//! Frequency oracles (`frequency-grr`, `frequency-oue`, `frequency-olh`) and the
//! de-biasing estimators (`estimator-rr-binary`, `estimator-grr`, `estimator-oue`,
//! `estimator-olh`). Laws, samplers and estimators come from fl-ldp.

use fl_ldp::{
    BinaryRandomizedResponse, BitProduct, FiniteOutputs, FrequencyOracle, FrequencyProtocol,
    Mechanism,
};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{Law, eps_param, finite_law, int_param};
use crate::{
    analysis::{
        BitLaw, SupportLaw,
        estimator::{EstimatorAudit, apportion},
    },
    error::{AuditError, Result},
    source::{BitAccumulator, ClassAccumulator, Data, Defects, Draws, Internal},
    suite::Params,
};

/// The protocol of a `frequency-*` or `estimator-*` mechanism name.
pub(crate) fn protocol(mechanism: &str) -> Option<FrequencyProtocol> {
    match mechanism.rsplit('-').next() {
        Some("grr") => Some(FrequencyProtocol::Grr),
        Some("oue") => Some(FrequencyProtocol::Oue),
        Some("olh") => Some(FrequencyProtocol::Olh),
        _ => None,
    }
}

fn oracle(mechanism: &str, params: &Params) -> Result<FrequencyOracle> {
    let protocol = protocol(mechanism)
        .ok_or_else(|| AuditError::usage(format!("`{mechanism}` is not a frequency oracle")))?;
    let k = int_param(params, "k", 2, 1 << 16)?;
    Ok(FrequencyOracle::new(eps_param(params)?, k, protocol)?)
}

fn unsupported() -> AuditError {
    AuditError::Mechanism("this frequency-oracle protocol is not supported by fl-audit".into())
}

/// The suite's test names in a frequency oracle's law: `support` (one exact binomial per
/// value: the report supports the user's value with probability p, any other with q),
/// `law` (GRR and OLH: chi-square of the whole report law; OUE: independence of adjacent
/// bits) and `epsilon`.
pub(crate) fn internal_tests(mechanism: &str, tests: &[String]) -> Vec<String> {
    let oue = protocol(mechanism) == Some(FrequencyProtocol::Oue);
    tests
        .iter()
        .map(|t| {
            match (t.as_str(), oue) {
                ("support", true) => "coordinates",
                ("law", true) => "independence",
                ("law", false) => "chi-square",
                (other, _) => other,
            }
            .to_string()
        })
        .collect()
}

/// A frequency oracle's law: GRR and OLH as finite laws over whole reports with their
/// support structure; OUE as a product of bits (coordinate v = "supports v").
pub(crate) fn oracle_law(mechanism: &str, params: &Params) -> Result<Law> {
    let o = oracle(mechanism, params)?;
    let (p, q) = o.support_probabilities();
    let k = o.categories();
    let values: Vec<usize> = (0..k).collect();
    let refs: Vec<&usize> = values.iter().collect();
    let json_inputs = values.iter().map(|&v| json!(v)).collect();
    let support = |supports| SupportLaw {
        supports,
        values: k,
        p,
        q,
    };
    Ok(match o {
        FrequencyOracle::Grr(m) => {
            let mut l = finite_law(&m, &refs, json_inputs)?;
            l.support = Some(support((0..k).map(|y| vec![y]).collect()));
            l.plan = Some(vec![p, q]);
            Law::Finite(l)
        }
        FrequencyOracle::Olh(m) => {
            let mut l = finite_law(&m, &refs, json_inputs)?;
            let g = usize::try_from(m.buckets()).map_err(|_| unsupported())?;
            let supports = (0..l.outputs.len())
                .map(|o| {
                    let (seed, bucket) = ((o / g) as u128, (o % g) as u64);
                    (0..k)
                        .filter(|&v| m.hash(seed, v) == Some(bucket))
                        .collect()
                })
                .collect();
            l.support = Some(support(supports));
            l.plan = Some(vec![p, q]);
            Law::Finite(l)
        }
        FrequencyOracle::Oue(m) => {
            super::check_law_cells(k, k)?;
            let claim = m.privacy().epsilon;
            let inputs = values
                .iter()
                .map(|&v| Ok((v.to_string(), json!(v), m.one_probabilities(&v)?)))
                .collect::<Result<Vec<_>>>()?;
            // The whole vector is ε-LDP; each coordinate is then too (post-processing).
            Law::Bits(BitLaw {
                dim: k,
                inputs,
                input_bits: values
                    .iter()
                    .map(|&v| (0..k).map(|j| j == v).collect())
                    .collect(),
                epsilon: Some((claim, claim)),
            })
        }
        _ => return Err(unsupported()),
    })
}

/// A frequency oracle's sampler: GRR's reports, OLH's reports indexed by fl-ldp's
/// `output_index`, OUE's bit vectors — one report at a time, in order.
pub(crate) fn oracle_sampler(
    mechanism: &str,
    params: &Params,
    defects: Defects,
) -> Result<Internal> {
    let o = oracle(mechanism, params)?;
    let k = o.categories();
    Ok(match o {
        FrequencyOracle::Grr(m) => Internal::per_output(
            move |i| Ok(move |rng: &mut ChaCha20Rng| Ok(m.randomize(i, rng)?)),
            move |_| ClassAccumulator::new(k),
            defects,
        ),
        FrequencyOracle::Olh(m) => {
            let outputs = m.output_count(&0)?;
            Internal::per_output(
                move |i| {
                    Ok(move |rng: &mut ChaCha20Rng| {
                        let report = m.randomize(i, rng)?;
                        Ok(m.output_index(&report)?)
                    })
                },
                move |_| ClassAccumulator::new(outputs),
                defects,
            )
        }
        FrequencyOracle::Oue(m) => Internal::per_output(
            move |i| Ok(move |rng: &mut ChaCha20Rng| Ok(m.randomize(i, rng)?)),
            move |_| BitAccumulator::new(k),
            defects,
        ),
        _ => return Err(unsupported()),
    })
}

/// The populations of the binary estimator: 20 % and 70 % ones.
const BINARY_POPULATIONS: [f64; 2] = [0.2, 0.7];

/// The populations of a k-value estimator: skewed (value v held by a share ∝ k − 1 − v,
/// so the last value by nobody) and uniform.
fn populations(k: usize) -> Vec<(String, Vec<f64>)> {
    let total = (k * (k - 1) / 2) as f64;
    vec![
        (
            "skewed".into(),
            (0..k).map(|v| (k - 1 - v) as f64 / total).collect(),
        ),
        ("uniform".into(), vec![1.0 / k as f64; k]),
    ]
}

/// `estimator-rr-binary` and `estimator-{grr,oue,olh}`: the estimator at the law's ε.
pub(crate) fn estimator_law(mechanism: &str, params: &Params) -> Result<Law> {
    if mechanism == "estimator-rr-binary" {
        let rr = BinaryRandomizedResponse::new(eps_param(params)?);
        let q = rr.flip_probability();
        return Ok(Law::Estimator(EstimatorAudit {
            values: vec!["ones".into()],
            inputs: BINARY_POPULATIONS
                .iter()
                .map(|&f| (format!("ones={f}"), json!({"ones": f}), vec![1.0 - f, f]))
                .collect(),
            estimate: Box::new(move |c, n, _| {
                let e = rr.estimate_ones(c.first().copied().unwrap_or(0), n)?;
                Ok(vec![(e.value, e.variance)])
            }),
            plan: vec![q],
        }));
    }
    let o = oracle(mechanism, params)?;
    let (p, q) = o.support_probabilities();
    let k = o.categories();
    Ok(Law::Estimator(EstimatorAudit {
        values: (0..k).map(|v| v.to_string()).collect(),
        inputs: populations(k)
            .into_iter()
            .map(|(l, f)| (l, json!(f), f))
            .collect(),
        estimate: Box::new(move |c, n, truth| {
            let est = o.estimate(c, n)?;
            Ok(est
                .into_iter()
                .zip(truth)
                .map(|(e, &t)| (e, o.variance(n, t as f64)))
                .collect())
        }),
        plan: vec![p, q],
    }))
}

/// The estimators' sampler: each chunk is a population apportioned by the input's
/// fractions; every user randomizes with the *sampler's* mechanism and the reports'
/// support counts are kept, with the true counts, in [`EstimatorAudit`]'s layout.
pub(crate) fn estimator_sampler(mechanism: &str, params: &Params) -> Result<Internal> {
    if mechanism == "estimator-rr-binary" {
        let rr = BinaryRandomizedResponse::new(eps_param(params)?);
        return Ok(Internal::new(move |i, n, rng| {
            let f = BINARY_POPULATIONS.get(i).copied().unwrap_or(0.0);
            let truth = apportion(n, &[1.0 - f, f]);
            let ones = |x: bool, count: u64, rng: &mut _| -> Result<u64> {
                Ok(rr
                    .sample_counts(&x, count, rng)?
                    .get(1)
                    .copied()
                    .unwrap_or(0))
            };
            let (zeros, true_ones) = (truth.first().copied(), truth.get(1).copied());
            let (zeros, true_ones) = (zeros.unwrap_or(0), true_ones.unwrap_or(0));
            let reported = ones(false, zeros, rng)? + ones(true, true_ones, rng)?;
            Ok(Draws::without_serial(Data::Counts(vec![
                n, reported, true_ones,
            ])))
        }));
    }
    let o = oracle(mechanism, params)?;
    let k = o.categories();
    let fractions: Vec<Vec<f64>> = populations(k).into_iter().map(|(_, f)| f).collect();
    Ok(Internal::new(move |i, n, rng| {
        let truth = apportion(n, fractions.get(i).map_or(&[][..], Vec::as_slice));
        let support = match &o {
            // GRR supports exactly its report: the batch histogram is the support count.
            FrequencyOracle::Grr(m) => {
                let mut c = vec![0u64; k];
                for (v, &t) in truth.iter().enumerate() {
                    for (x, y) in c.iter_mut().zip(m.sample_counts(&v, t, rng)?) {
                        *x += y;
                    }
                }
                c
            }
            _ => {
                let mut counter = o.support_counter();
                for (v, &t) in truth.iter().enumerate() {
                    for _ in 0..t {
                        counter.add(&o.randomize(v, rng)?)?;
                    }
                }
                counter.counts().to_vec()
            }
        };
        let mut out = Vec::with_capacity(1 + 2 * k);
        out.push(n);
        out.extend(support);
        out.extend(truth);
        Ok(Draws::without_serial(Data::Counts(out)))
    }))
}
