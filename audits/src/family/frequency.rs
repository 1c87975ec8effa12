//! The frequency oracles (`frequency-grr`, `frequency-oue`, `frequency-olh`): fl-ldp's
//! `FrequencyOracle` reports, their support structure and their laws.

use fl_ldp::{
    BitProduct, Epsilon, FiniteOutputs, FrequencyOracle, FrequencyProtocol, KaryRandomizedResponse,
    Mechanism, OptimizedLocalHashing, OptimizedUnaryEncoding,
};
use rand::rngs::ChaCha20Rng;
use serde_json::json;

use super::{
    EPS, Family, Law, MechanismInfo, Param, Reader, check_law_cells, each_input,
    embedding::bits_space,
    finite_law, finite_space, neighbour_pairs,
    rr_kary::{K, class_space, kary_law},
};
use crate::{
    analysis::{BitLaw, SupportLaw, learned::LearnedSpec, olh::OlhHashedAudit},
    error::{AuditError, Result},
    protocol::{OutputKind, Outputs},
    report::Branch,
    source::{Accumulate, BitAccumulator, ClassAccumulator, Feed, Observer, wrong_outputs},
    suite::Params,
    tally::{Data, Draws, FULL_VECTOR_MAX_DIM, SERIAL_ALPHABET, Streams, class_symbol},
};

/// The branches of a frequency oracle: every value as the user's value.
fn values_coverage(k: usize) -> Vec<Branch> {
    each_input(
        "user's value",
        &(0..k).map(|v| v.to_string()).collect::<Vec<_>>(),
    )
}

/// A frequency oracle family: its protocol and the estimator family that de-biases it.
pub(crate) trait Oracle: Family {
    /// What the estimator of this oracle is (`estimator-*`).
    const ESTIMATOR: MechanismInfo;
    /// fl-ldp's oracle at ε over k values.
    fn oracle(eps: Epsilon, k: usize) -> Result<FrequencyOracle>;
}

fn unsupported() -> AuditError {
    AuditError::Mechanism("this frequency-oracle protocol is not supported by fl-audit".into())
}

/// The support structure of `oracle`'s reports (p on the user's value, q elsewhere).
fn support(oracle: &FrequencyOracle, supports: Vec<Vec<usize>>) -> SupportLaw {
    let (p, q) = oracle.support_probabilities();
    SupportLaw {
        supports,
        values: oracle.categories(),
        p,
        q,
    }
}

fn values(k: usize) -> (Vec<usize>, Vec<serde_json::Value>) {
    let v: Vec<usize> = (0..k).collect();
    let j = v.iter().map(|&x| json!(x)).collect();
    (v, j)
}

/// The estimator of a frequency oracle (an `estimator-*` family's description).
const fn estimator_info(name: &'static str, what: &'static str) -> MechanismInfo {
    MechanismInfo {
        name,
        description: what,
        params: &[EPS, K],
        tests: &["estimate", "serial"],
    }
}

/// GRR over k values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grr {
    oracle: FrequencyOracle,
    m: KaryRandomizedResponse,
    k: usize,
}

impl Family for Grr {
    const INFO: MechanismInfo = MechanismInfo {
        name: "frequency-grr",
        description: "frequency oracle GRR (fl-ldp FrequencyOracle): support probabilities, report law",
        params: &[EPS, K],
        tests: &["support", "law", "epsilon", "learned", "serial"],
    };
    type Output = usize;
    type Drawer = usize;
    type Observer = ClassAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let k = r.int("k", 2, 1 << 16)?;
        let oracle = Self::oracle(r.epsilon()?, k)?;
        match oracle {
            FrequencyOracle::Grr(m) => Ok(Self { oracle, m, k }),
            _ => Err(unsupported()),
        }
    }

    /// A finite law over the reports, each supporting its own value.
    fn law(&self) -> Result<Law> {
        let Law::Finite(mut l) = kary_law(&self.m, self.k)? else {
            return Err(unsupported());
        };
        let s = support(&self.oracle, (0..self.k).map(|y| vec![y]).collect());
        l.plan = Some(vec![s.p, s.q]);
        l.support = Some(s);
        Ok(Law::Finite(l))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Class(self.k)))
    }

    fn observer(&self, _: usize) -> Result<ClassAccumulator> {
        Ok(ClassAccumulator::new(self.k))
    }

    fn drawer(&self, input: usize) -> Result<usize> {
        Ok(input)
    }

    fn draw(&self, value: &mut usize, rng: &mut ChaCha20Rng) -> Result<usize> {
        Ok(self.m.randomize(*value, rng)?)
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(class_space(law))
    }

    fn coverage(&self) -> Vec<Branch> {
        values_coverage(self.k)
    }
}

impl Oracle for Grr {
    const ESTIMATOR: MechanismInfo = estimator_info(
        "estimator-grr",
        "unbiasedness of GRR's count estimator (FrequencyOracle::estimate), z-test",
    );
    fn oracle(eps: Epsilon, k: usize) -> Result<FrequencyOracle> {
        Ok(FrequencyOracle::new(eps, k, FrequencyProtocol::Grr)?)
    }
}

/// OUE over k values: bit v of a report says "supports v".
#[derive(Debug, Clone, Copy)]
pub(crate) struct Oue {
    m: OptimizedUnaryEncoding,
    k: usize,
}

impl Family for Oue {
    const INFO: MechanismInfo = MechanismInfo {
        name: "frequency-oue",
        description: "frequency oracle OUE (fl-ldp FrequencyOracle): support bits, the joint law of every pair and of the whole vector",
        params: &[EPS, K],
        tests: &["support", "law", "epsilon", "learned", "serial"],
    };
    type Output = Vec<bool>;
    type Drawer = usize;
    type Observer = BitAccumulator;

    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let k = r.int("k", 2, 1 << 16)?;
        let oracle = Self::oracle(r.epsilon()?, k)?;
        match oracle {
            FrequencyOracle::Oue(m) => Ok(Self { m, k }),
            _ => Err(unsupported()),
        }
    }

    /// A product of bits (coordinate v = "supports v"). The whole vector is ε-LDP; each
    /// coordinate is then too (post-processing).
    fn law(&self) -> Result<Law> {
        let k = self.k;
        check_law_cells(k, k)?;
        let claim = self.m.privacy().epsilon;
        let inputs = (0..k)
            .map(|v| Ok((v.to_string(), json!(v), self.m.one_probabilities(&v)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Law::Bits(BitLaw {
            dim: k,
            inputs,
            input_bits: (0..k).map(|v| (0..k).map(|j| j == v).collect()).collect(),
            epsilon: Some((claim, claim)),
        }))
    }

    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(OutputKind::Bits(self.k)))
    }

    fn observer(&self, _: usize) -> Result<BitAccumulator> {
        Ok(BitAccumulator::new(self.k))
    }

    fn drawer(&self, input: usize) -> Result<usize> {
        Ok(input)
    }

    fn draw(&self, value: &mut usize, rng: &mut ChaCha20Rng) -> Result<Vec<bool>> {
        Ok(self.m.randomize(*value, rng)?)
    }

    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(bits_space(law))
    }

    fn coverage(&self) -> Vec<Branch> {
        values_coverage(self.k)
    }
}

impl Oracle for Oue {
    const ESTIMATOR: MechanismInfo = estimator_info(
        "estimator-oue",
        "unbiasedness of OUE's count estimator (FrequencyOracle::estimate), z-test",
    );
    fn oracle(eps: Epsilon, k: usize) -> Result<FrequencyOracle> {
        Ok(FrequencyOracle::new(eps, k, FrequencyProtocol::Oue)?)
    }
}

/// OLH over k values, read either as `[seed, bucket]` under fl-ldp's hash family or as
/// reports that carry every value's hash.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Olh {
    oracle: FrequencyOracle,
    m: OptimizedLocalHashing,
    k: usize,
    /// `Some(g)` when reports carry their hashes (`olh_hash` = `"reported"`, g buckets).
    reported: Option<usize>,
    eps: Epsilon,
}

/// One OLH report as the audit reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OlhOutput {
    /// fl-ldp's family: the report's index seed·g + bucket.
    Seeded(usize),
    /// The bucket and every value's hash.
    Hashed(u64, Vec<u64>),
}

impl Family for Olh {
    const INFO: MechanismInfo = MechanismInfo {
        name: "frequency-olh",
        description: "frequency oracle OLH (fl-ldp FrequencyOracle): support probabilities, (seed, bucket) law",
        params: &[
            EPS,
            K,
            Param {
                key: "olh_hash",
                option: "olh-hash",
                required: false,
                what: "\"fl-ldp\" (reports [seed, bucket] under fl-ldp's hash family, the default) or \"reported\" (each report carries every value's hash)",
            },
            Param {
                key: "buckets",
                option: "buckets",
                required: false,
                what: "g, the buckets of an OLH with reported hashes, an integer from 2 to 1048576 (default: fl-ldp's g for eps)",
            },
        ],
        tests: &["support", "law", "epsilon", "learned", "serial"],
    };
    type Output = OlhOutput;
    type Drawer = usize;
    type Observer = OlhObserver;

    /// `olh_hash` = `"fl-ldp"` (the default: reports are (seed, bucket) under fl-ldp's
    /// hash family, audited against the exact law of every report) or `"reported"` (each
    /// report carries H(v) for every value: any pairwise independent hash family,
    /// g = `buckets`, default fl-ldp's g for ε).
    fn parse(params: &Params) -> Result<Self> {
        let r = Reader::new(params, &Self::INFO);
        let eps = r.epsilon()?;
        let reported = r.choice("olh_hash", &["fl-ldp", "reported"])? == "reported";
        let k = r.int("k", 2, if reported { 1 << 12 } else { 1 << 16 })?;
        let oracle = Self::oracle(eps, k)?;
        let FrequencyOracle::Olh(m) = oracle else {
            return Err(unsupported());
        };
        let reported = if reported {
            let g = match r.optional("buckets") {
                None => usize::try_from(m.buckets()).map_err(|_| unsupported())?,
                Some(_) => r.int("buckets", 2, 1 << 20)?,
            };
            check_law_cells(k, 3 * k + 2 * g)?;
            Some(g)
        } else {
            None
        };
        Ok(Self {
            oracle,
            m,
            k,
            reported,
            eps,
        })
    }

    /// A finite law over every (seed, bucket) with fl-ldp's supports, or (reported
    /// hashes) [`OlhHashedAudit`]: k, g and GRR_g's keep and other probabilities (fl-ldp's
    /// k-ary RR over the g buckets).
    fn law(&self) -> Result<Law> {
        if let Some(g) = self.reported {
            let grr = KaryRandomizedResponse::new(self.eps, g)?;
            return Ok(Law::OlhHashed(OlhHashedAudit {
                values: self.k,
                buckets: g,
                keep: grr.keep_probability(),
                other: grr.other_probability(),
                inputs: (0..self.k).map(|v| (v.to_string(), json!(v))).collect(),
                epsilon: Some(grr.privacy().epsilon),
            }));
        }
        let (xs, json) = values(self.k);
        let refs: Vec<&usize> = xs.iter().collect();
        let mut l = finite_law(&self.m, &refs, json)?;
        let g = usize::try_from(self.m.buckets()).map_err(|_| unsupported())?;
        let supports = (0..l.outputs.len())
            .map(|o| {
                let (seed, bucket) = ((o / g) as u128, (o % g) as u64);
                (0..self.k)
                    .filter(|&v| self.m.hash(seed, v) == Some(bucket))
                    .collect()
            })
            .collect();
        let s = support(&self.oracle, supports);
        l.plan = Some(vec![s.p, s.q]);
        l.support = Some(s);
        Ok(Law::Finite(l))
    }

    /// `[seed, bucket]` under fl-ldp's hash family, or a hashed report.
    fn output_kind(&self) -> Result<Option<OutputKind>> {
        Ok(Some(match self.reported {
            Some(g) => OutputKind::OlhHashed {
                values: self.k,
                buckets: g as u64,
            },
            None => OutputKind::OlhSeeded {
                seeds: u64::try_from(self.m.seed_count()).map_err(|_| {
                    AuditError::usage("OLH's seeds do not fit in 64 bits: choose a smaller k")
                })?,
                buckets: self.m.buckets(),
            },
        }))
    }

    fn observer(&self, input: usize) -> Result<OlhObserver> {
        Ok(match self.reported {
            Some(g) => OlhObserver::Hashed(HashedAccumulator::new(input, self.k, g)),
            None => OlhObserver::Seeded(ClassAccumulator::new(self.m.output_count(&0)?)),
        })
    }

    fn drawer(&self, input: usize) -> Result<usize> {
        if let Some(g) = self.reported
            && g as u64 != self.m.buckets()
        {
            return Err(AuditError::usage(format!(
                "the built-in OLH sampler uses g = {} buckets, not {g}",
                self.m.buckets()
            )));
        }
        Ok(input)
    }

    fn draw(&self, value: &mut usize, rng: &mut ChaCha20Rng) -> Result<OlhOutput> {
        let r = self.m.randomize(*value, rng)?;
        Ok(match self.reported {
            Some(_) => OlhOutput::Hashed(
                r.bucket,
                (0..self.k)
                    .map(|v| self.m.hash(r.seed, v).unwrap_or(0))
                    .collect(),
            ),
            None => OlhOutput::Seeded(self.m.output_index(&r)?),
        })
    }

    /// fl-ldp's family: every (seed, bucket) report; reported hashes: the report's support
    /// vector (which of the first 16 values it supports).
    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>> {
        Ok(match law {
            Law::Finite(l) => finite_space(l, "the report (seed, bucket)"),
            Law::OlhHashed(l) => {
                let d = l.values.min(FULL_VECTOR_MAX_DIM);
                let cells = 1usize << d;
                l.epsilon.map(|claimed| LearnedSpec {
                    cells,
                    cell_meaning: format!(
                        "the report's support vector (which of the first {d} values it supports)"
                    ),
                    features: (0..cells)
                        .map(|c| (0..d).map(|v| f64::from(((c >> v) & 1) as u8)).collect())
                        .collect(),
                    claimed,
                    pairs: neighbour_pairs(l.inputs.len()),
                    laws: None,
                })
            }
            _ => None,
        })
    }

    fn coverage(&self) -> Vec<Branch> {
        let mut b = values_coverage(self.k);
        let all: Vec<String> = (0..self.k).map(|v| v.to_string()).collect();
        b.push(Branch::new(
            if self.reported.is_some() {
                "reports carry every value's hash (any pairwise independent family)"
            } else {
                "reports [seed, bucket] under fl-ldp's hash family"
            },
            all,
        ));
        b
    }
}

impl Oracle for Olh {
    const ESTIMATOR: MechanismInfo = estimator_info(
        "estimator-olh",
        "unbiasedness of OLH's count estimator (FrequencyOracle::estimate), z-test",
    );
    fn oracle(eps: Epsilon, k: usize) -> Result<FrequencyOracle> {
        Ok(FrequencyOracle::new(eps, k, FrequencyProtocol::Olh)?)
    }
}

/// The observer of one OLH input: a histogram of report indices, or hashed reports.
pub(crate) enum OlhObserver {
    /// fl-ldp's family.
    Seeded(ClassAccumulator),
    /// Reported hashes.
    Hashed(HashedAccumulator),
}

impl Observer for OlhObserver {
    fn streams(&mut self) -> &mut Streams {
        match self {
            Self::Seeded(a) => a.streams(),
            Self::Hashed(a) => a.streams(),
        }
    }
}

fn wrong_report() -> AuditError {
    AuditError::Mechanism("an OLH report of the other form".into())
}

impl Accumulate<OlhOutput> for OlhObserver {
    fn add(&mut self, output: &OlhOutput) -> Result<()> {
        match (self, output) {
            (Self::Seeded(a), OlhOutput::Seeded(o)) => a.add(o),
            (Self::Hashed(a), OlhOutput::Hashed(b, h)) => a.add_report(*b, h),
            _ => Err(wrong_report()),
        }
    }

    fn finish(self) -> Draws {
        match self {
            Self::Seeded(a) => a.finish(),
            Self::Hashed(a) => a.finish(),
        }
    }
}

impl Feed for OlhObserver {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        match self {
            Self::Seeded(a) => a.feed(outputs),
            Self::Hashed(a) => a.feed(outputs),
        }
    }

    fn finish_boxed(self: Box<Self>) -> Draws {
        self.finish()
    }
}

/// The suite's test names in a frequency oracle's law: `support` (one exact binomial per
/// value: the report supports the user's value with probability p, any other with q),
/// `law` (GRR and OLH: chi-square of the whole report law; OUE: independence of adjacent
/// bits) and `epsilon`.
pub(crate) fn internal_tests(mechanism: &str, tests: &[String]) -> Vec<String> {
    let oue = mechanism == Oue::INFO.name;
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

/// Counts hashed OLH reports in [`OlhHashedAudit`]'s layout for a user holding `value`,
/// with the bucket as the serial and batch symbol and the support vector as the event
/// cell.
#[derive(Debug, Clone)]
pub(crate) struct HashedAccumulator {
    value: usize,
    values: usize,
    buckets: usize,
    counts: Vec<u64>,
    streams: Streams,
}

impl HashedAccumulator {
    fn new(value: usize, values: usize, buckets: usize) -> Self {
        let symbols = buckets.min(SERIAL_ALPHABET);
        Self {
            value,
            values,
            buckets,
            counts: vec![0; 3 * values + 2 * buckets],
            streams: Streams::new(1, symbols, symbols, 1 << values.min(FULL_VECTOR_MAX_DIM)),
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
        let mut cell = 0usize;
        for (v, &h) in hashes.iter().enumerate() {
            if h == bucket {
                self.counts[v] += 1;
                if v < FULL_VECTOR_MAX_DIM {
                    cell |= 1 << v;
                }
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
        let symbol = class_symbol(bucket as usize, g);
        self.streams.symbol(0, symbol);
        self.streams.end_output(symbol, cell);
        Ok(())
    }
}

impl Observer for HashedAccumulator {
    fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }
}

impl Accumulate<(u64, Vec<u64>)> for HashedAccumulator {
    fn add(&mut self, (bucket, hashes): &(u64, Vec<u64>)) -> Result<()> {
        self.add_report(*bucket, hashes)
    }

    fn finish(self) -> Draws {
        Draws {
            data: Data::Counts(self.counts),
            streams: self.streams,
        }
    }
}

impl Feed for HashedAccumulator {
    fn feed(&mut self, outputs: &Outputs) -> Result<()> {
        let Outputs::Hashed(reports) = outputs else {
            return Err(wrong_outputs());
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
