//! `FreeHookAllocator` never unwinds out of `GlobalAlloc::dealloc` (which would be
//! undefined behaviour): a hook that panics aborts the process, after one line on stderr.
//!
//! The usual re-exec pattern: each parent test runs this test binary again as a child
//! (only [`child_frees_a_block`], with [`CHILD_ENV`] set), whose allocator's hook panics
//! on the child's marked block when asked to. The parent checks how the child ended: by
//! `abort` (SIGABRT on Unix) with the allocator's message, not by a panic's exit code
//! 101 or a clean exit; and, as the control, that the same child with a quiet hook frees
//! the same block and exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::cell::Cell;
use std::process::{Command, Output};

/// Set in the child's environment: `panic` (the hook panics on the marked block) or
/// `quiet` (it does not).
const CHILD_ENV: &str = "FL_PAILLIER_FREE_HOOK_ABORT_CHILD";

/// The marked block: 64 bytes of this value.
const MARK: u8 = 0x5a;

/// What the child prints once the free returned.
const SURVIVED: &str = "child: the free returned";

/// The line the allocator writes before aborting.
const ALLOCATOR_MESSAGE: &str = "FreeHookAllocator: the free hook panicked; aborting";

thread_local! {
    /// Whether this thread's next free of a marked block panics in the hook.
    static PANIC_ON_MARKED_FREE: Cell<bool> = const { Cell::new(false) };
}

/// The allocator's hook: panics on a marked block if this thread asked for it (once).
fn hook(block: &[u8]) {
    let armed = PANIC_ON_MARKED_FREE.try_with(|p| p.get()).unwrap_or(false);
    if armed && block.len() == 64 && block.iter().all(|&b| b == MARK) {
        let _ = PANIC_ON_MARKED_FREE.try_with(|p| p.set(false));
        panic!("the test's free hook panics on the marked block");
    }
}

#[global_allocator]
static ALLOCATOR: fl_paillier::FreeHookAllocator = fl_paillier::FreeHookAllocator::new(hook);

/// The child's body (a no-op in the parent): frees the marked block, with the hook set to
/// panic on it if [`CHILD_ENV`] is `panic`.
#[test]
fn child_frees_a_block() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    if mode == "probe" {
        println!("{PROBED}");
        return;
    }
    let block = std::hint::black_box(vec![MARK; 64]);
    PANIC_ON_MARKED_FREE.with(|p| p.set(mode == "panic"));
    drop(block);
    println!("{SURVIVED}");
}

/// What the child prints in `probe` mode (it frees nothing of interest).
const PROBED: &str = "child: probe";

/// Runs this binary as a child in `mode`: its output, stdout, stderr and a report of all
/// three for assertion messages; `None` (the test is skipped, with a line on stdout) where
/// the host cannot run this binary again, which a probe child tells first: a cross-compiled
/// binary run under qemu-user (`.ci/run`'s aarch64 step) gets ENOEXEC when it executes
/// itself without binfmt_misc, or exit status 127 with binfmt_misc but no `-L` for the
/// guest's loader. On x86-64 (run natively) the probe must succeed, so both tests run in full.
fn run_child(mode: &str) -> Option<(Output, String, String, String)> {
    match spawn_child("probe") {
        Ok(probe)
            if probe.status.success()
                && String::from_utf8_lossy(&probe.stdout).contains(PROBED) => {}
        // On x86-64 the tests run natively (CI's host): a failed probe is a failure there.
        other if cfg!(target_arch = "x86_64") => panic!("the probe child failed: {other:?}"),
        other => {
            println!("skipped: the host cannot run this test binary again ({other:?})");
            return None;
        }
    }
    let out = spawn_child(mode).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = format!(
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    Some((out, stdout, stderr, report))
}

fn spawn_child(mode: &str) -> std::io::Result<Output> {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_frees_a_block",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, mode)
        .output()
}

#[test]
fn a_panicking_free_hook_aborts_the_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let Some((out, stdout, stderr, report)) = run_child("panic") else {
        return;
    };
    assert!(
        stderr.contains("the test's free hook panics on the marked block"),
        "the hook did not run or did not panic: {report}"
    );
    assert!(!out.status.success(), "the child survived: {report}");
    assert!(!stdout.contains(SURVIVED), "the free returned: {report}");
    assert_ne!(
        out.status.code(),
        Some(101),
        "the panic unwound out of dealloc into the test harness: {report}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        const SIGABRT: i32 = 6;
        assert_eq!(out.status.signal(), Some(SIGABRT), "not an abort: {report}");
    }
    assert!(
        stderr.contains(ALLOCATOR_MESSAGE),
        "the allocator's line is missing: {report}"
    );
}

#[test]
fn a_quiet_free_hook_lets_the_child_exit_normally() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let Some((out, stdout, stderr, report)) = run_child("quiet") else {
        return;
    };
    assert!(out.status.success(), "the control child failed: {report}");
    assert!(
        stdout.contains(SURVIVED),
        "the free did not return: {report}"
    );
    assert!(!stderr.contains(ALLOCATOR_MESSAGE), "{report}");
}
