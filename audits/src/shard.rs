//! Sharded runs: a shard's counts file and the merge of a run's shards into its report.
//!
//! `fl-audit run|external --shard i/N --counts-out FILE` draws shard i of N of the run
//! ([`Shard`]: its share of every grid point's samples per input, from a seed derived from
//! the point's seed and the shard) and writes its sufficient statistics to FILE: per grid
//! point and input, every count table the analysis reads (the law's counts, bit statistics
//! or real outputs, serial pairs at every lag, per-batch counts, the learned event's cells,
//! the outputs observed), with the run's parameters, the audited command and the build of
//! fl-audit that drew them. `fl-audit merge FILES…` checks that the files are the N shards
//! of one run (the same command, parameters, build and format, each shard exactly once),
//! that every table in them is one the run's sources could have drawn for that shard
//! ([`Counts::validate`]: its shape and its totals), adds the tables in shard order with checked
//! sums and analyses them: the report of `fl-audit run --shards N`, byte for byte
//! (`report.json`).
//!
//! Every table is a sum over outputs, so the merge is exact; a serial pair or a batch
//! never straddles two shards (they are independent draws, and the run is defined as
//! their concatenation). Real outputs (the Laplace and discrete Gaussian families) are
//! counted per coordinate in the cells their law fixes before sampling
//! (`tally::RealCells`, at most 2¹² cells per coordinate): a counts file does not grow
//! with the samples (format version 1 kept the outputs themselves).
//!
//! The file (JSON, [`FORMAT`] version [`FORMAT_VERSION`]):
//!
//! ```text
//! { "format": "fl-audit-shard-counts", "format_version": 2, "fl_audit_version": "…",
//!   "fl_audit_build": "git:<commit>[+dirty.<hash>]"|"…",
//!   "run": { "command": "run"|"external", "suites": [suite file, …],
//!            "suite_sha256": [SHA-256 of each suite's canonical JSON, …],
//!            "program": [argv after `--`, `{seed}` not substituted]|null,
//!            "seed": S, "alpha": A, "samples": N|null, "batch": B|null },
//!   "shard": { "index": i, "count": N },
//!   "points": [ { "suite": name, "params": {…}, "seed": point seed, "samples": whole
//!                 run's samples per input, "seconds": s, "inputs": [counts, …] }, … ] }
//! ```

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod verify;

use crate::{
    engine::{self, PointDraws, RunOptions, Shard, SuitePoint},
    error::{AuditError, Result},
    family,
    progress::Progress,
    report::Report,
    source::{FeedFactory, Source},
    suite::Suite,
    tally::Draws,
};

/// The `format` field of a counts file.
pub const FORMAT: &str = "fl-audit-shard-counts";

/// The version of the counts file format this build writes and reads (2: the audited
/// command and the build recorded).
pub const FORMAT_VERSION: u32 = 2;

/// The most outputs an external run asks per request (`fl-audit external --batch`).
pub const MAX_BATCH: u64 = 1_000_000;

/// Which source this fl-audit was built from: `git:<commit>`, `git:<commit>+dirty.<hash>`
/// for a tree with changes, `git:<commit>+packaged` from a packaged crate, the
/// `FL_AUDIT_BUILD_ID` it was built with, or `unknown` (see `audits/build.rs`). A counts
/// file records it; `fl-audit merge` takes only shards of its own build.
pub const BUILD_ID: &str = crate::builtin::BUILD_ID;

pub use crate::error::ShardError;

/// The command a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RunCommand {
    /// `fl-audit run`: built-in or suite-file suites, the project's samplers.
    Run,
    /// `fl-audit external`: one mechanism over the protocol.
    External,
}

/// Everything that determines a run's points, sample sizes and seeds: equal in every
/// shard of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunSpec {
    /// The command.
    pub command: RunCommand,
    /// The suites, as suite files.
    pub suites: Vec<Value>,
    /// The SHA-256 of each suite's canonical JSON (keys sorted, no whitespace).
    pub suite_sha256: Vec<String>,
    /// The external program's command line after `--`, its `{seed}` placeholders not
    /// substituted (`None`: `run`, or an in-process mechanism).
    pub program: Option<Vec<String>>,
    /// The run seed.
    pub seed: u64,
    /// The family-wise α.
    pub alpha: f64,
    /// Samples per input set for every suite, if set.
    pub samples: Option<u64>,
    /// Outputs per request (external).
    pub batch: Option<u64>,
}

impl RunSpec {
    /// The spec of a run of `suites` (`program`: the external mechanism's command line,
    /// as given after `--`).
    pub(crate) fn new(
        command: RunCommand,
        suites: &[Suite],
        options: &RunOptions,
        batch: Option<u64>,
        program: Option<Vec<String>>,
    ) -> Self {
        let suites: Vec<Value> = suites.iter().map(Suite::to_json).collect();
        Self {
            command,
            suite_sha256: suites.iter().map(crate::suite::suite_sha256).collect(),
            suites,
            program,
            seed: options.seed,
            alpha: options.alpha,
            samples: options.samples,
            batch,
        }
    }

    /// The first field that differs from `other`'s.
    fn difference(&self, other: &Self) -> Option<&'static str> {
        if self.command != other.command {
            Some("the command (run or external)")
        } else if self.program != other.program {
            Some("the external program (its command line after --)")
        } else if self.suites != other.suites || self.suite_sha256 != other.suite_sha256 {
            Some("the suites (mechanism, parameters, grid, tests)")
        } else if self.seed != other.seed {
            Some("the seed")
        } else if self.alpha.to_bits() != other.alpha.to_bits() {
            Some("alpha")
        } else if self.samples != other.samples {
            Some("the samples per input")
        } else if self.batch != other.batch {
            Some("the batch size")
        } else {
            None
        }
    }

    fn suites_parsed(&self) -> Result<Vec<Suite>> {
        self.suites
            .iter()
            .map(|s| {
                let name = s.get("name").and_then(Value::as_str).unwrap_or("(unnamed)");
                Suite::parse(name, &s.to_string())
            })
            .collect()
    }

    fn options(&self) -> RunOptions {
        RunOptions {
            samples: self.samples,
            seed: self.seed,
            alpha: self.alpha,
            progress: false,
            shards: 1,
        }
    }

    /// The run's points, for analysis only (an external point has no mechanism).
    fn points(&self, suites: &[Suite]) -> Result<Vec<SuitePoint>> {
        match self.command {
            RunCommand::Run => engine::suite_points(suites, self.seed),
            RunCommand::External => {
                let [suite] = suites else {
                    return Err(AuditError::usage(format!(
                        "an external run has one suite, the counts hold {}",
                        suites.len()
                    )));
                };
                let audit = family::external(
                    &suite.mechanism,
                    &suite.params,
                    &suite.tests,
                    &mut |_, _, feed| Ok(Box::new(Merged { feed }) as Box<dyn Source>),
                )?;
                Ok(vec![SuitePoint {
                    suite: 0,
                    params: suite.params.clone(),
                    audit,
                    seed: self.seed,
                }])
            }
        }
    }
}

/// The source of a merged run: its counts were drawn by the shards. It draws only the
/// empty tables of an input's observer (no output: the shapes a counts file is checked
/// against).
struct Merged {
    feed: Box<FeedFactory>,
}

impl Source for Merged {
    fn draw(&mut self, input: usize, n: u64, _: u64, _: &Progress) -> Result<Draws> {
        if n > 0 {
            return Err(AuditError::Mechanism(
                "a merged run draws nothing (its shards did)".into(),
            ));
        }
        Ok((self.feed)(input)?.finish_boxed())
    }
}

/// Draws shard `shard` of the run of `suites` with `options` (`fl-audit run --shard`):
/// its counts, ready to write.
///
/// # Errors
/// As [`engine::run`].
pub fn run_shard(suites: &[Suite], options: &RunOptions, shard: Shard) -> Result<Counts> {
    let points = engine::execute_shard(
        suites,
        engine::suite_points(suites, options.seed)?,
        options,
        shard,
    )?;
    Ok(Counts::new(
        RunSpec::new(RunCommand::Run, suites, options, None, None),
        shard,
        points,
    ))
}

/// The index and count of a file's shard, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardField {
    index: u64,
    count: u64,
}

/// A counts file's first fields, read before the rest.
#[derive(Deserialize)]
struct Header {
    format: String,
    format_version: u32,
    fl_audit_version: String,
    fl_audit_build: Option<String>,
}

/// One shard's counts file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    format: String,
    format_version: u32,
    fl_audit_version: String,
    fl_audit_build: String,
    run: RunSpec,
    shard: ShardField,
    points: Vec<PointDraws>,
}

impl Counts {
    /// The counts of shard `shard` of the run `run`.
    pub(crate) fn new(run: RunSpec, shard: Shard, points: Vec<PointDraws>) -> Self {
        Self {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            fl_audit_version: env!("CARGO_PKG_VERSION").into(),
            fl_audit_build: BUILD_ID.into(),
            run,
            shard: ShardField {
                index: shard.index(),
                count: shard.count(),
            },
            points,
        }
    }

    /// The shard these counts are of.
    #[must_use]
    pub fn shard(&self) -> (u64, u64) {
        (self.shard.index, self.shard.count)
    }

    /// The count tables alone, as JSON (no timings): equal for equal draws.
    #[must_use]
    pub fn tables(&self) -> Value {
        let points: Vec<Value> = self
            .points
            .iter()
            .map(|p| serde_json::to_value(&p.inputs).unwrap_or(Value::Null))
            .collect();
        Value::Array(points)
    }

    /// Writes the file (atomically: a temporary file next to `path`, then renamed).
    ///
    /// # Errors
    /// [`AuditError::Io`] when the file cannot be written.
    pub fn write(&self, path: &Path) -> Result<()> {
        let name = path
            .file_name()
            .map_or_else(|| "counts".into(), |n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let io = |e: std::io::Error| AuditError::io(path, &e);
        let result = (|| {
            let file = std::fs::File::create(&tmp).map_err(io)?;
            let mut w = std::io::BufWriter::new(file);
            serde_json::to_writer(&mut w, self).map_err(|e| AuditError::Io {
                path: path.display().to_string(),
                message: format!("cannot serialise the counts: {e}"),
            })?;
            w.write_all(b"\n").map_err(io)?;
            w.into_inner()
                .map_err(|e| io(e.into_error()))?
                .sync_all()
                .map_err(io)?;
            std::fs::rename(&tmp, path).map_err(io)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// The build of fl-audit that drew these counts ([`BUILD_ID`] of that build).
    #[must_use]
    pub fn build(&self) -> &str {
        &self.fl_audit_build
    }

    /// Reads and checks a counts file (format, format version, fl-audit version and
    /// build, a valid shard, each input's outputs equal to the shard's share of the
    /// samples, the suites' hashes). Its tables are checked against the run's plan by
    /// [`Counts::validate`] (and by every merge).
    ///
    /// # Errors
    /// [`AuditError::Io`] when it cannot be read; [`ShardError::Corrupt`],
    /// [`ShardError::FormatVersion`], [`ShardError::ToolVersion`] or
    /// [`ShardError::Build`].
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read(path).map_err(|e| AuditError::io(path, &e))?;
        Ok(Self::parse(&path.display().to_string(), &text)?)
    }

    /// [`Counts::read`] of a file's bytes; `path` names it in errors.
    ///
    /// # Errors
    /// As [`Counts::read`].
    pub fn parse(path: &str, text: &[u8]) -> core::result::Result<Self, ShardError> {
        let corrupt = |message: String| ShardError::Corrupt {
            path: path.into(),
            message,
        };
        let header: Header = serde_json::from_slice(text).map_err(|e| corrupt(format!("{e}")))?;
        if header.format != FORMAT {
            return Err(corrupt(format!(
                "format is `{}`, expected `{FORMAT}`",
                header.format
            )));
        }
        if header.format_version != FORMAT_VERSION {
            return Err(ShardError::FormatVersion {
                path: path.into(),
                found: header.format_version,
                expected: FORMAT_VERSION,
            });
        }
        if header.fl_audit_version != env!("CARGO_PKG_VERSION") {
            return Err(ShardError::ToolVersion {
                path: path.into(),
                found: header.fl_audit_version,
            });
        }
        match header.fl_audit_build {
            Some(b) if b == BUILD_ID => {}
            found => {
                return Err(ShardError::Build {
                    path: path.into(),
                    found: found.unwrap_or_else(|| "(none)".into()),
                    expected: BUILD_ID.into(),
                });
            }
        }
        let counts: Self = serde_json::from_slice(text).map_err(|e| corrupt(format!("{e}")))?;
        let hashes: Vec<String> = counts
            .run
            .suites
            .iter()
            .map(crate::suite::suite_sha256)
            .collect();
        if hashes != counts.run.suite_sha256 {
            return Err(corrupt(
                "the suites' SHA-256 are not those of the suites recorded".into(),
            ));
        }
        let shard = Shard::new(counts.shard.index, counts.shard.count)
            .map_err(|e| corrupt(e.to_string()))?;
        for p in &counts.points {
            let share = shard.samples(p.samples);
            if let Some((i, d)) = p
                .inputs
                .iter()
                .enumerate()
                .find(|(_, d)| d.outputs() != share)
            {
                return Err(corrupt(format!(
                    "suite `{}`, input {i}: {} outputs, shard {shard}'s share of {} samples is {share}",
                    p.suite,
                    d.outputs(),
                    p.samples
                )));
            }
        }
        Ok(counts)
    }

    /// Checks every table against what the run's sources draw for this shard (see
    /// [`check`]: shapes and totals); `path` names the file in errors.
    ///
    /// # Errors
    /// [`ShardError::Table`] naming the point, the input and the table that is wrong;
    /// the errors of building the run's suites.
    pub fn validate(&self, path: &str) -> Result<()> {
        Ok(verify::Plan::of(&self.run)?.check(path, self)?)
    }
}

/// What identifies a grid point's counts in a shard: equal in every shard of a run.
#[derive(Debug, Clone, PartialEq)]
struct PointKey {
    suite: String,
    params: BTreeMap<String, Value>,
    seed: u64,
    samples: u64,
    inputs: usize,
}

/// What [`check`] compares of a counts file (not its counts).
#[derive(Debug, Clone)]
struct Summary {
    path: String,
    build: String,
    run: RunSpec,
    shard: ShardField,
    points: Vec<PointKey>,
}

impl Summary {
    fn of(path: &str, counts: &Counts) -> Self {
        Self {
            path: path.into(),
            build: counts.fl_audit_build.clone(),
            run: counts.run.clone(),
            shard: counts.shard,
            points: counts
                .points
                .iter()
                .map(|p| PointKey {
                    suite: p.suite.clone(),
                    params: p.params.clone(),
                    seed: p.seed,
                    samples: p.samples,
                    inputs: p.inputs.len(),
                })
                .collect(),
        }
    }
}

/// Checks that the files summarised are the N shards of one run, each exactly once; the
/// positions of the files in shard order.
fn check_summaries(files: &[Summary]) -> core::result::Result<Vec<usize>, ShardError> {
    let Some(first) = files.first() else {
        return Err(ShardError::NoFiles);
    };
    let count = first.shard.count;
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for (at, file) in files.iter().enumerate() {
        let mismatch = |what: &str| ShardError::Mismatch {
            path: file.path.clone(),
            first: first.path.clone(),
            what: what.into(),
        };
        if file.build != first.build {
            return Err(mismatch(&format!(
                "the build of fl-audit ({} and {})",
                file.build, first.build
            )));
        }
        if let Some(what) = file.run.difference(&first.run) {
            return Err(mismatch(what));
        }
        if file.shard.count != count {
            return Err(mismatch("the number of shards"));
        }
        if file.points != first.points {
            return Err(mismatch(
                "the grid points (suite, parameters, seed, samples or inputs)",
            ));
        }
        let index = file.shard.index;
        if let Some(other) = seen.insert(index, at) {
            return Err(ShardError::Duplicate {
                index,
                paths: [files[other].path.clone(), file.path.clone()],
            });
        }
    }
    let missing: Vec<u64> = (0..count).filter(|i| !seen.contains_key(i)).collect();
    if !missing.is_empty() {
        return Err(ShardError::Missing { missing, count });
    }
    Ok(seen.into_values().collect())
}

/// Checks that `files` (path, counts) are the N shards of one run, each exactly once, and
/// returns them in shard order.
///
/// # Errors
/// The [`ShardError`] that says what is wrong.
pub fn check(files: Vec<(String, Counts)>) -> core::result::Result<Vec<Counts>, ShardError> {
    let summaries: Vec<Summary> = files.iter().map(|(p, c)| Summary::of(p, c)).collect();
    let order = check_summaries(&summaries)?;
    let mut files: Vec<Option<Counts>> = files.into_iter().map(|(_, c)| Some(c)).collect();
    Ok(order
        .into_iter()
        .filter_map(|at| files.get_mut(at).and_then(Option::take))
        .collect())
}

/// The merged counts of a run's shards, ready to analyse.
pub struct Merge {
    run: RunSpec,
    shards: u64,
    points: Vec<PointDraws>,
}

impl Merge {
    /// Reads the files, checks that they are the shards of one run ([`check`]), checks
    /// every table of each ([`Counts::validate`]) and adds their counts in shard order
    /// with checked sums. Memory: the files are read twice (to check them, then to add
    /// them in shard order), so that at most one file's counts are held beside the sum.
    ///
    /// # Errors
    /// As [`Counts::read`], [`check`] and [`Counts::validate`]; a file that changed
    /// between the two reads is [`ShardError::Corrupt`]; a sum that overflows 64 bits is
    /// [`ShardError::Table`].
    pub fn read(paths: &[PathBuf]) -> Result<Self> {
        let summaries = paths
            .iter()
            .map(|p| {
                let path = p.display().to_string();
                Ok(Summary::of(&path, &Counts::read(p)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let order = check_summaries(&summaries)?;
        let plan = match summaries.first() {
            Some(first) => verify::Plan::of(&first.run).map_err(|e| ShardError::Corrupt {
                path: first.path.clone(),
                message: e.to_string(),
            })?,
            None => return Err(ShardError::NoFiles.into()),
        };
        let mut merge: Option<Self> = None;
        for at in order {
            let (path, expected) = (&paths[at], &summaries[at]);
            let counts = Counts::read(path)?;
            let again = Summary::of(&expected.path, &counts);
            if again.run != expected.run
                || again.shard != expected.shard
                || again.points != expected.points
            {
                return Err(ShardError::Corrupt {
                    path: expected.path.clone(),
                    message: "the file changed while it was merged".into(),
                }
                .into());
            }
            plan.check(&expected.path, &counts)?;
            match merge.as_mut() {
                Some(m) => m.add(&expected.path, counts)?,
                None => merge = Some(Self::start(counts)),
            }
        }
        merge.ok_or_else(|| ShardError::NoFiles.into())
    }

    /// [`Merge::read`] of counts already read.
    ///
    /// # Errors
    /// As [`Merge::read`].
    pub fn of(files: Vec<(String, Counts)>) -> core::result::Result<Self, ShardError> {
        let summaries: Vec<Summary> = files.iter().map(|(p, c)| Summary::of(p, c)).collect();
        let order = check_summaries(&summaries)?;
        let plan = match files.first() {
            Some((path, first)) => {
                verify::Plan::of(&first.run).map_err(|e| ShardError::Corrupt {
                    path: path.clone(),
                    message: e.to_string(),
                })?
            }
            None => return Err(ShardError::NoFiles),
        };
        let mut files: Vec<Option<(String, Counts)>> = files.into_iter().map(Some).collect();
        let mut merge: Option<Self> = None;
        for at in order {
            let Some((path, counts)) = files.get_mut(at).and_then(Option::take) else {
                continue;
            };
            plan.check(&path, &counts)?;
            match merge.as_mut() {
                Some(m) => m.add(&path, counts)?,
                None => merge = Some(Self::start(counts)),
            }
        }
        merge.ok_or(ShardError::NoFiles)
    }

    /// The merge of the first shard alone.
    fn start(first: Counts) -> Self {
        Self {
            run: first.run,
            shards: 1,
            points: first.points,
        }
    }

    /// Adds the next shard's counts (the file `path`), per grid point and input, with
    /// checked sums.
    fn add(&mut self, path: &str, next: Counts) -> core::result::Result<(), ShardError> {
        self.shards += 1;
        for (t, p) in self.points.iter_mut().zip(next.points) {
            t.seconds += p.seconds;
            let point = format!(
                "suite `{}` at {}",
                t.suite,
                crate::suite::params_label(&t.params)
            );
            for (i, (total, piece)) in t.inputs.iter_mut().zip(p.inputs).enumerate() {
                verify::checked_merge(total, piece).map_err(|message| ShardError::Table {
                    path: path.into(),
                    point: point.clone(),
                    input: format!("input {i}"),
                    table: "the merged sums".into(),
                    message,
                })?;
            }
        }
        Ok(())
    }

    /// The number of shards merged.
    #[must_use]
    pub fn shards(&self) -> u64 {
        self.shards
    }

    /// The merged count tables, as JSON (no timings): for N shards, equal to those of
    /// the same run drawn with `--shards N` in one process.
    #[must_use]
    pub fn tables(&self) -> Value {
        Value::Array(
            self.points
                .iter()
                .map(|p| serde_json::to_value(&p.inputs).unwrap_or(Value::Null))
                .collect(),
        )
    }

    /// Analyses the merged counts: the run's report.
    ///
    /// # Errors
    /// Counts that do not match the run's plan, and the analysis' errors.
    pub fn report(self) -> Result<Report> {
        let suites = self.run.suites_parsed()?;
        let points = self.run.points(&suites)?;
        let options = RunOptions {
            shards: self.shards,
            ..self.run.options()
        };
        let command = match self.run.command {
            RunCommand::Run => "run",
            RunCommand::External => "external",
        };
        let audited = crate::report::audited(command, &suites, self.run.program.clone());
        let mut report = engine::execute_merged(&suites, points, &options, self.points)?;
        report.audited = Some(audited);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two files of one run that record two builds: the merge names the build as what
    /// differs (each file is also checked against this build when it is read).
    #[test]
    fn shards_of_two_builds_are_two_runs() {
        let suite = crate::suite::builtin()
            .unwrap()
            .into_iter()
            .find(|s| s.name == "rr-binary")
            .unwrap();
        let options = RunOptions {
            samples: Some(10),
            ..RunOptions::default()
        };
        let spec = RunSpec::new(RunCommand::Run, &[suite], &options, None, None);
        let file = |index, build: &str| {
            let mut c = Counts::new(spec.clone(), Shard::new(index, 2).unwrap(), Vec::new());
            c.fl_audit_build = build.into();
            (format!("s{index}"), c)
        };
        match check(vec![file(0, BUILD_ID), file(1, "git:0+dirty.1")]) {
            Err(ShardError::Mismatch { what, .. }) => assert!(what.contains("build"), "{what}"),
            r => panic!("{:?}", r.map(|_| ())),
        }
        assert!(check(vec![file(0, BUILD_ID), file(1, BUILD_ID)]).is_ok());
    }
}
