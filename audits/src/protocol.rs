//! The external-mechanism wire format (newline-delimited JSON), as pure functions so that
//! the parser can be fuzzed without a child process.
//!
//! Request (one line): `{"input": X, "n": N}`. Response (one line): `{"outputs": [Y1, …, YN]}`
//! and no other key. See `docs/AUDIT_PROTOCOL.md`.
//!
//! The response's bytes are the output: besides its values, a response must have the
//! canonical form [`Canon`] checks (index sets strictly ascending, plain integers, reals in
//! their shortest digits and a notation that is a function of the value, exactly the
//! documented keys each once, one layout over the whole run). A deviation is not a parse
//! error: the values are still returned, with the deviation ([`Response::deviation`]),
//! which the audit turns into a failing `output-as-sent` test.

mod canonical;

pub use canonical::Canon;

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

/// One parsed response: its validated outputs and, if its bytes deviate from the run's
/// canonical form, the first deviation.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The outputs, validated and typed.
    pub outputs: Outputs,
    /// The first deviation from the canonical form of the output as sent (`output #i: …`),
    /// if any.
    pub deviation: Option<String>,
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

/// The most bytes a response of `n` outputs of `kind` may take: 4 KiB plus, per output,
/// several times what its compact JSON needs (a class: 32 bytes; a coordinate of a bit
/// vector: 8, of a real vector: 40; an index: 16; a report's fixed keys: 96). A child
/// that prints more — a valid but enormous JSON value, a flood of whitespace — is stopped
/// there, so what the audit holds stays within a small multiple of the expected response
/// (and never above [`MAX_LINE_BYTES`]).
#[must_use]
pub fn response_byte_limit(n: usize, kind: OutputKind) -> usize {
    let per_output = match kind {
        OutputKind::Class(_) => 32,
        OutputKind::Bits(d) => 16 + 8 * d,
        OutputKind::Reals(d) => 16 + 40 * d,
        OutputKind::IndexSet { size, .. } => 16 + 16 * size,
        OutputKind::ClientReport { size, .. } => 96 + 16 * size,
        OutputKind::OlhSeeded { .. } => 64,
        OutputKind::OlhHashed { values, .. } => 48 + 24 * values,
    };
    n.saturating_mul(per_output)
        .saturating_add(4096)
        .min(MAX_LINE_BYTES)
}

/// Parses and validates one response line, alone (a fresh [`Canon`]): exactly `n` outputs
/// of `kind`, parsed one output at a time into its typed form and rejected at the first
/// output beyond `n`, in canonical form.
///
/// # Errors
/// A one-line message: malformed JSON, missing `outputs`, wrong count, or the first
/// output that does not have the required form (with its position); a line longer than
/// [`response_byte_limit`] or not UTF-8; a deviation from the canonical form.
pub fn parse_response(line: &str, n: usize, kind: OutputKind) -> Result<Outputs, String> {
    strict(Canon::default().parse(line, n, kind))
}

/// Reads one response line from `reader` — at most [`response_byte_limit`] bytes: a longer
/// one is rejected as soon as the limit is passed, so a mechanism that prints a huge (valid)
/// JSON value costs a small multiple of the expected response, never the whole of it — and
/// parses it like [`parse_response`].
///
/// # Errors
/// As [`parse_response`]; an empty read (end of input) is `"no response"`.
pub fn read_response<R: std::io::BufRead>(
    reader: R,
    n: usize,
    kind: OutputKind,
) -> Result<Outputs, String> {
    strict(Canon::default().read(reader, n, kind))
}

/// A deviation as an error.
fn strict(r: Result<Response, String>) -> Result<Outputs, String> {
    let r = r?;
    match r.deviation {
        Some(d) => Err(format!("not in canonical form: {d}")),
        None => Ok(r.outputs),
    }
}

impl Canon {
    /// Parses and validates one response line of the run as [`parse_response`] does, and
    /// checks it against the run's canonical form (fixing what the run has not fixed yet).
    ///
    /// # Errors
    /// As [`parse_response`], except that a deviation from the canonical form is not an
    /// error but [`Response::deviation`].
    pub fn parse(&mut self, line: &str, n: usize, kind: OutputKind) -> Result<Response, String> {
        let limit = response_byte_limit(n, kind);
        if line.len() > limit {
            return Err(format!(
                "response line longer than {limit} bytes (the most {n} outputs may take)"
            ));
        }
        self.parse_bytes(line.as_bytes(), n, kind)
    }

    /// Reads one response line of the run from `reader` as [`read_response`] does, and
    /// checks it like [`Canon::parse`] (a `\r` before the newline is part of the line's
    /// layout).
    ///
    /// # Errors
    /// As [`Canon::parse`]; an empty read (end of input) is `"no response"`.
    pub fn read<R: std::io::BufRead>(
        &mut self,
        mut reader: R,
        n: usize,
        kind: OutputKind,
    ) -> Result<Response, String> {
        use std::io::{BufRead as _, Read as _};
        let limit = response_byte_limit(n, kind);
        let mut line = Vec::new();
        let read = reader
            .by_ref()
            .take(limit as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("cannot read the response: {e}"))?;
        if read == 0 {
            return Err("no response".into());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > limit {
            return Err(format!(
                "response line longer than {limit} bytes (the most {n} outputs may take)"
            ));
        }
        self.parse_bytes(&line, n, kind)
    }

    /// Parses one response (without its newline) and checks its form.
    fn parse_bytes(
        &mut self,
        bytes: &[u8],
        n: usize,
        kind: OutputKind,
    ) -> Result<Response, String> {
        if std::str::from_utf8(bytes).is_err() {
            return Err("response is not valid UTF-8".into());
        }
        let problem = std::cell::RefCell::new(None);
        let deviation = std::cell::RefCell::new(None);
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let seed = ResponseSeed {
            n,
            kind,
            problem: &problem,
            deviation: &deviation,
        };
        let parsed = serde::de::DeserializeSeed::deserialize(seed, &mut de).and_then(|o| {
            de.end()?;
            Ok(o)
        });
        let outputs = parsed.map_err(|e| {
            problem
                .into_inner()
                .unwrap_or_else(|| format!("malformed JSON response: {e}"))
        })?;
        let mut deviation = deviation.into_inner();
        if deviation.is_none() {
            let keys = match kind {
                OutputKind::ClientReport { .. } => 3,
                OutputKind::OlhHashed { .. } => 2,
                _ => 0,
            };
            let reals = matches!(kind, OutputKind::Reals(_));
            deviation = self.check_bytes(bytes, reals, keys).err();
        }
        Ok(Response { outputs, deviation })
    }
}

/// Records `message` as the response's first deviation from the canonical form.
fn deviate(deviation: &std::cell::RefCell<Option<String>>, message: String) {
    let mut d = deviation.borrow_mut();
    if d.is_none() {
        *d = Some(message);
    }
}

/// Parses `{"outputs": [...]}` (another key, or `outputs` twice, is a deviation).
struct ResponseSeed<'a> {
    n: usize,
    kind: OutputKind,
    problem: &'a std::cell::RefCell<Option<String>>,
    deviation: &'a std::cell::RefCell<Option<String>>,
}

/// Records `message` as the response's problem and returns the error that stops parsing.
fn stop<E: serde::de::Error>(problem: &std::cell::RefCell<Option<String>>, message: String) -> E {
    let mut p = problem.borrow_mut();
    if p.is_none() {
        *p = Some(message.clone());
    }
    E::custom(message)
}

/// A scalar or container as a short description, for "got ..." messages.
fn unexpected(u: serde::de::Unexpected<'_>) -> String {
    use serde::de::Unexpected as U;
    match u {
        U::Bool(b) => b.to_string(),
        U::Unsigned(x) => x.to_string(),
        U::Signed(x) => x.to_string(),
        U::Float(x) => x.to_string(),
        U::Str(s) => describe(&Value::from(s)),
        U::Seq => "an array".into(),
        U::Map => "an object".into(),
        U::Unit => "null".into(),
        other => other.to_string(),
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for ResponseSeed<'_> {
    type Value = Outputs;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Outputs, D::Error> {
        d.deserialize_any(self)
    }
}

impl ResponseSeed<'_> {
    fn not_object<E: serde::de::Error>(&self, got: serde::de::Unexpected<'_>) -> E {
        stop(
            self.problem,
            format!(
                "response must be a JSON object {{\"outputs\": [...]}}, got {}",
                unexpected(got)
            ),
        )
    }
}

macro_rules! reject_scalars {
    ($($method:ident: $t:ty => $u:expr;)*) => {
        $(fn $method<E: serde::de::Error>(self, v: $t) -> Result<Self::Value, E> {
            #[allow(clippy::redundant_closure_call)]
            Err(self.not_object(($u)(v)))
        })*
    };
}

impl<'de> serde::de::Visitor<'de> for ResponseSeed<'_> {
    type Value = Outputs;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object {\"outputs\": [...]}")
    }

    reject_scalars! {
        visit_bool: bool => serde::de::Unexpected::Bool;
        visit_u64: u64 => serde::de::Unexpected::Unsigned;
        visit_i64: i64 => serde::de::Unexpected::Signed;
        visit_f64: f64 => serde::de::Unexpected::Float;
        visit_str: &str => serde::de::Unexpected::Str;
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Outputs, E> {
        Err(self.not_object(serde::de::Unexpected::Unit))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<Outputs, A::Error> {
        Err(self.not_object(serde::de::Unexpected::Seq))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Outputs, A::Error> {
        let mut outputs = None;
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Outputs if outputs.is_some() => {
                    // Not read: the outputs are the first array's.
                    deviate(
                        self.deviation,
                        "response has two \"outputs\" fields (a key given twice)".into(),
                    );
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
                Key::Outputs => {
                    outputs = Some(map.next_value_seed(OutputsSeed {
                        builder: Builder::new(self.n, self.kind),
                        problem: self.problem,
                        deviation: self.deviation,
                    })?);
                }
                Key::Other(name) => {
                    deviate(
                        self.deviation,
                        format!(
                            "response has the key {}: a response is exactly {{\"outputs\": [...]}}",
                            describe(&Value::from(name))
                        ),
                    );
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        outputs.ok_or_else(|| stop(self.problem, "response has no \"outputs\" field".into()))
    }
}

/// A key of the response object: `outputs` or another one (named in the deviation).
enum Key {
    Outputs,
    Other(String),
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(if v == "outputs" {
                    Key::Outputs
                } else {
                    Key::Other(v.chars().take(64).collect())
                })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Parses the `outputs` array, one output at a time into `builder`.
struct OutputsSeed<'a> {
    builder: Builder,
    problem: &'a std::cell::RefCell<Option<String>>,
    deviation: &'a std::cell::RefCell<Option<String>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for OutputsSeed<'_> {
    type Value = Outputs;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Outputs, D::Error> {
        d.deserialize_any(self)
    }
}

impl OutputsSeed<'_> {
    fn not_array<E: serde::de::Error>(&self, got: serde::de::Unexpected<'_>) -> E {
        stop(
            self.problem,
            format!("\"outputs\" must be an array, got {}", unexpected(got)),
        )
    }
}

impl<'de> serde::de::Visitor<'de> for OutputsSeed<'_> {
    type Value = Outputs;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of outputs")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Outputs, E> {
        Err(self.not_array(serde::de::Unexpected::Bool(v)))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Outputs, E> {
        Err(self.not_array(serde::de::Unexpected::Unsigned(v)))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Outputs, E> {
        Err(self.not_array(serde::de::Unexpected::Signed(v)))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Outputs, E> {
        Err(self.not_array(serde::de::Unexpected::Float(v)))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Outputs, E> {
        Err(self.not_array(serde::de::Unexpected::Str(v)))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Outputs, E> {
        Err(self.not_array(serde::de::Unexpected::Unit))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<Outputs, A::Error> {
        Err(self.not_array(serde::de::Unexpected::Map))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Outputs, A::Error> {
        let mut b = self.builder;
        let n = b.n;
        for i in 0..n {
            // One output at a time: small, validated, then stored typed.
            let Some(item) = seq.next_element::<Value>()? else {
                return Err(stop(
                    self.problem,
                    format!("wrong count: asked for {n} outputs, got {i}"),
                ));
            };
            b.push(i, &item).map_err(|m| stop(self.problem, m))?;
        }
        // One more is already too many: stop before reading it.
        let more = std::cell::Cell::new(false);
        match seq.next_element_seed(TooMany(&more)) {
            Ok(None) => {
                if let Some(d) = b.deviation {
                    deviate(self.deviation, d);
                }
                Ok(b.out)
            }
            Err(e) if !more.get() => Err(e),
            _ => Err(stop(
                self.problem,
                format!("wrong count: asked for {n} outputs, got more"),
            )),
        }
    }
}

/// The seed of an output beyond the count: says so and fails without reading it.
struct TooMany<'a>(&'a std::cell::Cell<bool>);

impl<'de> serde::de::DeserializeSeed<'de> for TooMany<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        self.0.set(true);
        Err(serde::de::Error::custom("too many outputs"))
    }
}

/// Validates outputs one at a time and stores them in their typed form.
struct Builder {
    n: usize,
    kind: OutputKind,
    out: Outputs,
    /// The first deviation from the canonical form seen in the values (an unsorted set,
    /// an extra key).
    deviation: Option<String>,
}

/// The integer a JSON value stands for: an integer, a number with an integral value
/// (`1.0`, `1e0`) or a boolean (1 or 0). Only plain integers are canonical; the others
/// are read so that their notation can be reported as a deviation of the output as sent
/// ([`Canon`]), not as a malformed output.
fn integer(v: &Value) -> Option<i128> {
    match v {
        Value::Bool(b) => Some(i128::from(*b)),
        Value::Number(x) => x
            .as_u64()
            .map(i128::from)
            .or_else(|| x.as_i64().map(i128::from))
            .or_else(|| {
                x.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                    .map(|f| f as i128)
            }),
        _ => None,
    }
}

/// [`integer`] in `0..bound`.
fn below(v: &Value, bound: u64) -> Option<u64> {
    integer(v)
        .and_then(|x| u64::try_from(x).ok())
        .filter(|&x| x < bound)
}

/// The keys of an object that are not among `keys`, listed for a deviation.
fn other_keys(o: &serde_json::Map<String, Value>, keys: &[&str]) -> Option<String> {
    let other: Vec<String> = o
        .keys()
        .filter(|k| !keys.contains(&k.as_str()))
        .take(3)
        .map(|k| describe(&Value::from(k.as_str())))
        .collect();
    (!other.is_empty()).then(|| other.join(", "))
}

impl Builder {
    fn new(n: usize, kind: OutputKind) -> Self {
        // Reserve for the expected count only (bounded by what the response may hold).
        let n_cap = n.min(1 << 20);
        let out = match kind {
            OutputKind::Class(_) | OutputKind::OlhSeeded { .. } => {
                Outputs::Classes(Vec::with_capacity(n_cap))
            }
            OutputKind::Bits(d) => Outputs::Bits(Vec::with_capacity(n_cap.saturating_mul(d))),
            OutputKind::Reals(d) => Outputs::Reals(Vec::with_capacity(n_cap.saturating_mul(d))),
            OutputKind::IndexSet { .. } => Outputs::Sets(Vec::with_capacity(n_cap)),
            OutputKind::ClientReport { .. } => Outputs::Reports(Vec::with_capacity(n_cap)),
            OutputKind::OlhHashed { .. } => Outputs::Hashed(Vec::with_capacity(n_cap)),
        };
        Self {
            n,
            kind,
            out,
            deviation: None,
        }
    }

    /// Validates output number `i` and stores it.
    fn push(&mut self, i: usize, item: &Value) -> Result<(), String> {
        match (self.kind, &mut self.out) {
            (OutputKind::Class(classes), Outputs::Classes(out)) => {
                match below(item, classes as u64).and_then(|c| usize::try_from(c).ok()) {
                    Some(c) => out.push(c),
                    _ => {
                        return Err(format!(
                            "output #{i} is {}, expected an integer in 0..{}",
                            describe(item),
                            classes.saturating_sub(1)
                        ));
                    }
                }
            }
            (OutputKind::Bits(dim), Outputs::Bits(out)) => {
                let row = row(item, i, dim)?;
                for (j, b) in row.iter().enumerate() {
                    match below(b, 2) {
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
            (OutputKind::IndexSet { dim, size }, Outputs::Sets(out)) => {
                let set = index_set(item, i, dim, size)?;
                if !set.is_sorted() {
                    self.deviation.get_or_insert_with(|| unsorted(i, &set));
                }
                out.push(set);
            }
            (OutputKind::ClientReport { dim, size }, Outputs::Reports(out)) => {
                let Value::Object(o) = item else {
                    return Err(format!(
                        "output #{i} is {}, expected {{\"sign\": 1 or -1, \"magrr_bit\": 0 or 1, \"indices\": [...]}}",
                        describe(item)
                    ));
                };
                let positive = match o.get("sign").and_then(integer) {
                    Some(1) => true,
                    Some(-1) => false,
                    _ => return Err(format!("output #{i}: \"sign\" must be 1 or -1")),
                };
                let magrr_bit = match o.get("magrr_bit").and_then(integer) {
                    Some(0) => false,
                    Some(1) => true,
                    _ => return Err(format!("output #{i}: \"magrr_bit\" must be 0 or 1")),
                };
                let indices = match o.get("indices") {
                    Some(v) => index_set(v, i, dim, size)?,
                    None => return Err(format!("output #{i} has no \"indices\"")),
                };
                if let Some(other) = other_keys(o, &["sign", "magrr_bit", "indices"]) {
                    self.deviation.get_or_insert_with(|| {
                        format!(
                            "output #{i} has the key(s) {other}: a report has exactly \"sign\", \
                             \"magrr_bit\" and \"indices\""
                        )
                    });
                }
                if !indices.is_sorted() {
                    self.deviation.get_or_insert_with(|| unsorted(i, &indices));
                }
                out.push(ClientReport {
                    positive,
                    magrr_bit,
                    indices,
                });
            }
            (OutputKind::OlhSeeded { seeds, buckets }, Outputs::Classes(out)) => {
                let pair = match item {
                    Value::Array(p) if p.len() == 2 => (below(&p[0], seeds), below(&p[1], buckets)),
                    _ => (None, None),
                };
                match pair {
                    (Some(seed), Some(bucket)) => {
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
            (OutputKind::OlhHashed { values, buckets }, Outputs::Hashed(out)) => {
                let bucket = item.get("bucket").and_then(|b| below(b, buckets));
                let hashes = item.get("hashes").and_then(Value::as_array).and_then(|h| {
                    h.iter()
                        .map(|x| below(x, buckets))
                        .collect::<Option<Vec<u64>>>()
                });
                if let Some(other) = item
                    .as_object()
                    .and_then(|o| other_keys(o, &["bucket", "hashes"]))
                {
                    self.deviation.get_or_insert_with(|| {
                        format!(
                            "output #{i} has the key(s) {other}: a report has exactly \"bucket\" \
                             and \"hashes\""
                        )
                    });
                }
                match (bucket, hashes) {
                    (Some(b), Some(h)) if h.len() == values => {
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
            (OutputKind::Reals(dim), Outputs::Reals(out)) => {
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
            _ => return Err("internal: outputs of another kind".into()),
        }
        Ok(())
    }
}

/// The deviation of a set of indices not sent in strictly ascending order.
fn unsorted(i: usize, set: &[u32]) -> String {
    format!(
        "output #{i}: indices sent as {}, not in ascending order (a set has one canonical \
         order; any other may carry information)",
        describe(&Value::from(set.to_vec()))
    )
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
        match below(x, dim as u64).and_then(|j| u32::try_from(j).ok()) {
            Some(j) => set.push(j),
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
            parse_response(r#"{"outputs":[[0,1],[1,1]]}"#, 2, OutputKind::Bits(2)).unwrap(),
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
                r#"{"outputs":[[1,3],[0,2]]}"#,
                2,
                OutputKind::IndexSet { dim: 4, size: 2 }
            )
            .unwrap(),
            Outputs::Sets(vec![vec![1, 3], vec![0, 2]])
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

    /// Parses `lines` as one run; the deviation of each.
    fn run(lines: &[&str], n: usize, kind: OutputKind) -> Vec<Option<String>> {
        let mut canon = Canon::default();
        lines
            .iter()
            .map(|l| canon.parse(l, n, kind).unwrap().deviation)
            .collect()
    }

    #[test]
    fn canonical_responses_have_no_deviation() {
        let client = OutputKind::ClientReport { dim: 8, size: 2 };
        // Python's default separators and compact ones, each held over the run.
        for lines in [
            [
                r#"{"outputs": [{"sign": 1, "magrr_bit": 0, "indices": [2, 5]}]}"#,
                r#"{"outputs": [{"sign": -1, "magrr_bit": 1, "indices": [0, 7]}]}"#,
            ],
            [
                r#"{"outputs":[{"indices":[2,5],"magrr_bit":0,"sign":1}]}"#,
                r#"{"outputs":[{"indices":[0,7],"magrr_bit":1,"sign":-1}]}"#,
            ],
        ] {
            assert_eq!(run(&lines, 1, client), vec![None, None]);
        }
        let reals = run(
            &[
                r#"{"outputs":[[0.5,-1e-05],[3.0,2.5]]}"#,
                r#"{"outputs":[[1.5,-2e-05],[0.25,4.0]]}"#,
            ],
            2,
            OutputKind::Reals(2),
        );
        assert_eq!(reals, vec![None, None]);
    }

    /// Negative controls, one per class of deviation of the output as sent: each is read
    /// (the values are valid) and reported with its reason.
    #[test]
    fn every_deviation_of_the_output_as_sent_is_reported() {
        let set = OutputKind::IndexSet { dim: 8, size: 2 };
        let client = OutputKind::ClientReport { dim: 8, size: 2 };
        let hashed = OutputKind::OlhHashed {
            values: 2,
            buckets: 3,
        };
        let class = OutputKind::Class(3);
        let cases: Vec<(Vec<&str>, usize, OutputKind, &str)> = vec![
            (
                vec![r#"{"outputs":[[5,2]]}"#],
                1,
                set,
                "not in ascending order",
            ),
            (
                vec![r#"{"outputs":[{"sign":1,"magrr_bit":0,"indices":[5,2]}]}"#],
                1,
                client,
                "not in ascending order",
            ),
            (
                vec![r#"{"outputs":[1.0]}"#],
                1,
                class,
                "integer written as `1.0`",
            ),
            (
                vec![r#"{"outputs":[1e0]}"#],
                1,
                class,
                "integer written as `1e0`",
            ),
            (
                vec![r#"{"outputs":[-0]}"#],
                1,
                class,
                "integer written as `-0`",
            ),
            (vec![r#"{"outputs":[true]}"#], 1, class, "`true`"),
            (vec![r#"{"outputs":[[1,4.0]]}"#], 1, set, "integer written"),
            (
                vec![r#"{"outputs":[1],"note":0}"#],
                1,
                class,
                "the key \"note\"",
            ),
            (
                vec![r#"{"outputs":[1],"outputs":[2]}"#],
                1,
                class,
                "two \"outputs\"",
            ),
            (
                vec![r#"{"outputs":[{"sign":1,"magrr_bit":0,"indices":[2,5],"x":1}]}"#],
                1,
                client,
                "the key(s) \"x\"",
            ),
            (
                vec![r#"{"outputs":[{"sign":1,"magrr_bit":1,"magrr_bit":0,"indices":[2,5]}]}"#],
                1,
                client,
                "a key given twice",
            ),
            (
                vec![r#"{"outputs":[{"bucket":1,"hashes":[0,2],"seed":7}]}"#],
                1,
                hashed,
                "the key(s) \"seed\"",
            ),
            (
                vec![r#"{"outputs":[{"bucket":1,"bucket":2,"hashes":[0,2]}]}"#],
                1,
                hashed,
                "a key given twice",
            ),
            (
                vec![r#"{"outputs":[0,1]}"#, r#"{"outputs":[0, 1]}"#],
                2,
                class,
                "between outputs",
            ),
            (
                vec![r#"{"outputs":[[2,5]]}"#, r#"{"outputs":[[2, 5]]}"#],
                1,
                set,
                "laid out as",
            ),
            (
                vec![
                    r#"{"outputs":[{"sign":1,"magrr_bit":0,"indices":[2,5]}]}"#,
                    r#"{"outputs":[{"magrr_bit":0,"sign":1,"indices":[2,5]}]}"#,
                ],
                1,
                client,
                "laid out as",
            ),
            (
                vec![r#"{"outputs":[0]}"#, "{\"outputs\":[0]}\r"],
                1,
                class,
                "after the last output",
            ),
            (
                vec![r#"{"outputs":[0]}"#, r#" {"outputs":[0]}"#],
                1,
                class,
                "before the first output",
            ),
            (
                vec![
                    r#"{"outputs":[[0.5,0.25]]}"#,
                    r#"{"outputs":[[5e-1,0.25]]}"#,
                ],
                1,
                OutputKind::Reals(2),
                "notation",
            ),
            (
                vec![r#"{"outputs":[[0.50000000000000001,0.25]]}"#],
                1,
                OutputKind::Reals(2),
                "shortest",
            ),
        ];
        for (lines, n, kind, what) in cases {
            let deviations = run(&lines, n, kind);
            let last = deviations.last().cloned().flatten();
            let d = last.unwrap_or_else(|| panic!("{lines:?}: no deviation"));
            assert!(d.contains(what), "{lines:?}: {d}");
            assert!(!d.contains('\n'));
            // The strict, stateless parser rejects a deviation within one response.
            if lines.len() == 1 {
                let err = parse_response(lines[0], n, kind).unwrap_err();
                assert!(err.contains("canonical"), "{err}");
            }
        }
    }

    #[test]
    fn a_carriage_return_is_part_of_the_layout() {
        let mut canon = Canon::default();
        let mut two = &b"{\"outputs\":[1]}\r\n{\"outputs\":[0]}\r\n"[..];
        for _ in 0..2 {
            let r = canon.read(&mut two, 1, OutputKind::Class(2)).unwrap();
            assert_eq!(r.deviation, None);
        }
        let mut mixed = &b"{\"outputs\":[1]}\n"[..];
        let r = canon.read(&mut mixed, 1, OutputKind::Class(2)).unwrap();
        assert!(r.deviation.unwrap().contains("after the last output"));
    }
}
