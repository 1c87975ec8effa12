//! Talking to an external mechanism: a child process that answers newline-delimited JSON
//! requests on stdin/stdout (see [`crate::protocol`] and `docs/AUDIT_PROTOCOL.md`).
//!
//! Robustness: the child's stdout is read by a dedicated thread, and every response is
//! awaited with a timeout, so a child that hangs, exits, floods or garbles its output ends
//! the audit with a one-line [`AuditError::External`] — never a hang or a panic. The child
//! is killed and reaped whenever the runner is dropped.

use std::{
    io::{BufRead, BufReader, Read, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc::{self, Receiver, RecvTimeoutError},
    time::Duration,
};

use serde_json::Value;

use crate::{
    error::{AuditError, Result},
    protocol::{MAX_LINE_BYTES, OutputKind, Outputs, parse_response, request_line},
};

#[derive(Debug)]
enum Line {
    Text(String),
    Eof,
    Failed(String),
}

/// A running external mechanism.
#[derive(Debug)]
pub struct ExternalMechanism {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    timeout: Duration,
    command: String,
    requests: u64,
}

fn read_line_capped<R: BufRead>(r: &mut R) -> Line {
    let mut buf = Vec::new();
    let limit = MAX_LINE_BYTES as u64 + 1;
    match r.by_ref().take(limit).read_until(b'\n', &mut buf) {
        Ok(0) => Line::Eof,
        Ok(_) => {
            if buf.last() == Some(&b'\n') {
                buf.pop();
                if buf.last() == Some(&b'\r') {
                    buf.pop();
                }
            } else if buf.len() as u64 >= limit {
                return Line::Failed(format!("response line longer than {MAX_LINE_BYTES} bytes"));
            }
            match String::from_utf8(buf) {
                Ok(s) => Line::Text(s),
                Err(_) => Line::Failed("response is not valid UTF-8".into()),
            }
        }
        Err(e) => Line::Failed(format!("cannot read the child's stdout: {e}")),
    }
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
        let (tx, rx) = mpsc::channel::<Line>();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                loop {
                    let line = read_line_capped(&mut reader);
                    let stop = !matches!(line, Line::Text(_));
                    if tx.send(line).is_err() || stop {
                        break;
                    }
                }
            });
        }
        Ok(Self {
            child,
            stdin,
            lines: rx,
            timeout,
            command: command.join(" ").escape_debug().to_string(),
            requests: 0,
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
        match self.lines.recv_timeout(self.timeout) {
            Ok(Line::Text(text)) => match parse_response(&text, n, kind) {
                Ok(outputs) => Ok(outputs),
                Err(e) => {
                    let what = format!("request #{}: {e}", self.requests);
                    Err(self.fail(what))
                }
            },
            Ok(Line::Eof) | Err(RecvTimeoutError::Disconnected) => {
                let what = self.exited();
                Err(self.fail(what))
            }
            Ok(Line::Failed(e)) => {
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
    fn misbehaving_children_are_errors() {
        let t = Duration::from_millis(500);
        for (script, what) in [
            ("read l; exit 3", "closed its stdout"),
            ("read l; sleep 30", "timeout"),
            (r#"read l; echo '{"outputs":[1]}'"#, "wrong count"),
            ("read l; echo 'hello'", "malformed"),
            (r#"read l; printf '\377\n'"#, "UTF-8"),
        ] {
            let mut m = ExternalMechanism::start(&sh(script), t).unwrap();
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
}
