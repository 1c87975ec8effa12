//! Frequency oracles (`frequency-grr`, `frequency-oue`, `frequency-olh`) and the
//! de-biasing estimators (`estimator-rr-binary`, `estimator-grr`, `estimator-oue`,
//! `estimator-olh`). Laws, samplers and estimators come from fl-ldp.

use fl_ldp::{
    BinaryRandomizedResponse, BitProduct, FiniteOutputs, FrequencyOracle, FrequencyProtocol,
    KaryRandomizedResponse, Mechanism,
};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{Law, eps_param, finite_law, int_param};
use crate::{
    analysis::{
        BitLaw, SupportLaw,
        estimator::{EstimatorAudit, apportion},
        olh::OlhHashedAudit,
    },
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    source::{
        Accumulate, BitAccumulator, ClassAccumulator, Data, Defects, Draws, Feed, FeedFactory,
        Internal, SERIAL_ALPHABET, SerialPairs, class_symbol,
    },
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

/// How an OLH audit reads reports: `olh_hash` = `"fl-ldp"` (the default: reports are
/// (seed, bucket) under fl-ldp's hash family, audited against the exact law of every
/// report) or `"reported"` (each report carries H(v) for every value: any pairwise
/// independent hash family, g = `buckets`, default fl-ldp's g for ε).
fn reported_hashes(params: &Params) -> Result<bool> {
    match params.get("olh_hash").map(|v| v.as_str()) {
        None | Some(Some("fl-ldp")) => Ok(false),
        Some(Some("reported")) => Ok(true),
        Some(_) => Err(AuditError::usage(format!(
            "parameter `olh_hash` must be \"fl-ldp\" or \"reported\", got {}",
            params
                .get("olh_hash")
                .map_or_else(String::new, ToString::to_string)
        ))),
    }
}

/// The hashed-report OLH audit at `params`: k, g and GRR_g's keep and other
/// probabilities (fl-ldp's k-ary RR over the g buckets).
fn hashed(params: &Params) -> Result<OlhHashedAudit> {
    let eps = eps_param(params)?;
    let k = int_param(params, "k", 2, 1 << 12)?;
    let g = match params.get("buckets") {
        None => match FrequencyOracle::new(eps, k, FrequencyProtocol::Olh)? {
            FrequencyOracle::Olh(m) => usize::try_from(m.buckets()).map_err(|_| unsupported())?,
            _ => return Err(unsupported()),
        },
        Some(_) => int_param(params, "buckets", 2, 1 << 20)?,
    };
    super::check_law_cells(k, 3 * k + 2 * g)?;
    let grr = KaryRandomizedResponse::new(eps, g)?;
    Ok(OlhHashedAudit {
        values: k,
        buckets: g,
        keep: grr.keep_probability(),
        other: grr.other_probability(),
        inputs: (0..k).map(|v| (v.to_string(), json!(v))).collect(),
        epsilon: Some(grr.privacy().epsilon),
    })
}

/// Counts hashed OLH reports in [`OlhHashedAudit`]'s layout for a user holding `value`,
/// with the bucket as the serial symbol.
#[derive(Debug, Clone)]
pub(crate) struct HashedAccumulator {
    value: usize,
    values: usize,
    buckets: usize,
    counts: Vec<u64>,
    serial: SerialPairs,
}

impl HashedAccumulator {
    fn new(value: usize, values: usize, buckets: usize) -> Self {
        Self {
            value,
            values,
            buckets,
            counts: vec![0; 3 * values + 2 * buckets],
            serial: SerialPairs::new(1, buckets.min(SERIAL_ALPHABET)),
        }
    }

    /// Adds one report: its bucket and H(v) for every value v (all below g).
    fn add_report(&mut self, bucket: u64, hashes: &[u64]) -> Result<()> {
        let (k, g) = (self.values, self.buckets as u64);
        if hashes.len() != k || bucket >= g || hashes.iter().any(|&h| h >= g) {
            return Err(AuditError::Mechanism(format!(
                "a hashed OLH report needs a bucket and {k} hashes, all below {g}"
            )));
        }
        let own = hashes[self.value];
        let g = self.buckets;
        for (v, &h) in hashes.iter().enumerate() {
            if h == bucket {
                self.counts[v] += 1;
            }
            if v != self.value && h != own {
                if bucket == own {
                    self.counts[k + 2 * g + 2 * v] += 1;
                } else if bucket == h {
                    self.counts[k + 2 * g + 2 * v + 1] += 1;
                }
            }
        }
        self.counts[k + own as usize] += 1;
        let offset = (bucket as usize + g - own as usize) % g;
        self.counts[k + g + offset] += 1;
        self.serial.push(0, class_symbol(bucket as usize, g));
        Ok(())
    }
}

impl Accumulate<(u64, Vec<u64>)> for HashedAccumulator {
    fn add(&mut self, (bucket, hashes): &(u64, Vec<u64>)) {
        // fl-ldp's reports are always well formed.
        let _ = self.add_report(*bucket, hashes);
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            serial: self.serial,
        }
    }
}

impl Feed for HashedAccumulator {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        let Outputs::Hashed(reports) = outputs else {
            return Err(AuditError::Mechanism(
                "the external outputs are not hashed OLH reports".into(),
            ));
        };
        for r in reports {
            self.add_report(r.bucket, &r.hashes)?;
        }
        Ok(())
    }

    fn finish_boxed(self: Box<Self>) -> Draws {
        self.finish()
    }
}

/// The collectors of an external OLH's hashed reports.
pub(crate) fn hashed_feeder(params: &Params) -> Result<Box<FeedFactory>> {
    let a = hashed(params)?;
    let (k, g) = (a.values, a.buckets);
    Ok(Box::new(move |x| {
        Box::new(HashedAccumulator::new(x, k, g)) as Box<dyn Feed>
    }))
}

/// The protocol output of an OLH audit: `[seed, bucket]` under fl-ldp's hash family, or
/// a hashed report.
pub(crate) fn olh_output_kind(params: &Params) -> Result<OutputKind> {
    if reported_hashes(params)? {
        let a = hashed(params)?;
        return Ok(OutputKind::OlhHashed {
            values: a.values,
            buckets: a.buckets as u64,
        });
    }
    match oracle("frequency-olh", params)? {
        FrequencyOracle::Olh(m) => Ok(OutputKind::OlhSeeded {
            seeds: u64::try_from(m.seed_count()).map_err(|_| {
                AuditError::usage("OLH's seeds do not fit in 64 bits: choose a smaller k")
            })?,
            buckets: m.buckets(),
        }),
        _ => Err(unsupported()),
    }
}

/// A frequency oracle's law: GRR and OLH as finite laws over whole reports with their
/// support structure (OLH with `olh_hash` = `"reported"`: [`OlhHashedAudit`]); OUE as a
/// product of bits (coordinate v = "supports v").
pub(crate) fn oracle_law(mechanism: &str, params: &Params) -> Result<Law> {
    if protocol(mechanism) == Some(FrequencyProtocol::Olh) && reported_hashes(params)? {
        return Ok(Law::OlhHashed(hashed(params)?));
    }
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
    if let (FrequencyOracle::Olh(m), true) = (&o, reported_hashes(params)?) {
        let (m, g) = (*m, hashed(params)?.buckets);
        if g as u64 != m.buckets() {
            return Err(AuditError::usage(format!(
                "the built-in OLH sampler uses g = {} buckets, not {g}",
                m.buckets()
            )));
        }
        return Ok(Internal::per_output(
            move |x| {
                Ok(move |rng: &mut ChaCha20Rng| {
                    let r = m.randomize(x, rng)?;
                    let hashes = (0..k).map(|v| m.hash(r.seed, v).unwrap_or(0)).collect();
                    Ok((r.bucket, hashes))
                })
            },
            move |x| HashedAccumulator::new(x, k, g),
            defects,
        ));
    }
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
