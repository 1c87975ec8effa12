//! The command line (a contract: see `docs/AUDIT_PROTOCOL.md` and the README).
//!
//! ```text
//! fl-audit run [--suite NAME|all] [--samples N] [--seed S] [--alpha A] [--out DIR]
//!              [--shards N | --shard i/N --counts-out FILE]
//! fl-audit merge FILE... [--out DIR]
//! fl-audit list
//! fl-audit epsilon --mechanism NAME --eps E [mechanism options] [--samples N] [--seed S]
//! fl-audit plan --mechanism NAME --eps E --detect DELTA [mechanism options] [--alpha A] [--power P]
//! fl-audit external --mechanism NAME --eps E [mechanism options] [--samples N]
//!                   [--alpha A] [--shard i/N --counts-out FILE] -- COMMAND [ARGS...]
//! ```
//!
//! Exit status: 0 pass, 1 fail, 2 usage error (including every error that prevents a
//! verdict).

use std::{io::IsTerminal, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Parser, Subcommand};
use serde_json::json;

use crate::{
    engine::{self, DEFAULT_ALPHA, DEFAULT_SEED, RunOptions, Shard, SuitePoint},
    error::{AuditError, EXIT_FAIL, EXIT_PASS, EXIT_USAGE, Result},
    external::{ExternalMechanism, Responder},
    family,
    report::{EpsilonRow, OutputDir, Report, fmt_confidence, fmt_count, fmt_eps, fmt_p},
    shard::{Counts, Merge, RunCommand, RunSpec},
    source::{External, Source},
    suite::{self, Params, Samples, Suite, params_label},
};

/// Default samples per input of `epsilon`.
pub const DEFAULT_EPSILON_SAMPLES: u64 = 2_000_000;
/// Default outputs per request of `external`.
pub const DEFAULT_BATCH: u64 = 10_000;
/// Default seconds to wait for each response of `external`.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

/// fl-audit: statistical conformance audits of differential-privacy mechanisms.
#[derive(Debug, Parser)]
#[command(name = "fl-audit", version, about, long_about = None)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// A mechanism's parameters on the command line (each names a suite `params` key; see
/// `fl-audit list` for which mechanism takes which).
#[derive(Debug, Clone, Default, PartialEq, Args)]
pub struct LawArgs {
    /// Number of classes or values (rr-kary, label-dp-onehot, frequency-*).
    #[arg(long, value_name = "K")]
    pub classes: Option<u64>,
    /// Dimension (embedding-dp, laplace, signds-selection, signds-client).
    #[arg(long, value_name = "D")]
    pub dim: Option<u64>,
    /// Utilities of the candidates, comma-separated (exponential).
    #[arg(
        long,
        value_name = "U1,U2,...",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub utilities: Option<Vec<f64>>,
    /// Utility sensitivity Δu (exponential; default 1).
    #[arg(long, value_name = "DELTA")]
    pub sensitivity: Option<f64>,
    /// `standard` (P ∝ exp(ε·u/(2Δ)), the default) or `monotone` (exp(ε·u/Δ)) (exponential).
    #[arg(long, value_name = "FORM")]
    pub form: Option<String>,
    /// The public prior over the classes, comma-separated (rr-with-prior).
    #[arg(long, value_name = "P1,P2,...", value_delimiter = ',')]
    pub prior: Option<Vec<f64>>,
    /// K, the size of the top-k set (signds-selection).
    #[arg(long, value_name = "K")]
    pub top_k: Option<u64>,
    /// h, the indices selected (signds-selection; signds-client: 0 or absent = fl-signds' search).
    #[arg(long, value_name = "H")]
    pub output_dim: Option<u64>,
    /// MagRR's ε (signds-client).
    #[arg(long, value_name = "E")]
    pub eps_rr: Option<f64>,
    /// The top-k fraction k in (0, 0.25] (signds-client).
    #[arg(long, value_name = "F")]
    pub top_k_fraction: Option<f64>,
    /// `fl-ldp` ([seed, bucket] under fl-ldp's hash family, the default) or `reported`
    /// (each report carries every value's hash) (frequency-olh).
    #[arg(long, value_name = "FAMILY")]
    pub olh_hash: Option<String>,
    /// g, the buckets of an OLH with reported hashes (default: fl-ldp's g for ε).
    #[arg(long, value_name = "G")]
    pub buckets: Option<u64>,
    /// `top-k` (send the top-k set, the default) or `update` (send an update vector whose
    /// K largest values are the set) (signds-selection).
    #[arg(long, value_name = "FORM")]
    pub selection_input: Option<String>,
    /// The noise scale σ (discrete-gaussian).
    #[arg(long, value_name = "SIGMA")]
    pub sigma: Option<f64>,
    /// The integer shifts μ the noise is added to, comma-separated (discrete-gaussian;
    /// default 0,7).
    #[arg(
        long,
        value_name = "MU1,MU2,...",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub shifts: Option<Vec<i64>>,
    /// Read the mechanism's parameters from a suite file (one grid point); the options
    /// above override them.
    #[arg(long, value_name = "FILE")]
    pub suite: Option<PathBuf>,
}

impl LawArgs {
    /// The value of the option `name` (without `--`) as a suite parameter value, if given.
    #[must_use]
    pub fn option(&self, name: &str) -> Option<serde_json::Value> {
        match name {
            "classes" => self.classes.map(|v| json!(v)),
            "dim" => self.dim.map(|v| json!(v)),
            "utilities" => self.utilities.as_ref().map(|v| json!(v)),
            "sensitivity" => self.sensitivity.map(|v| json!(v)),
            "form" => self.form.as_ref().map(|v| json!(v)),
            "prior" => self.prior.as_ref().map(|v| json!(v)),
            "top-k" => self.top_k.map(|v| json!(v)),
            "output-dim" => self.output_dim.map(|v| json!(v)),
            "eps-rr" => self.eps_rr.map(|v| json!(v)),
            "top-k-fraction" => self.top_k_fraction.map(|v| json!(v)),
            "olh-hash" => self.olh_hash.as_ref().map(|v| json!(v)),
            "buckets" => self.buckets.map(|v| json!(v)),
            "selection-input" => self.selection_input.as_ref().map(|v| json!(v)),
            "sigma" => self.sigma.map(|v| json!(v)),
            "shifts" => self.shifts.as_ref().map(|v| json!(v)),
            _ => None,
        }
    }
}

/// Running one shard of a run (`--shard i/N --counts-out FILE`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct ShardArgs {
    /// Draw only shard i of N (0 <= i < N) and write its counts to --counts-out instead
    /// of a report (`fl-audit merge` makes the report of all N).
    #[arg(long, value_name = "i/N", requires = "counts_out")]
    pub shard: Option<String>,
    /// Where a shard's counts go (JSON; see the README's "Sharded runs").
    #[arg(long, value_name = "FILE", requires = "shard")]
    pub counts_out: Option<PathBuf>,
}

impl ShardArgs {
    /// The shard and its counts file, if sharded.
    ///
    /// # Errors
    /// [`AuditError::Usage`] for a malformed shard.
    pub fn parsed(&self) -> Result<Option<(Shard, PathBuf)>> {
        match (&self.shard, &self.counts_out) {
            (Some(s), Some(out)) => Ok(Some((Shard::parse(s)?, out.clone()))),
            (None, None) => Ok(None),
            _ => Err(AuditError::usage(
                "--shard and --counts-out go together".to_string(),
            )),
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run conformance suites and write report.md, report.json and SVG plots.
    Run {
        /// A suite name, `all`, or the path of a suite file.
        #[arg(long, value_name = "NAME|all", default_value = "all")]
        suite: String,
        /// Samples per input for every suite (default: each suite's own, planned sizes).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        samples: Option<u64>,
        /// The run seed (the same seed gives the same report).
        #[arg(long, value_name = "S", default_value_t = DEFAULT_SEED)]
        seed: u64,
        /// Family-wise significance level over the whole run.
        #[arg(long, value_name = "A", default_value_t = DEFAULT_ALPHA)]
        alpha: f64,
        /// Report directory.
        #[arg(
            long,
            value_name = "DIR",
            default_value = "target/fl-audit",
            conflicts_with = "shard"
        )]
        out: PathBuf,
        /// Draw the run as N shards one after the other in this process and merge them:
        /// the report `merge` makes of the same N shards run apart.
        #[arg(long, value_name = "N", default_value_t = 1, conflicts_with = "shard",
              value_parser = clap::value_parser!(u64).range(1..=engine::MAX_SHARDS))]
        shards: u64,
        /// Drawing one shard of the run.
        #[command(flatten)]
        sharding: ShardArgs,
    },
    /// Merge the counts files of every shard of one run into its report.
    Merge {
        /// The shards' counts files (each shard 0..N-1 exactly once, any order).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Report directory.
        #[arg(long, value_name = "DIR", default_value = "target/fl-audit")]
        out: PathBuf,
    },
    /// List the suites (and the mechanisms they can use).
    List,
    /// Certified empirical lower bound on ε, compared with the claim.
    Epsilon {
        /// Mechanism (see `list`).
        #[arg(long, value_name = "NAME")]
        mechanism: String,
        /// The claimed ε.
        #[arg(long, value_name = "E")]
        eps: f64,
        /// The mechanism's parameters.
        #[command(flatten)]
        law: LawArgs,
        /// Samples per input.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_EPSILON_SAMPLES,
              value_parser = clap::value_parser!(u64).range(1..))]
        samples: u64,
        /// Seed.
        #[arg(long, value_name = "S", default_value_t = DEFAULT_SEED)]
        seed: u64,
    },
    /// Samples per input needed to detect a relative error in the keep/flip probabilities.
    Plan {
        /// Mechanism (see `list`).
        #[arg(long, value_name = "NAME")]
        mechanism: String,
        /// The claimed ε (every mechanism but discrete-gaussian, which claims none).
        #[arg(long, value_name = "E")]
        eps: Option<f64>,
        /// Relative error to detect in every keep/flip probability (0.01 = 1 %).
        #[arg(long, value_name = "DELTA")]
        detect: f64,
        /// Family-wise significance level of the mechanism's audit.
        #[arg(long, value_name = "A", default_value_t = DEFAULT_ALPHA)]
        alpha: f64,
        /// Power (probability of detecting the error).
        #[arg(long, value_name = "P", default_value_t = 0.99)]
        power: f64,
        /// The mechanism's parameters.
        #[command(flatten)]
        law: LawArgs,
    },
    /// Audit an implementation in any language over newline-delimited JSON.
    External {
        /// Mechanism: any of `fl-audit list` but the estimators.
        #[arg(long, value_name = "NAME")]
        mechanism: String,
        /// The claimed ε (every mechanism but discrete-gaussian, which claims none).
        #[arg(long, value_name = "E")]
        eps: Option<f64>,
        /// The mechanism's parameters.
        #[command(flatten)]
        law: LawArgs,
        /// Samples per input (default: the planner's size for the claimed ε, which detects
        /// a 1 % relative error in every keep/flip probability with power 0.99; fewer make
        /// the verdict line say what the run can detect).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        samples: Option<u64>,
        /// Family-wise significance level.
        #[arg(long, value_name = "A", default_value_t = DEFAULT_ALPHA)]
        alpha: f64,
        /// Outputs per request (extension of the specified interface).
        #[arg(long, value_name = "N", default_value_t = DEFAULT_BATCH,
              value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        batch: u64,
        /// Seconds to wait for each response (extension of the specified interface).
        #[arg(long, value_name = "SECS", default_value_t = DEFAULT_TIMEOUT_SECS)]
        timeout: f64,
        /// Also write report.md, report.json, report.html and the plot to this directory.
        #[arg(long, value_name = "DIR", conflicts_with = "shard")]
        out: Option<PathBuf>,
        /// The seed of the request schedule (sizes and order) and of the reuse test's
        /// projections: a number (the default, 0, makes the run reproducible) or `random`
        /// (drawn from the operating system and recorded in the report: a program that
        /// knows the seed can predict the schedule).
        #[arg(long, value_name = "S|random", default_value = "0", value_parser = parse_seed)]
        seed: u64,
        /// Drawing one shard of the run.
        #[command(flatten)]
        sharding: ShardArgs,
        /// The command that runs the mechanism, after `--` (`{seed}` in an argument is
        /// replaced by the shard's seed: 0 for an unsharded run).
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

/// External mechanisms the protocol defines: every mechanism family but the estimators
/// (which audit the project's own de-biasing code, not a randomizer).
pub const EXTERNAL_MECHANISMS: &[&str] = &[
    "rr-binary",
    "rr-kary",
    "label-dp-binary",
    "label-dp-onehot",
    "embedding-dp",
    "exponential",
    "rr-with-prior",
    "laplace",
    "discrete-gaussian",
    "signds-selection",
    "signds-magrr",
    "signds-client",
    "frequency-grr",
    "frequency-oue",
    "frequency-olh",
];

/// Parses `std::env::args` and runs the command; the process exit status.
#[must_use]
pub fn main() -> ExitCode {
    ExitCode::from(main_with_args(std::env::args_os()))
}

/// Parses `args` (the program's name first, as `std::env::args_os` gives them) and runs the
/// command, printing what `fl-audit` prints; the exit status (0 pass, 1 fail, 2 usage error;
/// clap's 0 for `--help` and `--version`). `main` is this with the process's arguments; the
/// Python package's `fl-audit` script calls it in-process.
#[must_use]
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // clap: 0 for --help/--version, 2 for usage errors.
            return u8::try_from(e.exit_code()).unwrap_or(EXIT_USAGE);
        }
    };
    match execute(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fl-audit: {e}");
            e.exit_code()
        }
    }
}

/// Runs a parsed command; `Ok(exit status)`.
///
/// # Errors
/// Anything that prevents a verdict (exit status 2).
pub fn execute(command: Command) -> Result<u8> {
    match command {
        Command::Run {
            suite,
            samples,
            seed,
            alpha,
            out,
            shards,
            sharding,
        } => {
            let options = RunOptions {
                samples,
                seed,
                alpha,
                progress: std::io::stderr().is_terminal() || std::env::var_os("CI").is_some(),
                shards,
            };
            match sharding.parsed()? {
                Some((shard, counts)) => cmd_run_shard(&suite, &options, shard, &counts),
                None => cmd_run(&suite, &options, out),
            }
        }
        Command::Merge { files, out } => cmd_merge(&files, out),
        Command::List => cmd_list(),
        Command::Epsilon {
            mechanism,
            eps,
            law,
            samples,
            seed,
        } => cmd_epsilon(&mechanism, eps, &law, samples, seed),
        Command::Plan {
            mechanism,
            eps,
            detect,
            alpha,
            power,
            law,
        } => cmd_plan(&mechanism, eps, detect, alpha, power, &law),
        Command::External {
            mechanism,
            eps,
            law,
            samples,
            alpha,
            batch,
            timeout,
            out,
            seed,
            sharding,
            command,
        } => {
            let audit = ExternalAudit {
                mechanism,
                eps,
                law,
                samples,
                alpha,
                batch,
                out,
                seed,
            };
            match sharding.parsed()? {
                Some((shard, counts)) => {
                    cmd_external_shard(&audit, timeout, &command, shard, &counts)
                }
                None => cmd_external(&audit, timeout, &command),
            }
        }
    }
}

fn check_alpha(alpha: f64) -> Result<()> {
    if alpha > 0.0 && alpha < 1.0 {
        Ok(())
    } else {
        Err(AuditError::usage(format!(
            "--alpha must be strictly between 0 and 1, got {alpha}"
        )))
    }
}

fn print_summary(report: &Report) {
    println!(
        "{:<28} {:<18} {:>6} {:>7} {:>6} {:>12} {:>10} {:>11}  verdict",
        "suite",
        "mechanism",
        "points",
        "tests",
        "failed",
        "min adj. p",
        "eps_lb/eps",
        "lb/realised"
    );
    for s in &report.suites {
        let v = report.suite_verdict(&s.name);
        println!(
            "{:<28} {:<18} {:>6} {:>7} {:>6} {:>12} {:>10} {:>11}  {}",
            s.name,
            s.mechanism,
            s.points,
            v.tests,
            v.failed,
            v.min_adjusted_p.map_or("-".into(), fmt_p),
            v.max_epsilon_ratio
                .map_or("-".into(), |r| format!("{r:.3}")),
            v.max_realised_ratio
                .map_or("-".into(), |r| format!("{r:.3}")),
            if v.failed == 0 { "pass" } else { "FAIL" }
        );
    }
}

fn cmd_run(which: &str, options: &RunOptions, out: PathBuf) -> Result<u8> {
    check_alpha(options.alpha)?;
    let suites = engine::select(suite::all_suites()?, which)?;
    // Fail fast on an unwritable destination, before a long run.
    let dir = OutputDir::prepare(&out)?;
    let report = engine::run(&suites, options)?;
    dir.commit(&engine::report_files(&report)?)?;
    print_verdict(&report, &out);
    Ok(exit_status(&report))
}

fn exit_status(report: &Report) -> u8 {
    if report.passed() {
        EXIT_PASS
    } else {
        EXIT_FAIL
    }
}

fn print_verdict(report: &Report, out: &std::path::Path) {
    print_summary(report);
    println!(
        "{}: {} tests and {} epsilon bounds at family-wise alpha = {}, {} samples, seed {}{}; {}; report in {}",
        if report.passed() { "PASS" } else { "FAIL" },
        report.results.len(),
        report.epsilon.len(),
        report.alpha,
        fmt_count(report.samples()),
        report.seed,
        if report.shards > 1 {
            format!(" in {} shards", report.shards)
        } else {
            String::new()
        },
        report.detectable_sentence(),
        out.display()
    );
}

/// `fl-audit run --shard i/N --counts-out FILE`.
fn cmd_run_shard(
    which: &str,
    options: &RunOptions,
    shard: Shard,
    counts_out: &std::path::Path,
) -> Result<u8> {
    check_alpha(options.alpha)?;
    let suites = engine::select(suite::all_suites()?, which)?;
    check_counts_out(counts_out)?;
    let counts = crate::shard::run_shard(&suites, options, shard)?;
    write_counts(&counts, shard, counts_out)
}

/// Writes a shard's counts and says where.
fn write_counts(counts: &Counts, shard: Shard, counts_out: &std::path::Path) -> Result<u8> {
    counts.write(counts_out)?;
    println!(
        "shard {shard}: counts written to {} (merge all {} shards with `fl-audit merge`)",
        counts_out.display(),
        shard.count()
    );
    Ok(EXIT_PASS)
}

/// Fails fast when the counts file's directory does not exist.
fn check_counts_out(path: &std::path::Path) -> Result<()> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| std::path::Path::new("."));
    if path.as_os_str().is_empty() || path.is_dir() || !parent.is_dir() {
        return Err(AuditError::Io {
            path: path.display().to_string(),
            message: "--counts-out must be a file in an existing directory".into(),
        });
    }
    Ok(())
}

/// `fl-audit merge FILE... --out DIR`.
fn cmd_merge(files: &[PathBuf], out: PathBuf) -> Result<u8> {
    let dir = OutputDir::prepare(&out)?;
    let merge = Merge::read(files)?;
    let shards = merge.shards();
    let report = merge.report()?;
    dir.commit(&engine::report_files(&report)?)?;
    println!("merged {shards} shards");
    print_verdict(&report, &out);
    Ok(exit_status(&report))
}

fn cmd_list() -> Result<u8> {
    let suites = suite::all_suites()?;
    println!("suites (run with `fl-audit run --suite NAME`):");
    for s in &suites {
        let samples = match s.samples {
            Samples::Fixed(n) => format!("{n} samples/input"),
            Samples::Plan => "planned samples".into(),
        };
        println!(
            "  {:<28} {:<18} {:>4} points, {:<22} {}",
            s.name,
            s.mechanism,
            s.points().len(),
            samples,
            s.description
        );
    }
    println!("\nmechanisms (suite `mechanism`, tests):");
    for m in family::mechanisms() {
        println!(
            "  {:<18} params: {:<22} tests: {:<40} {}",
            m.name,
            m.params_line(),
            m.tests.join(", "),
            m.description
        );
    }
    println!(
        "\nAdd suites without recompiling: put suite files in a directory and set {}=DIR.",
        suite::SUITE_DIR_ENV
    );
    Ok(EXIT_PASS)
}

/// The parameters of a mechanism from command-line options: a suite file's (if given),
/// overridden by the options (each family names the option of each of its parameters),
/// checked against the mechanism's law.
fn cli_params(mechanism: &str, eps: Option<f64>, law: &LawArgs) -> Result<Params> {
    let info = family::info(mechanism)?;
    match eps {
        Some(e) if !e.is_finite() || e < 0.0 => {
            return Err(AuditError::usage(format!(
                "--eps must be a finite number >= 0, got {e}"
            )));
        }
        Some(_) if info.param("eps").is_none() => {
            return Err(AuditError::usage(format!(
                "mechanism `{mechanism}` makes no epsilon claim (it is Renyi DP): leave out --eps"
            )));
        }
        _ => {}
    }
    let mut p = Params::new();
    if let Some(path) = &law.suite {
        let s = Suite::load(path)?;
        if s.mechanism != mechanism {
            return Err(AuditError::usage(format!(
                "suite file {} is for mechanism `{}`, not `{mechanism}`",
                path.display(),
                s.mechanism
            )));
        }
        let mut points = s.points();
        if points.len() != 1 {
            return Err(AuditError::usage(format!(
                "suite file {} has {} grid points; an external audit runs one (remove its grid)",
                path.display(),
                points.len()
            )));
        }
        p = points.remove(0);
    }
    if let Some(eps) = eps {
        p.insert("eps".into(), json!(eps));
    }
    for param in info.params {
        if let Some(v) = law.option(param.option) {
            p.insert(param.key.into(), v);
        }
    }
    // The law names a missing or invalid parameter and the option that supplies it.
    family::law(mechanism, &p)?;
    Ok(p)
}

fn adhoc_suite(
    mechanism: &str,
    params: Params,
    seed: u64,
    samples: u64,
    tests: Vec<String>,
) -> Suite {
    Suite {
        name: mechanism.to_string(),
        description: String::new(),
        mechanism: mechanism.to_string(),
        params,
        grid: Default::default(),
        seed,
        samples: Samples::Fixed(samples),
        tests,
        sampler: None,
    }
}

/// What an ε statement is about (`output`, `vector`, `MagRR bit`...), if it says.
fn scope_of(e: &EpsilonRow) -> Option<&str> {
    e.params.get("scope").and_then(serde_json::Value::as_str)
}

fn cmd_epsilon(mechanism: &str, eps: f64, law: &LawArgs, samples: u64, seed: u64) -> Result<u8> {
    let info = family::info(mechanism)?;
    if !info.tests.contains(&"epsilon") {
        return Err(AuditError::usage(format!(
            "mechanism `{mechanism}` has no epsilon lower bound"
        )));
    }
    let params = cli_params(mechanism, Some(eps), law)?;
    let suite = adhoc_suite(mechanism, params, seed, samples, vec!["epsilon".into()]);
    let report = engine::run(
        &[suite],
        &RunOptions {
            seed,
            ..RunOptions::default()
        },
    )?;
    let mut violated = false;
    for e in &report.epsilon {
        let scope = scope_of(e).map_or_else(String::new, |s| format!(" ({s})"));
        println!(
            "{mechanism}{scope}: claimed epsilon = {}, realised at the audited inputs = {}, certified lower bound = {:.6} at confidence {} ({} samples per input)",
            fmt_eps(e.claimed),
            fmt_eps(e.realised),
            e.lower_bound,
            fmt_confidence(e.confidence),
            fmt_count(samples)
        );
        if let Some(event) = &e.event {
            println!(
                "  event (chosen from the law before sampling): {}",
                event.describe()
            );
        }
        violated |= !e.passed();
    }
    if violated {
        println!("VIOLATION: the certified lower bound exceeds the claimed epsilon");
        Ok(EXIT_FAIL)
    } else {
        println!("consistent with the claim");
        Ok(EXIT_PASS)
    }
}

fn cmd_plan(
    mechanism: &str,
    eps: Option<f64>,
    detect: f64,
    alpha: f64,
    power: f64,
    law: &LawArgs,
) -> Result<u8> {
    check_alpha(alpha)?;
    if !(detect > 0.0 && detect < 1.0) {
        return Err(AuditError::usage(format!(
            "--detect is a relative error strictly between 0 and 1 (0.01 = 1 %), got {detect}"
        )));
    }
    if !(power > 0.0 && power < 1.0) {
        return Err(AuditError::usage(format!(
            "--power must be strictly between 0 and 1, got {power}"
        )));
    }
    let params = cli_params(mechanism, eps, law)?;
    let tests: Vec<String> = family::info(mechanism)?
        .tests
        .iter()
        .map(|t| (*t).to_string())
        .collect();
    let audit = family::point(mechanism, &params, &params, &tests)?;
    let family = (audit.test_count() + audit.epsilon_count()).max(1);
    let alpha_each = alpha / family as f64;
    // The two-sided test is symmetric in p and 1 − p: plan once per min(p, 1 − p).
    let probs = engine::distinct_probabilities(&audit.plan_probabilities());
    println!(
        "{mechanism} at {}: {} tests + {} epsilon bounds, alpha = {alpha} family-wise ({} per test), power {power}",
        params_label(&params),
        audit.test_count(),
        audit.epsilon_count(),
        fmt_p(alpha_each)
    );
    for &p in &probs {
        let n = engine::planned_samples(&[p], detect, alpha_each, power)?;
        println!(
            "  probability {:<12} (or 1 - p) error {:<12} {n:>14} samples per input",
            fmt_p(p),
            fmt_p(detect * p)
        );
    }
    let n = engine::planned_samples(&probs, detect, alpha_each, power)?;
    println!(
        "samples per input: {n} ({} inputs, {} outputs in all)",
        audit.inputs(),
        n.saturating_mul(audit.inputs() as u64)
    );
    Ok(EXIT_PASS)
}

/// One audit of a mechanism over the external protocol, as `fl-audit external` runs it:
/// the mechanism's claimed law at `eps` with its parameters (`law`: the same options, or
/// suite file, as `plan` and `epsilon`), the inputs that law chooses, `samples` outputs per
/// input asked `batch` at a time, the built-in suites' tests (serial independence included)
/// and ε statements, α split over them, and the report files written to `out`. The
/// answers come from any [`Responder`]: a child process (the command line) or an in-process
/// callback (the Python package's `fl_privacy.audit`), so both run this one code path.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalAudit {
    /// The mechanism (one of [`EXTERNAL_MECHANISMS`]).
    pub mechanism: String,
    /// The claimed ε (`None` for a mechanism without ε claim: discrete-gaussian).
    pub eps: Option<f64>,
    /// The mechanism's parameters (classes, dim, utilities, prior, ... or a suite file).
    pub law: LawArgs,
    /// Samples per input; `None`: the planner's size for the claimed ε (detects a 1 %
    /// relative error in every keep/flip probability with power 0.99 at `alpha`).
    pub samples: Option<u64>,
    /// Family-wise significance level.
    pub alpha: f64,
    /// Outputs per request.
    pub batch: u64,
    /// Where to write report.md, report.json, report.html and the plot (atomically), if
    /// anywhere.
    pub out: Option<PathBuf>,
    /// The run's seed: the request schedule (random sizes, inputs interleaved) and the
    /// reuse test's projections are drawn from it (0 by default; see `--seed random`).
    pub seed: u64,
}

/// Parses `--seed`: a number, or `random` for a seed from the operating system.
fn parse_seed(text: &str) -> core::result::Result<u64, String> {
    if text == "random" {
        let mut bytes = [0u8; 8];
        rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut bytes)
            .map_err(|e| format!("cannot draw a random seed: {e}"))?;
        return Ok(u64::from_le_bytes(bytes));
    }
    text.parse::<u64>()
        .map_err(|_| format!("--seed takes a number (0 to 2^64 - 1) or `random`, got `{text}`"))
}

impl ExternalAudit {
    /// Validates the audit and prepares `out`, then starts the mechanism with `start` and
    /// audits it (nothing is started when the audit is invalid or `out` unwritable); the
    /// report is written to `out` whatever the verdict.
    ///
    /// # Errors
    /// [`AuditError::Usage`] for an unknown mechanism, a missing or invalid parameter, an
    /// invalid ε, α, sample or batch size; [`AuditError::Io`] for an unwritable `out`;
    /// whatever `start` returns; the responder's [`AuditError::External`] failures.
    pub fn run(
        &self,
        start: impl FnOnce() -> Result<Box<dyn Responder>>,
        progress: bool,
    ) -> Result<Report> {
        self.run_program(&[], start, progress)
    }

    /// [`ExternalAudit::run`] of the mechanism run as `program` (its command line as
    /// given, `{seed}` not substituted; empty for an in-process mechanism), which the
    /// report records (`report.json`'s `audited.program`).
    ///
    /// # Errors
    /// As [`ExternalAudit::run`].
    pub fn run_program(
        &self,
        program: &[String],
        start: impl FnOnce() -> Result<Box<dyn Responder>>,
        progress: bool,
    ) -> Result<Report> {
        self.check()?;
        let mechanism = self.mechanism.as_str();
        let params = cli_params(mechanism, self.eps, &self.law)?;
        // Fail fast on an unwritable destination, before the mechanism is started.
        let dir = self.out.as_deref().map(OutputDir::prepare).transpose()?;
        let (suite, point, options) = self.prepare(params, start, progress)?;
        let audited = crate::report::audited(
            "external",
            std::slice::from_ref(&suite),
            (!program.is_empty()).then(|| program.to_vec()),
        );
        let mut report = engine::execute(&[suite], vec![point], &options)?;
        report.audited = Some(audited);
        if let Some(dir) = dir {
            dir.commit(&engine::report_files(&report)?)?;
        }
        Ok(report)
    }

    /// Draws shard `shard` of the audit (the mechanism started with `start`, which a
    /// seeded test mechanism may take [`Shard::seed`]`(0)` from): the shard's counts,
    /// which `fl-audit merge` adds to the other shards' ([`crate::shard`]). `program` is
    /// the mechanism's command line as given (its `{seed}` placeholders not substituted;
    /// empty for an in-process mechanism): the counts record it, and shards of two
    /// programs do not merge. `out` is not written.
    ///
    /// # Errors
    /// As [`ExternalAudit::run`].
    pub fn run_shard(
        &self,
        program: &[String],
        start: impl FnOnce() -> Result<Box<dyn Responder>>,
        progress: bool,
        shard: Shard,
    ) -> Result<Counts> {
        self.check()?;
        let params = cli_params(&self.mechanism, self.eps, &self.law)?;
        let (suite, point, options) = self.prepare(params, start, progress)?;
        let run = RunSpec::new(
            RunCommand::External,
            std::slice::from_ref(&suite),
            &options,
            Some(self.batch),
            (!program.is_empty()).then(|| program.to_vec()),
        );
        let points = engine::execute_shard(&[suite], vec![point], &options, shard)?;
        Ok(Counts::new(run, shard, points))
    }

    /// The checks of [`ExternalAudit::run`] before anything is prepared.
    fn check(&self) -> Result<()> {
        check_alpha(self.alpha)?;
        let mechanism = self.mechanism.as_str();
        if !EXTERNAL_MECHANISMS.contains(&mechanism) {
            return Err(AuditError::usage(format!(
                "external audits support {}; got `{mechanism}`",
                EXTERNAL_MECHANISMS.join(", ")
            )));
        }
        if self.samples == Some(0) || self.batch == 0 {
            return Err(AuditError::usage(
                "samples and batch must be at least 1".to_string(),
            ));
        }
        Ok(())
    }

    /// The audit's suite, its one point (the mechanism started) and the run options.
    fn prepare(
        &self,
        params: Params,
        start: impl FnOnce() -> Result<Box<dyn Responder>>,
        progress: bool,
    ) -> Result<(Suite, SuitePoint, RunOptions)> {
        let mechanism = self.mechanism.as_str();
        let tests: Vec<String> = family::info(mechanism)?
            .tests
            .iter()
            .map(|t| (*t).to_string())
            .collect();
        let batch = self.batch;
        let mut start = Some(start);
        let audit = family::external(mechanism, &params, &tests, &mut |law, kind, feed| {
            let start = start
                .take()
                .ok_or_else(|| AuditError::Mechanism("the mechanism was started twice".into()))?;
            Ok(Box::new(External {
                mechanism: start()?,
                inputs: law.protocol_inputs(),
                kind,
                batch,
                feed,
            }) as Box<dyn Source>)
        })?;
        let samples = match self.samples {
            Some(n) => Samples::Fixed(n),
            None => Samples::Plan,
        };
        let mut suite = adhoc_suite(mechanism, params.clone(), 0, 1, tests);
        suite.samples = samples;
        let options = RunOptions {
            samples: self.samples,
            seed: self.seed,
            alpha: self.alpha,
            progress,
            shards: 1,
        };
        let point = SuitePoint {
            suite: 0,
            params,
            audit,
            seed: self.seed,
        };
        Ok((suite, point, options))
    }

    /// The two lines `fl-audit external` prints for `report` of the mechanism `target`:
    /// what was audited, and the verdict (PASS or FAIL with the worst test and the ε
    /// bounds).
    ///
    /// # Errors
    /// Only for an audit that [`ExternalAudit::run`] would have rejected.
    pub fn summary(&self, target: &str, report: &Report) -> Result<[String; 2]> {
        let params = cli_params(&self.mechanism, self.eps, &self.law)?;
        let summary = report.suites.first();
        let samples = summary
            .and_then(|s| s.samples_per_input.first().copied())
            .unwrap_or(0);
        let how = match self.samples {
            Some(_) => "set by --samples",
            None => "planned",
        };
        let header = format!(
            "fl-audit external: {} at {} against `{target}`: {} inputs x {samples} samples ({how}), alpha = {} over {} tests and {} epsilon bounds",
            self.mechanism,
            params_label(&params),
            summary.map_or(0, |s| s.samples_drawn) / samples.max(1),
            self.alpha,
            report.results.len(),
            report.epsilon.len()
        );
        let eps_line = report
            .epsilon
            .iter()
            .map(|e| {
                let scope = scope_of(e).map_or_else(String::new, |s| format!("{s} "));
                format!(
                    "{scope}eps_lb = {:.4} (claimed {}, realised {}, confidence {})",
                    e.lower_bound,
                    fmt_eps(e.claimed),
                    fmt_eps(e.realised),
                    fmt_confidence(e.confidence)
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let powered = report.detectable_sentence();
        let verdict = if report.passed() {
            let min_p = report
                .results
                .iter()
                .map(|r| r.adjusted_p_value)
                .fold(1.0, f64::min);
            format!(
                "PASS: every test consistent with the claimed law (smallest adjusted p = {}); {powered}; {eps_line}",
                fmt_p(min_p)
            )
        } else {
            let mut failing: Vec<_> = report.results.iter().filter(|r| !r.passed).collect();
            failing.sort_by(|a, b| a.adjusted_p_value.total_cmp(&b.adjusted_p_value));
            // A deviation of the output as sent is named first, with its reason.
            let as_sent = failing.iter().find(|r| r.test == family::OUTPUT_AS_SENT);
            if let Some(row) = as_sent {
                let mut about = row.params.clone();
                for k in params.keys() {
                    about.remove(k);
                }
                let reason = about
                    .remove("reason")
                    .and_then(|r| r.as_str().map(str::to_string))
                    .unwrap_or_default();
                format!(
                    "FAIL: {} [{}]: {reason} ({} failing tests); {powered}; {eps_line}",
                    row.test,
                    params_label(&about),
                    failing.len()
                )
            } else if let Some(worst) = failing.first() {
                let mut about = worst.params.clone();
                for k in params.keys() {
                    about.remove(k);
                }
                format!(
                    "FAIL: {} [{}] adjusted p = {} ({} failing tests); {powered}; {eps_line}",
                    worst.test,
                    params_label(&about),
                    fmt_p(worst.adjusted_p_value),
                    failing.len()
                )
            } else {
                format!("FAIL: certified epsilon violation; {powered}; {eps_line}")
            }
        };
        Ok([header, verdict])
    }
}

/// `command` with every `{seed}` in its arguments replaced by `seed` (how a seeded test
/// mechanism gets a shard's seed).
#[must_use]
pub fn command_with_seed(command: &[String], seed: u64) -> Vec<String> {
    command
        .iter()
        .map(|a| a.replace("{seed}", &seed.to_string()))
        .collect()
}

fn check_timeout(timeout: f64) -> Result<Duration> {
    if !(timeout.is_finite() && timeout > 0.0 && timeout <= 86_400.0) {
        return Err(AuditError::usage(format!(
            "--timeout must be between 0 and 86400 seconds, got {timeout}"
        )));
    }
    Ok(Duration::from_secs_f64(timeout))
}

/// `fl-audit external --shard i/N --counts-out FILE`.
fn cmd_external_shard(
    audit: &ExternalAudit,
    timeout: f64,
    command: &[String],
    shard: Shard,
    counts_out: &std::path::Path,
) -> Result<u8> {
    let timeout = check_timeout(timeout)?;
    check_counts_out(counts_out)?;
    let program = command;
    let command = command_with_seed(command, shard.seed(0));
    let counts = audit.run_shard(
        program,
        || {
            let child = ExternalMechanism::start(&command, timeout)?;
            Ok(Box::new(child) as Box<dyn Responder>)
        },
        std::io::stderr().is_terminal(),
        shard,
    )?;
    write_counts(&counts, shard, counts_out)
}

/// `fl-audit external`: `audit` with the mechanism run as the child `command`, each
/// response awaited at most `timeout` seconds.
fn cmd_external(audit: &ExternalAudit, timeout: f64, command: &[String]) -> Result<u8> {
    let timeout = check_timeout(timeout)?;
    let program = command;
    let command = command_with_seed(command, Shard::WHOLE.seed(0));
    let report = audit.run_program(
        program,
        || {
            let child = ExternalMechanism::start(&command, timeout)?;
            Ok(Box::new(child) as Box<dyn Responder>)
        },
        std::io::stderr().is_terminal(),
    )?;
    for line in audit.summary(&command.join(" "), &report)? {
        println!("{line}");
    }
    Ok(if report.passed() {
        EXIT_PASS
    } else {
        EXIT_FAIL
    })
}
