//! Progress of large reads and writes on stderr: a bar with bytes, rate and time left on a terminal (indicatif), plain lines every tenth otherwise.
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Totals below this are not worth reporting.
const MIN_TOTAL: u64 = 1 << 30;

/// Where progress goes.
enum Sink {
    /// Nothing (small totals).
    Off,
    /// A redrawn bar on a terminal.
    Bar(ProgressBar),
    /// A line each time another tenth is done, for logs and pipes.
    Lines { shown: AtomicU64 },
}

/// A byte counter over a long read or write.
pub struct Progress {
    label: &'static str,
    total: u64,
    done: AtomicU64,
    start: Instant,
    sink: Sink,
}

impl Progress {
    /// A counter over `total` bytes: a bar when stderr is a terminal, plain lines otherwise, silent for totals under 1 GiB.
    pub fn new(label: &'static str, total: u64) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        Progress::with(label, total, if total < MIN_TOTAL { None } else { Some(terminal) })
    }

    /// A counter with the sink chosen: `None` silent, `Some(true)` the bar, `Some(false)` plain lines.
    pub fn with(label: &'static str, total: u64, terminal: Option<bool>) -> Progress {
        let sink = match terminal {
            None => Sink::Off,
            Some(true) => {
                let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
                let style = ProgressStyle::with_template("{msg} [{bar:32}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta} left").unwrap_or_else(|_| ProgressStyle::default_bar());
                bar.set_style(style.progress_chars("=> "));
                bar.set_message(label);
                Sink::Bar(bar)
            }
            Some(false) => Sink::Lines { shown: AtomicU64::new(0) },
        };
        Progress { label, total, done: AtomicU64::new(0), start: Instant::now(), sink }
    }

    /// Counts `bytes` more.
    pub fn advance(&self, bytes: u64) {
        let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
        match &self.sink {
            Sink::Off => {}
            Sink::Bar(bar) => bar.set_position(done.min(self.total)),
            Sink::Lines { shown } => {
                let tenth = done.min(self.total) * 10 / self.total.max(1);
                if tenth > shown.fetch_max(tenth, Ordering::Relaxed) {
                    eprintln!("{}", self.line(done));
                }
            }
        }
    }

    /// The plain line for `done` bytes: label, percent, bytes and rate.
    fn line(&self, done: u64) -> String {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        format!("{}: {:3}% {:.1} of {:.1} GiB, {:.2} GiB/s", self.label, done.min(self.total) * 100 / self.total.max(1), gib(done), gib(self.total), gib(done) / secs)
    }

    /// Bytes counted so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Ends the bar (the lines need no end).
    pub fn finish(&self) {
        if let Sink::Bar(bar) = &self.sink {
            bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_report_each_tenth_once_with_the_bytes_done() {
        let p = Progress::with("writing", 1000, Some(false));
        for _ in 0..25 {
            p.advance(40);
        }
        assert_eq!(p.done(), 1000);
        let Sink::Lines { shown } = &p.sink else { panic!("plain lines") };
        assert_eq!(shown.load(Ordering::Relaxed), 10, "every tenth reached");
        assert!(p.line(500).starts_with("writing:  50% 0.0 of 0.0 GiB"), "{}", p.line(500));
    }
}
