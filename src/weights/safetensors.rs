//! safetensors files read and written through the `safetensors` crate over the caller's bytes, with errors that name the file and the tensor.
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::{SafeTensorError, SafeTensors};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Element types a checkpoint may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    /// bfloat16.
    BF16,
    /// IEEE binary32.
    F32,
    /// e4m3fn (fp8 weights, engram tables).
    F8E4M3,
    /// e8m0 power-of-two scales.
    F8E8M0,
    /// Container of two e2m1 nibbles (fp4 experts).
    I8,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::BF16 => 2,
            Dtype::F32 => 4,
            Dtype::F8E4M3 | Dtype::F8E8M0 | Dtype::I8 => 1,
        }
    }

    /// The safetensors dtype string.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::BF16 => "BF16",
            Dtype::F32 => "F32",
            Dtype::F8E4M3 => "F8_E4M3",
            Dtype::F8E8M0 => "F8_E8M0",
            Dtype::I8 => "I8",
        }
    }

    /// Parses a safetensors dtype string; `None` for unsupported ones. `U8` is read as e8m0: writers without `F8_E8M0` store the scales' bytes as `U8`.
    pub fn parse(s: &str) -> Option<Dtype> {
        Some(match s {
            "BF16" => Dtype::BF16,
            "F32" => Dtype::F32,
            "F8_E4M3" => Dtype::F8E4M3,
            "F8_E8M0" | "U8" => Dtype::F8E8M0,
            "I8" => Dtype::I8,
            _ => return None,
        })
    }

    /// The dtype of a crate dtype (by its safetensors string), if supported.
    fn of(d: safetensors::Dtype) -> Option<Dtype> {
        Dtype::parse(&d.to_string())
    }

    /// The crate's dtype for this one.
    fn stored(self) -> safetensors::Dtype {
        match self {
            Dtype::BF16 => safetensors::Dtype::BF16,
            Dtype::F32 => safetensors::Dtype::F32,
            Dtype::F8E4M3 => safetensors::Dtype::F8_E4M3,
            Dtype::F8E8M0 => safetensors::Dtype::F8_E8M0,
            Dtype::I8 => safetensors::Dtype::I8,
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a safetensors header is unusable; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// Shorter than the 8-byte length prefix, or than the length it declares.
    #[error("{file}: truncated header ({problem})")]
    TruncatedHeader { file: String, problem: String },
    /// The header is not the expected JSON, or its offsets do not tile the data.
    #[error("{file}: malformed header JSON: {problem}")]
    Malformed { file: String, problem: String },
    /// A dtype outside BF16, F32, F8_E4M3, F8_E8M0 (or U8), I8.
    #[error("{file}: tensor `{name}` has unsupported dtype {dtype} (supported: BF16, F32, F8_E4M3, F8_E8M0 or U8 for e8m0 scales, I8)")]
    UnsupportedDtype { file: String, name: String, dtype: String },
    /// Offsets disagree with shape and dtype.
    #[error("{file}: tensor `{name}` has {found} bytes but shape {shape:?} of {dtype} needs {expected}")]
    ByteLength { file: String, name: String, shape: Vec<usize>, dtype: String, expected: u64, found: u64 },
    /// A tensor's data runs past the end of the file.
    #[error("{file}: tensor `{name}` ends at byte {end} of the data but the file holds only {len} data bytes (truncated shard)")]
    Truncated { file: String, name: String, end: u64, len: u64 },
}

/// One tensor of a header: name, dtype, shape and its byte range within the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderEntry {
    /// Tensor name as stored.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// First byte, relative to the data section.
    pub start: u64,
    /// One past the last byte, relative to the data section.
    pub end: u64,
}

/// A parsed header: where the data section starts and the tensors in it.
#[derive(Debug, Clone)]
pub struct Header {
    /// Byte offset of the data section in the file (8 + header length).
    pub data_start: u64,
    /// Tensors, sorted by name.
    pub entries: Vec<HeaderEntry>,
}

/// Element count of a shape (saturating, so absurd shapes fail the byte check instead of overflowing).
pub fn numel(shape: &[usize]) -> u64 {
    shape.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64))
}

/// Parses the header of `bytes`, the whole safetensors file `file`, with `SafeTensors::read_metadata`.
pub fn parse_header(bytes: &[u8], file: &Path) -> Result<Header, HeaderError> {
    let fname = file.display().to_string();
    let (n, metadata) = SafeTensors::read_metadata(bytes).map_err(|e| explain(e, bytes, &fname))?;
    if crate::testing::planted("safetensors") && metadata.metadata().as_ref().is_some_and(|m| m.len() >= 2) {
        panic!("planted bug: a valid header whose metadata has two keys");
    }
    let mut entries = Vec::with_capacity(metadata.tensors().len());
    for (name, info) in metadata.tensors() {
        let Some(dtype) = Dtype::of(info.dtype) else {
            return Err(HeaderError::UnsupportedDtype { file: fname, name, dtype: info.dtype.to_string() });
        };
        let (start, end) = (info.data_offsets.0 as u64, info.data_offsets.1 as u64);
        entries.push(HeaderEntry { name, dtype, shape: info.shape.clone(), start, end });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Header { data_start: 8 + n as u64, entries })
}

/// The error for a file the crate refused, naming the tensor at fault where the crate's error does not.
fn explain(e: SafeTensorError, bytes: &[u8], file: &str) -> HeaderError {
    let file = file.to_string();
    let declared = bytes.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    match e {
        SafeTensorError::HeaderTooSmall => HeaderError::TruncatedHeader { file, problem: format!("{} bytes", bytes.len()) },
        SafeTensorError::InvalidHeaderLength => {
            let n = declared.unwrap_or(0);
            HeaderError::TruncatedHeader { file, problem: format!("declares {n} header bytes, file has {}", bytes.len()) }
        }
        SafeTensorError::TensorInvalidInfo | SafeTensorError::MetadataIncompleteBuffer => match declared.and_then(|n| culprit(bytes, n, &file)) {
            Some(named) => named,
            None => HeaderError::Malformed { file, problem: e.to_string() },
        },
        other => HeaderError::Malformed { file, problem: other.to_string() },
    }
}

/// The tensor a header of `n` bytes gets wrong: a byte count that disagrees with its shape, else the first to run past the data.
fn culprit(bytes: &[u8], n: u64, file: &str) -> Option<HeaderError> {
    let json = bytes.get(8..usize::try_from(n.checked_add(8)?).ok()?)?;
    let all: BTreeMap<String, serde_json::Value> = serde_json::from_slice(json).ok()?;
    let infos: Vec<(String, TensorInfo)> =
        all.into_iter().filter(|(k, _)| k != "__metadata__").filter_map(|(k, v)| Some((k, serde_json::from_value(v).ok()?))).collect();
    let file = file.to_string();
    for (name, info) in &infos {
        let (s, e) = (info.data_offsets.0 as u64, info.data_offsets.1 as u64);
        let expected = (numel(&info.shape) as u128 * info.dtype.bitsize() as u128).div_ceil(8);
        if e < s || u128::from(e - s) != expected {
            let (shape, dtype, expected) = (info.shape.clone(), info.dtype.to_string(), u64::try_from(expected).unwrap_or(u64::MAX));
            return Some(HeaderError::ByteLength { file, name: name.clone(), shape, dtype, expected, found: e.saturating_sub(s) });
        }
    }
    let len = (bytes.len() as u64).checked_sub(8 + n)?;
    if let Some((name, info)) = infos.iter().filter(|(_, i)| i.data_offsets.1 as u64 > len).min_by_key(|(_, i)| i.data_offsets) {
        return Some(HeaderError::Truncated { file, name: name.clone(), end: info.data_offsets.1 as u64, len });
    }
    let used = infos.iter().map(|(_, i)| i.data_offsets.1 as u64).max().unwrap_or(0);
    let problem = format!("{} data bytes follow the last tensor's (the tensors must cover the data exactly)", len - used);
    (len > used).then_some(HeaderError::Malformed { file, problem })
}

/// Maps a safetensors file and parses its header without reading its data.
pub fn read_header(path: &Path) -> Result<Header, ReadError> {
    let io = |source| ReadError::Io { file: path.display().to_string(), source };
    let f = std::fs::File::open(path).map_err(io)?;
    if f.metadata().map_err(io)?.len() < 8 {
        return parse_header(&std::fs::read(path).map_err(io)?, path).map_err(ReadError::Header);
    }
    // SAFETY: the map is read-only and dropped before returning; a file modified meanwhile is outside the contract.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(io)?;
    parse_header(&map, path).map_err(ReadError::Header)
}

/// Why a safetensors file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{file}: {source}")]
    Io { file: String, source: std::io::Error },
    /// The header is unusable.
    #[error(transparent)]
    Header(#[from] HeaderError),
}

/// The `__metadata__` every file written here carries.
fn format_pt() -> Option<HashMap<String, String>> {
    Some(HashMap::from([("format".to_string(), "pt".to_string())]))
}

/// A header's bytes and each tensor's data range, in the order the tensors were given.
pub type HeaderLayout = (Vec<u8>, Vec<(u64, u64)>);

/// Builds a header (`__metadata__` first, then tensors in name order, padded with spaces to a multiple of 8) for tensors laid out in name order.
pub fn header_bytes(tensors: &[(&str, Dtype, &[usize])]) -> std::io::Result<HeaderLayout> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by(|&a, &b| tensors[a].0.cmp(tensors[b].0));
    let mut offsets = vec![(0u64, 0u64); tensors.len()];
    let mut infos = Vec::with_capacity(tensors.len());
    let mut at = 0usize;
    for &i in &order {
        let (name, dtype, shape) = tensors[i];
        let end = at + numel(shape) as usize * dtype.size();
        offsets[i] = (at as u64, end as u64);
        infos.push((name.to_string(), TensorInfo { dtype: dtype.stored(), shape: shape.to_vec(), data_offsets: (at, end) }));
        at = end;
    }
    let metadata = Metadata::new(format_pt(), infos).map_err(std::io::Error::other)?;
    let mut json = serde_json::to_vec(&metadata).map_err(std::io::Error::other)?;
    json.resize(json.len().next_multiple_of(8), b' ');
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&json);
    Ok((out, offsets))
}

/// A stored tensor as the crate's writer takes it.
struct Stored<'a> {
    dtype: Dtype,
    shape: &'a [usize],
    bytes: &'a [u8],
}

impl safetensors::View for Stored<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        self.dtype.stored()
    }

    fn shape(&self) -> &[usize] {
        self.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.bytes)
    }

    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// A stored tensor as [`read_file`] returns it and [`write_file`] takes it: name, dtype, shape, bytes.
pub type StoredTensor = (String, Dtype, Vec<usize>, Vec<u8>);

/// Every tensor of a safetensors file, in header order.
pub fn read_file(path: &Path) -> Result<Vec<StoredTensor>, ReadError> {
    let h = read_header(path)?;
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io { file: path.display().to_string(), source })?;
    let at = |o: u64| (h.data_start + o) as usize;
    Ok(h.entries.into_iter().map(|e| (e.name, e.dtype, e.shape, bytes[at(e.start)..at(e.end)].to_vec())).collect())
}

/// Writes a whole safetensors file from in-memory tensors `(name, dtype, shape, bytes)` with `safetensors::serialize_to_file`.
pub fn write_file(path: &Path, tensors: &[StoredTensor]) -> std::io::Result<()> {
    let views = tensors.iter().map(|(n, d, s, b)| (n.as_str(), Stored { dtype: *d, shape: s, bytes: b }));
    safetensors::serialize_to_file(views, format_pt(), path).map_err(|e| match e {
        SafeTensorError::IoError(io) => io,
        other => std::io::Error::other(format!("{}: {other}", path.display())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `json` as its header and `data` zero bytes.
    fn file_of(json: &str, data: usize) -> Vec<u8> {
        let mut v = (json.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(json.as_bytes());
        v.resize(v.len() + data, 0);
        v
    }

    #[test]
    fn header_round_trips_and_is_padded_to_eight_bytes() {
        let shapes = [vec![3usize, 5], vec![7], vec![2, 2, 2]];
        let specs = [("b.weight", Dtype::BF16, &shapes[0][..]), ("a.scale", Dtype::F8E8M0, &shapes[1][..]), ("c", Dtype::F32, &shapes[2][..])];
        let (h, offs) = header_bytes(&specs).expect("header");
        assert_eq!((h.len() - 8) % 8, 0);
        assert!(String::from_utf8_lossy(&h[8..]).starts_with(r#"{"__metadata__":{"format":"pt"},"a.scale":{"dtype":"F8_E8M0","shape":[7],"data_offsets":[0,7]}"#));
        let total = 30 + 7 + 32;
        let mut file = h.clone();
        file.resize(h.len() + total, 0);
        let parsed = parse_header(&file, Path::new("t.safetensors")).expect("valid");
        let names: Vec<&str> = parsed.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a.scale", "b.weight", "c"]);
        assert_eq!(offs[1], (0, 7));
        assert_eq!(offs[0], (7, 37));
        assert_eq!(parsed.entries[1].shape, vec![3, 5]);
        let short = &file[..file.len() - 1];
        let err = parse_header(short, Path::new("t.safetensors")).expect_err("truncated");
        assert!(err.to_string().contains("`c`") && err.to_string().contains("t.safetensors") && err.to_string().contains("truncated"), "{err}");
    }

    #[test]
    fn unsupported_dtype_bad_json_and_bad_byte_counts_name_the_file_and_tensor() {
        let f = file_of(r#"{"x":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}"#, 2);
        let e = parse_header(&f, Path::new("s.st")).expect_err("F16");
        assert!(e.to_string().contains("F16") && e.to_string().contains("`x`"), "{e}");
        let f = file_of("{not json", 0);
        let e = parse_header(&f, Path::new("s.st")).expect_err("json");
        assert!(e.to_string().contains("s.st") && e.to_string().contains("malformed"), "{e}");
        let f = file_of(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"BF16","shape":[3],"data_offsets":[8,12]}}"#, 12);
        let e = parse_header(&f, Path::new("s.st")).expect_err("byte count");
        assert!(e.to_string().contains("`w` has 4 bytes but shape [3] of BF16 needs 6"), "{e}");
        let f = file_of(r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#, 5);
        let e = parse_header(&f, Path::new("s.st")).expect_err("a byte after the data");
        assert!(e.to_string().contains("s.st: malformed header JSON: 1 data bytes follow the last tensor's"), "{e}");
        let f = file_of(r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}}"#, 8);
        let e = parse_header(&f, Path::new("s.st")).expect_err("a gap between tensors");
        assert!(e.to_string().contains("`b`"), "{e}");
    }

    #[test]
    fn u8_scales_read_as_e8m0_and_written_files_read_back() {
        let dir = std::env::temp_dir().join(format!("lockstep-safetensors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("w.safetensors");
        let tensors = vec![
            ("w.weight".to_string(), Dtype::F8E4M3, vec![2, 3], vec![1, 2, 3, 4, 5, 6]),
            ("w.scale".to_string(), Dtype::F8E8M0, vec![1, 1], vec![127]),
            ("n".to_string(), Dtype::F32, vec![2], 1.5f32.to_le_bytes().repeat(2)),
        ];
        write_file(&path, &tensors).expect("write");
        let bytes = std::fs::read(&path).expect("read");
        let h = read_header(&path).expect("header");
        for (name, dtype, shape, data) in &tensors {
            let e = h.entries.iter().find(|e| &e.name == name).expect("entry");
            let at = |o: u64| (h.data_start + o) as usize;
            assert_eq!((e.dtype, &e.shape, &bytes[at(e.start)..at(e.end)]), (*dtype, shape, &data[..]), "{name}");
        }
        let f = file_of(r#"{"s":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#, 2);
        assert_eq!(parse_header(&f, Path::new("u8.st")).expect("U8").entries[0].dtype, Dtype::F8E8M0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
