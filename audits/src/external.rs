//! Talking to an external mechanism: a child process that answers newline-delimited JSON
//! requests on stdin/stdout (see [`crate::protocol`] and `docs/AUDIT_PROTOCOL.md`), or an
//! in-process function that answers the same request lines ([`CallbackMechanism`], used by
//! the Python package's `fl_privacy.audit`). Both are [`Responder`]s: the audit cannot tell
//! them apart, so they get the same inputs, tests, ε statements and report.
//!
//! Robustness: the child's stdout is read by a dedicated thread, which reads each response
//! up to [`crate::protocol::response_byte_limit`] bytes (a small multiple of the expected
//! response) and parses it one output at a time into its typed form, stopping at the first
//! output beyond the count ([`crate::protocol::read_response`]), and every response is
//! awaited with a timeout, so a
//! child that hangs, exits, floods or garbles its output ends the audit with a one-line
//! [`AuditError::External`] — never a hang, a panic or memory beyond a small multiple of
//! the expected response. The child is killed and reaped whenever the runner is dropped.

use std::{
    io::{BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc::{self, Receiver, RecvTimeoutError, Sender},
    time::Duration,
};

use serde_json::Value;

use crate::{
    error::{AuditError, Result},
    protocol::{Canon, OutputKind, Outputs, Response, request_line},
};

/// A mechanism under audit, answering the external protocol's requests.
pub trait Responder: Send {
    /// `n` outputs of `kind` for the protocol input `input`, validated.
    ///
    /// # Errors
    /// [`AuditError::External`] when the mechanism fails or answers with anything but `n`
    /// valid outputs.
    fn respond(&mut self, input: &Value, n: usize, kind: OutputKind) -> Result<Outputs>;

    /// The first deviation from the canonical form of the output as sent
    /// ([`crate::protocol::Canon`], checked over every response since the mechanism
    /// started) found since the last call, as `request #r: output #i: …`; `None` when
    /// every response since then was canonical. The audit fails a run with a deviation
    /// (the `output-as-sent` test). A responder that wraps another must pass this on.
    fn take_deviation(&mut self) -> Option<String>;
}

impl Responder for ExternalMechanism {
    fn respond(&mut self, input: &Value, n: usize, kind: OutputKind) -> Result<Outputs> {
        self.request(input, n, kind)
    }

    fn take_deviation(&mut self) -> Option<String> {
        self.deviation.take()
    }
}

/// Keeps the first of the deviations of request number `request`'s response.
fn note(pending: &mut Option<String>, request: u64, response: Response) -> Outputs {
    if pending.is_none()
        && let Some(d) = response.deviation
    {
        *pending = Some(format!("request #{request}: {d}"));
    }
    response.outputs
}

/// An in-process mechanism: a function from one request line (`{"input": X, "n": N}`) to
/// one response line (`{"outputs": [...]}`), or to a one-line failure. Its answers go
/// through the same parser and canonical-form checks as a child's ([`Canon`]).
pub struct CallbackMechanism<F> {
    answer: F,
    requests: u64,
    canon: Canon,
    deviation: Option<String>,
}

impl<F> core::fmt::Debug for CallbackMechanism<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CallbackMechanism")
            .field("requests", &self.requests)
            .finish_non_exhaustive()
    }
}

impl<F: FnMut(&str) -> core::result::Result<String, String> + Send> CallbackMechanism<F> {
    /// A mechanism answered by `answer`.
    pub fn new(answer: F) -> Self {
        Self {
            answer,
            requests: 0,
            canon: Canon::default(),
            deviation: None,
        }
    }
}

impl<F: FnMut(&str) -> core::result::Result<String, String> + Send> Responder
    for CallbackMechanism<F>
{
    fn respond(&mut self, input: &Value, n: usize, kind: OutputKind) -> Result<Outputs> {
        self.requests += 1;
        let number = self.requests;
        let fail = |e: String| AuditError::External(format!("request #{number}: {e}"));
        let line = (self.answer)(&request_line(input, n)).map_err(fail)?;
        let response = self.canon.parse(&line, n, kind).map_err(fail)?;
        Ok(note(&mut self.deviation, number, response))
    }

    fn take_deviation(&mut self) -> Option<String> {
        self.deviation.take()
    }
}

/// What the reader thread makes of one response.
#[derive(Debug)]
enum Reply {
    /// The validated outputs (and their deviation from the canonical form, if any).
    Parsed(Response),
    /// The child closed its stdout before answering.
    Eof,
    /// The response was malformed (the child is killed).
    Failed(String),
}

/// A running external mechanism.
#[derive(Debug)]
pub struct ExternalMechanism {
    child: Child,
    stdin: Option<ChildStdin>,
    /// What to parse next: the count and the form of the outputs asked for.
    jobs: Option<Sender<(usize, OutputKind)>>,
    replies: Receiver<Reply>,
    timeout: Duration,
    command: String,
    requests: u64,
    /// The first deviation from the canonical form not yet taken.
    deviation: Option<String>,
}

impl ExternalMechanism {
    /// Starts `command[0]` with arguments `command[1..]`; its stderr is passed through.
    ///
    /// # Errors
    /// [`AuditError::Usage`] for an empty command, [`AuditError::External`] when it cannot
    /// be started.
    pub fn start(command: &[String], timeout: Duration) -> Result<Self> {
        let Some((program, args)) = command.split_first() else {
            return Err(AuditError::usage(
                "external needs a command after `--`, e.g. `-- python3 my_mechanism.py`",
            ));
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| AuditError::External(format!("cannot start `{program}`: {e}")))?;
        let stdout = child.stdout.take();
        let stdin = child.stdin.take();
        let (jobs, todo) = mpsc::channel::<(usize, OutputKind)>();
        let (tx, replies) = mpsc::channel::<Reply>();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                // The canonical form of the whole run's responses.
                let mut canon = Canon::default();
                // One response per request, parsed as it arrives; the thread (and with it
                // the read end of the child's stdout, so that a child stopped mid-line is
                // killed rather than interrupted by a broken pipe) ends when the mechanism
                // is dropped (no more jobs).
                while let Ok((n, kind)) = todo.recv() {
                    let reply = match canon.read(&mut reader, n, kind) {
                        Ok(o) => Reply::Parsed(o),
                        Err(e) if e == "no response" => Reply::Eof,
                        Err(e) => Reply::Failed(e),
                    };
                    if tx.send(reply).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Self {
            child,
            stdin,
            jobs: Some(jobs),
            replies,
            timeout,
            command: command.join(" ").escape_debug().to_string(),
            requests: 0,
            deviation: None,
        })
    }

    fn fail(&mut self, what: String) -> AuditError {
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        let suffix = status.map_or_else(String::new, |s| format!(" (child {s})"));
        AuditError::External(format!("`{}`: {what}{suffix}", self.command))
    }

    fn exited(&mut self) -> String {
        // Give a child that closed stdout a moment to exit so the status can be shown.
        for _ in 0..20 {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        format!(
            "closed its stdout (exited?) before answering request #{}",
            self.requests
        )
    }

    /// Asks for `n` outputs for `input` and validates the answer.
    ///
    /// # Errors
    /// [`AuditError::External`] when the child cannot be written to, exits, does not
    /// answer within the timeout, or answers with anything but `n` valid outputs; the
    /// child is then killed.
    pub fn request(&mut self, input: &Value, n: usize, kind: OutputKind) -> Result<Outputs> {
        self.requests += 1;
        let mut line = request_line(input, n);
        line.push('\n');
        let written = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush())
                .map_err(|e| e.to_string()),
            None => Err("stdin is closed".into()),
        };
        if let Err(e) = written {
            let what = format!("cannot send request #{}: {e}", self.requests);
            return Err(self.fail(what));
        }
        let queued = self
            .jobs
            .as_ref()
            .is_some_and(|j| j.send((n, kind)).is_ok());
        if !queued {
            let what = self.exited();
            return Err(self.fail(what));
        }
        match self.replies.recv_timeout(self.timeout) {
            Ok(Reply::Parsed(response)) => Ok(note(&mut self.deviation, self.requests, response)),
            Ok(Reply::Eof) | Err(RecvTimeoutError::Disconnected) => {
                let what = self.exited();
                Err(self.fail(what))
            }
            Ok(Reply::Failed(e)) => {
                let what = format!("request #{}: {e}", self.requests);
                Err(self.fail(what))
            }
            Err(RecvTimeoutError::Timeout) => {
                let what = format!(
                    "no answer to request #{} within {:.1}s (timeout)",
                    self.requests,
                    self.timeout.as_secs_f64()
                );
                Err(self.fail(what))
            }
        }
    }

    /// Closes the child's stdin and waits (up to the timeout) for it to exit; kills it
    /// otherwise.
    pub fn finish(mut self) {
        self.stdin = None;
        self.jobs = None;
        let deadline = std::time::Instant::now() + self.timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ExternalMechanism {
    fn drop(&mut self) {
        self.stdin = None;
        self.jobs = None;
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn round_trip_with_a_shell_child() {
        let mut m = ExternalMechanism::start(
            &sh(r#"while read l; do echo '{"outputs":[1,0]}'; done"#),
            Duration::from_secs(10),
        )
        .unwrap();
        for _ in 0..3 {
            let o = m.request(&Value::from(1), 2, OutputKind::Class(2)).unwrap();
            assert_eq!(o, Outputs::Classes(vec![1, 0]));
        }
        m.finish();
    }

    #[test]
    fn callbacks_answer_like_children() {
        let mut m = CallbackMechanism::new(|line: &str| {
            assert_eq!(line, r#"{"input":1,"n":2}"#);
            Ok(r#"{"outputs":[1,0]}"#.to_string())
        });
        let o = m.respond(&Value::from(1), 2, OutputKind::Class(2)).unwrap();
        assert_eq!(o, Outputs::Classes(vec![1, 0]));
        let mut wrong = CallbackMechanism::new(|_: &str| Ok(r#"{"outputs":[2]}"#.to_string()));
        let err = wrong
            .respond(&Value::from(1), 1, OutputKind::Class(2))
            .unwrap_err();
        assert!(err.to_string().contains("request #1: output #0"), "{err}");
        let mut failing = CallbackMechanism::new(|_: &str| Err("boom".to_string()));
        let err = failing
            .respond(&Value::from(1), 1, OutputKind::Class(2))
            .unwrap_err();
        assert!(err.to_string().contains("request #1: boom"), "{err}");
    }

    #[test]
    fn misbehaving_children_are_errors() {
        let t = Duration::from_millis(500);
        for (script, what) in [
            ("read l; exit 3", "closed its stdout"),
            ("read l; sleep 30", "timeout"),
            (r#"read l; echo '{"outputs":[1]}'"#, "wrong count"),
            ("read l; echo 'hello'", "malformed"),
            (r#"read l; printf '\377\n'"#, "UTF-8"),
        ] {
            // Only the hanging child needs the short timeout. The others answer (or exit) at
            // once, but within 0.5 s only if `sh` starts that fast; on a loaded machine a
            // slower start would turn their error into "timeout". A generous timeout costs
            // nothing for them (the error comes as soon as they answer).
            let timeout = if what == "timeout" {
                t
            } else {
                Duration::from_secs(60)
            };
            let mut m = ExternalMechanism::start(&sh(script), timeout).unwrap();
            let err = m
                .request(&Value::from(0), 2, OutputKind::Class(2))
                .unwrap_err()
                .to_string();
            assert!(err.contains(what), "{script}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let err = ExternalMechanism::start(&["/nonexistent/mechanism".into()], t).unwrap_err();
        assert!(err.to_string().contains("cannot start"));
        assert!(ExternalMechanism::start(&[], t).is_err());
    }

    #[test]
    fn deviations_are_kept_across_requests_and_taken_once() {
        // A child whose second response changes the layout the first fixed.
        let mut m = ExternalMechanism::start(
            &sh(r#"read l; echo '{"outputs":[1,0]}'; while read l; do echo '{"outputs":[1, 0]}'; done"#),
            Duration::from_secs(60),
        )
        .unwrap();
        m.request(&Value::from(1), 2, OutputKind::Class(2)).unwrap();
        assert_eq!(m.take_deviation(), None);
        let o = m.request(&Value::from(1), 2, OutputKind::Class(2)).unwrap();
        assert_eq!(o, Outputs::Classes(vec![1, 0]), "the values are still read");
        let d = m.take_deviation().unwrap();
        assert!(
            d.starts_with("request #2: output #1: the bytes between"),
            "{d}"
        );
        assert_eq!(m.take_deviation(), None);
        m.finish();
        // In process: the same checks.
        let mut calls = 0;
        let mut cb = CallbackMechanism::new(move |_: &str| {
            calls += 1;
            Ok(if calls == 1 {
                r#"{"outputs":[[0,3]]}"#.to_string()
            } else {
                r#"{"outputs":[[3,0]]}"#.to_string()
            })
        });
        let set = OutputKind::IndexSet { dim: 4, size: 2 };
        cb.respond(&Value::from(0), 1, set).unwrap();
        assert_eq!(cb.take_deviation(), None);
        cb.respond(&Value::from(0), 1, set).unwrap();
        let d = cb.take_deviation().unwrap();
        assert!(
            d.contains("request #2: output #0: indices sent as [3,0]"),
            "{d}"
        );
    }
}
