//! The output as sent: the canonical form of a run's responses (issue 30, item 5).
//!
//! Everything a mechanism writes on stdout is its output. The tests read the values
//! (classes, bits, index sets, reals); whatever else the bytes could vary — the order of a
//! set, the notation of a number, the whitespace between tokens, the order and spelling of
//! keys, a duplicated key, the line terminator — is either fixed by the protocol or must
//! be the same in every response of the run, so that the bytes are a function of the
//! values and carry nothing the tests do not see. [`Canon`] holds what the run's first
//! responses fixed and checks every later one against it, in one pass over the bytes:
//!
//! - **integers** (classes, bits, indices, sign, MagRR bit, OLH seeds, buckets and
//!   hashes) are plain JSON integers: no fraction, no exponent, no `-0`, no boolean;
//! - **reals** (`laplace`) carry the shortest digits that round-trip the f64 (closest to
//!   it: what Python's `repr`, JavaScript and Rust's ryu/`serde_json` write), and their
//!   notation — positional or exponent, `e` or `E`, exponent sign and padding, a trailing
//!   `.0`, the spelling of zero — is a function of (decimal exponent, number of digits):
//!   fixed by the first value of each such class in the run;
//! - **layout**: every output, with its numbers taken out (its *skeleton*: brackets, keys,
//!   whitespace), is byte for byte the run's first output's skeleton; the bytes before the
//!   first output, between two outputs and after the last (through a `\r` before the
//!   newline) are the run's first such bytes;
//! - **keys**: an object carries each documented key once (checked by counting the keys
//!   of every output as sent; the parser checks which keys they are).
//!
//! Set order (strictly ascending indices) and the response's keys are checked by the
//! parser in `protocol.rs`, which sees the values.

use std::collections::HashMap;

/// The most distinct (decimal exponent, digit count) classes of reals a run may fix a
/// notation for: every finite f64 is in one of fewer than 2·650·17 of them.
const MAX_REAL_CLASSES: usize = 1 << 15;

/// The canonical form of a run's responses, fixed by its first responses and enforced on
/// the rest (see the module documentation). One `Canon` per audited mechanism, kept for
/// its whole run (every input), so that the form cannot depend on the input either.
#[derive(Debug, Clone, Default)]
pub struct Canon {
    /// The bytes from the start of the line to the first output.
    prefix: Option<Vec<u8>>,
    /// The bytes between two outputs.
    separator: Option<Vec<u8>>,
    /// The bytes after the last output, through the end of the line (a `\r` included).
    suffix: Option<Vec<u8>>,
    /// An output's skeleton (its bytes, every number replaced by `#`).
    skeleton: Option<Vec<u8>>,
    /// The notation of reals per (decimal exponent, significant digits): the value's
    /// unsigned token with its significant digits replaced by `d`.
    notation: HashMap<(i32, u8), Vec<u8>>,
}

/// Quotes bytes for a one-line message (at most 40 characters).
fn quote(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let short: String = s.chars().take(40).collect();
    let more = if s.chars().count() > 40 { "…" } else { "" };
    format!("`{}{more}`", short.escape_debug())
}

/// `slot` fixed to `got` if unset; whether `got` equals it.
fn same(slot: &mut Option<Vec<u8>>, got: &[u8]) -> Result<(), Vec<u8>> {
    match slot {
        Some(first) if first.as_slice() == got => Ok(()),
        Some(first) => Err(first.clone()),
        None => {
            *slot = Some(got.to_vec());
            Ok(())
        }
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_number_byte(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
}

/// Checks that `token` is a plain JSON integer.
fn check_integer(token: &[u8]) -> Result<(), String> {
    let digits = token.strip_prefix(b"-").unwrap_or(token);
    let plain = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits.len() == 1 || digits[0] != b'0')
        && token != b"-0";
    if plain {
        Ok(())
    } else {
        Err(format!(
            "integer written as {}: integers are plain JSON integers (no fraction, exponent, \
             boolean or -0)",
            quote(token)
        ))
    }
}

/// The significant digits of a JSON number's text (no leading or trailing zeros; `"0"` for
/// zero) and its decimal exponent (the text's value is 0.d₁d₂… × 10^(exponent + 1)).
fn digits_of(text: &str) -> (String, i32) {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.trim_start_matches('+').parse::<i32>().unwrap_or(0)),
        None => (unsigned, 0),
    };
    let point = mantissa.find('.').unwrap_or(mantissa.len());
    let all: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let Some(first) = all.iter().position(|&b| b != b'0') else {
        return ("0".into(), 0);
    };
    let last = all.iter().rposition(|&b| b != b'0').unwrap_or(first);
    let digits = String::from_utf8_lossy(&all[first..=last]).into_owned();
    let first = i32::try_from(first).unwrap_or(i32::MAX);
    let point = i32::try_from(point).unwrap_or(i32::MAX);
    (
        digits,
        point
            .saturating_sub(1)
            .saturating_sub(first)
            .saturating_add(exponent),
    )
}

/// The shortest digits that round-trip `v`, closest to it with ties to even (what Python's
/// `repr`, JavaScript's `Number.prototype.toString` and ryu — `serde_json`'s writer —
/// produce; Rust's own `{}` and `{:e}` break exact ties upwards instead), and their
/// decimal exponent, as [`digits_of`].
fn shortest(v: f64) -> (String, i32) {
    let text = serde_json::to_string(&v).unwrap_or_default();
    digits_of(&text)
}

impl Canon {
    /// Checks a real's `token` (a valid JSON number): shortest digits, and the notation
    /// of its class.
    fn check_real(&mut self, token: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(token).map_err(|_| "a number is not ASCII".to_string())?;
        let v: f64 = text
            .parse()
            .map_err(|_| format!("cannot read the number {}", quote(token)))?;
        let (digits, exponent) = shortest(v);
        let unsigned = text.strip_prefix('-').unwrap_or(text);
        if digits_of(text) != (digits.clone(), exponent) {
            return Err(format!(
                "real written as {}: its digits are not the shortest that round-trip the value \
                 ({digits} × 10^{})",
                quote(token),
                exponent + 1 - digits.len() as i32
            ));
        }
        let mantissa = unsigned
            .split(['e', 'E'])
            .next()
            .unwrap_or(unsigned)
            .as_bytes();
        let first = mantissa.iter().position(|b| (b'1'..=b'9').contains(b));
        let last = mantissa.iter().rposition(|b| (b'1'..=b'9').contains(b));
        // The notation: the unsigned token with its significant digits replaced.
        let mut notation = unsigned.as_bytes().to_vec();
        if let (Some(f), Some(l)) = (first, last) {
            for b in &mut notation[f..=l] {
                if b.is_ascii_digit() {
                    *b = b'd';
                }
            }
        }
        let class = if v == 0.0 {
            (i32::MIN, 1)
        } else {
            (exponent, u8::try_from(digits.len()).unwrap_or(u8::MAX))
        };
        match self.notation.get(&class) {
            Some(first) if *first == notation => Ok(()),
            Some(first) => Err(format!(
                "real written as {}: notation {} differs from the run's earlier values with \
                 decimal exponent {exponent} and {} digits ({}); a real's notation must be a \
                 function of its value",
                quote(token),
                quote(&notation),
                digits.len(),
                quote(first)
            )),
            None if self.notation.len() >= MAX_REAL_CLASSES => {
                Err("too many distinct notations of reals".into())
            }
            None => {
                self.notation.insert(class, notation);
                Ok(())
            }
        }
    }

    /// Checks the bytes before output number `output` (the response's start for the
    /// first, a separator for the others).
    fn check_frame(&mut self, frame: &[u8], output: usize) -> Result<(), String> {
        let (slot, what) = if output == 0 {
            (&mut self.prefix, "the bytes before the first output are")
        } else {
            (&mut self.separator, "the bytes between outputs are")
        };
        same(slot, frame).map_err(|first| {
            format!(
                "output #{output}: {what} {}, the run's first were {}",
                quote(frame),
                quote(&first)
            )
        })
    }

    /// Checks output number `output`'s skeleton and its number of keys as sent.
    fn check_output(
        &mut self,
        skeleton: &[u8],
        colons: usize,
        keys: usize,
        output: usize,
    ) -> Result<(), String> {
        if colons != keys {
            return Err(format!(
                "output #{output} has {colons} keys as sent, its object has {keys} distinct keys \
                 (a key given twice)"
            ));
        }
        same(&mut self.skeleton, skeleton).map_err(|first| {
            format!(
                "output #{output} is laid out as {}, the run's first output as {} (the bytes \
                 around and between its values must not vary)",
                quote(skeleton),
                quote(&first)
            )
        })
    }

    /// Checks the bytes of one response (a valid JSON object `{"outputs": [...]}` with
    /// exactly that key, as the parser has already established, without its `\n`; a `\r`
    /// before it is part of the line) against the run's canonical form, fixing what is not
    /// fixed yet. `reals`: the outputs' numbers are reals (else integers); `keys`: the
    /// keys each output object must have.
    ///
    /// # Errors
    /// The first deviation, in words, with the output's position.
    pub(super) fn check_bytes(
        &mut self,
        line: &[u8],
        reals: bool,
        keys: usize,
    ) -> Result<(), String> {
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut in_output = false;
        let mut frame_start = 0usize;
        let mut output = 0usize;
        let mut skeleton: Vec<u8> = Vec::new();
        let mut colons = 0usize;
        let mut p = 0usize;
        while p < line.len() {
            let b = line[p];
            if in_string {
                if in_output {
                    skeleton.push(b);
                }
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
                p += 1;
                continue;
            }
            if !in_output && depth == 2 && !is_ws(b) && b != b',' && b != b']' {
                self.check_frame(&line[frame_start..p], output)?;
                in_output = true;
                skeleton.clear();
                colons = 0;
            }
            if in_output && matches!(b, b't' | b'f' | b'n' | b'-' | b'0'..=b'9') {
                // A scalar: a number, or a word (true, false: a boolean where an integer
                // is expected, which the parser accepts as 1 or 0; null never parses).
                let word = b.is_ascii_alphabetic();
                let end = line[p..]
                    .iter()
                    .position(|&c| {
                        if word {
                            !c.is_ascii_alphabetic()
                        } else {
                            !is_number_byte(c)
                        }
                    })
                    .map_or(line.len(), |e| p + e);
                let token = &line[p..end];
                let checked = if word && token != b"null" {
                    check_integer(token)
                } else if word {
                    Ok(())
                } else if reals {
                    self.check_real(token)
                } else {
                    check_integer(token)
                };
                checked.map_err(|e| format!("output #{output}: {e}"))?;
                skeleton.push(b'#');
                p = end;
            } else {
                if in_output {
                    skeleton.push(b);
                }
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => depth = depth.saturating_sub(1),
                    b':' if in_output => colons += 1,
                    _ => {}
                }
                p += 1;
            }
            if in_output && depth == 2 {
                self.check_output(&skeleton, colons, keys, output)?;
                in_output = false;
                frame_start = p;
                output += 1;
            }
        }
        let suffix = &line[frame_start..];
        same(&mut self.suffix, suffix).map_err(|first| {
            format!(
                "the bytes after the last output are {}, the run's first response's were {}",
                quote(suffix),
                quote(&first)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_must_be_plain() {
        for ok in ["0", "1", "17", "-1", "123456789012"] {
            check_integer(ok.as_bytes()).unwrap();
        }
        for bad in ["1.0", "1e0", "1E+0", "-0", "0.0", "10e-1"] {
            assert!(check_integer(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn reals_as_python_ryu_and_javascript_write_them_pass() {
        // Python repr, serde_json (ryu) and JavaScript notations, each consistent.
        for run in [
            [
                "0.5", "-2.25", "1e-05", "1.5e-07", "1e+16", "1.0", "-0.0", "123.456",
            ],
            [
                "0.5", "-2.25", "1e-5", "1.5e-7", "1e16", "1.0", "-0.0", "123.456",
            ],
            [
                "0.5",
                "-2.25",
                "0.00001",
                "1.5e-7",
                "10000000000000000",
                "1",
                "0",
                "123.456",
            ],
        ] {
            let mut c = Canon::default();
            for _ in 0..2 {
                for t in run {
                    c.check_real(t.as_bytes()).unwrap();
                }
            }
        }
    }

    #[test]
    fn non_shortest_digits_and_switching_notation_fail() {
        let mut c = Canon::default();
        assert!(c.check_real(b"0.50").is_ok());
        // 0.1 + 0.2 written with 17 digits rather than its shortest 0.30000000000000004.
        assert!(c.check_real(b"0.30000000000000004").is_ok());
        assert!(c.check_real(b"0.3000000000000000444").is_err());
        assert!(c.check_real(b"0.7").is_err(), "notation changed");
        // An exact tie (…562.25) has the even digit, as Python, JavaScript and ryu write it.
        assert!(c.check_real(b"1658206780088562.2").is_ok());
        assert!(c.check_real(b"1658206780088562.3").is_err());
        assert!(c.check_real(b"1.25e-5").is_ok());
        assert!(c.check_real(b"3.75E-5").is_err(), "exponent letter changed");
        assert!(c.check_real(b"0.0000375").is_err(), "positional changed");
        assert!(
            c.check_real(b"1.75e-05").is_err(),
            "exponent padding changed"
        );
        assert!(c.check_real(b"0.0").is_ok());
        assert!(c.check_real(b"0").is_err(), "zero spelled two ways");
        assert!(c.check_real(b"-0.0").is_ok(), "the sign is the value's");
    }

    #[test]
    fn ryu_writes_the_shortest_digits_of_every_double() {
        // serde_json (ryu) on pseudo-random bit patterns: always canonical.
        let mut c = Canon::default();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if v.is_finite() {
                let t = serde_json::to_string(&v).unwrap();
                c.check_real(t.as_bytes()).unwrap();
            }
        }
    }

    #[test]
    fn layout_is_fixed_by_the_first_response() {
        let mut c = Canon::default();
        c.check_bytes(br#"{"outputs": [[1, 0], [0, 1]]}"#, false, 0)
            .unwrap();
        c.check_bytes(br#"{"outputs": [[0, 0]]}"#, false, 0)
            .unwrap();
        for bad in [
            &br#"{"outputs": [[1,0], [0, 1]]}"#[..],
            br#"{"outputs":[[1, 0], [0, 1]]}"#,
            br#"{"outputs": [[1, 0],[0, 1]]}"#,
            br#"{"outputs": [[1, 0], [0, 1]] }"#,
            b"{\"outputs\": [[1, 0], [0, 1]]}\r",
        ] {
            let mut d = c.clone();
            assert!(
                d.check_bytes(bad, false, 0).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut k = Canon::default();
        let err = k
            .check_bytes(br#"{"outputs":[{"a":1,"a":2}]}"#, false, 1)
            .unwrap_err();
        assert!(err.contains("2 keys"), "{err}");
        let err = k
            .check_bytes(br#"{"outputs":[true]}"#, false, 0)
            .unwrap_err();
        assert!(err.contains("boolean"), "{err}");
    }
}
