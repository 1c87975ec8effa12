//! A small progress bar on stderr, hand-written (one atomic counter and a redraw thread):
//! the needs are a single bar with a rate and an ETA, which does not justify a dependency.
//! On a terminal it redraws in place ten times a second; otherwise (CI logs) it prints a
//! line at every 10 %.

use std::{
    io::{IsTerminal, Write},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// A shared counter of work done; cheap to clone into worker threads.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    done: Arc<AtomicU64>,
}

impl Progress {
    /// Adds `n` units of work done.
    pub fn add(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    /// Units done so far.
    #[must_use]
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
}

/// The bar drawing [`Progress`] on stderr until [`ProgressBar::finish`].
#[derive(Debug)]
pub struct ProgressBar {
    progress: Progress,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

fn line(label: &str, done: u64, total: u64, start: Instant) -> String {
    let frac = if total == 0 {
        1.0
    } else {
        (done as f64 / total as f64).min(1.0)
    };
    let width = 30usize;
    let filled = (frac * width as f64).round() as usize;
    let secs = start.elapsed().as_secs_f64();
    let eta = if frac > 0.0 && frac < 1.0 {
        format!(" eta {:.0}s", secs * (1.0 - frac) / frac)
    } else {
        String::new()
    };
    format!(
        "{label} [{}{}] {:5.1}% {:.1}M samples {:.0}s{eta}",
        "#".repeat(filled),
        "-".repeat(width - filled),
        frac * 100.0,
        done as f64 / 1e6,
        secs
    )
}

impl ProgressBar {
    /// Starts drawing a bar for `total` units; `enabled = false` draws nothing.
    #[must_use]
    pub fn start(label: &str, total: u64, enabled: bool) -> Self {
        let progress = Progress::default();
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled {
            return Self {
                progress,
                stop,
                handle: None,
            };
        }
        let p = progress.clone();
        let s = Arc::clone(&stop);
        let label = label.to_string();
        let tty = std::io::stderr().is_terminal();
        let handle = std::thread::spawn(move || {
            let start = Instant::now();
            let mut last_decile = 0u64;
            loop {
                let finished = s.load(Ordering::Relaxed);
                let done = p.done();
                let mut err = std::io::stderr().lock();
                if tty {
                    let _ = write!(err, "\r{}\x1b[K", line(&label, done, total, start));
                    if finished {
                        let _ = writeln!(err);
                    }
                } else {
                    let decile = done.saturating_mul(10).checked_div(total).unwrap_or(10);
                    if decile > last_decile || finished {
                        last_decile = decile;
                        let _ = writeln!(err, "{}", line(&label, done, total, start));
                    }
                }
                let _ = err.flush();
                drop(err);
                if finished {
                    break;
                }
                std::thread::sleep(Duration::from_millis(if tty { 100 } else { 250 }));
            }
        });
        Self {
            progress,
            stop,
            handle: Some(handle),
        }
    }

    /// The counter workers add to.
    #[must_use]
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }

    /// Draws the final state and stops the redraw thread.
    pub fn finish(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for ProgressBar {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_fraction_and_counts() {
        let l = line("run", 50, 100, Instant::now());
        assert!(l.contains(" 50.0%"), "{l}");
        assert!(l.contains("###############---------------"), "{l}");
        assert!(line("run", 0, 0, Instant::now()).contains("100.0%"));
    }

    #[test]
    fn counter_is_shared() {
        let bar = ProgressBar::start("t", 10, false);
        let p = bar.progress();
        p.add(3);
        bar.progress().add(4);
        assert_eq!(p.done(), 7);
        bar.finish();
    }
}
