//! The one error type of the tool. Every variant prints as one line that names the problem;
//! [`AuditError::exit_code`] maps it to the documented exit status.

use core::fmt;

/// Exit status: every test passed (or the command succeeded).
pub const EXIT_PASS: u8 = 0;
/// Exit status: at least one test failed after the family-wise correction.
pub const EXIT_FAIL: u8 = 1;
/// Exit status: a usage error (bad option, unknown suite or mechanism, unreadable suite
/// file, unwritable output directory, misbehaving external mechanism).
pub const EXIT_USAGE: u8 = 2;

/// Everything that stops a command before it reaches a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuditError {
    /// A command-line option or a combination of options is not allowed.
    Usage(String),
    /// A suite file cannot be read or does not follow the suite format.
    Suite {
        /// The file or suite name.
        source: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// A mechanism or statistics crate rejected a parameter or a computation.
    Mechanism(String),
    /// Reading or writing a file failed.
    Io {
        /// The path involved.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// An external mechanism misbehaved (could not start, exited, timed out, answered
    /// with malformed JSON or the wrong number of outputs).
    External(String),
    /// Shards' counts files that cannot be merged (see [`crate::shard`]).
    Shard(ShardError),
}

impl AuditError {
    /// The exit status this error ends the program with (always [`EXIT_USAGE`]: a run that
    /// did not reach a verdict is never reported as a pass or a fail).
    #[must_use]
    pub const fn exit_code(&self) -> u8 {
        EXIT_USAGE
    }

    /// A usage error.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::Usage(message.into())
    }

    /// A suite error for `source`.
    pub(crate) fn suite(source: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Suite {
            source: source.into(),
            message: message.into(),
        }
    }

    /// An I/O error on `path`.
    pub(crate) fn io(path: impl AsRef<std::path::Path>, err: &std::io::Error) -> Self {
        Self::Io {
            path: path.as_ref().display().to_string(),
            message: err.to_string(),
        }
    }
}

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::Usage(m) | Self::Mechanism(m) => m.clone(),
            Self::Suite { source, message } => format!("suite `{source}`: {message}"),
            Self::Io { path, message } => format!("{path}: {message}"),
            Self::External(m) => format!("external mechanism: {m}"),
            Self::Shard(e) => e.to_string(),
        };
        write_one_line(f, &text)
    }
}

/// Writes `text` with its control characters escaped, so that an error is always exactly
/// one line even when it quotes untrusted input (a suite file's keys, a child's output).
fn write_one_line(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    for c in text.chars() {
        if c.is_control() {
            write!(f, "{}", c.escape_default())?;
        } else {
            write!(f, "{c}")?;
        }
    }
    Ok(())
}

impl std::error::Error for AuditError {}

impl From<ShardError> for AuditError {
    fn from(e: ShardError) -> Self {
        Self::Shard(e)
    }
}

impl From<fl_stats::Error> for AuditError {
    fn from(e: fl_stats::Error) -> Self {
        Self::Mechanism(format!("statistics: {e}"))
    }
}

impl From<fl_ldp::Error> for AuditError {
    fn from(e: fl_ldp::Error) -> Self {
        Self::Mechanism(format!("mechanism: {e}"))
    }
}

impl From<fl_signds::Error> for AuditError {
    fn from(e: fl_signds::Error) -> Self {
        Self::Mechanism(format!("mechanism: {e}"))
    }
}

/// The result type of this crate.
pub type Result<T> = core::result::Result<T, AuditError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_one_line_even_when_they_quote_control_characters() {
        let e = AuditError::suite("a\nb", "unknown field `x\ny\r\u{7}`");
        let text = e.to_string();
        assert!(!text.contains('\n') && !text.contains('\r'), "{text}");
        assert!(text.contains("x\\ny"), "{text}");
        assert_eq!(AuditError::usage("plain").to_string(), "plain");
    }
}

/// Why shards' counts files cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardError {
    /// No file was given.
    NoFiles,
    /// A file is not a counts file (not JSON, another format, a field missing or of the
    /// wrong type, counts inconsistent with the shard's share of the samples).
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A file has another format version than this build's
    /// [`crate::shard::FORMAT_VERSION`].
    FormatVersion {
        /// The file.
        path: String,
        /// Its version.
        found: u32,
        /// The version this build reads.
        expected: u32,
    },
    /// A file was written by another fl-audit version than this one.
    ToolVersion {
        /// The file.
        path: String,
        /// Its fl-audit version.
        found: String,
    },
    /// A file was drawn by another build of fl-audit than this one (another commit, a
    /// tree with other changes: see [`crate::shard::BUILD_ID`]).
    Build {
        /// The file.
        path: String,
        /// Its build.
        found: String,
        /// This build.
        expected: String,
    },
    /// A table of a file is not one the run's sources draw for its shard: another shape
    /// (length, kind, alphabet) or totals that do not match the shard's outputs.
    Table {
        /// The file.
        path: String,
        /// The grid point (suite and parameters).
        point: String,
        /// The input (number and label).
        input: String,
        /// The table.
        table: String,
        /// What is wrong.
        message: String,
    },
    /// A file belongs to another run than the first file (another seed, α, sample size,
    /// suites, command or number of shards).
    Mismatch {
        /// The file.
        path: String,
        /// The first file, whose run the others must match.
        first: String,
        /// What differs.
        what: String,
    },
    /// A shard appears in two files.
    Duplicate {
        /// The shard's index.
        index: u64,
        /// The two files.
        paths: [String; 2],
    },
    /// Shards of the run are missing.
    Missing {
        /// The missing indices.
        missing: Vec<u64>,
        /// The run's number of shards.
        count: u64,
    },
}

impl fmt::Display for ShardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoFiles => write!(f, "merge needs the counts files of every shard of a run"),
            Self::Corrupt { path, message } => {
                write!(f, "{path}: not a valid fl-audit counts file: {message}")
            }
            Self::FormatVersion {
                path,
                found,
                expected,
            } => write!(
                f,
                "{path}: counts file format version {found}; this fl-audit reads version {expected}"
            ),
            Self::ToolVersion { path, found } => write!(
                f,
                "{path}: written by fl-audit {found}; this is fl-audit {} (merge shards with the version that drew them)",
                env!("CARGO_PKG_VERSION")
            ),
            Self::Build {
                path,
                found,
                expected,
            } => write!(
                f,
                "{path}: drawn by fl-audit build {found}; this is build {expected} (merge shards with the build that drew them)"
            ),
            Self::Table {
                path,
                point,
                input,
                table,
                message,
            } => write!(
                f,
                "{path}: {point}, {input}, table {table}: {message} (refused: not a table this run draws)"
            ),
            Self::Mismatch { path, first, what } => write!(
                f,
                "{path}: another run than {first}: {what} differs (merge only the shards of one run)"
            ),
            Self::Duplicate { index, paths } => write!(
                f,
                "shard {index} is given twice: {} and {}",
                paths[0], paths[1]
            ),
            Self::Missing { missing, count } => {
                let list: Vec<String> = missing.iter().take(10).map(u64::to_string).collect();
                write!(
                    f,
                    "{} of the run's {count} shards missing: {}{}",
                    missing.len(),
                    list.join(", "),
                    if missing.len() > 10 { ", …" } else { "" }
                )
            }
        }
    }
}

impl std::error::Error for ShardError {}
