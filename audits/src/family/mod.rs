//! The mechanism families, one file each, each one implementation of the `Family` trait: what
//! `fl-audit list` shows (name, description, parameters, tests), its parameters parsed once
//! into a typed value, its exact law at those parameters with the audit's inputs, its
//! sampler, and the observer that collects its outputs — the same observer for the
//! project's sampler and for an external mechanism. Like OpenDP's `make_*` constructors
//! (one constructor returns the function and its privacy map), one parse gives everything a
//! grid point needs, so no parameter is read twice and no family is named in more than one
//! place: one list (`FAMILIES`) names them.
//!
//! No formula is written here: probabilities come from fl-ldp / fl-signds, statistics from
//! fl-stats (through `analysis`).

use std::{marker::PhantomData, sync::Arc};

use rand::rngs::ChaCha20Rng;
use serde_json::Value;

mod discrete_gaussian;
mod embedding;
mod estimator;
mod exponential;
mod frequency;
mod label_dp;
mod laplace;
mod rr_binary;
mod rr_kary;
mod rr_with_prior;
mod signds_client;
mod signds_magrr;
mod signds_selection;

use crate::{
    analysis::{
        BitLaw, EpsilonEvidence, FiniteLaw, PointResult, RealLaw, TestSet,
        context::{
            context_note, context_test_count, position_outcomes, reuse_outcome, schedule_outcomes,
        },
        estimator::EstimatorAudit,
        learned::LearnedSpec,
        neighbour_pairs,
        olh::OlhHashedAudit,
        serial::{
            dispersion_outcomes, dispersion_test_count, serial_note, serial_outcomes,
            serial_test_count,
        },
        signds::{ClientAudit, SelectionAudit},
    },
    error::{AuditError, Result},
    progress::Progress,
    protocol::OutputKind,
    report::Branch,
    source::{Accumulate, Defects, Feed, FeedFactory, Internal, Source},
    suite::Params,
    tally::{Data, Draws, EventCells, MAX_EVENT_CELLS, group},
};

use fl_ldp::{Epsilon, FiniteOutputs};

/// One parameter of a mechanism family: its key in suite files, the command-line option
/// that supplies it, and what it must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// The suite `params`/`grid` key.
    pub key: &'static str,
    /// The option of `external`, `plan` and `epsilon` that supplies it (without `--`);
    /// empty for a parameter only suite files set.
    pub option: &'static str,
    /// Whether the family needs it.
    pub required: bool,
    /// What it is and which values are allowed.
    pub what: &'static str,
}

/// The claimed ε: every family with a pure-ε claim has it, first.
pub(crate) const EPS: Param = Param {
    key: "eps",
    option: "eps",
    required: true,
    what: "the claimed epsilon, a finite number >= 0",
};

/// What `fl-audit list`, the suite validator and the command line know about a mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MechanismInfo {
    /// Registry name used in suite files and on the command line.
    pub name: &'static str,
    /// One line.
    pub description: &'static str,
    /// Parameters (suite `params`/`grid` keys and their options).
    pub params: &'static [Param],
    /// Tests a suite may ask for.
    pub tests: &'static [&'static str],
}

impl MechanismInfo {
    /// The parameters as `fl-audit list` shows them: `eps, k, form?` (`?`: optional).
    #[must_use]
    pub fn params_line(&self) -> String {
        self.params
            .iter()
            .map(|p| format!("{}{}", p.key, if p.required { "" } else { "?" }))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The parameter `key`, if the family takes it.
    #[must_use]
    pub fn param(&self, key: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.key == key)
    }
}

/// A mechanism family at one set of parameters (parsed once, see the module docs).
pub(crate) trait Family: Sized + Send + Sync + 'static {
    /// Name, description, parameters and tests.
    const INFO: MechanismInfo;
    /// One output as the project's sampler draws it.
    type Output: Clone;
    /// Per-chunk drawing state for one input (the input itself, a buffer…).
    type Drawer;
    /// Collects one input's outputs in the law's layout, from the project's sampler and
    /// from an external mechanism alike.
    type Observer: Accumulate<Self::Output> + Feed + 'static;

    /// The parameters, parsed and validated.
    ///
    /// # Errors
    /// [`AuditError::Usage`] naming a missing or invalid parameter.
    fn parse(params: &Params) -> Result<Self>;

    /// The exact law at these parameters, with the audit's inputs.
    ///
    /// # Errors
    /// Laws the mechanism crate rejects or that are too large to hold.
    fn law(&self) -> Result<Law>;

    /// The external protocol's output form; `None` when the family has no external
    /// protocol (it audits the project's own code, not a randomizer).
    ///
    /// # Errors
    /// Parameters whose outputs cannot be described.
    fn output_kind(&self) -> Result<Option<OutputKind>>;

    /// The observer of input number `input`'s outputs.
    ///
    /// # Errors
    /// An input the law does not have, or a layout too large to hold.
    fn observer(&self, input: usize) -> Result<Self::Observer>;

    /// Prepares drawing outputs for input number `input` (called once per chunk; `self`
    /// holds the sampler's parameters).
    ///
    /// # Errors
    /// Parameters the mechanism rejects.
    fn drawer(&self, input: usize) -> Result<Self::Drawer>;

    /// Draws one output.
    ///
    /// # Errors
    /// Whatever the mechanism returns.
    fn draw(&self, drawer: &mut Self::Drawer, rng: &mut ChaCha20Rng) -> Result<Self::Output>;

    /// Where the learned distinguishing event is searched: the cells the observers count
    /// (their features, the claim for the whole output and the pairs of neighbours); `None`
    /// for a family without one.
    ///
    /// # Errors
    /// Laws the mechanism crate rejects.
    fn event_space(&self, law: &Law) -> Result<Option<LearnedSpec>>;

    /// The branches of the mechanism (input cases its code treats differently) and which
    /// of the audit's inputs exercise each, for the report's input-coverage table.
    fn coverage(&self) -> Vec<Branch>;

    /// Names of the observers' serial streams, when a coordinate number does not say what
    /// they are.
    fn stream_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// The project's sampler: `sampler` holds the sampler's parameters (a suite's
    /// `sampler` overrides), `law` the law's, whose observers collect the outputs. The
    /// default draws one output at a time (the serial tests see the sequence).
    ///
    /// # Errors
    /// Invalid parameters.
    fn sampler(sampler: Arc<Self>, law: Arc<Self>, defects: Defects) -> Result<Internal> {
        Ok(Internal::per_output(
            move |i| sampler.drawer(i).map(|d| (Arc::clone(&sampler), d)),
            |(s, d): &mut (Arc<Self>, Self::Drawer), rng: &mut ChaCha20Rng| s.draw(d, rng),
            move |i| law.observer(i),
            defects,
        ))
    }
}

/// The registry's view of a family: parses the parameters once and hands out what a
/// grid point or an external audit needs.
pub(crate) trait Registered: Sync {
    /// What the family is.
    fn info(&self) -> &'static MechanismInfo;
    /// The law and the external output form at `params`.
    fn law(&self, params: &Params) -> Result<(Law, Option<OutputKind>)>;
    /// A grid point: the law at `params`, the sampler at `sampler_params`.
    fn point(
        &self,
        params: &Params,
        sampler_params: &Params,
        tests: &[String],
    ) -> Result<PointAudit>;
    /// The grid point of an external audit at `params`: `source` makes the source of the
    /// outputs from the law, the output form and the observers of each input's outputs.
    fn external(
        &self,
        params: &Params,
        tests: &[String],
        source: &mut SourceMaker<'_>,
    ) -> Result<PointAudit>;
}

/// Makes an external audit's source from the law, the output form and the observers.
pub(crate) type SourceMaker<'a> =
    dyn FnMut(&Law, OutputKind, Box<FeedFactory>) -> Result<Box<dyn Source>> + 'a;

/// A family in the registry.
struct Entry<F>(PhantomData<fn() -> F>);

impl<F: Family> Registered for Entry<F> {
    fn info(&self) -> &'static MechanismInfo {
        &F::INFO
    }

    fn law(&self, params: &Params) -> Result<(Law, Option<OutputKind>)> {
        let f = F::parse(params)?;
        Ok((f.law()?, f.output_kind()?))
    }

    fn point(
        &self,
        params: &Params,
        sampler_params: &Params,
        tests: &[String],
    ) -> Result<PointAudit> {
        for t in tests {
            if !F::INFO.tests.contains(&t.as_str()) {
                return Err(AuditError::usage(format!(
                    "mechanism `{}` has no test `{t}`; its tests: {}",
                    F::INFO.name,
                    F::INFO.tests.join(", ")
                )));
            }
        }
        let law_family = Arc::new(F::parse(params)?);
        let law = law_family.law()?;
        signds_selection::check_tests(&law, tests)?;
        let defects = Defects::from_params(sampler_params)?;
        let sampler = Arc::new(F::parse(sampler_params)?);
        let shape = Shape::of(&*law_family, &law)?;
        let source = F::sampler(sampler, law_family, defects)?;
        Ok(PointAudit {
            tests: law_tests(F::INFO.name, &law, tests),
            law,
            shape,
            source: Box::new(source),
            external: false,
        })
    }

    fn external(
        &self,
        params: &Params,
        tests: &[String],
        source: &mut SourceMaker<'_>,
    ) -> Result<PointAudit> {
        let f = Arc::new(F::parse(params)?);
        let law = f.law()?;
        let kind = f.output_kind()?.ok_or_else(|| {
            AuditError::usage(format!(
                "mechanism `{}` has no external protocol",
                F::INFO.name
            ))
        })?;
        let shape = Shape::of(&*f, &law)?;
        let observers = Arc::clone(&f);
        let feed: Box<FeedFactory> =
            Box::new(move |i| observers.observer(i).map(|o| Box::new(o) as Box<dyn Feed>));
        let source = source(&law, kind, feed)?;
        Ok(PointAudit {
            tests: law_tests(F::INFO.name, &law, tests),
            law,
            shape,
            source,
            external: true,
        })
    }
}

/// What a point knows about its outputs beyond the law: the serial streams its observers
/// keep, the learned event's space and the input coverage.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// Serial streams per input.
    pub streams: usize,
    /// Their names, if any.
    pub stream_names: &'static [&'static str],
    /// The learned event's space.
    pub learned: Option<LearnedSpec>,
    /// The input coverage.
    pub coverage: Vec<Branch>,
}

impl Shape {
    fn of<F: Family>(f: &F, law: &Law) -> Result<Self> {
        let mut probe = f.observer(0)?;
        Ok(Self {
            streams: crate::source::Observer::streams(&mut probe).lags.streams(),
            stream_names: f.stream_names(),
            learned: f.event_space(law)?,
            coverage: f.coverage(),
        })
    }
}

/// Every family the tool can audit, in `fl-audit list` order.
static FAMILIES: &[&dyn Registered] = &[
    &Entry::<rr_binary::RrBinary>(PhantomData),
    &Entry::<rr_kary::RrKary>(PhantomData),
    &Entry::<label_dp::LabelDpBinary>(PhantomData),
    &Entry::<label_dp::LabelDpOneHot>(PhantomData),
    &Entry::<embedding::Embedding>(PhantomData),
    &Entry::<exponential::Exponential>(PhantomData),
    &Entry::<rr_with_prior::RrWithPrior>(PhantomData),
    &Entry::<laplace::Laplace>(PhantomData),
    &Entry::<discrete_gaussian::DiscreteGaussian>(PhantomData),
    &Entry::<signds_selection::Selection>(PhantomData),
    &Entry::<rr_binary::RrBinary<signds_magrr::MagRr>>(PhantomData),
    &Entry::<signds_client::SignDsClient>(PhantomData),
    &Entry::<frequency::Grr>(PhantomData),
    &Entry::<frequency::Oue>(PhantomData),
    &Entry::<frequency::Olh>(PhantomData),
    &Entry::<estimator::BinaryEstimator>(PhantomData),
    &Entry::<estimator::OracleEstimator<frequency::Grr>>(PhantomData),
    &Entry::<estimator::OracleEstimator<frequency::Oue>>(PhantomData),
    &Entry::<estimator::OracleEstimator<frequency::Olh>>(PhantomData),
];

/// Every mechanism the tool can audit, in `fl-audit list` order.
pub fn mechanisms() -> impl Iterator<Item = &'static MechanismInfo> {
    FAMILIES.iter().map(|f| f.info())
}

fn registered(name: &str) -> Result<&'static dyn Registered> {
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.info().name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = mechanisms().map(|m| m.name).collect();
            AuditError::usage(format!(
                "unknown mechanism `{name}`; known mechanisms: {}",
                names.join(", ")
            ))
        })
}

/// Looks a mechanism up by name.
///
/// # Errors
/// [`AuditError::Usage`] naming the known mechanisms.
pub fn info(name: &str) -> Result<&'static MechanismInfo> {
    registered(name).map(Registered::info)
}

/// The law and output form of `mechanism` at `params`.
///
/// # Errors
/// Unknown mechanism, missing or invalid parameters.
pub(crate) fn law(mechanism: &str, params: &Params) -> Result<(Law, Option<OutputKind>)> {
    registered(mechanism)?.law(params)
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
    registered(mechanism)?.point(params, sampler_params, tests)
}

/// The grid point of an external audit of `mechanism` at `params`, its outputs collected
/// by the same observers as the project's sampler's (see [`Registered::external`]).
///
/// # Errors
/// Invalid parameters, a mechanism without external protocol, `source`'s errors.
pub(crate) fn external(
    mechanism: &str,
    params: &Params,
    tests: &[String],
    source: &mut SourceMaker<'_>,
) -> Result<PointAudit> {
    registered(mechanism)?.external(params, tests, source)
}

/// Reads a family's parameters: every missing or invalid one is a usage error that names
/// the parameter, its command-line option and what it must be (from [`MechanismInfo`]).
pub(crate) struct Reader<'a> {
    params: &'a Params,
    info: &'static MechanismInfo,
}

impl<'a> Reader<'a> {
    /// A reader of `params` for the family `info`.
    pub(crate) fn new(params: &'a Params, info: &'static MechanismInfo) -> Self {
        Self { params, info }
    }

    fn spec(&self, key: &str) -> Param {
        self.info.param(key).copied().unwrap_or(Param {
            key: "?",
            option: "?",
            required: false,
            what: "a value",
        })
    }

    /// The value of `key`, if given.
    pub(crate) fn optional(&self, key: &str) -> Option<&'a Value> {
        self.params.get(key)
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// A missing parameter.
    pub(crate) fn value(&self, key: &str) -> Result<&'a Value> {
        self.params.get(key).ok_or_else(|| {
            let p = self.spec(key);
            AuditError::usage(format!(
                "mechanism `{}` needs --{} (missing parameter `{key}`: {})",
                self.info.name, p.option, p.what
            ))
        })
    }

    /// The error for a value of `key` that is not what it must be.
    pub(crate) fn invalid(&self, key: &str, got: &Value) -> AuditError {
        AuditError::usage(format!(
            "parameter `{key}` must be {}, got {got}",
            self.spec(key).what
        ))
    }

    /// The claimed ε.
    ///
    /// # Errors
    /// Missing, not a number, negative or not finite.
    pub(crate) fn epsilon(&self) -> Result<Epsilon> {
        let v = self.value("eps")?;
        let x = v.as_f64().ok_or_else(|| self.invalid("eps", v))?;
        Epsilon::new(x).map_err(|e| AuditError::usage(format!("parameter `eps`: {e}")))
    }

    /// A number.
    ///
    /// # Errors
    /// Missing or not a number.
    pub(crate) fn number(&self, key: &str) -> Result<f64> {
        let v = self.value(key)?;
        v.as_f64().ok_or_else(|| self.invalid(key, v))
    }

    /// An integer in `lo..=hi`.
    ///
    /// # Errors
    /// Missing, not an integer or out of range.
    pub(crate) fn int(&self, key: &str, lo: u64, hi: u64) -> Result<usize> {
        let v = self.value(key)?;
        match v.as_u64() {
            Some(x) if (lo..=hi).contains(&x) => usize::try_from(x)
                .map_err(|_| AuditError::usage(format!("parameter `{key}` is too large"))),
            _ => Err(AuditError::usage(format!(
                "parameter `{key}` must be an integer from {lo} to {hi}, got {v}"
            ))),
        }
    }

    /// A non-empty list of finite numbers.
    ///
    /// # Errors
    /// Missing, not an array of finite numbers, or empty.
    pub(crate) fn f64_list(&self, key: &str) -> Result<Vec<f64>> {
        let v = self.value(key)?;
        let list = v
            .as_array()
            .and_then(|a| a.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>());
        match list {
            Some(l) if !l.is_empty() && l.iter().all(|x| x.is_finite()) => Ok(l),
            _ => Err(self.invalid(key, v)),
        }
    }

    /// One of `choices` (the first when absent).
    ///
    /// # Errors
    /// A value that is not one of the choices.
    pub(crate) fn choice(&self, key: &str, choices: &[&'static str]) -> Result<&'static str> {
        match self.params.get(key) {
            None => Ok(choices.first().copied().unwrap_or_default()),
            Some(v) => v
                .as_str()
                .and_then(|s| choices.iter().copied().find(|c| *c == s))
                .ok_or_else(|| self.invalid(key, v)),
        }
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
        self.labels().len()
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

/// The test an external mechanism fails when its responses deviate from the canonical
/// form of the output as sent (`protocol::Canon`).
pub const OUTPUT_AS_SENT: &str = "output-as-sent";

/// One grid point ready to run: its law, its tests and where its samples come from.
pub(crate) struct PointAudit {
    /// The expected law.
    pub law: Law,
    /// The tests asked for.
    pub tests: TestSet,
    /// Streams, learned event and coverage.
    pub shape: Shape,
    /// The sample source.
    pub source: Box<dyn Source>,
    /// Whether the source is an external mechanism (its batches are its responses).
    pub external: bool,
}

fn missing_schedule() -> AuditError {
    AuditError::Mechanism(
        "the counts of an external run hold no schedule contexts or reuse result".into(),
    )
}

fn wrong_kind() -> AuditError {
    AuditError::Mechanism("sampler returned the wrong kind of output".into())
}

impl PointAudit {
    /// Whether the learned-event statement runs.
    fn learns(&self) -> bool {
        self.tests.has("learned") && self.shape.learned.is_some() && self.inputs() >= 2
    }

    /// Hypothesis tests this point will run (used to split α before sampling).
    pub(crate) fn test_count(&self) -> usize {
        let streams = if self.tests.has("serial") {
            (serial_test_count(self.shape.streams)
                + dispersion_test_count()
                + context_test_count(self.external))
                * self.inputs()
        } else {
            0
        };
        streams
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
        usize::from(self.learns())
            + match &self.law {
                Law::Finite(l) => usize::from(self.tests.has("epsilon") && l.epsilon.is_some()),
                Law::Bits(l) => l.epsilon_count(&self.tests),
                Law::Reals(l) => l.epsilon_count(&self.tests),
                Law::Selection(l) => l.epsilon_count(&self.tests),
                Law::Client(l) => l.epsilon_count(&self.tests),
                Law::Estimator(_) => 0,
                Law::OlhHashed(l) => l.epsilon_count(&self.tests),
            }
    }

    /// Probabilities the planner must cover.
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

    /// Draws `n` samples per input (input i from the seed `mix(seed, i)`), each input's
    /// counts flushed: the sufficient statistics [`PointAudit::analyze`] reads.
    pub(crate) fn draw(&mut self, n: u64, seed: u64, progress: &Progress) -> Result<Vec<Draws>> {
        let mut draws = self.source.draw_all(self.inputs(), n, seed, progress)?;
        for d in &mut draws {
            d.streams.flush();
        }
        Ok(draws)
    }

    /// Runs the tests on the draws of every input (one [`Draws`] per input, in input
    /// order: one draw, or the merge of several pieces).
    pub(crate) fn analyze(&self, draws: Vec<Draws>) -> Result<PointResult> {
        if draws.len() != self.inputs() {
            return Err(AuditError::Mechanism(format!(
                "the counts hold {} inputs, the law has {}",
                draws.len(),
                self.inputs()
            )));
        }
        let mut data = Vec::with_capacity(draws.len());
        let mut streams = Vec::with_capacity(draws.len());
        for mut d in draws {
            d.streams.flush();
            data.push(d.data);
            streams.push(d.streams);
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
                let stats = data
                    .into_iter()
                    .map(|d| match d {
                        Data::Bits(s) => Ok(s),
                        _ => Err(wrong_kind()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                l.analyze(&stats, &self.tests)
            }
            Law::Reals(l) => {
                let cols = data
                    .into_iter()
                    .map(|d| match d {
                        Data::RealCells(c) => Ok(c),
                        _ => Err(wrong_kind()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                l.analyze(&cols, &self.tests)
            }
        }?;
        let labels = self.law.labels();
        if self.tests.has("serial") {
            for (label, s) in labels.iter().zip(&streams) {
                result
                    .outcomes
                    .extend(serial_outcomes(label, &s.lags, self.shape.stream_names)?);
                result
                    .outcomes
                    .extend(dispersion_outcomes(label, &s.batches)?);
                result
                    .outcomes
                    .extend(position_outcomes(label, &s.batches)?);
                if self.external {
                    let contexts = s.contexts.as_ref().ok_or_else(missing_schedule)?;
                    let reuse = s.reuse.as_ref().ok_or_else(missing_schedule)?;
                    result.outcomes.extend(schedule_outcomes(label, contexts)?);
                    result.outcomes.push(reuse_outcome(label, reuse));
                }
            }
            if let Some(first) = streams.first() {
                result
                    .notes
                    .push(serial_note(&first.lags, &first.batches, self.external));
                result
                    .notes
                    .push(context_note(self.external, first.reuse.as_ref()));
            }
        }
        // The output as sent: a deviation from the canonical form is a certain failure
        // (a conforming mechanism never deviates, so p = 0 is exact and the test needs no
        // share of α: it is not in `test_count`).
        for (label, s) in labels.iter().zip(&streams) {
            if let Some(reason) = &s.deviation {
                result.outcomes.push(crate::analysis::Outcome {
                    test: OUTPUT_AS_SENT.into(),
                    about: Params::from([
                        ("input".to_string(), Value::from(label.as_str())),
                        ("reason".to_string(), Value::from(reason.as_str())),
                    ]),
                    samples: s.position,
                    statistic: f64::INFINITY,
                    p_value: 0.0,
                });
            }
        }
        if self.learns()
            && let Some(spec) = &self.shape.learned
        {
            let cells: Vec<&EventCells> = streams.iter().map(|s| &s.events).collect();
            result
                .evidence
                .push(EpsilonEvidence::learned(spec, &cells, &labels));
            result.notes.push(format!(
                "learned event: searched over {} ({} cells), fitted on the even blocks of {} \
                 outputs of each input's stream, certified on the odd blocks",
                spec.cell_meaning,
                spec.cells,
                crate::tally::EVENT_BLOCK
            ));
        }
        result.coverage = self.shape.coverage.clone();
        Ok(result)
    }
}

/// The suite's test names as `law` knows them (a frequency oracle's `support` and `law`
/// are its finite or bit law's tests; see [`frequency::internal_tests`]), with `serial`
/// (serial independence at every lag and over-dispersion across batches) added: it runs
/// on every suite, whether its file lists it or not.
pub(crate) fn law_tests(mechanism: &str, law: &Law, tests: &[String]) -> TestSet {
    let mut t = match law {
        Law::Finite(_) | Law::Bits(_) if mechanism.starts_with("frequency-") => {
            frequency::internal_tests(mechanism, tests)
        }
        _ => tests.to_vec(),
    };
    if !t.iter().any(|x| x == "serial") {
        t.push("serial".into());
    }
    TestSet(t)
}

/// The learned-event space of a finite law: its outputs (grouped into at most 2¹⁶ cells
/// like [`crate::source::ClassAccumulator`]'s), with their exact laws.
pub(crate) fn finite_space(l: &FiniteLaw, meaning: &str) -> Option<LearnedSpec> {
    let (claimed, pairs) = l.epsilon.clone()?;
    let k = l.outputs.len();
    let cells = k.min(MAX_EVENT_CELLS);
    let laws = l
        .inputs
        .iter()
        .map(|(_, _, law)| {
            let mut g = vec![0.0; cells];
            for (o, &p) in law.iter().enumerate() {
                g[group(o, k, MAX_EVENT_CELLS)] += p;
            }
            g
        })
        .collect();
    Some(LearnedSpec {
        cells,
        cell_meaning: meaning.into(),
        features: Vec::new(),
        claimed,
        pairs,
        laws: Some(laws),
    })
}

/// Every input of `labels` as the only input of one branch named after it.
pub(crate) fn each_input(what: &str, labels: &[String]) -> Vec<Branch> {
    labels
        .iter()
        .map(|l| Branch::new(format!("{what} {l}"), [l.clone()]))
        .collect()
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

/// A drawer of single outputs that privatizes a batch of inputs at a time (a batch API,
/// e.g. LabelDP's `privatize`) and hands the outputs out in order.
pub(crate) struct Buffered<O> {
    buffer: std::vec::IntoIter<O>,
}

impl<O> Buffered<O> {
    /// An empty buffer.
    pub(crate) fn new() -> Self {
        Self {
            buffer: Vec::new().into_iter(),
        }
    }

    /// The next output, refilling the buffer with `refill` when it is empty.
    ///
    /// # Errors
    /// `refill`'s errors, or an empty batch.
    pub(crate) fn next(&mut self, refill: impl FnOnce() -> Result<Vec<O>>) -> Result<O> {
        if let Some(o) = self.buffer.next() {
            return Ok(o);
        }
        self.buffer = refill()?.into_iter();
        self.buffer
            .next()
            .ok_or_else(|| AuditError::Mechanism("the sampler returned an empty batch".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_listed_once_with_its_parameters() {
        let names: Vec<&str> = mechanisms().map(|m| m.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        // Every family claims a pure ε, first among its parameters, but the discrete
        // Gaussian (Rényi DP: no ε statement, no `eps`).
        for m in mechanisms() {
            if m.name == "discrete-gaussian" {
                assert!(m.param("eps").is_none());
                assert!(!m.tests.contains(&"epsilon") && !m.tests.contains(&"learned"));
            } else {
                assert_eq!(m.params.first(), Some(&EPS), "{}", m.name);
            }
        }
        assert_eq!(info("rr-kary").unwrap().params_line(), "eps, k");
        assert!(info("nope").unwrap_err().to_string().contains("rr-binary"));
    }

    #[test]
    fn a_missing_parameter_names_its_option() {
        let err = law(
            "rr-kary",
            &Params::from([("eps".into(), serde_json::json!(1))]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("needs --classes") && err.contains("missing parameter `k`"),
            "{err}"
        );
    }
}
