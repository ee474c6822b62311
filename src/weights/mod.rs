//! The checkpoint's files: a sharded or single safetensors directory, memory-mapped or copied (same bytes), its tensors by name, checked against a table of expected tensors, with canonical values served in place of the stored ones.
pub mod canonical;
pub mod progress;
pub mod safetensors;
mod spec;
mod values;

pub use canonical::{CanonicalSummary, Changes};
pub use safetensors::{numel, Dtype, HeaderError};
pub use spec::{scale_name_of, Quant, TensorSpec};
pub use values::{is_engram_table, Tables, ValueCheck, SAMPLE_ABOVE, SAMPLE_STRIDE};

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
#[derive(Debug)]
struct Entry {
    stored_name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    shard: usize,
    start: usize,
    end: usize,
    checked: std::sync::OnceLock<Checked>,
}

/// What the value scan found in one tensor.
#[derive(Debug)]
enum Checked {
    /// Finite and canonical as stored.
    Clean,
    /// Finite; served from these canonical bytes.
    Patched(Vec<u8>),
    /// Element at this index is NaN or infinite.
    Bad(usize),
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

/// An open checkpoint: every tensor of every shard, by canonical name; tensors made canonical are served from owned bytes.
pub struct Checkpoint {
    mode: LoadMode,
    shards: Vec<Shard>,
    entries: BTreeMap<String, Entry>,
    canonical: std::sync::Mutex<CanonicalSummary>,
    read: std::sync::atomic::AtomicU64,
    sampled: std::sync::atomic::AtomicU64,
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
        let mut ck = Checkpoint { mode, shards: Vec::new(), entries: BTreeMap::new(), canonical: Default::default(), read: Default::default(), sampled: Default::default() };
        for (i, path) in paths.into_iter().enumerate() {
            let bytes = open_bytes(&path, sizes[i], mode, &progress)?;
            let header = parse_header(bytes.as_slice(), &path)?;
            for e in header.entries {
                let name = canonical_name(&e.name);
                if let Some(prev) = ck.entries.get(&name) {
                    // both spellings of one tensor may sit in the shard being read
                    let first = ck.shards.get(prev.shard).map_or(&path, |s| &s.path).display().to_string();
                    return Err(CheckpointError::Duplicate { name, first, second: path.display().to_string() });
                }
                let (start, end) = ((header.data_start + e.start) as usize, (header.data_start + e.end) as usize);
                ck.entries.insert(name, Entry { stored_name: e.name, dtype: e.dtype, shape: e.shape, shard: i, start, end, checked: Default::default() });
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

    /// The tensor called `name` (either spelling), if present: its canonical bytes where the load changed them, else the stored ones.
    pub fn get(&self, name: &str) -> Option<TensorView<'_>> {
        let (key, e) = self.entries.get_key_value(&canonical_name(name))?;
        let bytes = match e.checked.get() {
            Some(Checked::Patched(b)) => &b[..],
            _ => self.stored(e),
        };
        Some(TensorView { name: key, dtype: e.dtype, shape: &e.shape, bytes })
    }

    /// The tensor called `name` with its values scanned (on this first read unless a scan ran before): canonical bytes, or a `NonFinite` error naming it.
    pub fn verified(&self, name: &str) -> Result<TensorView<'_>, CheckpointError> {
        let (key, e) = self.entries.get_key_value(&canonical_name(name)).ok_or_else(|| CheckpointError::NotFound { name: name.to_string() })?;
        if let Checked::Bad(index) = self.check_entry(key, e) {
            return Err(CheckpointError::NonFinite { name: key.clone(), index: *index });
        }
        self.tensor(key)
    }

    /// What the scans so far changed to make the values canonical.
    pub fn canonical(&self) -> CanonicalSummary {
        self.canonical.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether `name` is served from canonical bytes that differ from the stored ones.
    pub fn is_patched(&self, name: &str) -> bool {
        self.entries.get(&canonical_name(name)).is_some_and(|e| matches!(e.checked.get(), Some(Checked::Patched(_))))
    }

    /// Bytes the value scans have read (each tensor once, sampled tables by their sampled rows).
    pub fn bytes_read(&self) -> u64 {
        self.read.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes of the engram tables read by a sampled scan (counted in [`Checkpoint::bytes_read`] too).
    pub fn bytes_sampled(&self) -> u64 {
        self.sampled.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Total stored bytes of every tensor.
    pub fn payload_bytes(&self) -> u64 {
        self.entries.values().map(|e| (e.end - e.start) as u64).sum()
    }

    /// The stored bytes of an entry.
    fn stored(&self, e: &Entry) -> &[u8] {
        &self.shards[e.shard].bytes.as_slice()[e.start..e.end]
    }

    /// The scan of one entry, run on its first call.
    fn check_entry<'a>(&self, name: &str, e: &'a Entry) -> &'a Checked {
        e.checked.get_or_init(|| {
            let v = TensorView { name, dtype: e.dtype, shape: &e.shape, bytes: self.stored(e) };
            self.read.fetch_add(v.bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
            match canonical::scan(v.dtype, v.bytes, self.blocks_of(&v)) {
                canonical::Scan::Canonical => Checked::Clean,
                canonical::Scan::Patched(changes, bytes) => {
                    let mut c = self.canonical.lock().unwrap_or_else(|p| p.into_inner());
                    c.tensors.push((name.to_string(), changes));
                    c.tensors.sort_by(|a, b| a.0.cmp(&b.0));
                    Checked::Patched(bytes)
                }
                canonical::Scan::NonFinite(at) => Checked::Bad(at),
            }
        })
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

    /// The block layout and scale bytes of a quantized weight (its `.scale` tensor present with a fitting shape).
    fn blocks_of(&self, v: &TensorView<'_>) -> Option<(canonical::Blocks, &[u8])> {
        if !matches!(v.dtype, Dtype::F8E4M3 | Dtype::I8) {
            return None;
        }
        let scale = self.get(&scale_name_of(v.name)).filter(|s| s.dtype == Dtype::F8E8M0 && s.name != v.name)?;
        Some((canonical::Blocks::of(v.dtype, v.shape, scale.shape)?, scale.bytes))
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
    use crate::weights::canonical::{FP4_BLOCK_FLOOR, FP8_BLOCK_FLOOR};

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
        let at = |dtype, b: &[u8]| match canonical::scan(dtype, b, None) {
            canonical::Scan::NonFinite(i) => Some(i),
            _ => None,
        };
        assert_eq!(at(Dtype::F8E4M3, &[0x7e, 0xfe, 0xff]), Some(2));
        assert_eq!(at(Dtype::F8E8M0, &[0xfe, 0xff]), Some(1));
        assert_eq!(at(Dtype::BF16, &[0x80, 0x3f, 0x80, 0xff]), Some(1));
        assert_eq!(at(Dtype::F32, &f32::MAX.to_le_bytes()), None);
        assert_eq!(at(Dtype::F32, &f32::NAN.to_le_bytes()), Some(0));
        assert_eq!(at(Dtype::I8, &[0xff]), None);
    }

    /// A single-file checkpoint in a fresh temp dir: a BF16, an F32, an fp8 and an fp4 weight with scales; `plant` adds subnormals and a tiny-scale block.
    fn small_checkpoint(tag: &str, plant: bool) -> (PathBuf, Vec<u8>) {
        let dir = std::env::temp_dir().join(format!("lockstep-weights-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut s = 0x5eedu64;
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let mut a: Vec<u16> = (0..32).map(|_| (next() as u16 & 0x807f) | ((1 + next() % 250) as u16) << 7).collect();
        let mut want = a.clone();
        let w: Vec<u8> = (0..64 * 32).map(|_| (next() % 0x7e) as u8 | 1).collect();
        let b: Vec<u8> = (0..16).flat_map(|i| (i as f32 * 0.37 - 2.0).to_le_bytes()).collect();
        let x: Vec<u8> = (0..2 * 16).map(|_| next() as u8).collect();
        if plant {
            for (i, code) in [(1usize, 0x0003u16), (17, 0x8001), (30, 0x007f)] {
                a[i] = code;
                want[i] = code & 0x8000;
            }
        }
        let le = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let tensors = vec![
            ("a.weight".to_string(), Dtype::BF16, vec![4, 8], le(&a)),
            ("b".to_string(), Dtype::F32, vec![16], b),
            ("w.weight".to_string(), Dtype::F8E4M3, vec![64, 32], w),
            ("w.scale".to_string(), Dtype::F8E8M0, vec![2, 1], vec![100, if plant { FP8_BLOCK_FLOOR - 1 } else { FP8_BLOCK_FLOOR }]),
            ("x.weight".to_string(), Dtype::I8, vec![2, 16], x),
            ("x.scale".to_string(), Dtype::F8E8M0, vec![2, 1], vec![FP4_BLOCK_FLOOR, 90]),
        ];
        safetensors::write_file(&dir.join(SINGLE_FILE), &tensors).expect("write");
        (dir, le(&want))
    }

    #[test]
    fn check_values_serves_canonical_bytes_from_an_overlay_and_counts_the_changes() {
        let (dir, want_a) = small_checkpoint("planted", true);
        let mut ck = Checkpoint::open(&dir, LoadMode::Mapped).expect("open");
        let stored_w = ck.tensor("w.weight").expect("w").bytes.to_vec();
        let first = ck.check_values(ValueCheck::UpTo(64)).expect("finite");
        assert_eq!(first.tensors, vec![("a.weight".to_string(), Changes { flushed: 3, blocks_zeroed: 0 })], "the scope leaves the 2048-byte weight");
        let all = ck.check_values(ValueCheck::All).expect("finite");
        assert_eq!(all.tensors, vec![("w.weight".to_string(), Changes { flushed: 0, blocks_zeroed: 1 })], "what is canonical already is not patched twice");
        assert_eq!((ck.canonical().tensors.len(), ck.canonical().flushed(), ck.canonical().blocks_zeroed()), (2, 3, 1));
        assert_eq!(ck.tensor("a.weight").expect("a").bytes, &want_a[..]);
        let w = ck.tensor("w.weight").expect("w").bytes;
        assert!(w[..32 * 32] == stored_w[..32 * 32] && w[32 * 32..].iter().all(|&c| c == 0), "only the block of scale code below the floor is zeroed");
        assert!(ck.is_patched("a.weight") && ck.is_patched("w.weight") && !ck.is_patched("b") && !ck.is_patched("x.weight"));
        assert_eq!(ck.bytes_read(), ck.payload_bytes());
        let text = ck.canonical().to_string();
        assert!(text.contains("2 tensors changed, 3 subnormal values flushed to zero, 1 quantized blocks"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_canonical_checkpoint_gets_no_overlay_and_its_views_are_the_mapped_bytes() {
        let (dir, _) = small_checkpoint("canonical", false);
        let mut ck = Checkpoint::open(&dir, LoadMode::Mapped).expect("open");
        assert!(ck.check_values(ValueCheck::All).expect("finite").is_empty());
        assert!(ck.canonical().is_empty());
        let map = ck.shards[0].bytes.as_slice().as_ptr_range();
        for n in ["a.weight", "b", "w.weight", "x.weight"] {
            assert!(map.contains(&ck.tensor(n).expect("present").bytes.as_ptr()), "{n} is served from the map");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
