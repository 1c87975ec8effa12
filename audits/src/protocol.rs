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
    /// `label-dp-onehot`, `rr-with-prior`, `exponential`, `frequency-grr`: K classes).
    Class(usize),
    /// An array of `D` values, each 0 or 1 (`embedding-dp`, `frequency-oue`).
    Bits(usize),
    /// An array of `D` finite numbers (`laplace`).
    Reals(usize),
    /// An array of `size` distinct indices in `0..dim`, any order (`signds-selection`).
    IndexSet {
        /// d.
        dim: usize,
        /// h.
        size: usize,
    },
    /// A SignDS client report `{"sign": 1 | -1, "magrr_bit": 0 | 1, "indices": [...]}`
    /// with `size` distinct indices in `0..dim` (`signds-client`).
    ClientReport {
        /// d.
        dim: usize,
        /// h.
        size: usize,
    },
    /// An OLH report `[seed, bucket]` under fl-ldp's hash family, `seed < seeds`,
    /// `bucket < buckets`; parsed into the class `seed·buckets + bucket`.
    OlhSeeded {
        /// g^(m+1).
        seeds: u64,
        /// g.
        buckets: u64,
    },
    /// An OLH report under the mechanism's own hash family,
    /// `{"bucket": b, "hashes": [H(0), …, H(k−1)]}`, every value `< buckets`.
    OlhHashed {
        /// k.
        values: usize,
        /// g.
        buckets: u64,
    },
}

/// A SignDS client report, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientReport {
    /// `true` for the positive sign.
    pub positive: bool,
    /// The MagRR bit.
    pub magrr_bit: bool,
    /// The selected indices.
    pub indices: Vec<u32>,
}

/// An OLH report with the hashes of every value under its hash function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashedReport {
    /// The reported bucket.
    pub bucket: u64,
    /// H(v) for every value v.
    pub hashes: Vec<u64>,
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
    /// One index set per output.
    Sets(Vec<Vec<u32>>),
    /// One client report per output.
    Reports(Vec<ClientReport>),
    /// One hashed OLH report per output.
    Hashed(Vec<HashedReport>),
}

impl Outputs {
    /// The number of values held (outputs × dimension, or outputs for structured ones).
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::Classes(v) => v.len(),
            Self::Bits(v) => v.len(),
            Self::Reals(v) => v.len(),
            Self::Sets(v) => v.len(),
            Self::Reports(v) => v.len(),
            Self::Hashed(v) => v.len(),
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
        OutputKind::IndexSet { dim, size } => {
            let mut out = Vec::with_capacity(n);
            for (i, item) in items.iter().enumerate() {
                out.push(index_set(item, i, dim, size)?);
            }
            Ok(Outputs::Sets(out))
        }
        OutputKind::ClientReport { dim, size } => {
            let mut out = Vec::with_capacity(n);
            for (i, item) in items.iter().enumerate() {
                let Value::Object(o) = item else {
                    return Err(format!(
                        "output #{i} is {}, expected {{\"sign\": 1 or -1, \"magrr_bit\": 0 or 1, \"indices\": [...]}}",
                        describe(item)
                    ));
                };
                let positive = match o.get("sign").and_then(Value::as_i64) {
                    Some(1) => true,
                    Some(-1) => false,
                    _ => return Err(format!("output #{i}: \"sign\" must be 1 or -1")),
                };
                let magrr_bit = match o.get("magrr_bit").and_then(Value::as_u64) {
                    Some(0) => false,
                    Some(1) => true,
                    _ => return Err(format!("output #{i}: \"magrr_bit\" must be 0 or 1")),
                };
                let indices = match o.get("indices") {
                    Some(v) => index_set(v, i, dim, size)?,
                    None => return Err(format!("output #{i} has no \"indices\"")),
                };
                out.push(ClientReport {
                    positive,
                    magrr_bit,
                    indices,
                });
            }
            Ok(Outputs::Reports(out))
        }
        OutputKind::OlhSeeded { seeds, buckets } => {
            let mut out = Vec::with_capacity(n);
            for (i, item) in items.iter().enumerate() {
                let pair = match item {
                    Value::Array(p) if p.len() == 2 => (p[0].as_u64(), p[1].as_u64()),
                    _ => (None, None),
                };
                match pair {
                    (Some(seed), Some(bucket)) if seed < seeds && bucket < buckets => {
                        let index = u128::from(seed) * u128::from(buckets) + u128::from(bucket);
                        out.push(usize::try_from(index).map_err(|_| {
                            format!("output #{i}: report index does not fit in memory")
                        })?);
                    }
                    _ => {
                        return Err(format!(
                            "output #{i} is {}, expected [seed, bucket] with seed < {seeds} \
                             and bucket < {buckets}",
                            describe(item)
                        ));
                    }
                }
            }
            Ok(Outputs::Classes(out))
        }
        OutputKind::OlhHashed { values, buckets } => {
            let mut out = Vec::with_capacity(n);
            for (i, item) in items.iter().enumerate() {
                let bucket = item.get("bucket").and_then(Value::as_u64);
                let hashes = item.get("hashes").and_then(Value::as_array).and_then(|h| {
                    h.iter()
                        .map(|x| x.as_u64().filter(|&x| x < buckets))
                        .collect::<Option<Vec<u64>>>()
                });
                match (bucket, hashes) {
                    (Some(b), Some(h)) if b < buckets && h.len() == values => {
                        out.push(HashedReport {
                            bucket: b,
                            hashes: h,
                        });
                    }
                    _ => {
                        return Err(format!(
                            "output #{i} is {}, expected {{\"bucket\": b, \"hashes\": [H(0), …, \
                             H({})]}} with every value below {buckets}",
                            describe(item),
                            values.saturating_sub(1)
                        ));
                    }
                }
            }
            Ok(Outputs::Hashed(out))
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

/// `size` distinct indices in `0..dim`.
fn index_set(item: &Value, i: usize, dim: usize, size: usize) -> Result<Vec<u32>, String> {
    let bad = || {
        format!(
            "output #{i} is {}, expected an array of {size} distinct indices in 0..{}",
            describe(item),
            dim.saturating_sub(1)
        )
    };
    let Value::Array(a) = item else {
        return Err(bad());
    };
    if a.len() != size {
        return Err(bad());
    }
    let mut set = Vec::with_capacity(size);
    for x in a {
        match x.as_u64().and_then(|j| u32::try_from(j).ok()) {
            Some(j) if (j as usize) < dim => set.push(j),
            _ => return Err(bad()),
        }
    }
    let mut sorted = set.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("output #{i} repeats an index"));
    }
    Ok(set)
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
    fn parses_the_structured_kinds() {
        assert_eq!(
            parse_response(
                r#"{"outputs":[[3,1],[0,2]]}"#,
                2,
                OutputKind::IndexSet { dim: 4, size: 2 }
            )
            .unwrap(),
            Outputs::Sets(vec![vec![3, 1], vec![0, 2]])
        );
        assert_eq!(
            parse_response(
                r#"{"outputs":[{"sign":-1,"magrr_bit":1,"indices":[2]}]}"#,
                1,
                OutputKind::ClientReport { dim: 4, size: 1 }
            )
            .unwrap(),
            Outputs::Reports(vec![ClientReport {
                positive: false,
                magrr_bit: true,
                indices: vec![2]
            }])
        );
        assert_eq!(
            parse_response(
                r#"{"outputs":[[4,2]]}"#,
                1,
                OutputKind::OlhSeeded {
                    seeds: 9,
                    buckets: 3
                }
            )
            .unwrap(),
            Outputs::Classes(vec![14])
        );
        assert_eq!(
            parse_response(
                r#"{"outputs":[{"bucket":1,"hashes":[0,1,2]}]}"#,
                1,
                OutputKind::OlhHashed {
                    values: 3,
                    buckets: 3
                }
            )
            .unwrap(),
            Outputs::Hashed(vec![HashedReport {
                bucket: 1,
                hashes: vec![0, 1, 2]
            }])
        );
    }

    #[test]
    fn rejects_every_malformation_with_a_message() {
        let set = OutputKind::IndexSet { dim: 4, size: 2 };
        let client = OutputKind::ClientReport { dim: 4, size: 1 };
        let seeded = OutputKind::OlhSeeded {
            seeds: 9,
            buckets: 3,
        };
        let hashed = OutputKind::OlhHashed {
            values: 2,
            buckets: 3,
        };
        for (line, kind, what) in [
            (r#"{"outputs":[[1,1]]}"#, set, "repeats"),
            (r#"{"outputs":[[1,4]]}"#, set, "distinct indices"),
            (r#"{"outputs":[[1]]}"#, set, "distinct indices"),
            (r#"{"outputs":[3]}"#, client, "expected {"),
            (
                r#"{"outputs":[{"sign":0,"magrr_bit":1,"indices":[2]}]}"#,
                client,
                "sign",
            ),
            (
                r#"{"outputs":[{"sign":1,"magrr_bit":2,"indices":[2]}]}"#,
                client,
                "magrr_bit",
            ),
            (
                r#"{"outputs":[{"sign":1,"magrr_bit":1}]}"#,
                client,
                "indices",
            ),
            (r#"{"outputs":[[9,0]]}"#, seeded, "seed <"),
            (r#"{"outputs":[[0,3]]}"#, seeded, "seed <"),
            (
                r#"{"outputs":[{"bucket":3,"hashes":[0,1]}]}"#,
                hashed,
                "below 3",
            ),
            (
                r#"{"outputs":[{"bucket":0,"hashes":[0,3]}]}"#,
                hashed,
                "below 3",
            ),
            (
                r#"{"outputs":[{"bucket":0,"hashes":[0]}]}"#,
                hashed,
                "hashes",
            ),
        ] {
            let err = parse_response(line, 1, kind).unwrap_err();
            assert!(err.contains(what), "{line}: {err}");
            assert!(!err.contains('\n'));
        }
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
