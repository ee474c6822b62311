//! When a checkpoint's values are checked: at load, or on first use in the pass that reads each tensor, with the engram tables sampled or scanned whole.
use super::{canonical, CanonicalSummary, Checked, Checkpoint, CheckpointError, Entry};
use super::progress::Progress;

/// Which tensors get the NaN/inf scan and are made canonical, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueCheck {
    /// No scan at load; tensors read through [`Checkpoint::verified`] are still scanned on first use.
    Off,
    /// Every tensor, at load.
    All,
    /// Tensors of at most this many bytes, at load.
    UpTo(u64),
    /// Each tensor on first use, in the pass that reads it (the GPU's upload); the host-resident engram tables at load, sampled or in full.
    OnUse(Tables),
}

/// How the engram tables (read on the host, row by row, each row checked as it is read) are scanned at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    /// One row in [`SAMPLE_STRIDE`] of tables above [`SAMPLE_ABOVE`] bytes; smaller tables in full.
    Sampled,
    /// Every row.
    Full,
}

/// Tables above this many bytes are sampled.
pub const SAMPLE_ABOVE: u64 = 64 << 20;
/// One row in this many is scanned in a sampled table.
pub const SAMPLE_STRIDE: usize = 1024;

impl Default for ValueCheck {
    /// Every tensor on first use, the engram tables sampled.
    fn default() -> ValueCheck {
        ValueCheck::OnUse(Tables::Sampled)
    }
}

/// Whether `name` is an engram table or its scales (read on the host by every executor).
pub fn is_engram_table(name: &str) -> bool {
    name.ends_with(".engram.embed.weight") || name.ends_with(".engram.embed.scale")
}

impl Checkpoint {
    /// Scans weights for NaN/inf (F32 and BF16 exponent all-ones, e4m3 codes 0x7f/0xff, e8m0 255) and makes them canonical in the same pass (see [`canonical`]), on up to 8 threads; returns what this call changed. `OnUse` scans only the engram tables here.
    pub fn check_values(&mut self, scope: ValueCheck) -> Result<CanonicalSummary, CheckpointError> {
        let pick = |name: &str, e: &Entry| match scope {
            ValueCheck::Off => false,
            ValueCheck::All => true,
            ValueCheck::UpTo(n) => (e.end - e.start) as u64 <= n,
            ValueCheck::OnUse(_) => is_engram_table(name),
        };
        let sample = |e: &Entry| matches!(scope, ValueCheck::OnUse(Tables::Sampled)) && (e.end - e.start) as u64 > SAMPLE_ABOVE;
        let before = self.canonical();
        let work: Vec<(&String, &Entry)> = self.entries.iter().filter(|(n, e)| pick(n, e) && e.checked.get().is_none()).collect();
        let progress = Progress::new("checking weights", work.iter().map(|(_, e)| if sample(e) { 0 } else { (e.end - e.start) as u64 }).sum());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        let mut bad: Vec<(String, usize)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut bad = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&(name, e)) = work.get(i) else { return bad };
                            let found = if sample(e) { self.sample_rows(e) } else {
                                progress.advance((e.end - e.start) as u64);
                                match self.check_entry(name, e) { Checked::Bad(at) => Some(*at), _ => None }
                            };
                            bad.extend(found.map(|at| (name.clone(), at)));
                        }
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
        });
        progress.finish();
        bad.sort();
        if let Some((name, index)) = bad.into_iter().next() {
            return Err(CheckpointError::NonFinite { name, index });
        }
        let now = self.canonical();
        Ok(CanonicalSummary { tensors: now.tensors.into_iter().filter(|t| !before.tensors.contains(t)).collect() })
    }

    /// Scans one row in [`SAMPLE_STRIDE`] of a row-scaled table (its scales in full): the first non-finite element found; nothing is patched (rows are checked as they are read).
    fn sample_rows(&self, e: &Entry) -> Option<usize> {
        let bytes = self.stored(e);
        let [rows, cols] = e.shape[..] else { return None };
        let row_bytes = bytes.len() / rows.max(1);
        let mut read = 0u64;
        let mut found = None;
        for r in (0..rows).step_by(SAMPLE_STRIDE) {
            let row = &bytes[r * row_bytes..(r + 1) * row_bytes];
            read += row.len() as u64;
            if let canonical::Scan::NonFinite(at) = canonical::scan(e.dtype, row, None) {
                found = Some(r * cols + at);
                break;
            }
        }
        self.read.fetch_add(read, std::sync::atomic::Ordering::Relaxed);
        self.sampled.fetch_add(read, std::sync::atomic::Ordering::Relaxed);
        found
    }
}
