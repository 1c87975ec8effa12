//! `fl-audit run`: builds every grid point of the selected suites, splits the family-wise
//! α, chooses sample sizes, draws in parallel (reproducibly), corrects for multiple
//! testing over the whole run and assembles the report.
//!
//! α split: with m_t hypothesis tests and m_e ε statements in the run, the tests share
//! α·m_t/(m_t+m_e) through Holm's step-down correction and each ε statement holds at
//! confidence 1 − α/(m_t+m_e) (its neighbour pairs share that by Bonferroni). By the union
//! bound the probability that a correct mechanism fails anything is at most α.

use std::{path::Path, time::Instant};

use rayon::prelude::*;
use serde_json::json;

use serde::{Deserialize, Serialize};

use crate::{
    analysis::{PointResult, epsilon, learned},
    error::{AuditError, Result},
    family::{self, PointAudit},
    progress::{Progress, ProgressBar},
    report::{
        CoverageRow, EpsilonEvent, EpsilonRow, EventFit, Report, SuiteSummary, TestRow, versions,
    },
    seeds::mix,
    suite::{Params, Samples, Suite},
    tally::Draws,
};

/// The default run seed.
pub const DEFAULT_SEED: u64 = 20_261_101;
/// The default family-wise α.
pub const DEFAULT_ALPHA: f64 = 1e-3;
/// The relative error in every keep/flip probability the planned sample sizes detect.
pub const PLAN_RELATIVE_ERROR: f64 = 0.01;
/// The power the planned sample sizes reach.
pub const PLAN_POWER: f64 = 0.99;

/// Options of one run.
///
/// Build it from [`RunOptions::default`] with struct update syntax
/// (`RunOptions { seed: 7, ..RunOptions::default() }`): fields may be added in later
/// versions, and code written that way keeps compiling.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// Samples per input for every suite (overrides the suites' own and the planner).
    pub samples: Option<u64>,
    /// The run seed.
    pub seed: u64,
    /// The family-wise α.
    pub alpha: f64,
    /// Draw the progress bar on stderr.
    pub progress: bool,
    /// The run drawn as this many shards in this process, one after the other, their
    /// counts merged in shard order: exactly what `fl-audit merge` makes of the same
    /// shards run apart (see [`Shard`]). 1 (the default) is the plain run.
    pub shards: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            samples: None,
            seed: DEFAULT_SEED,
            alpha: DEFAULT_ALPHA,
            progress: false,
            shards: 1,
        }
    }
}

/// The most shards a run may be split into.
pub const MAX_SHARDS: u64 = 1 << 16;

/// Domain separation of the shard seeds from the other seeds derived from a point's seed.
const SHARD_DOMAIN: u64 = 0x5348_4152_445F_5345; // "SHARD_SE"

/// Shard `index` of `count` of a run: it draws [`Shard::samples`] of each grid point's
/// samples per input, from the seed [`Shard::seed`] of the point's seed, and nothing else
/// (every grid point and every input is in every shard). A run split into N shards is, by
/// definition, the concatenation of its N shards' output streams in shard order: its count
/// tables are the sums of the shards' (a serial pair or a batch never straddles two
/// shards: the shards are independent pieces), so merging the shards' counts gives exactly
/// the counts of `fl-audit run --shards N` in one process. Shard 0 of 1 is the plain run
/// (its seed is the point's seed itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    index: u64,
    count: u64,
}

impl Shard {
    /// The whole run (shard 0 of 1).
    pub const WHOLE: Self = Self { index: 0, count: 1 };

    /// Shard `index` of `count`.
    ///
    /// # Errors
    /// [`AuditError::Usage`] unless 1 ≤ `count` ≤ [`MAX_SHARDS`] and `index` < `count`.
    pub fn new(index: u64, count: u64) -> Result<Self> {
        if count == 0 || count > MAX_SHARDS {
            return Err(AuditError::usage(format!(
                "the number of shards must be between 1 and {MAX_SHARDS}, got {count}"
            )));
        }
        if index >= count {
            return Err(AuditError::usage(format!(
                "shard index {index} is out of range: shards of {count} are numbered 0 to {}",
                count - 1
            )));
        }
        Ok(Self { index, count })
    }

    /// Parses `i/N` (as `--shard` takes it).
    ///
    /// # Errors
    /// [`AuditError::Usage`] for another form or an invalid shard (see [`Shard::new`]).
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || {
            AuditError::usage(format!(
                "--shard takes i/N (shard i of N, 0 <= i < N), got `{text}`"
            ))
        };
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let i = i.trim().parse::<u64>().map_err(|_| bad())?;
        let n = n.trim().parse::<u64>().map_err(|_| bad())?;
        Self::new(i, n)
    }

    /// The shard's number, 0..count.
    #[must_use]
    pub const fn index(self) -> u64 {
        self.index
    }

    /// The number of shards of the run.
    #[must_use]
    pub const fn count(self) -> u64 {
        self.count
    }

    /// Every shard of a run of `count` shards, in order (none for an invalid count).
    pub fn all(count: u64) -> impl Iterator<Item = Self> {
        let count = if count > MAX_SHARDS { 0 } else { count };
        (0..count).map(move |index| Self { index, count })
    }

    /// The shard's share of `n` samples per input: ⌊n/N⌋, one more for the first n mod N
    /// shards (the shares add up to `n`).
    #[must_use]
    pub const fn samples(self, n: u64) -> u64 {
        n / self.count + if self.index < n % self.count { 1 } else { 0 }
    }

    /// The seed the shard draws a grid point with, from the point's seed: the point's seed
    /// itself for the whole run, else a SplitMix64 mix of it, the shard count and the index
    /// (the only place shard seeds are derived).
    #[must_use]
    pub fn seed(self, point_seed: u64) -> u64 {
        if self.count == 1 {
            point_seed
        } else {
            mix(mix(mix(point_seed, SHARD_DOMAIN), self.count), self.index)
        }
    }
}

impl core::fmt::Display for Shard {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Selects suites by name: `all` (every suite), a suite name, or the path of a suite file.
///
/// # Errors
/// Unknown name (the message lists the known ones), unreadable or invalid file.
pub fn select(suites: Vec<Suite>, which: &str) -> Result<Vec<Suite>> {
    if which == "all" {
        return Ok(suites);
    }
    let path = Path::new(which);
    if which.ends_with(".json") || path.is_file() {
        return Ok(vec![Suite::load(path)?]);
    }
    let names: Vec<String> = suites.iter().map(|s| s.name.clone()).collect();
    match suites.into_iter().find(|s| s.name == which) {
        Some(s) => Ok(vec![s]),
        None => Err(AuditError::usage(format!(
            "unknown suite `{which}`; known suites: all, {}",
            names.join(", ")
        ))),
    }
}

struct Point {
    suite: usize,
    params: Params,
    audit: PointAudit,
    seed: u64,
    samples: u64,
    /// What the planner would draw per input.
    planned: u64,
}

/// Samples per input needed to detect a relative error `relative` in each probability of
/// `probabilities` with an exact two-sided binomial test at level `alpha_each` and power
/// `power` (fl-stats' planner, [`fl_stats::sample_size_for_proportion`]); the largest over
/// the probabilities. The error in p is δ = `relative`·min(p, 1 − p): a relative error in
/// p *or* in 1 − p (a keep and a flip probability), whichever is harder to see.
///
/// # Errors
/// When the planner rejects its inputs (`relative` or `power` outside (0, 1), `alpha_each`
/// not a level, a probability outside (0, 1)).
pub fn planned_samples(
    probabilities: &[f64],
    relative: f64,
    alpha_each: f64,
    power: f64,
) -> Result<u64> {
    let mut n = 1u64;
    for p in distinct_probabilities(probabilities) {
        let delta = relative * p;
        n = n.max(binomial_sample_size(p, delta, alpha_each, power)?);
    }
    Ok(n)
}

/// The smallest relative error in the probabilities `probabilities` that `samples` per
/// input detect with the exact two-sided binomial test at level `alpha_each` and power
/// `power`: the inverse of [`planned_samples`] (bisection on the relative error, to 10⁻⁴
/// relative). 1 when not even a 100 % error is detectable.
///
/// # Errors
/// As [`planned_samples`].
pub fn detectable_relative_error(
    probabilities: &[f64],
    samples: u64,
    alpha_each: f64,
    power: f64,
) -> Result<f64> {
    let needs = |relative: f64| planned_samples(probabilities, relative, alpha_each, power);
    let top = 0.999;
    if needs(top)? > samples {
        return Ok(1.0);
    }
    // The answer lies in (lo, hi]: lo too small (or 0), hi large enough.
    let (mut lo, mut hi) = (0.0f64, top);
    while hi - lo > 1e-4 * hi {
        let mid = 0.5 * (lo + hi);
        if needs(mid)? <= samples {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The probabilities a plan has to cover: min(p, 1 − p) of each (the two-sided test is
/// symmetric), sorted, without the near-duplicates that p and a rounded 1 − p give (equal
/// within 10⁻¹² relative).
#[must_use]
pub fn distinct_probabilities(probabilities: &[f64]) -> Vec<f64> {
    let mut distinct: Vec<f64> = probabilities.iter().map(|&p| p.min(1.0 - p)).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup_by(|a, b| (*a - *b).abs() <= 1e-12 * b.abs());
    distinct
}

/// fl-stats' planner for one probability (wired here in one place). The two-sided test
/// is symmetric in p and 1 − p, so the caller passes the smaller one.
fn binomial_sample_size(p: f64, delta: f64, alpha: f64, power: f64) -> Result<u64> {
    let alpha = fl_stats::Alpha::new(alpha).map_err(|_| {
        AuditError::usage(format!("the planner needs a level in (0, 1), got {alpha}"))
    })?;
    Ok(fl_stats::sample_size_for_proportion(p, delta, alpha, power)?.samples)
}

/// Builds a suite's grid points (validating mechanism, parameters and tests).
///
/// # Errors
/// [`AuditError::Suite`] naming the suite and the problem.
pub(crate) fn build_points(suite: &Suite) -> Result<Vec<(Params, PointAudit)>> {
    suite
        .points()
        .into_iter()
        .map(|p| {
            let sp = suite.sampler_params(&p);
            family::point(&suite.mechanism, &p, &sp, &suite.tests)
                .map(|a| (p, a))
                .map_err(|e| AuditError::suite(&suite.name, e.to_string()))
        })
        .collect()
}

/// Runs `suites` and returns the report (nothing is written here).
///
/// # Errors
/// Invalid suites or options, and mechanism or statistics errors.
pub fn run(suites: &[Suite], options: &RunOptions) -> Result<Report> {
    let mut report = execute(suites, suite_points(suites, options.seed)?, options)?;
    report.audited = Some(crate::report::audited("run", suites, None));
    Ok(report)
}

/// The grid points of `suites`, each seeded from the run seed, its suite's seed and its
/// position in the suite.
pub(crate) fn suite_points(suites: &[Suite], seed: u64) -> Result<Vec<SuitePoint>> {
    let mut points = Vec::new();
    for (si, suite) in suites.iter().enumerate() {
        for (pi, (params, audit)) in build_points(suite)?.into_iter().enumerate() {
            points.push(SuitePoint {
                suite: si,
                params,
                audit,
                seed: mix(mix(seed, suite.seed), pi as u64),
            });
        }
    }
    Ok(points)
}

/// A grid point of suite number `suite`, ready to run.
pub(crate) struct SuitePoint {
    /// Index into the suites.
    pub suite: usize,
    /// The law's parameters.
    pub params: Params,
    /// The audit.
    pub audit: PointAudit,
    /// Its seed.
    pub seed: u64,
}

/// A run's points with their sample sizes and the α split.
struct Planned {
    points: Vec<Point>,
    alpha: f64,
    alpha_each: f64,
    family: f64,
    detectable: Vec<Option<f64>>,
}

/// One grid point's draws in one shard (or merged over shards).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PointDraws {
    /// The suite's name.
    pub suite: String,
    /// The point's parameters.
    pub params: Params,
    /// The point's seed (before the shard's derivation).
    pub seed: u64,
    /// The whole run's samples per input (all shards).
    pub samples: u64,
    /// Seconds spent drawing (not compared).
    pub seconds: f64,
    /// Per input, in input order, the counts.
    pub inputs: Vec<Draws>,
}

/// Adds `piece`'s draws to `total`'s, input by input.
pub(crate) fn merge_inputs(total: &mut Vec<Draws>, piece: Vec<Draws>) {
    if total.is_empty() {
        *total = piece;
        return;
    }
    for (t, p) in total.iter_mut().zip(piece) {
        t.merge(p);
    }
}

/// Plans, runs and corrects `points` (of `suites`): each point drawn as
/// `options.shards` shards in order, merged, then analysed.
pub(crate) fn execute(
    suites: &[Suite],
    points: Vec<SuitePoint>,
    options: &RunOptions,
) -> Result<Report> {
    Shard::new(0, options.shards)?;
    let mut planned = plan(suites, points, options)?;
    let total: u64 = planned
        .points
        .iter()
        .map(|p| p.samples.saturating_mul(p.audit.inputs() as u64))
        .fold(0, u64::saturating_add);
    let bar = ProgressBar::start("fl-audit run", total, options.progress);
    let progress: Progress = bar.progress();
    let results: Vec<(usize, Result<PointResult>, f64)> = planned
        .points
        .par_iter_mut()
        .enumerate()
        .map(|(i, p)| {
            let t = Instant::now();
            let r = draw_shards(p, options.shards, &progress).and_then(|d| p.audit.analyze(d));
            (i, r, t.elapsed().as_secs_f64())
        })
        .collect();
    bar.finish();
    assemble(suites, &planned, results, options)
}

/// Draws the shards 0..`shards` of `p` one after the other and adds their counts in
/// shard order (the definition of a run of `shards` shards).
fn draw_shards(p: &mut Point, shards: u64, progress: &Progress) -> Result<Vec<Draws>> {
    let mut draws = Vec::new();
    for shard in Shard::all(shards) {
        let piece = p
            .audit
            .draw(shard.samples(p.samples), shard.seed(p.seed), progress)?;
        merge_inputs(&mut draws, piece);
    }
    Ok(draws)
}

/// The count tables [`run`] analyses (drawn as `options.shards` shards in this process,
/// merged in shard order), as JSON: one array per grid point, one element per input.
/// `fl-audit merge` of the same run's shards has the same tables
/// ([`crate::shard::Merge::tables`]).
///
/// # Errors
/// As [`run`].
pub fn run_tables(suites: &[Suite], options: &RunOptions) -> Result<serde_json::Value> {
    Shard::new(0, options.shards)?;
    let mut planned = plan(suites, suite_points(suites, options.seed)?, options)?;
    let progress = Progress::default();
    let tables: Vec<serde_json::Value> = planned
        .points
        .par_iter_mut()
        .map(|p| {
            let d = draw_shards(p, options.shards, &progress)?;
            serde_json::to_value(&d)
                .map_err(|e| AuditError::Mechanism(format!("cannot serialise the counts: {e}")))
        })
        .collect::<Result<_>>()?;
    Ok(serde_json::Value::Array(tables))
}

/// Plans `points` (of `suites`) and draws shard `shard` of each: the counts a shard's
/// counts file holds.
pub(crate) fn execute_shard(
    suites: &[Suite],
    points: Vec<SuitePoint>,
    options: &RunOptions,
    shard: Shard,
) -> Result<Vec<PointDraws>> {
    let mut planned = plan(suites, points, options)?;
    let total: u64 = planned
        .points
        .iter()
        .map(|p| {
            shard
                .samples(p.samples)
                .saturating_mul(p.audit.inputs() as u64)
        })
        .fold(0, u64::saturating_add);
    let bar = ProgressBar::start(&format!("fl-audit shard {shard}"), total, options.progress);
    let progress: Progress = bar.progress();
    let drawn: Vec<Result<PointDraws>> = planned
        .points
        .par_iter_mut()
        .map(|p| {
            let t = Instant::now();
            let inputs = p
                .audit
                .draw(shard.samples(p.samples), shard.seed(p.seed), &progress)
                .map_err(|e| {
                    AuditError::suite(
                        &suites[p.suite].name,
                        format!(
                            "{} at {}: {e}",
                            suites[p.suite].mechanism,
                            crate::suite::params_label(&p.params)
                        ),
                    )
                })?;
            Ok(PointDraws {
                suite: suites[p.suite].name.clone(),
                params: p.params.clone(),
                seed: p.seed,
                samples: p.samples,
                seconds: t.elapsed().as_secs_f64(),
                inputs,
            })
        })
        .collect();
    bar.finish();
    drawn.into_iter().collect()
}

/// Plans `points` (of `suites`) and analyses `draws`, the merged counts of every shard of
/// each point (in the points' order), as [`execute`] analyses what it draws.
///
/// # Errors
/// [`AuditError::Usage`] when the counts do not match the plan (another number of points
/// or inputs, another number of outputs per input than the plan's samples), and the
/// analysis' errors.
pub(crate) fn execute_merged(
    suites: &[Suite],
    points: Vec<SuitePoint>,
    options: &RunOptions,
    draws: Vec<PointDraws>,
) -> Result<Report> {
    let mut planned = plan(suites, points, options)?;
    if draws.len() != planned.points.len() {
        return Err(AuditError::usage(format!(
            "the merged counts hold {} grid points, the run has {}",
            draws.len(),
            planned.points.len()
        )));
    }
    for (p, d) in planned.points.iter().zip(&draws) {
        let wrong = d.inputs.len() != p.audit.inputs()
            || d.samples != p.samples
            || d.inputs.iter().any(|i| i.outputs() != p.samples);
        if wrong {
            return Err(AuditError::usage(format!(
                "the merged counts of suite `{}` at {} do not hold {} samples for each of its {} inputs",
                d.suite,
                crate::suite::params_label(&p.params),
                p.samples,
                p.audit.inputs()
            )));
        }
    }
    let results: Vec<(usize, Result<PointResult>, f64)> = planned
        .points
        .par_iter_mut()
        .zip(draws)
        .enumerate()
        .map(|(i, (p, d))| (i, p.audit.analyze(d.inputs), d.seconds))
        .collect();
    assemble(suites, &planned, results, options)
}

/// Sample sizes (the planner's or the options'), the α split and what short runs detect.
fn plan(suites: &[Suite], points: Vec<SuitePoint>, options: &RunOptions) -> Result<Planned> {
    let alpha = fl_stats::Alpha::new(options.alpha)
        .map_err(|_| {
            AuditError::usage(format!("--alpha must be in (0, 1), got {}", options.alpha))
        })?
        .value();
    if options.samples == Some(0) {
        return Err(AuditError::usage("--samples must be at least 1"));
    }
    let mut points: Vec<Point> = points
        .into_iter()
        .map(|p| Point {
            suite: p.suite,
            params: p.params,
            audit: p.audit,
            seed: p.seed,
            samples: 0,
            planned: 0,
        })
        .collect();
    let m_tests: usize = points.iter().map(|p| p.audit.test_count()).sum();
    let m_eps: usize = points.iter().map(|p| p.audit.epsilon_count()).sum();
    let family = (m_tests + m_eps).max(1) as f64;
    let alpha_each = alpha / family;
    for p in &mut points {
        p.planned = planned_samples(
            &p.audit.plan_probabilities(),
            PLAN_RELATIVE_ERROR,
            alpha_each,
            PLAN_POWER,
        )
        .map_err(|e| AuditError::suite(&suites[p.suite].name, e.to_string()))?;
        p.samples = match (options.samples, suites[p.suite].samples) {
            (Some(n), _) | (None, Samples::Fixed(n)) => n,
            (None, Samples::Plan) => p.planned,
        };
    }
    // Below the planned size, what the run can detect (what a pass means).
    let under: Vec<(usize, Vec<f64>, u64, bool)> = points
        .iter()
        .map(|p| {
            let probs = p.audit.plan_probabilities();
            (p.suite, probs, p.samples, p.samples < p.planned)
        })
        .collect();
    let detectable: Vec<Option<f64>> = under
        .par_iter()
        .map(|(suite, probs, samples, short)| {
            if !short {
                return Ok(None);
            }
            detectable_relative_error(probs, *samples, alpha_each, PLAN_POWER)
                .map(Some)
                .map_err(|e| AuditError::suite(&suites[*suite].name, e.to_string()))
        })
        .collect::<Result<_>>()?;
    Ok(Planned {
        points,
        alpha,
        alpha_each,
        family,
        detectable,
    })
}

/// Corrects the points' results for multiple testing and assembles the report.
fn assemble(
    suites: &[Suite],
    planned: &Planned,
    results: Vec<(usize, Result<PointResult>, f64)>,
    options: &RunOptions,
) -> Result<Report> {
    let Planned {
        points,
        alpha,
        alpha_each,
        family,
        detectable,
    } = planned;
    let (alpha, alpha_each, family) = (*alpha, *alpha_each, *family);
    let mut summaries: Vec<SuiteSummary> = suites
        .iter()
        .map(|s| SuiteSummary {
            name: s.name.clone(),
            description: s.description.clone(),
            mechanism: s.mechanism.clone(),
            seed: s.seed,
            points: 0,
            samples_per_input: Vec::new(),
            samples_drawn: 0,
            sampler_overrides: s.sampler.clone(),
            sample_size: match (options.samples, s.samples) {
                (Some(_), _) => "set by --samples for every suite".into(),
                (None, Samples::Fixed(_)) => "fixed by the suite file".into(),
                (None, Samples::Plan) => format!(
                    "planned (fl-stats' sample_size_for_proportion) to detect a {} % relative \
                     error in every keep/flip probability with power {} at α/{} = {} per test \
                     (the whole run's family)",
                    PLAN_RELATIVE_ERROR * 100.0,
                    PLAN_POWER,
                    family as u64,
                    crate::report::fmt_p(alpha_each)
                ),
            },
            panels: Vec::new(),
            notes: Vec::new(),
            coverage: Vec::new(),
            planned_per_input: Vec::new(),
            detectable: None,
            seconds: 0.0,
        })
        .collect();
    let mut rows = Vec::new();
    let mut evidence = Vec::new();
    for (i, r, secs) in results {
        let p = &points[i];
        let suite = &suites[p.suite];
        let r = r.map_err(|e| {
            AuditError::suite(
                &suite.name,
                format!(
                    "{} at {}: {e}",
                    suite.mechanism,
                    crate::suite::params_label(&p.params)
                ),
            )
        })?;
        let s = &mut summaries[p.suite];
        s.points += 1;
        s.samples_per_input.push(p.samples);
        s.planned_per_input.push(p.planned);
        if let Some(d) = detectable[i] {
            s.detectable = Some(s.detectable.map_or(d, |x: f64| x.max(d)));
        }
        s.samples_drawn += r.drawn;
        s.seconds += secs;
        // Panels are told apart by the grid axes (the fixed parameters are the suite's).
        let grid: Params = p
            .params
            .iter()
            .filter(|(k, _)| suite.grid.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let label = crate::suite::params_label(&grid);
        for branch in r.coverage {
            match s.coverage.iter_mut().find(|row| row.branch == branch) {
                Some(row) => row.points.push(label.clone()),
                None => s.coverage.push(CoverageRow {
                    branch,
                    points: vec![label.clone()],
                }),
            }
        }
        for note in r.notes {
            if !s.notes.contains(&note) {
                s.notes.push(note);
            }
        }
        for mut panel in r.panels {
            if !label.is_empty() {
                panel.title = format!("{label}: {}", panel.title);
            }
            s.panels.push(panel);
        }
        for o in r.outcomes {
            let mut params = p.params.clone();
            params.extend(o.about);
            rows.push(TestRow {
                suite: suite.name.clone(),
                mechanism: suite.mechanism.clone(),
                params,
                test: o.test,
                samples: o.samples,
                statistic: o.statistic.is_finite().then_some(o.statistic),
                p_value: o.p_value,
                adjusted_p_value: o.p_value,
                passed: true,
            });
        }
        for e in r.evidence {
            let mut params = p.params.clone();
            params.extend(e.about.clone());
            evidence.push((suite.name.clone(), suite.mechanism.clone(), params, e));
        }
    }
    // Recount with what actually ran (the planning count is an estimate).
    let m_tests = rows.len();
    let m_eps = evidence.len();
    let family = (m_tests + m_eps).max(1) as f64;
    let alpha_tests = alpha * m_tests as f64 / family;
    if !rows.is_empty() {
        let p: Vec<f64> = rows.iter().map(|r| r.p_value).collect();
        let adjusted = fl_stats::holm(&p)?;
        for (r, &a) in rows.iter_mut().zip(&adjusted.adjusted) {
            r.adjusted_p_value = a;
            r.passed = a > alpha_tests;
        }
    }
    // A coverage row that holds at every point of its suite is shown without points.
    for s in &mut summaries {
        let points = s.points;
        for row in &mut s.coverage {
            if row.points.len() == points {
                row.points.clear();
            }
        }
    }
    let mut eps_rows = Vec::new();
    let confidence = 1.0 - alpha / family;
    let statement_confidence = fl_stats::Confidence::new(confidence)?;
    for (suite, mechanism, params, e) in evidence {
        // The event is chosen from the law and the sample sizes only (before the counts
        // are read), so the statement pays for two one-sided bounds, not for the choice.
        let samples: Vec<(u64, u64)> = e
            .pairs
            .iter()
            .map(|(a, b)| (a.iter().sum(), b.iter().sum()))
            .collect();
        let error_each = (alpha / family) / 2.0;
        // A learned event is chosen on the fitting half (`e.learned`) and certified on the
        // other (`e.pairs`); a planned one from the law and the sample sizes alone.
        let (event, fit) = match &e.learned {
            Some(l) => match learned::fit(&l.spec, &l.fit, error_each)? {
                Some(f) => {
                    let mut event = f.event;
                    event.law_log_ratio = e
                        .laws
                        .get(event.pair)
                        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                        .map_or(f64::NAN, |(a, b)| {
                            let (num, den) = if event.swapped { (b, a) } else { (a, b) };
                            let sum = |l: &[f64]| {
                                event.cells.iter().filter_map(|&c| l.get(c)).sum::<f64>()
                            };
                            epsilon::log_ratio(sum(num), sum(den))
                        });
                    (Some(event), Some((f.method.name(), f.fit_bound)))
                }
                None => (None, None),
            },
            None => (epsilon::plan_event(&e.laws, &samples, error_each)?, None),
        };
        let lower_bound = epsilon::certify(event.as_ref(), &e.pairs, statement_confidence)?;
        let known = e.laws.iter().all(|(a, b)| !a.is_empty() && !b.is_empty());
        let space = e
            .learned
            .as_ref()
            .map(|l| (l.spec.cells, l.spec.cell_meaning.clone()));
        eps_rows.push(EpsilonRow {
            suite,
            mechanism,
            params,
            claimed: e.claimed,
            realised: if known {
                epsilon::realised_epsilon(&e.laws)
            } else {
                f64::NAN
            },
            lower_bound,
            confidence,
            event: event.map(|p| EpsilonEvent {
                pair: e.names.get(p.pair).cloned().unwrap_or_default(),
                swapped: p.swapped,
                cell_count: space.as_ref().map_or_else(
                    || e.laws.get(p.pair).map_or(0, |l| l.0.len()),
                    |(cells, _)| *cells,
                ),
                cells: p.cells,
                law_log_ratio: p.law_log_ratio,
                fit: fit.map(|(method, bound)| EventFit {
                    method: method.into(),
                    cell_meaning: space.as_ref().map(|(_, m)| m.clone()).unwrap_or_default(),
                    fit_bound: bound,
                }),
            }),
        });
    }
    Ok(Report {
        alpha,
        alpha_tests,
        plan_relative_error: PLAN_RELATIVE_ERROR,
        plan_power: PLAN_POWER,
        seed: options.seed,
        shards: options.shards,
        versions: versions(),
        suites: summaries,
        results: rows,
        epsilon: eps_rows,
        audited: None,
    })
}

/// The files of a report directory: `report.json`, `report.md`, `report.html` (with the
/// plots inline) and one SVG per suite.
///
/// # Errors
/// Serialisation failure (not expected).
pub fn report_files(report: &Report) -> Result<Vec<(String, Vec<u8>)>> {
    let svg_names: Vec<String> = report
        .suites
        .iter()
        .map(|s| format!("{}.svg", s.name))
        .collect();
    let json = serde_json::to_string_pretty(&report.to_json())
        .map_err(|e| AuditError::Mechanism(format!("cannot serialise the report: {e}")))?;
    // The plots' threshold lines are at Holm's first step: the tests' share of α over
    // the number of tests.
    let alpha_each = report.alpha_tests / report.results.len().max(1) as f64;
    let svgs: Vec<(String, String)> = report
        .suites
        .iter()
        .zip(&svg_names)
        .map(|(s, name)| (name.clone(), crate::report::render_svg(s, alpha_each)))
        .collect();
    let mut files = vec![
        ("report.json".to_string(), json.into_bytes()),
        (
            "report.md".to_string(),
            crate::report::render_markdown(report, &svg_names).into_bytes(),
        ),
        (
            "report.html".to_string(),
            crate::report::render_html(report, &svgs).into_bytes(),
        ),
    ];
    for (name, svg) in svgs {
        files.push((name, svg.into_bytes()));
    }
    Ok(files)
}

/// A one-line description of the planning assumptions, for `list` and the README.
#[must_use]
pub fn plan_note() -> serde_json::Value {
    json!({
        "relative_error": PLAN_RELATIVE_ERROR,
        "power": PLAN_POWER,
        "alpha": DEFAULT_ALPHA,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planned_samples_follow_fl_stats_and_cover_the_hardest_probability() {
        let keep = 1f64.exp() / (1.0 + 1f64.exp());
        let direct = fl_stats::sample_size_for_proportion(
            1.0 - keep,
            0.01 * (1.0 - keep),
            fl_stats::Alpha::new(1e-4).unwrap(),
            0.99,
        )
        .unwrap()
        .samples;
        // The keep and the flip probability are one plan (min(p, 1 − p)).
        assert_eq!(
            planned_samples(&[keep, 1.0 - keep], 0.01, 1e-4, 0.99).unwrap(),
            direct
        );
        // A smaller probability needs more samples; the plan is the largest.
        let both = planned_samples(&[0.5, 0.1], 0.01, 1e-4, 0.99).unwrap();
        let small = planned_samples(&[0.1], 0.01, 1e-4, 0.99).unwrap();
        assert_eq!(both, small);
        assert!(small > planned_samples(&[0.5], 0.01, 1e-4, 0.99).unwrap());
        assert!(planned_samples(&[0.5], 0.01, 0.0, 0.99).is_err());
        assert!(planned_samples(&[0.5], 0.01, 1e-3, 1.0).is_err());
        assert_eq!(
            distinct_probabilities(&[0.3, 0.7, 0.7 + 1e-17, 0.2]),
            vec![0.2, 0.3]
        );
    }

    /// The family the planner divides α by is the family the run corrects over: for every
    /// built-in suite, the tests and ε statements counted before sampling are those the
    /// run reports (correct samplers, small samples).
    #[test]
    fn planned_family_is_the_reported_family() {
        for suite in crate::suite::builtin().unwrap() {
            let points = build_points(&suite).unwrap();
            let tests: usize = points.iter().map(|(_, a)| a.test_count()).sum();
            let eps: usize = points.iter().map(|(_, a)| a.epsilon_count()).sum();
            let report = run(
                std::slice::from_ref(&suite),
                &RunOptions {
                    samples: Some(3000),
                    ..RunOptions::default()
                },
            )
            .unwrap();
            assert_eq!(report.results.len(), tests, "{}", suite.name);
            assert_eq!(report.epsilon.len(), eps, "{}", suite.name);
        }
    }

    #[test]
    fn plan_samples_account_for_every_test_of_the_run() {
        let text = |name: &str| {
            format!(
                r#"{{"name": "{name}", "mechanism": "rr-binary", "params": {{"eps": 1}},
                "seed": 2, "samples": "plan", "tests": ["cells", "epsilon"]}}"#
            )
        };
        // (Seed 2: at seed 1 this correct sampler's batch counts at 4 batches per group are
        // unusually regular, χ²₁₇ = 1.92, two-sided p = 5·10⁻⁶, a chance false alarm of the
        // two-sided dispersion test at the run's α = 10⁻³; 40 other seeds of this suite gave
        // every dispersion and run-position p-value its uniform share below 0.05 and 0.2.)
        let one = Suite::parse("t", &text("one")).unwrap();
        let alone = run(std::slice::from_ref(&one), &RunOptions::default()).unwrap();
        // 2 cell tests, 2 × (8 serial lags + 4 dispersion scales + 2 run-position
        // segmentations) and 1 ε statement: α/31 per test.
        let m = alone.results.len() + alone.epsilon.len();
        assert_eq!(m, 31);
        let keep = 1f64.exp() / (1.0 + 1f64.exp());
        let want =
            planned_samples(&[keep], PLAN_RELATIVE_ERROR, 1e-3 / m as f64, PLAN_POWER).unwrap();
        assert_eq!(alone.suites[0].samples_per_input, vec![want]);
        assert!(alone.passed());
        assert_eq!(alone.detectable(), None);
        // Next to a second suite the family doubles and each test gets α/54: more samples.
        let two = Suite::parse("t", &text("two")).unwrap();
        let both = run(&[one, two], &RunOptions::default()).unwrap();
        let want2 = planned_samples(
            &[keep],
            PLAN_RELATIVE_ERROR,
            1e-3 / (2 * m) as f64,
            PLAN_POWER,
        )
        .unwrap();
        assert_eq!(both.suites[0].samples_per_input, vec![want2]);
        assert!(want2 > want);
    }
}
