//! A plain progress line on stderr for large loads, shown only when stderr is a terminal.
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

/// Totals below this are not worth a progress line.
const MIN_TOTAL: u64 = 1 << 30;

/// A byte counter that redraws `label: NN%` with `\r` as whole percents pass.
pub struct Progress {
    label: &'static str,
    total: u64,
    done: AtomicU64,
    shown: AtomicU64,
    enabled: bool,
}

impl Progress {
    /// A counter over `total` bytes; silent unless stderr is a terminal and the total is large.
    pub fn new(label: &'static str, total: u64) -> Progress {
        let enabled = total >= MIN_TOTAL && std::io::stderr().is_terminal();
        Progress { label, total, done: AtomicU64::new(0), shown: AtomicU64::new(u64::MAX), enabled }
    }

    /// Counts `bytes` more and redraws when the percentage changed.
    pub fn advance(&self, bytes: u64) {
        if !self.enabled {
            return;
        }
        let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let pct = done.min(self.total) * 100 / self.total.max(1);
        if self.shown.swap(pct, Ordering::Relaxed) != pct {
            eprint!("\r{}: {pct:3}% of {:.1} GiB", self.label, self.total as f64 / (1u64 << 30) as f64);
        }
    }

    /// Ends the line.
    pub fn finish(&self) {
        if self.enabled {
            eprintln!();
        }
    }
}
