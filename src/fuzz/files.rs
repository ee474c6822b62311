//! File targets: safetensors headers and the tensor table, config files in both layouts, prompt-cache snapshots, images.
use super::{error_label, split_line, Target};
use crate::model::config::{Config, RELEASE_CONFIG_JSON, TINY_CONFIG_JSON};
use crate::serve::snapshot::{self, Snapshot};
use crate::weights::safetensors::{header_bytes, parse_header, Dtype};
use crate::weights::{Checkpoint, LoadMode, Quant, TensorSpec};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// The tensors of the safetensors seed, which the tensor-table check expects.
const TABLE: &[(&str, Dtype, &[usize])] = &[
    ("embed.weight", Dtype::BF16, &[4, 8]),
    ("layers.0.attn.wq.weight", Dtype::F8E4M3, &[32, 32]),
    ("layers.0.attn.wq.scale", Dtype::F8E8M0, &[1, 1]),
    ("norm.weight", Dtype::F32, &[8]),
];

/// A safetensors file from a header line (a declared length, else the JSON's), the JSON header, and `data=N` bytes; parsed, opened as a checkpoint, checked against [`TABLE`], every tensor's values scanned.
pub struct SafeTensors {
    dir: PathBuf,
}

impl SafeTensors {
    /// The target, writing its files in a private temporary folder.
    pub fn new() -> Result<SafeTensors, String> {
        let base = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("lockstep-fuzz-st-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(SafeTensors { dir })
    }
}

impl Drop for SafeTensors {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Target for SafeTensors {
    fn name(&self) -> &'static str {
        "safetensors"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let Ok((bytes, _)) = header_bytes(TABLE) else { return Vec::new() };
        let prefixed = bytes.get(..8).is_some_and(|p| u64::from_le_bytes(p.try_into().unwrap_or([0; 8])) == bytes.len() as u64 - 8);
        let header = String::from_utf8_lossy(if prefixed { &bytes[8..] } else { &bytes }).trim_end().to_string();
        let mut v: Value = serde_json::from_str(&header).unwrap_or(Value::Null);
        v["__metadata__"] = json!({"format": "pt"});
        let data: u64 = TABLE.iter().map(|(_, d, s)| s.iter().product::<usize>() as u64 * d.size() as u64).sum();
        vec![format!("data={data}\n{v}").into_bytes(), format!("len=auto data={data}\n{header}").into_bytes()]
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        ["dtype", "shape", "data_offsets", "__metadata__", "BF16", "F32", "F8_E4M3", "F8_E8M0", "I8", "U8", "F16", "F64", "weight_scale_inv", ".scale", "data=", "len="].iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn json(&self) -> bool {
        true
    }

    fn run(&mut self, input: &[u8]) -> Result<String, String> {
        let (flags, json) = split_line(input);
        let flags = String::from_utf8_lossy(flags);
        let field = |k: &str| flags.split_whitespace().find_map(|w| w.strip_prefix(k)).and_then(|n| n.parse::<u64>().ok());
        let data = field("data=").unwrap_or(0).min(1 << 16) as usize;
        let declared = field("len=").unwrap_or(json.len() as u64);
        let mut file = declared.to_le_bytes().to_vec();
        file.extend_from_slice(json);
        file.extend((0..data).map(|i| (i * 37 % 251) as u8 & 0x3f));
        let path = self.dir.join("model.safetensors");
        let header = match parse_header(&file, &path) {
            Ok(h) => h,
            Err(e) => return Ok(error_label("header", &format!("{e:?}"))),
        };
        std::fs::write(&path, &file).map_err(|e| format!("writing {}: {e}", path.display()))?;
        let ck = match Checkpoint::open(&self.dir, LoadMode::Copied) {
            Ok(ck) => ck,
            Err(e) => return Ok(error_label("open", &format!("{e:?}"))),
        };
        for e in &header.entries {
            if let Err(err) = ck.verified(&e.name) {
                return Ok(error_label("values", &format!("{err:?}")));
            }
        }
        let expected: Vec<TensorSpec> = TABLE.iter().map(|(n, d, s)| TensorSpec { name: n.to_string(), dtype: *d, shape: s.to_vec(), quant: Quant::Plain }).collect();
        match ck.check_layout(&expected) {
            Ok(()) => Ok(format!("ok:{}", header.entries.len().min(5))),
            Err(e) => Ok(error_label("table", &format!("{e:?}"))),
        }
    }
}

/// Config files in the nested and the flat layout, parsed and validated.
pub struct ConfigFile;

/// The flat layout of a nested config: `text_config` folded over the top level.
fn flat(nested: &str) -> String {
    let mut v: Value = serde_json::from_str(nested).unwrap_or(Value::Null);
    if let Some(Value::Object(text)) = v.as_object_mut().and_then(|o| o.remove("text_config")) {
        if let Some(top) = v.as_object_mut() {
            top.extend(text);
        }
    }
    v.to_string()
}

impl Target for ConfigFile {
    fn name(&self) -> &'static str {
        "config"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        [RELEASE_CONFIG_JSON.to_string(), TINY_CONFIG_JSON.to_string(), flat(RELEASE_CONFIG_JSON), flat(TINY_CONFIG_JSON)].into_iter().map(|s| format!("\n{s}").into_bytes()).collect()
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        ["text_config", "vision_config", "num_hidden_layers", "hidden_size", "n_routed_experts", "num_experts_per_tok", "vocab_size", "compress_ratios", "index_topk", "sliding_window", "rope_scaling", "null", "true"].iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn json(&self) -> bool {
        true
    }

    fn run(&mut self, input: &[u8]) -> Result<String, String> {
        let Ok(text) = std::str::from_utf8(split_line(input).1) else { return Ok("utf8".into()) };
        match Config::from_json(text) {
            Ok(cfg) => {
                let again = Config::from_json(text).map_err(|e| format!("a config parsed once and failed the second time: {e}"))?;
                if format!("{again:?}") != format!("{cfg:?}") {
                    return Err("the same config text parsed twice differs".into());
                }
                Ok(format!("ok:layers{}:vision{}", cfg.num_hidden_layers.min(4), cfg.vision.is_some()))
            }
            Err(e) => Ok(error_label("err", &format!("{e:?}"))),
        }
    }
}

/// Snapshot files: half the inputs have their seal recomputed, so the fields behind the checksum are reached.
pub struct SnapshotFile {
    fp: [u8; 32],
}

impl SnapshotFile {
    /// The target over one checkpoint fingerprint.
    pub fn new() -> SnapshotFile {
        SnapshotFile { fp: Sha256::digest(b"fuzz checkpoint").into() }
    }
}

impl Target for SnapshotFile {
    fn name(&self) -> &'static str {
        "snapshot"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let s = Snapshot { key: vec![1, 2, 3, 40_000], logits: vec![0.5, -1.0, f32::MIN_POSITIVE], state: b"LKSTATE2 state bytes".to_vec() };
        let mut sealed = vec![0u8];
        sealed.extend(snapshot::encode(&self.fp, &s));
        let mut raw = vec![1u8];
        raw.extend(snapshot::encode(&self.fp, &Snapshot { key: vec![], logits: vec![], state: vec![] }));
        vec![sealed, raw]
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        vec![snapshot::MAGIC.to_vec(), snapshot::MAGIC_V1.to_vec(), u64::MAX.to_le_bytes().to_vec(), 1u64.to_le_bytes().to_vec(), self.fp.to_vec()]
    }

    fn run(&mut self, input: &[u8]) -> Result<String, String> {
        let Some((&mode, rest)) = input.split_first() else { return Ok("empty".into()) };
        let mut bytes = rest.to_vec();
        if mode & 1 == 0 && bytes.len() >= 32 {
            let n = bytes.len() - 32;
            let seal = Sha256::digest(&bytes[..n]);
            bytes[n..].copy_from_slice(&seal);
        }
        match snapshot::decode(&self.fp, &bytes) {
            Ok(s) => {
                if snapshot::encode(&self.fp, &s) != bytes && bytes.starts_with(snapshot::MAGIC) {
                    return Err("a snapshot read back encodes to other bytes".into());
                }
                Ok(format!("ok:k{}:l{}:s{}", s.key.len().min(3), s.logits.len().min(3), s.state.len().min(3)))
            }
            Err(e) => Ok(error_label("err", &e)),
        }
    }
}

/// Images under a pixel limit: the header alone refuses a bomb, a decoded image is as large as its header said.
pub struct Image;

/// The pixel limit of the image target.
const MAX_PIXELS: u64 = 1 << 16;

fn encoded(img: image::DynamicImage, f: image::ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, f).map(|_| out.into_inner()).unwrap_or_default()
}

/// A PNG whose header claims `w` x `h` pixels over a few bytes of data.
fn png_bomb(w: u32, h: u32) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    let chunk = |b: &mut Vec<u8>, kind: &[u8], data: &[u8]| {
        b.extend((data.len() as u32).to_be_bytes());
        let start = b.len();
        b.extend(kind);
        b.extend(data);
        let crc = crc32(&b[start..]);
        b.extend(crc.to_be_bytes());
    };
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]);
    chunk(&mut b, b"IHDR", &ihdr);
    chunk(&mut b, b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
    chunk(&mut b, b"IEND", &[]);
    b
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &x in bytes {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

impl Target for Image {
    fn name(&self) -> &'static str {
        "image"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let rgb = image::RgbImage::from_fn(4, 4, |x, y| image::Rgb([(x * 60) as u8, (y * 60) as u8, 128]));
        let gray = image::GrayAlphaImage::from_fn(6, 5, |x, y| image::LumaA([(x * y * 9) as u8, 200]));
        let img = image::DynamicImage::ImageRgb8(rgb);
        let mut out = vec![encoded(img.clone(), image::ImageFormat::Png), encoded(img.clone(), image::ImageFormat::Jpeg), encoded(img.clone(), image::ImageFormat::Gif), encoded(img, image::ImageFormat::WebP)];
        out.push(encoded(image::DynamicImage::ImageLumaA8(gray), image::ImageFormat::Png));
        out.push(png_bomb(100_000, 100_000));
        out.retain(|s| !s.is_empty());
        out
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        vec![b"IHDR".to_vec(), b"IDAT".to_vec(), b"GIF89a".to_vec(), b"RIFF".to_vec(), b"VP8L".to_vec(), vec![0xff, 0xd8, 0xff], vec![0xff, 0xd9], vec![0xff, 0xff, 0xff, 0x7f]]
    }

    fn run(&mut self, input: &[u8]) -> Result<String, String> {
        let (format, w, h) = match crate::vision::decode::check_pixels(input, MAX_PIXELS) {
            Ok(x) => x,
            Err(e) => return Ok(error_label("header", &format!("{e:?}"))),
        };
        if u64::from(w) * u64::from(h) > MAX_PIXELS {
            return Err(format!("a {w}x{h} header passed a {MAX_PIXELS}-pixel limit"));
        }
        match crate::vision::decode::decode(input, MAX_PIXELS) {
            Ok(rgb) => {
                if rgb.data.len() as u64 != u64::from(rgb.width) * u64::from(rgb.height) * 3 || u64::from(rgb.width) * u64::from(rgb.height) > MAX_PIXELS {
                    return Err(format!("a decoded {}x{} image holds {} bytes", rgb.width, rgb.height, rgb.data.len()));
                }
                Ok(format!("ok:{}", format.name()))
            }
            Err(e) => Ok(error_label(format.name(), &format!("{e:?}"))),
        }
    }
}
