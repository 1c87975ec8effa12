//! `fl-audit`: the auditors' command-line tool (see the crate README).

fn main() -> std::process::ExitCode {
    fl_audit::cli::main()
}
