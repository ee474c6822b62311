//! The checkpoint's files: a sharded or single safetensors directory, memory-mapped or copied (same bytes), its tensors by name, checked against a table of expected tensors.
pub mod progress;
pub mod safetensors;
mod spec;

pub use safetensors::{numel, Dtype, HeaderError};
pub use spec::{scale_name_of, Quant, TensorSpec};

use progress::Progress;
use safetensors::parse_header;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Name of the shard index file.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// Name of a single-file checkpoint.
pub const SINGLE_FILE: &str = "model.safetensors";

/// How shard bytes are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// Memory-mapped (memmap2); pages are read on first touch.
    Mapped,
    /// Read into owned memory.
    Copied,
}

/// Which tensors get the NaN/inf scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueCheck {
    /// No scan.
    Off,
    /// Every tensor.
    All,
    /// Tensors of at most this many bytes (skips the engram tables of the release).
    UpTo(u64),
}

impl Default for ValueCheck {
    /// Every tensor up to 4 GiB: all of the release but its two engram tables.
    fn default() -> ValueCheck {
        ValueCheck::UpTo(4 << 30)
    }
}

/// Why a checkpoint cannot be used; every variant names the file or tensor at fault.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file could not be opened or read.
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// Neither an index nor a single safetensors file.
    #[error("{dir}: no {INDEX_FILE} or {SINGLE_FILE}")]
    NoWeights { dir: String },
    /// The shard index is malformed.
    #[error("{path}: malformed shard index: {problem}")]
    Index { path: String, problem: String },
    /// A shard header is unusable (names the shard and, where it applies, the tensor).
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// Two stored names map to one tensor.
    #[error("tensor `{name}` is stored twice: in {first} and in {second}")]
    Duplicate { name: String, first: String, second: String },
    /// The index places a tensor in a shard whose header lacks it.
    #[error("{INDEX_FILE} places tensor `{name}` in {shard}, whose header does not have it")]
    IndexMismatch { name: String, shard: String },
    /// An expected tensor is absent.
    #[error("missing tensor `{name}` ({dtype} {shape:?}){more}")]
    Missing { name: String, dtype: Dtype, shape: Vec<usize>, more: String },
    /// A tensor has the wrong shape.
    #[error("tensor `{name}` has shape {found:?}, expected {expected:?}")]
    Shape { name: String, expected: Vec<usize>, found: Vec<usize> },
    /// A tensor has the wrong dtype.
    #[error("tensor `{name}` has dtype {found}, expected {expected}")]
    Dtype { name: String, expected: Dtype, found: Dtype },
    /// A tensor the config's layout does not have.
    #[error("unexpected tensor `{name}` in {shard}: not part of this config's layout")]
    Unexpected { name: String, shard: String },
    /// A weight holds NaN or infinity.
    #[error("tensor `{name}` holds a non-finite value (NaN or inf code) at element {index}")]
    NonFinite { name: String, index: usize },
    /// No tensor of that name.
    #[error("no tensor named `{name}` in the checkpoint")]
    NotFound { name: String },
}

/// Owned or mapped shard bytes.
enum Bytes {
    Mapped(memmap2::Mmap),
    Copied(Vec<u8>),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Copied(v) => v,
        }
    }
}

/// One open shard.
struct Shard {
    path: PathBuf,
    bytes: Bytes,
}

/// Where one tensor lives.
#[derive(Debug, Clone)]
struct Entry {
    stored_name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    shard: usize,
    start: usize,
    end: usize,
}

/// A borrowed tensor: dtype, shape and its little-endian bytes.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    /// Canonical name.
    pub name: &'a str,
    /// Storage dtype.
    pub dtype: Dtype,
    /// Storage shape.
    pub shape: &'a [usize],
    /// The stored bytes.
    pub bytes: &'a [u8],
}

impl TensorView<'_> {
    /// The values of a BF16 or F32 tensor as f32 (exact); `None` for other dtypes.
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        match self.dtype {
            Dtype::BF16 => Some(self.bytes.chunks_exact(2).map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)).collect()),
            Dtype::F32 => Some(self.bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()),
            _ => None,
        }
    }
}

/// The canonical (release) spelling of a stored name: HF's `model.`/`lm_head` prefixes and `.weight_scale_inv` accepted.
pub fn canonical_name(stored: &str) -> String {
    let renames = [("model.layers.", "layers."), ("model.embed.", "embed."), ("model.norm.", "norm."), ("lm_head.", "head.")];
    let s = renames
        .iter()
        .find_map(|(from, to)| stored.strip_prefix(from).map(|rest| format!("{to}{rest}")))
        .unwrap_or_else(|| stored.to_string());
    match s.strip_suffix(".weight_scale_inv") {
        Some(base) => format!("{base}.scale"),
        None => s,
    }
}

/// An open checkpoint: every tensor of every shard, by canonical name.
pub struct Checkpoint {
    mode: LoadMode,
    shards: Vec<Shard>,
    entries: BTreeMap<String, Entry>,
}

impl Checkpoint {
    /// Opens `dir` (index + shards, or one `model.safetensors`) and parses every header; checks no config.
    pub fn open(dir: &Path, mode: LoadMode) -> Result<Checkpoint, CheckpointError> {
        let index_path = dir.join(INDEX_FILE);
        let (files, weight_map) = if index_path.exists() {
            let (files, map) = read_index(&index_path)?;
            (files, Some(map))
        } else if dir.join(SINGLE_FILE).exists() {
            (vec![SINGLE_FILE.to_string()], None)
        } else {
            return Err(CheckpointError::NoWeights { dir: dir.display().to_string() });
        };
        let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(f)).collect();
        let mut sizes = Vec::with_capacity(paths.len());
        for p in &paths {
            sizes.push(std::fs::metadata(p).map_err(|source| io_err(p, source))?.len());
        }
        let progress = Progress::new("reading weights", if mode == LoadMode::Copied { sizes.iter().sum() } else { 0 });
        let mut ck = Checkpoint { mode, shards: Vec::new(), entries: BTreeMap::new() };
        for (i, path) in paths.into_iter().enumerate() {
            let bytes = open_bytes(&path, sizes[i], mode, &progress)?;
            let header = parse_header(bytes.as_slice(), sizes[i], &path)?;
            for e in header.entries {
                let name = canonical_name(&e.name);
                if let Some(prev) = ck.entries.get(&name) {
                    let first = ck.shards[prev.shard].path.display().to_string();
                    return Err(CheckpointError::Duplicate { name, first, second: path.display().to_string() });
                }
                let (start, end) = ((header.data_start + e.start) as usize, (header.data_start + e.end) as usize);
                ck.entries.insert(name, Entry { stored_name: e.name, dtype: e.dtype, shape: e.shape, shard: i, start, end });
            }
            ck.shards.push(Shard { path, bytes });
        }
        progress.finish();
        if let Some(map) = weight_map {
            for (stored, file) in map {
                let in_shard = ck.entries.get(&canonical_name(&stored)).is_some_and(|e| ck.shards[e.shard].path == dir.join(&file));
                if !in_shard {
                    return Err(CheckpointError::IndexMismatch { name: stored, shard: file });
                }
            }
        }
        Ok(ck)
    }

    /// How the shard bytes are held.
    pub fn mode(&self) -> LoadMode {
        self.mode
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the checkpoint holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Canonical names of all tensors, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The tensor called `name` (either spelling), if present.
    pub fn get(&self, name: &str) -> Option<TensorView<'_>> {
        let (key, e) = self.entries.get_key_value(&canonical_name(name))?;
        let bytes = &self.shards[e.shard].bytes.as_slice()[e.start..e.end];
        Some(TensorView { name: key, dtype: e.dtype, shape: &e.shape, bytes })
    }

    /// The tensor called `name`, or a `NotFound` error naming it.
    pub fn tensor(&self, name: &str) -> Result<TensorView<'_>, CheckpointError> {
        self.get(name).ok_or_else(|| CheckpointError::NotFound { name: name.to_string() })
    }

    /// Checks that the tensors are exactly `expected` (a config's table): all present, with the expected dtypes and shapes, nothing extra.
    pub fn check_layout(&self, expected: &[TensorSpec]) -> Result<(), CheckpointError> {
        let missing: Vec<_> = expected.iter().filter(|s| !self.entries.contains_key(&s.name)).collect();
        if let Some(first) = missing.first() {
            let more = if missing.len() > 1 { format!(" and {} more", missing.len() - 1) } else { String::new() };
            return Err(CheckpointError::Missing { name: first.name.clone(), dtype: first.dtype, shape: first.shape.clone(), more });
        }
        for s in expected {
            let e = &self.entries[&s.name];
            if e.dtype != s.dtype {
                return Err(CheckpointError::Dtype { name: s.name.clone(), expected: s.dtype, found: e.dtype });
            }
            if e.shape != s.shape {
                return Err(CheckpointError::Shape { name: s.name.clone(), expected: s.shape.clone(), found: e.shape.clone() });
            }
        }
        if expected.len() != self.entries.len() {
            let known: std::collections::HashSet<&str> = expected.iter().map(|s| s.name.as_str()).collect();
            if let Some((_, e)) = self.entries.iter().find(|(n, _)| !known.contains(n.as_str())) {
                let shard = self.shards[e.shard].path.display().to_string();
                return Err(CheckpointError::Unexpected { name: e.stored_name.clone(), shard });
            }
        }
        Ok(())
    }

    /// Scans weights for NaN/inf: F32 and BF16 exponent all-ones, e4m3 codes 0x7f/0xff, e8m0 255.
    pub fn check_values(&self, scope: ValueCheck) -> Result<(), CheckpointError> {
        let limit = match scope {
            ValueCheck::Off => return Ok(()),
            ValueCheck::All => u64::MAX,
            ValueCheck::UpTo(n) => n,
        };
        let work: Vec<TensorView> = self.names().filter_map(|n| self.get(n)).filter(|v| (v.bytes.len() as u64) <= limit).collect();
        let progress = Progress::new("checking weights", work.iter().map(|v| v.bytes.len() as u64).sum());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        let mut found: Vec<(usize, usize)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut bad = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(v) = work.get(i) else { return bad };
                            if let Some(at) = first_non_finite(v.dtype, v.bytes) {
                                bad.push((i, at));
                            }
                            progress.advance(v.bytes.len() as u64);
                        }
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
        });
        progress.finish();
        found.sort_unstable();
        match found.first() {
            Some(&(i, index)) => Err(CheckpointError::NonFinite { name: work[i].name.to_string(), index }),
            None => Ok(()),
        }
    }
}

/// Index of the first non-finite element, by dtype.
fn first_non_finite(dtype: Dtype, b: &[u8]) -> Option<usize> {
    match dtype {
        Dtype::F32 => b.chunks_exact(4).position(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) & 0x7f80_0000 == 0x7f80_0000),
        Dtype::BF16 => b.chunks_exact(2).position(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7f80 == 0x7f80),
        Dtype::F8E4M3 => b.iter().position(|&x| x & 0x7f == 0x7f),
        Dtype::F8E8M0 => b.iter().position(|&x| x == 0xff),
        Dtype::I8 => None,
    }
}

/// An `Io` error naming `path`.
fn io_err(path: &Path, source: std::io::Error) -> CheckpointError {
    CheckpointError::Io { path: path.display().to_string(), source }
}

/// Reads the shard index: the shard files (sorted, unique) and the stored-name to file map.
fn read_index(path: &Path) -> Result<(Vec<String>, BTreeMap<String, String>), CheckpointError> {
    let text = std::fs::read_to_string(path).map_err(|e| io_err(path, e))?;
    let bad = |problem: String| CheckpointError::Index { path: path.display().to_string(), problem };
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let map = v.get("weight_map").and_then(Value::as_object).ok_or_else(|| bad("no `weight_map` object".into()))?;
    let mut out = BTreeMap::new();
    for (name, file) in map {
        let f = file.as_str().ok_or_else(|| bad(format!("shard of `{name}` is not a string")))?;
        if f.contains('/') || f.contains('\\') || f == ".." {
            return Err(bad(format!("shard name `{f}` of `{name}` is not a plain file name")));
        }
        out.insert(name.clone(), f.to_string());
    }
    let mut files: Vec<String> = out.values().cloned().collect();
    files.sort();
    files.dedup();
    Ok((files, out))
}

/// Maps or reads a whole shard.
fn open_bytes(path: &Path, len: u64, mode: LoadMode, progress: &Progress) -> Result<Bytes, CheckpointError> {
    let mut file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    if len < 8 {
        return Ok(Bytes::Copied(std::fs::read(path).map_err(|e| io_err(path, e))?));
    }
    match mode {
        LoadMode::Mapped => {
            // SAFETY: the map is read-only; a checkpoint modified while served is outside the contract.
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_err(path, e))?;
            Ok(Bytes::Mapped(map))
        }
        LoadMode::Copied => {
            let n = usize::try_from(len).map_err(|_| io_err(path, std::io::ErrorKind::OutOfMemory.into()))?;
            let mut buf = vec![0u8; n];
            let mut at = 0;
            while at < n {
                let step = (n - at).min(64 << 20);
                file.read_exact(&mut buf[at..at + step]).map_err(|e| io_err(path, e))?;
                progress.advance(step as u64);
                at += step;
            }
            Ok(Bytes::Copied(buf))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_spellings_map_to_release_names() {
        assert_eq!(canonical_name("model.layers.3.attn.wq_a.weight_scale_inv"), "layers.3.attn.wq_a.scale");
        assert_eq!(canonical_name("model.embed.weight"), "embed.weight");
        assert_eq!(canonical_name("model.norm.weight"), "norm.weight");
        assert_eq!(canonical_name("lm_head.weight"), "head.weight");
        assert_eq!(canonical_name("mtp.0.main_norm.weight"), "mtp.0.main_norm.weight");
        assert_eq!(canonical_name("layers.0.attn_norm.weight"), "layers.0.attn_norm.weight");
    }

    #[test]
    fn non_finite_codes_are_found_per_dtype() {
        assert_eq!(first_non_finite(Dtype::F8E4M3, &[0x7e, 0xfe, 0xff]), Some(2));
        assert_eq!(first_non_finite(Dtype::F8E8M0, &[0xfe, 0xff]), Some(1));
        assert_eq!(first_non_finite(Dtype::BF16, &[0x80, 0x3f, 0x80, 0xff]), Some(1));
        assert_eq!(first_non_finite(Dtype::F32, &f32::MAX.to_le_bytes()), None);
        assert_eq!(first_non_finite(Dtype::F32, &f32::NAN.to_le_bytes()), Some(0));
        assert_eq!(first_non_finite(Dtype::I8, &[0xff]), None);
    }
}
