//! safetensors files read and written by hand: 8-byte LE header length, JSON header, data; F8_E8M0 included.
use serde_json::Value;
use std::io::Write;
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
    /// The header is not the expected JSON.
    #[error("{file}: malformed header JSON: {problem}")]
    Malformed { file: String, problem: String },
    /// A dtype outside BF16, F32, F8_E4M3, F8_E8M0 (or U8), I8.
    #[error("{file}: tensor `{name}` has unsupported dtype {dtype} (supported: BF16, F32, F8_E4M3, F8_E8M0 or U8 for e8m0 scales, I8)")]
    UnsupportedDtype { file: String, name: String, dtype: String },
    /// Offsets disagree with shape and dtype.
    #[error("{file}: tensor `{name}` has {found} bytes but shape {shape:?} of {dtype} needs {expected}")]
    ByteLength { file: String, name: String, shape: Vec<usize>, dtype: Dtype, expected: u64, found: u64 },
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

/// Parses the header at the start of `bytes` (the file, or at least its header) of a file `file_len` bytes long.
pub fn parse_header(bytes: &[u8], file_len: u64, file: &Path) -> Result<Header, HeaderError> {
    let fname = file.display().to_string();
    let trunc = |problem: String| HeaderError::TruncatedHeader { file: fname.clone(), problem };
    let bad = |problem: String| HeaderError::Malformed { file: fname.clone(), problem };
    let len_bytes: [u8; 8] = bytes.get(..8).and_then(|b| b.try_into().ok()).ok_or_else(|| trunc(format!("{} bytes", bytes.len())))?;
    let n = u64::from_le_bytes(len_bytes);
    let data_start = n.checked_add(8).filter(|&d| d <= file_len).ok_or_else(|| trunc(format!("declares {n} header bytes, file has {file_len}")))?;
    let json = bytes.get(8..data_start as usize).ok_or_else(|| trunc(format!("declares {n} header bytes")))?;
    let value: Value = serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?;
    let obj = value.as_object().ok_or_else(|| bad("not a JSON object".into()))?;
    let data_len = file_len - data_start;
    let mut entries = Vec::with_capacity(obj.len());
    for (name, v) in obj {
        if name == "__metadata__" {
            continue;
        }
        let dtype_str = v.get("dtype").and_then(Value::as_str).ok_or_else(|| bad(format!("tensor `{name}` has no dtype")))?;
        let dtype = Dtype::parse(dtype_str).ok_or_else(|| HeaderError::UnsupportedDtype {
            file: fname.clone(),
            name: name.clone(),
            dtype: dtype_str.into(),
        })?;
        let ints = |key: &str| -> Option<Vec<u64>> { v.get(key)?.as_array()?.iter().map(Value::as_u64).collect() };
        let shape: Vec<usize> = ints("shape")
            .and_then(|s| s.into_iter().map(|d| usize::try_from(d).ok()).collect())
            .ok_or_else(|| bad(format!("tensor `{name}` has no valid shape")))?;
        let offs = ints("data_offsets").filter(|o| o.len() == 2 && o[0] <= o[1]);
        let offs = offs.ok_or_else(|| bad(format!("tensor `{name}` has no valid data_offsets")))?;
        let (start, end) = (offs[0], offs[1]);
        let expected = numel(&shape).saturating_mul(dtype.size() as u64);
        if end - start != expected {
            let (name, file) = (name.clone(), fname.clone());
            return Err(HeaderError::ByteLength { file, name, shape, dtype, expected, found: end - start });
        }
        entries.push(HeaderEntry { name: name.clone(), dtype, shape, start, end });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(e) = entries.iter().filter(|e| e.end > data_len).min_by_key(|e| (e.start, e.end)) {
        return Err(HeaderError::Truncated { file: fname, name: e.name.clone(), end: e.end, len: data_len });
    }
    Ok(Header { data_start, entries })
}

/// Reads and parses the header of a safetensors file without reading its data.
pub fn read_header(path: &Path) -> Result<Header, ReadError> {
    use std::io::Read;
    let io = |source| ReadError::Io { file: path.display().to_string(), source };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let file_len = f.metadata().map_err(io)?.len();
    if file_len < 8 {
        let mut short = Vec::new();
        f.read_to_end(&mut short).map_err(io)?;
        return parse_header(&short, file_len, path).map_err(ReadError::Header);
    }
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(io)?;
    let n = u64::from_le_bytes(len).min(file_len - 8) as usize;
    let mut buf = vec![0u8; 8 + n];
    buf[..8].copy_from_slice(&len);
    f.read_exact(&mut buf[8..]).map_err(io)?;
    parse_header(&buf, file_len, path).map_err(ReadError::Header)
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

/// Builds a header (keys sorted, `__metadata__` first, padded with spaces to a multiple of 8) for tensors laid out in name order.
pub fn header_bytes(tensors: &[(&str, Dtype, &[usize])]) -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by(|&a, &b| tensors[a].0.cmp(tensors[b].0));
    let mut offsets = vec![(0u64, 0u64); tensors.len()];
    let mut json = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    let mut at = 0u64;
    for &i in &order {
        let (name, dtype, shape) = tensors[i];
        let end = at + numel(shape) * dtype.size() as u64;
        offsets[i] = (at, end);
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let quoted = serde_json::to_string(name).unwrap_or_default();
        json.push_str(&format!(",{quoted}:{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{at},{end}]}}", dims.join(",")));
        at = end;
    }
    json.push('}');
    while json.len() % 8 != 0 {
        json.push(' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    (out, offsets)
}

/// Writes a whole safetensors file from in-memory tensors `(name, dtype, shape, bytes)`; data in name order.
pub fn write_file(path: &Path, tensors: &[(String, Dtype, Vec<usize>, Vec<u8>)]) -> std::io::Result<()> {
    let specs: Vec<(&str, Dtype, &[usize])> = tensors.iter().map(|(n, d, s, _)| (n.as_str(), *d, s.as_slice())).collect();
    let (header, _) = header_bytes(&specs);
    let mut order: Vec<&(String, Dtype, Vec<usize>, Vec<u8>)> = tensors.iter().collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    w.write_all(&header)?;
    for t in order {
        w.write_all(&t.3)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_is_padded_to_eight_bytes() {
        let shapes = [vec![3usize, 5], vec![7], vec![2, 2, 2]];
        let specs = [("b.weight", Dtype::BF16, &shapes[0][..]), ("a.scale", Dtype::F8E8M0, &shapes[1][..]), ("c", Dtype::F32, &shapes[2][..])];
        let (h, offs) = header_bytes(&specs);
        assert_eq!((h.len() - 8) % 8, 0);
        let total = 30 + 7 + 32;
        let mut file = h.clone();
        file.resize(h.len() + total, 0);
        let parsed = parse_header(&file, file.len() as u64, Path::new("t.safetensors")).expect("valid");
        let names: Vec<&str> = parsed.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a.scale", "b.weight", "c"]);
        assert_eq!(offs[1], (0, 7));
        assert_eq!(offs[0], (7, 37));
        assert_eq!(parsed.entries[1].shape, vec![3, 5]);
        let short = &file[..file.len() - 1];
        let err = parse_header(short, short.len() as u64, Path::new("t.safetensors")).expect_err("truncated");
        assert!(err.to_string().contains("`c`") && err.to_string().contains("t.safetensors"), "{err}");
    }

    #[test]
    fn unsupported_dtype_and_bad_json_name_the_file() {
        let mk = |json: &str| {
            let mut v = (json.len() as u64).to_le_bytes().to_vec();
            v.extend_from_slice(json.as_bytes());
            v
        };
        let f = mk(r#"{"x":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}"#);
        let e = parse_header(&f, f.len() as u64 + 2, Path::new("s.st")).expect_err("F16");
        assert!(e.to_string().contains("F16") && e.to_string().contains("`x`"), "{e}");
        let f = mk("{not json");
        let e = parse_header(&f, f.len() as u64, Path::new("s.st")).expect_err("json");
        assert!(e.to_string().contains("s.st") && e.to_string().contains("malformed"), "{e}");
    }
}
