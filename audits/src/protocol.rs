//! The external-mechanism wire format (newline-delimited JSON), as pure functions so that
//! the parser can be fuzzed without a child process.
//!
//! Request (one line): `{"input": X, "n": N}`. Response (one line): `{"outputs": [Y1, …, YN]}`
//! (other keys are ignored). See `docs/AUDIT_PROTOCOL.md`.

use serde_json::{Value, json};

/// The largest response line accepted, in bytes (a larger one is a protocol error, not an
/// out-of-memory condition).
pub const MAX_LINE_BYTES: usize = 256 << 20;

/// What each output of a mechanism must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// An integer in `0..classes` (`rr-binary`, `label-dp-binary`: 2 classes;
    /// `label-dp-onehot`: K classes).
    Class(usize),
    /// An array of `D` values, each 0 or 1 (`embedding-dp`).
    Bits(usize),
    /// An array of `D` finite numbers (`laplace`).
    Reals(usize),
}

/// A batch of validated outputs, flattened row-major.
#[derive(Debug, Clone, PartialEq)]
pub enum Outputs {
    /// One class index per output.
    Classes(Vec<usize>),
    /// `n·D` bits.
    Bits(Vec<bool>),
    /// `n·D` finite numbers.
    Reals(Vec<f64>),
}

impl Outputs {
    /// The number of values held (outputs × dimension).
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::Classes(v) => v.len(),
            Self::Bits(v) => v.len(),
            Self::Reals(v) => v.len(),
        }
    }

    /// `true` when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The request line (without the newline) asking for `n` outputs for `input`.
#[must_use]
pub fn request_line(input: &Value, n: usize) -> String {
    json!({"input": input, "n": n}).to_string()
}

fn describe(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

/// Parses and validates one response line: exactly `n` outputs of `kind`.
///
/// # Errors
/// A one-line message: malformed JSON, missing `outputs`, wrong count, or the first
/// output that does not have the required form (with its position).
pub fn parse_response(line: &str, n: usize, kind: OutputKind) -> Result<Outputs, String> {
    if line.len() > MAX_LINE_BYTES {
        return Err(format!("response line longer than {MAX_LINE_BYTES} bytes"));
    }
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("malformed JSON response: {e}"))?;
    let Value::Object(mut obj) = value else {
        return Err(format!(
            "response must be a JSON object {{\"outputs\": [...]}}, got {}",
            describe(&value)
        ));
    };
    let Some(outputs) = obj.remove("outputs") else {
        return Err("response has no \"outputs\" field".into());
    };
    let Value::Array(items) = outputs else {
        return Err(format!(
            "\"outputs\" must be an array, got {}",
            describe(&outputs)
        ));
    };
    if items.len() != n {
        return Err(format!(
            "wrong count: asked for {n} outputs, got {}",
            items.len()
        ));
    }
    match kind {
        OutputKind::Class(classes) => {
            let mut out = Vec::with_capacity(n);
            for (i, item) in items.iter().enumerate() {
                match item.as_u64().and_then(|c| usize::try_from(c).ok()) {
                    Some(c) if c < classes => out.push(c),
                    _ => {
                        return Err(format!(
                            "output #{i} is {}, expected an integer in 0..{}",
                            describe(item),
                            classes.saturating_sub(1)
                        ));
                    }
                }
            }
            Ok(Outputs::Classes(out))
        }
        OutputKind::Bits(dim) => {
            let mut out = Vec::with_capacity(n.saturating_mul(dim));
            for (i, item) in items.iter().enumerate() {
                let row = row(item, i, dim)?;
                for (j, b) in row.iter().enumerate() {
                    match b.as_u64() {
                        Some(0) => out.push(false),
                        Some(1) => out.push(true),
                        _ => {
                            return Err(format!(
                                "output #{i}, coordinate {j} is {}, expected 0 or 1",
                                describe(b)
                            ));
                        }
                    }
                }
            }
            Ok(Outputs::Bits(out))
        }
        OutputKind::Reals(dim) => {
            let mut out = Vec::with_capacity(n.saturating_mul(dim));
            for (i, item) in items.iter().enumerate() {
                let row = row(item, i, dim)?;
                for (j, x) in row.iter().enumerate() {
                    match x.as_f64() {
                        Some(v) if v.is_finite() => out.push(v),
                        _ => {
                            return Err(format!(
                                "output #{i}, coordinate {j} is {}, expected a finite number",
                                describe(x)
                            ));
                        }
                    }
                }
            }
            Ok(Outputs::Reals(out))
        }
    }
}

fn row(item: &Value, i: usize, dim: usize) -> Result<&Vec<Value>, String> {
    match item {
        Value::Array(r) if r.len() == dim => Ok(r),
        Value::Array(r) => Err(format!(
            "output #{i} has {} coordinates, expected {dim}",
            r.len()
        )),
        other => Err(format!(
            "output #{i} is {}, expected an array of {dim} values",
            describe(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_one_json_line() {
        let l = request_line(&json!([0.5, 0.25]), 3);
        assert_eq!(l, r#"{"input":[0.5,0.25],"n":3}"#);
    }

    #[test]
    fn parses_each_kind() {
        assert_eq!(
            parse_response(r#"{"outputs":[0,1,1]}"#, 3, OutputKind::Class(2)).unwrap(),
            Outputs::Classes(vec![0, 1, 1])
        );
        assert_eq!(
            parse_response(
                r#"{"outputs":[[0,1],[1,1]],"note":"x"}"#,
                2,
                OutputKind::Bits(2)
            )
            .unwrap(),
            Outputs::Bits(vec![false, true, true, true])
        );
        assert_eq!(
            parse_response(r#"{"outputs":[[0.5,-2]]}"#, 1, OutputKind::Reals(2)).unwrap(),
            Outputs::Reals(vec![0.5, -2.0])
        );
    }

    #[test]
    fn rejects_every_malformation_with_a_message() {
        for (line, n, kind, what) in [
            ("not json", 1, OutputKind::Class(2), "malformed"),
            ("[1]", 1, OutputKind::Class(2), "object"),
            (r#"{"out":[1]}"#, 1, OutputKind::Class(2), "no \"outputs\""),
            (
                r#"{"outputs":1}"#,
                1,
                OutputKind::Class(2),
                "must be an array",
            ),
            (r#"{"outputs":[1]}"#, 2, OutputKind::Class(2), "wrong count"),
            (r#"{"outputs":[2]}"#, 1, OutputKind::Class(2), "output #0"),
            (r#"{"outputs":[1.0]}"#, 1, OutputKind::Class(2), "integer"),
            (r#"{"outputs":[-1]}"#, 1, OutputKind::Class(2), "integer"),
            (
                r#"{"outputs":[[0]]}"#,
                1,
                OutputKind::Bits(2),
                "coordinates",
            ),
            (r#"{"outputs":[[0,2]]}"#, 1, OutputKind::Bits(2), "0 or 1"),
            (r#"{"outputs":[3]}"#, 1, OutputKind::Bits(2), "array"),
            (
                r#"{"outputs":[[0,"a"]]}"#,
                1,
                OutputKind::Reals(2),
                "finite",
            ),
            (
                r#"{"outputs":[[0,NaN]]}"#,
                1,
                OutputKind::Reals(2),
                "malformed",
            ),
        ] {
            let err = parse_response(line, n, kind).unwrap_err();
            assert!(err.contains(what), "{line}: {err}");
            assert!(!err.contains('\n'));
        }
    }
}
