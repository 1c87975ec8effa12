//! Suites as data: one JSON file per suite.
//!
//! ```json
//! {
//!   "name": "rr-binary",
//!   "description": "Binary randomized response: keep probability e^ε/(1+e^ε)",
//!   "mechanism": "rr-binary",
//!   "params": {},
//!   "grid": {"eps": [0.5, 1, 2, 4]},
//!   "seed": 1,
//!   "samples": "plan",
//!   "tests": ["cells", "chi-square", "epsilon"]
//! }
//! ```
//!
//! - `params`: fixed parameters of the mechanism (any JSON values, e.g. a list of
//!   utilities);
//! - `grid`: axes of the parameter grid, each a non-empty array; the suite runs once per
//!   point of the Cartesian product (axes in alphabetical order, values in file order);
//! - `seed`: mixed with the run's `--seed` into every grid point's CSPRNG seed;
//! - `samples`: samples per input, either an integer or `"plan"` (the default: fl-stats'
//!   planner chooses the size that detects a 1 % relative error in every keep/flip
//!   probability with power 0.99 at the run's family-wise α);
//! - `tests`: which of the mechanism's tests to run (`fl-audit list` shows them);
//! - `sampler` (optional): parameters that override `params` and the grid **for the
//!   sampler only**, while the expected law keeps the suite's parameters — a deliberately
//!   mis-calibrated variant, used for negative controls and "would the suite notice?"
//!   questions.
//!
//! JSON because serde_json is already in the tree (no new dependency, no second parser),
//! every language can write it, and the same parser is fuzzed (`fuzz/`).

use std::{collections::BTreeMap, path::Path};

use serde::Deserialize;
use serde_json::Value;

use crate::error::{AuditError, Result};

/// The largest grid a suite may define (points of the Cartesian product).
pub const MAX_GRID_POINTS: usize = 1024;

/// The largest suite file accepted, in bytes.
pub const MAX_SUITE_BYTES: usize = 1 << 20;

/// Parameters of one grid point: name → JSON value.
pub type Params = BTreeMap<String, Value>;

/// How many samples per input a suite draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Samples {
    /// A fixed number of samples per input.
    Fixed(u64),
    /// Chosen by the planner (see the module docs).
    Plan,
}

/// One suite, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// The suite's name (`[a-z0-9-]+`), unique in a run.
    pub name: String,
    /// One line for `fl-audit list`.
    pub description: String,
    /// The mechanism's registry name (`fl-audit list` shows them).
    pub mechanism: String,
    /// Fixed parameters.
    pub params: Params,
    /// Grid axes.
    pub grid: BTreeMap<String, Vec<Value>>,
    /// The suite's seed (mixed with the run seed).
    pub seed: u64,
    /// Samples per input.
    pub samples: Samples,
    /// The tests to run.
    pub tests: Vec<String>,
    /// Sampler-only parameter overrides (a mis-calibrated variant), if any.
    pub sampler: Option<Params>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    name: String,
    #[serde(default)]
    description: String,
    mechanism: String,
    #[serde(default)]
    params: Params,
    #[serde(default)]
    grid: BTreeMap<String, Value>,
    seed: u64,
    #[serde(default)]
    samples: Option<Value>,
    tests: Vec<String>,
    #[serde(default)]
    sampler: Option<Params>,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl Suite {
    /// Parses and validates a suite file's text; `source` names it in errors. Checks the
    /// format only; the mechanism registry checks names, parameters and tests.
    ///
    /// # Errors
    /// [`AuditError::Suite`] naming the problem.
    pub fn parse(source: &str, text: &str) -> Result<Self> {
        if text.len() > MAX_SUITE_BYTES {
            return Err(AuditError::suite(
                source,
                format!("file is larger than {MAX_SUITE_BYTES} bytes"),
            ));
        }
        let raw: RawSuite = serde_json::from_str(text)
            .map_err(|e| AuditError::suite(source, format!("not a valid suite file: {e}")))?;
        if !valid_name(&raw.name) {
            return Err(AuditError::suite(
                source,
                format!(
                    "name {:?} must be 1 to 64 characters from a-z, 0-9 and '-'",
                    raw.name
                ),
            ));
        }
        let source = raw.name.clone();
        if raw.description.contains('\n') {
            return Err(AuditError::suite(&source, "description must be one line"));
        }
        let samples = match raw.samples {
            None => Samples::Plan,
            Some(Value::String(s)) if s == "plan" => Samples::Plan,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v > 0 => Samples::Fixed(v),
                _ => {
                    return Err(AuditError::suite(
                        &source,
                        format!("samples must be a positive integer or \"plan\", got {n}"),
                    ));
                }
            },
            Some(other) => {
                return Err(AuditError::suite(
                    &source,
                    format!("samples must be a positive integer or \"plan\", got {other}"),
                ));
            }
        };
        let mut grid = BTreeMap::new();
        let mut points: usize = 1;
        for (axis, values) in raw.grid {
            if raw.params.contains_key(&axis) {
                return Err(AuditError::suite(
                    &source,
                    format!("parameter `{axis}` is both in params and in grid"),
                ));
            }
            let Value::Array(values) = values else {
                return Err(AuditError::suite(
                    &source,
                    format!("grid axis `{axis}` must be a non-empty array of values"),
                ));
            };
            if values.is_empty() {
                return Err(AuditError::suite(
                    &source,
                    format!("grid axis `{axis}` must be a non-empty array of values"),
                ));
            }
            points = points.saturating_mul(values.len());
            grid.insert(axis, values);
        }
        if points > MAX_GRID_POINTS {
            return Err(AuditError::suite(
                &source,
                format!("the grid has {points} points; at most {MAX_GRID_POINTS} are allowed"),
            ));
        }
        if raw.tests.is_empty() {
            return Err(AuditError::suite(
                &source,
                "tests must name at least one test",
            ));
        }
        Ok(Self {
            name: raw.name,
            description: raw.description,
            mechanism: raw.mechanism,
            params: raw.params,
            grid,
            seed: raw.seed,
            samples,
            tests: raw.tests,
            sampler: raw.sampler,
        })
    }

    /// The suite as a suite file (what [`Suite::parse`] reads back as this suite).
    #[must_use]
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "mechanism": self.mechanism,
            "params": self.params,
            "grid": self.grid,
            "seed": self.seed,
            "samples": match self.samples {
                Samples::Fixed(n) => Value::from(n),
                Samples::Plan => Value::from("plan"),
            },
            "tests": self.tests,
            "sampler": self.sampler,
        })
    }

    /// Reads and parses a suite file.
    ///
    /// # Errors
    /// [`AuditError::Io`] when the file cannot be read, [`AuditError::Suite`] when it is
    /// not a valid suite.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| AuditError::io(path, &e))?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// The grid points in a fixed order: axes alphabetically, the last axis varying
    /// fastest. Each point holds the fixed parameters and one value per axis.
    #[must_use]
    pub fn points(&self) -> Vec<Params> {
        let mut points = vec![self.params.clone()];
        for (axis, values) in &self.grid {
            let mut next = Vec::with_capacity(points.len() * values.len());
            for p in &points {
                for v in values {
                    let mut q = p.clone();
                    q.insert(axis.clone(), v.clone());
                    next.push(q);
                }
            }
            points = next;
        }
        points
    }

    /// The sampler's parameters for a grid point: the point with the `sampler` overrides
    /// applied (the point itself when the suite has none).
    #[must_use]
    pub fn sampler_params(&self, point: &Params) -> Params {
        let mut p = point.clone();
        if let Some(overrides) = &self.sampler {
            for (k, v) in overrides {
                p.insert(k.clone(), v.clone());
            }
        }
        p
    }
}

/// Renders parameters compactly for tables: `eps=1, k=10`.
#[must_use]
pub fn params_label(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={}", compact(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) if a.len() > 6 => format!("[{} values]", a.len()),
        other => other.to_string(),
    }
}

/// The built-in suites (the files of `audits/suites/`, embedded at build time).
///
/// # Errors
/// [`AuditError::Suite`] if a built-in file is invalid (a build defect the tests catch).
pub fn builtin() -> Result<Vec<Suite>> {
    crate::builtin::BUILTIN_SUITES
        .iter()
        .map(|(file, text)| Suite::parse(file, text))
        .collect()
}

/// The environment variable naming a directory of additional suite files (`*.json`),
/// loaded after the built-in ones.
pub const SUITE_DIR_ENV: &str = "FL_AUDIT_SUITES";

/// Built-in suites plus those in the directory named by [`SUITE_DIR_ENV`], if set.
/// Suite names must be unique.
///
/// # Errors
/// Unreadable or invalid files, duplicate names.
pub fn all_suites() -> Result<Vec<Suite>> {
    let mut suites = builtin()?;
    if let Some(dir) = std::env::var_os(SUITE_DIR_ENV) {
        suites.extend(load_dir(Path::new(&dir))?);
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in &suites {
        if !seen.insert(s.name.clone()) {
            return Err(AuditError::suite(
                &s.name,
                "two suites have this name; suite names must be unique",
            ));
        }
    }
    Ok(suites)
}

/// Every `*.json` file of `dir`, in file-name order.
///
/// # Errors
/// Unreadable directory or files, invalid suites.
pub fn load_dir(dir: &Path) -> Result<Vec<Suite>> {
    let rd = std::fs::read_dir(dir).map_err(|e| AuditError::io(dir, &e))?;
    let mut files = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| AuditError::io(dir, &e))?;
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "json") {
            files.push(path);
        }
    }
    files.sort();
    files.iter().map(|p| Suite::load(p)).collect()
}

/// The SHA-256 of a suite's canonical JSON (as `fl-audit` re-serialises it: keys sorted,
/// no whitespace), in hex: what the counts files and the report record of each suite.
pub(crate) fn suite_sha256(suite: &Value) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(suite.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"name":"x-1","mechanism":"rr-binary","grid":{"eps":[1,2],"b":["u","v","w"]},
        "params":{"k":3},"seed":7,"samples":1000,"tests":["cells"]}"#;

    #[test]
    fn parses_and_expands_the_grid() {
        let s = Suite::parse("t", OK).unwrap();
        assert_eq!(s.samples, Samples::Fixed(1000));
        let pts = s.points();
        assert_eq!(pts.len(), 6);
        assert_eq!(params_label(&pts[0]), "b=u, eps=1, k=3");
        assert_eq!(params_label(&pts[1]), "b=u, eps=2, k=3");
        assert_eq!(params_label(&pts[5]), "b=w, eps=2, k=3");
    }

    #[test]
    fn sampler_overrides_apply_to_the_sampler_only() {
        let text = OK.replace(r#""tests""#, r#""sampler":{"eps":1.5},"tests""#);
        let s = Suite::parse("t", &text).unwrap();
        let p = &s.points()[0];
        assert_eq!(s.sampler_params(p)["eps"], serde_json::json!(1.5));
        assert_eq!(p["eps"], serde_json::json!(1));
    }

    #[test]
    fn rejects_malformed_suites() {
        for (bad, what) in [
            ("{", "not a valid suite"),
            (
                r#"{"name":"A","mechanism":"m","seed":1,"tests":["t"]}"#,
                "name",
            ),
            (
                r#"{"name":"a","mechanism":"m","seed":1,"tests":[],"samples":5}"#,
                "at least one test",
            ),
            (
                r#"{"name":"a","mechanism":"m","seed":1,"tests":["t"],"samples":0}"#,
                "positive integer",
            ),
            (
                r#"{"name":"a","mechanism":"m","seed":1,"tests":["t"],"samples":-3}"#,
                "positive integer",
            ),
            (
                r#"{"name":"a","mechanism":"m","seed":1,"tests":["t"],"grid":{"e":[]}}"#,
                "non-empty",
            ),
            (
                r#"{"name":"a","mechanism":"m","seed":1,"tests":["t"],"grid":{"e":3}}"#,
                "non-empty",
            ),
            (
                r#"{"name":"a","mechanism":"m","seed":1,"tests":["t"],"colour":3}"#,
                "unknown field",
            ),
            (
                r#"{"name":"a","mechanism":"m","seed":1,"tests":["t"],"params":{"e":1},"grid":{"e":[1]}}"#,
                "both",
            ),
        ] {
            let err = Suite::parse("t", bad).unwrap_err().to_string();
            assert!(err.contains(what), "{bad}: {err}");
        }
        let big: Vec<u32> = (0..40).collect();
        let text = format!(
            r#"{{"name":"a","mechanism":"m","seed":1,"tests":["t"],"grid":{{"a":{b:?},"b":{b:?}}}}}"#,
            b = big
        );
        assert!(
            Suite::parse("t", &text)
                .unwrap_err()
                .to_string()
                .contains("at most")
        );
    }

    #[test]
    fn builtin_suites_parse_and_have_unique_names() {
        let suites = builtin().unwrap();
        assert!(!suites.is_empty());
        let mut names: Vec<_> = suites.iter().map(|s| s.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), suites.len());
    }
}
