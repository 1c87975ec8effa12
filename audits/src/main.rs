//! `fl-audit`: the auditors' command-line tool.
//!
//! The conformance suites land with issue 8; until then every command reports that plainly
//! and exits with status 2 (usage error), so that nobody mistakes an empty run for a pass.

use std::process::ExitCode;

const USAGE: &str = "usage: fl-audit <run|list|epsilon|plan|external> [OPTIONS]";

fn main() -> ExitCode {
    let command = std::env::args().nth(1);
    match command.as_deref() {
        None | Some("-h" | "--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("fl-audit: `{other}`: the conformance suites are not built yet\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
