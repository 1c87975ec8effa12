//! The run report: one model, four renderings (`report.json` per the specification's
//! schema with every number exact, `report.md` and the self-contained `report.html` for
//! people with numbers formatted for reading, one SVG plot of deviations per suite),
//! written atomically.

mod document;
mod html;
mod markdown;
mod svg;
mod write;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::suite::Params;

pub use html::render_html;
pub use markdown::render_markdown;
pub use svg::render_svg;
pub use write::{OutputDir, write_atomically};

/// One hypothesis test's row in the report.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TestRow {
    /// The suite that ran the test.
    pub suite: String,
    /// The mechanism's registry name.
    pub mechanism: String,
    /// The grid point's parameters, plus the input (and output cell) the test is about.
    pub params: Params,
    /// The test's name, e.g. `cell-binomial`.
    pub test: String,
    /// Observations the test used.
    pub samples: u64,
    /// The test statistic (`None` when it is not finite, e.g. an impossible output was
    /// observed).
    pub statistic: Option<f64>,
    /// The unadjusted p-value.
    pub p_value: f64,
    /// The Holm-adjusted p-value over every test of the run.
    pub adjusted_p_value: f64,
    /// `adjusted_p_value > α_tests`.
    pub passed: bool,
}

/// One certified ε lower bound in the report.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EpsilonRow {
    /// The suite that computed it.
    pub suite: String,
    /// The mechanism's registry name.
    pub mechanism: String,
    /// The grid point's parameters and what the bound is about (`scope`).
    pub params: Params,
    /// The ε the mechanism claims for this scope.
    pub claimed: f64,
    /// The ε the exact law realises at the audited inputs: the largest log-ratio
    /// ln(P[o|x]/P[o|x′]) over the statement's pairs and outputs (below the claim when
    /// the mechanism's analysis is loose or the inputs are not the worst case).
    pub realised: f64,
    /// The certified lower bound ε̂_lb.
    pub lower_bound: f64,
    /// The confidence of the bound.
    pub confidence: f64,
    /// The event the bound was certified on (chosen from the law before sampling); `None`
    /// when no event could certify a positive bound.
    pub event: Option<EpsilonEvent>,
}

/// The distinguishing event of an ε statement, fixed before sampling.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EpsilonEvent {
    /// The pair of neighbours compared: `"x / x′"`, optionally after a context
    /// (`"coordinate 3: x / x′"`).
    pub pair: String,
    /// `true` when the bound is on P[S|x′]/P[S|x] (the pair's second input on top).
    pub swapped: bool,
    /// The output cells making up S.
    pub cells: Vec<usize>,
    /// The number of cells of the output space.
    pub cell_count: usize,
    /// ln(P[S|top]/P[S|bottom]) under the law: what the bound estimates (NaN when the
    /// law of the event's cells is not known).
    pub law_log_ratio: f64,
    /// For a learned event: how it was found on the fitting half.
    pub fit: Option<EventFit>,
}

/// How a learned event was found (see `analysis::learned`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EventFit {
    /// The ranking of the cells that gave the event.
    pub method: String,
    /// What a cell of the output space is.
    pub cell_meaning: String,
    /// The bound on the fitting half (what the search maximised; not certified).
    pub fit_bound: f64,
}

impl EpsilonEvent {
    /// One line for people: the pair, the order and the event.
    #[must_use]
    pub fn describe(&self) -> String {
        let (context, pair) = match self.pair.split_once(": ") {
            Some((c, p)) => (format!("{c}: "), p),
            None => (String::new(), self.pair.as_str()),
        };
        let (top, bottom) = match pair.split_once(" / ") {
            Some((a, b)) if self.swapped => (b.to_string(), a.to_string()),
            Some((a, b)) => (a.to_string(), b.to_string()),
            None => (pair.to_string(), String::new()),
        };
        let what = if self.fit.is_some() {
            "cells"
        } else {
            "outputs"
        };
        let cells = if self.cells.len() <= 4 {
            let list: Vec<String> = self.cells.iter().map(ToString::to_string).collect();
            format!("{{{}}}", list.join(", "))
        } else {
            format!("{} of {} {what}", self.cells.len(), self.cell_count)
        };
        let learned = self.fit.as_ref().map_or_else(String::new, |f| {
            format!(
                " (learned on the fitting half by {} over {}; fitting-half bound {:.3})",
                f.method, f.cell_meaning, f.fit_bound
            )
        });
        format!("{context}P[S | {top}] / P[S | {bottom}], S = {cells}{learned}")
    }
}

impl EpsilonRow {
    /// `true` unless the data certify a violation (ε̂_lb > claimed).
    #[must_use]
    pub fn passed(&self) -> bool {
        self.lower_bound <= self.claimed
    }
}

/// The data of one plot panel: empirical against expected law.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PanelData {
    /// A finite law: one bar per output, drawn as the residual in standard errors.
    Bars {
        /// Output labels.
        labels: Vec<String>,
        /// Expected probabilities.
        expected: Vec<f64>,
        /// Observed frequencies.
        observed: Vec<f64>,
        /// The number of observations behind each frequency.
        samples: u64,
        /// Each cell's standard error, when it is not the binomial
        /// √(expected·(1 − expected)/samples) (an estimator's exact deviation).
        standard_errors: Option<Vec<f64>>,
    },
    /// A CDF against the empirical CDF at the same abscissae, drawn as their difference.
    Cdf {
        /// Abscissae (increasing).
        xs: Vec<f64>,
        /// The expected CDF at `xs`.
        expected: Vec<f64>,
        /// The empirical CDF at `xs`.
        empirical: Vec<f64>,
        /// The sample size of the empirical CDF.
        samples: u64,
    },
}

/// A branch of a mechanism — an input case its code treats differently — and the audit
/// inputs that exercise it (none: the branch is not exercised).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Branch {
    /// The branch, in words.
    pub branch: String,
    /// The labels of the inputs that exercise it.
    pub inputs: Vec<String>,
}

impl Branch {
    /// The branch `branch`, exercised by `inputs`.
    pub(crate) fn new(branch: impl Into<String>, inputs: impl IntoIterator<Item = String>) -> Self {
        Self {
            branch: branch.into(),
            inputs: inputs.into_iter().collect(),
        }
    }
}

/// A row of a suite's input-coverage table: a branch, the inputs that exercise it, and the
/// grid points where it holds (empty: every point).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoverageRow {
    /// The branch and its inputs.
    pub branch: Branch,
    /// The grid points (labels) where the row holds; empty when it holds at every point.
    pub points: Vec<String>,
}

/// One plot panel.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Panel {
    /// The panel's title (grid point and input).
    pub title: String,
    /// What it shows.
    pub data: PanelData,
}

/// What the report says about one suite.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SuiteSummary {
    /// The suite's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The mechanism's registry name.
    pub mechanism: String,
    /// The suite's own seed.
    pub seed: u64,
    /// Grid points run.
    pub points: usize,
    /// Samples per input at each grid point (in grid order).
    pub samples_per_input: Vec<u64>,
    /// Total outputs drawn.
    pub samples_drawn: u64,
    /// Sampler-only overrides, if the suite is a deliberately mis-calibrated variant.
    pub sampler_overrides: Option<Params>,
    /// How the sample sizes were chosen, in words (planned and what the plan detects,
    /// fixed by the suite file, or set by `--samples`).
    pub sample_size: String,
    /// Plot panels.
    pub panels: Vec<Panel>,
    /// What the tests covered, in sentences (e.g. the input-bit combinations of each
    /// pair the independence tests saw), without repeats.
    pub notes: Vec<String>,
    /// Which branches of the mechanism the inputs exercised.
    pub coverage: Vec<CoverageRow>,
    /// The planner's samples per input at each grid point (what a default run draws).
    pub planned_per_input: Vec<u64>,
    /// When some point drew fewer samples than planned: the smallest relative error in the
    /// keep/flip (selection) probabilities the run detects at the planned power, the
    /// largest over the points.
    pub detectable: Option<f64>,
    /// Wall-clock seconds spent (not part of the reproducible JSON).
    pub seconds: f64,
}

/// A complete run report.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// The family-wise significance level of the whole run.
    pub alpha: f64,
    /// The share of α given to the hypothesis tests (Holm over all of them).
    pub alpha_tests: f64,
    /// The relative error in every keep/flip probability the planned sizes detect.
    pub plan_relative_error: f64,
    /// The power with which they detect it.
    pub plan_power: f64,
    /// The run seed.
    pub seed: u64,
    /// The number of shards the run was drawn as (1: unsharded; see
    /// [`crate::engine::Shard`]): a run of N shards draws other streams than the unsharded
    /// run with the same seed.
    pub shards: u64,
    /// Versions of the tool, the audited crates and the compiler.
    pub versions: BTreeMap<String, String>,
    /// The suites in run order.
    pub suites: Vec<SuiteSummary>,
    /// Every test, in run order.
    pub results: Vec<TestRow>,
    /// Every ε lower bound, in run order.
    pub epsilon: Vec<EpsilonRow>,
    /// What was audited (`report.json`'s `audited`; `None` writes nothing).
    pub audited: Option<Audited>,
}

/// What a run audited, as its counts files record it and `fl-audit merge` checks it: the
/// command, the external program and each suite's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audited {
    /// `run` or `external`.
    pub command: String,
    /// The external mechanism's command line after `--`, its `{seed}` placeholders not
    /// substituted (`None`: `run`, or an in-process mechanism).
    pub program: Option<Vec<String>>,
    /// Each suite's name and the SHA-256 of its canonical JSON (keys sorted, no
    /// whitespace), in run order.
    pub suites: Vec<(String, String)>,
}

/// What a run of `suites` by `command` (`run` or `external`) audited, for its report.
pub(crate) fn audited(
    command: &str,
    suites: &[crate::suite::Suite],
    program: Option<Vec<String>>,
) -> Audited {
    Audited {
        command: command.into(),
        program,
        suites: suites
            .iter()
            .map(|s| (s.name.clone(), crate::suite::suite_sha256(&s.to_json())))
            .collect(),
    }
}

fn num(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

/// One suite's line of the summary tables (stdout and `report.md`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct SuiteVerdict {
    /// Hypothesis tests run for the suite.
    pub tests: usize,
    /// Tests and ε bounds that failed.
    pub failed: usize,
    /// The smallest Holm-adjusted p-value, if the suite ran any test.
    pub min_adjusted_p: Option<f64>,
    /// The largest ratio ε̂_lb / ε over the suite's ε bounds with a positive claim, if any.
    pub max_epsilon_ratio: Option<f64>,
    /// The largest ratio ε̂_lb / realised ε over the suite's ε bounds with a positive,
    /// finite realised ε, if any: how much of what the law allows the samples certified.
    pub max_realised_ratio: Option<f64>,
}

impl Report {
    /// The verdict line of the suite named `suite`.
    #[must_use]
    pub fn suite_verdict(&self, suite: &str) -> SuiteVerdict {
        let rows = self.results.iter().filter(|r| r.suite == suite);
        let eps = self.epsilon.iter().filter(|e| e.suite == suite);
        let min_p = rows
            .clone()
            .map(|r| r.adjusted_p_value)
            .fold(f64::INFINITY, f64::min);
        let ratio = eps
            .clone()
            .filter(|e| e.claimed > 0.0)
            .map(|e| e.lower_bound / e.claimed)
            .fold(f64::NEG_INFINITY, f64::max);
        let realised = eps
            .clone()
            .filter(|e| e.realised > 0.0 && e.realised.is_finite())
            .map(|e| e.lower_bound / e.realised)
            .fold(f64::NEG_INFINITY, f64::max);
        SuiteVerdict {
            tests: rows.clone().count(),
            failed: rows.filter(|r| !r.passed).count() + eps.filter(|e| !e.passed()).count(),
            min_adjusted_p: min_p.is_finite().then_some(min_p),
            max_epsilon_ratio: ratio.is_finite().then_some(ratio),
            max_realised_ratio: realised.is_finite().then_some(realised),
        }
    }

    /// Total outputs drawn over the run.
    #[must_use]
    pub fn samples(&self) -> u64 {
        self.suites.iter().map(|s| s.samples_drawn).sum()
    }

    /// The smallest relative error in the keep/flip probabilities the whole run detects at
    /// the planned power (the largest over its suites), when some suite drew fewer samples
    /// than planned; `None` when every suite drew its planned size (or more).
    #[must_use]
    pub fn detectable(&self) -> Option<f64> {
        self.suites
            .iter()
            .filter_map(|s| s.detectable)
            .fold(None, |a: Option<f64>, d| Some(a.map_or(d, |x| x.max(d))))
    }

    /// The sentence that says what the run's sample sizes can detect (for the verdict
    /// lines): the planned 1 % or, below it, the smallest detectable relative error.
    #[must_use]
    pub fn detectable_sentence(&self) -> String {
        match self.detectable() {
            None => format!(
                "planned sizes: a {} % relative error in any keep/flip probability is detected with power {}",
                self.plan_relative_error * 100.0,
                self.plan_power
            ),
            Some(d) => {
                let short: Vec<&str> = self
                    .suites
                    .iter()
                    .filter(|s| s.detectable.is_some())
                    .map(|s| s.name.as_str())
                    .collect();
                let named = if short.len() == self.suites.len() {
                    String::new()
                } else {
                    format!(" ({})", short.join(", "))
                };
                format!(
                    "UNDER-POWERED{named}: fewer samples than planned; the smallest relative error in the keep/flip (selection) probabilities this run detects with power {} is {:.3} %, so this verdict does not exclude smaller errors (planned: {} % with the planner's sizes)",
                    self.plan_power,
                    d * 100.0,
                    self.plan_relative_error * 100.0
                )
            }
        }
    }

    /// `true` when every test passed after correction and no ε bound exceeds its claim.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.passed) && self.epsilon.iter().all(EpsilonRow::passed)
    }

    /// Tests and ε bounds that failed.
    #[must_use]
    pub fn failures(&self) -> usize {
        self.results.iter().filter(|r| !r.passed).count()
            + self.epsilon.iter().filter(|e| !e.passed()).count()
    }

    /// `report.json`: the specification's schema (`alpha`, `seed`, `samples`, `results`,
    /// `epsilon`) plus `tool`, `versions`, `alpha_tests`, `passed` and `suites`. Contains
    /// no timings, so the same seed gives the same bytes.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self
            .results
            .iter()
            .map(|r| {
                json!({
                    "suite": r.suite,
                    "mechanism": r.mechanism,
                    "params": r.params,
                    "test": r.test,
                    "samples": r.samples,
                    "statistic": r.statistic.map_or(Value::Null, num),
                    "p_value": num(r.p_value),
                    "adjusted_p_value": num(r.adjusted_p_value),
                    "passed": r.passed,
                })
            })
            .collect();
        let epsilon: Vec<Value> = self
            .epsilon
            .iter()
            .map(|e| {
                json!({
                    "mechanism": e.mechanism,
                    "params": e.params,
                    "claimed": num(e.claimed),
                    "realised": num(e.realised),
                    "lower_bound": num(e.lower_bound),
                    "confidence": num(e.confidence),
                    "event": e.event.as_ref().map_or(Value::Null, |v| json!({
                        "pair": v.pair,
                        "swapped": v.swapped,
                        "cells": v.cells,
                        "cell_count": v.cell_count,
                        "law_log_ratio": num(v.law_log_ratio),
                        "fit": v.fit.as_ref().map_or(Value::Null, |f| json!({
                            "method": f.method,
                            "cell_meaning": f.cell_meaning,
                            "fit_bound": num(f.fit_bound),
                        })),
                    })),
                })
            })
            .collect();
        let suites: Vec<Value> = self
            .suites
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "mechanism": s.mechanism,
                    "seed": s.seed,
                    "points": s.points,
                    "samples_per_input": s.samples_per_input,
                    "samples": s.samples_drawn,
                    "sampler_overrides": s.sampler_overrides,
                    "notes": s.notes,
                    "planned_samples_per_input": s.planned_per_input,
                    "detectable_relative_error": s.detectable.map_or(Value::Null, num),
                    "coverage": s.coverage.iter().map(|c| json!({
                        "branch": c.branch.branch,
                        "inputs": c.branch.inputs,
                        "points": c.points,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let mut report = json!({
            "tool": "fl-audit",
            "versions": self.versions,
            "alpha": num(self.alpha),
            "alpha_tests": num(self.alpha_tests),
            "seed": self.seed,
            "shards": self.shards,
            "samples": self.samples(),
            "passed": self.passed(),
            "detectable_relative_error": self.detectable().map_or(Value::Null, num),
            "suites": suites,
            "results": results,
            "epsilon": epsilon,
        });
        if let (Some(a), Some(o)) = (&self.audited, report.as_object_mut()) {
            let mut audited = json!({
                "command": a.command,
                "suites": a.suites.iter().map(|(name, sha)| json!({
                    "name": name,
                    "sha256": sha,
                })).collect::<Vec<_>>(),
            });
            if let (Some(p), Some(x)) = (&a.program, audited.as_object_mut()) {
                x.insert("program".into(), json!(p));
            }
            o.insert("audited".into(), audited);
        }
        report
    }
}

/// An ε for people: six decimals at most, trailing zeros dropped (so a claimed ε computed
/// as 0.4999999999999995 reads 0.5), ∞ for an infinite one.
#[must_use]
pub fn fmt_eps(eps: f64) -> String {
    if eps.is_infinite() {
        return "∞".into();
    }
    if eps.is_nan() {
        return "–".into();
    }
    // report.json keeps the exact value.
    let s = format!("{eps:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// A count for people: thousands separated by commas (865,254,403).
#[must_use]
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A test statistic for people: four significant digits (fixed up to 10⁶, then
/// scientific), ∞ for an infinite one.
#[must_use]
pub fn fmt_stat(x: f64) -> String {
    if !x.is_finite() {
        return "∞".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if (1e-3..1e6).contains(&a) {
        let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{x:.decimals$}")
    } else {
        format!("{x:.3e}")
    }
}

/// A confidence level for people: `1 − 6.67e-05` rather than 0.9999333333333333.
#[must_use]
pub fn fmt_confidence(c: f64) -> String {
    format!("1 − {}", fmt_p(1.0 - c))
}

/// Formats a probability or p-value compactly.
#[must_use]
pub fn fmt_p(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p >= 1e-3 {
        format!("{p:.4}")
    } else {
        format!("{p:.2e}")
    }
}

/// The versions recorded in every report.
#[must_use]
pub fn versions() -> BTreeMap<String, String> {
    let v = env!("CARGO_PKG_VERSION").to_string();
    let mut m = BTreeMap::new();
    m.insert("fl-audit".into(), v.clone());
    // Which source the binary was built from (a commit, with its changes if dirty): shards
    // of one run must come from one build.
    m.insert("fl-audit-build".into(), crate::builtin::BUILD_ID.into());
    // The audited crates are workspace members and share the workspace version.
    m.insert("fl-ldp".into(), v.clone());
    m.insert("fl-signds".into(), v.clone());
    m.insert("fl-stats".into(), v.clone());
    // Not audited here: fl-paillier, with the arithmetic engine its keys get on this CPU
    // (issue 22: every report says which kernel the machine ran).
    m.insert(
        "fl-paillier".into(),
        format!("{v} (engine {})", fl_paillier::default_engine()),
    );
    // `rustc --version` says "rustc 1.95.0 (…)": the key already names the tool.
    let rustc = crate::builtin::RUSTC_VERSION;
    m.insert(
        "rustc".into(),
        rustc.strip_prefix("rustc ").unwrap_or(rustc).into(),
    );
    m
}

#[cfg(test)]
mod format_tests {
    use super::*;

    #[test]
    fn numbers_for_people() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1000), "1,000");
        assert_eq!(fmt_count(865_254_403), "865,254,403");
        assert_eq!(fmt_eps(0.499_999_999_999_999_5), "0.5");
        assert_eq!(fmt_eps(f64::INFINITY), "∞");
        assert_eq!(fmt_stat(12.345_678), "12.35");
        assert_eq!(fmt_stat(0.012_345), "0.01235");
        assert_eq!(fmt_stat(1_234_567.0), "1.235e6");
        assert_eq!(fmt_confidence(1.0 - 1e-4), "1 − 1.00e-4");
        let v = versions();
        assert!(!v["rustc"].starts_with("rustc"), "{}", v["rustc"]);
        assert!(
            v["fl-paillier"].ends_with(&format!("(engine {})", fl_paillier::default_engine())),
            "{}",
            v["fl-paillier"]
        );
    }
}
