//! The tiny checkpoint generator: seeded random weights, quantized to the release formats, written as byte-deterministic safetensors shards.
pub mod edge;
mod fill;

pub use edge::Values;

use crate::weights::progress::Progress;
use crate::weights::INDEX_FILE;
use crate::model::config::{Config, ConfigError, TINY_CONFIG_JSON};
use crate::model::checkpoint::quantize::{quantize_fp4, quantize_fp8_blocks, quantize_fp8_rows};
use crate::weights::safetensors::{header_bytes, Dtype};
use crate::model::checkpoint::tensor_table::expected_tensors;
use crate::weights::{scale_name_of, Quant, TensorSpec};
use crate::numerics::bf16_from_f32;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a checkpoint could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum TinyError {
    /// The config is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A file could not be written.
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TinySummary {
    /// Every file written (config, index, shards).
    pub files: Vec<PathBuf>,
    /// Tensors written.
    pub tensors: usize,
    /// Tensor payload bytes written.
    pub bytes: u64,
}

/// Writes the tiny checkpoint of spec 1.6 (or of `config_json`) into `dir`, deterministic from `seed`.
pub fn make_tiny(dir: &Path, seed: u64, config_json: Option<&str>) -> Result<TinySummary, TinyError> {
    write_checkpoint(dir, seed, config_json.unwrap_or(TINY_CONFIG_JSON))
}

/// Writes a random checkpoint for the config in `config_path` (the `--config FILE` option).
pub fn make_tiny_from_file(dir: &Path, seed: u64, config_path: &Path) -> Result<TinySummary, TinyError> {
    let text = std::fs::read_to_string(config_path)
        .map_err(|source| ConfigError::Io { path: config_path.display().to_string(), source })?;
    write_checkpoint(dir, seed, &text)
}

/// Writes `config.json` (verbatim), the shard index and the shards for any valid config JSON.
pub fn write_checkpoint(dir: &Path, seed: u64, config_json: &str) -> Result<TinySummary, TinyError> {
    write_checkpoint_values(dir, seed, config_json, Values::Random)
}

/// [`write_checkpoint`] with the values chosen: the random init, or its edge-values rescaling (same draws for one seed).
pub fn write_checkpoint_values(dir: &Path, seed: u64, config_json: &str, values: Values) -> Result<TinySummary, TinyError> {
    let cfg = Config::from_json(config_json)?;
    let io = |p: &Path| {
        let path = p.display().to_string();
        move |source| TinyError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let config_path = dir.join("config.json");
    std::fs::write(&config_path, config_json).map_err(io(&config_path))?;
    let specs = expected_tensors(&cfg);
    let has_engram_shard = specs.iter().any(|s| s.quant == Quant::Fp8Rows);
    let n_shards = if has_engram_shard { 3 } else { 2 };
    let mut shards: Vec<BTreeMap<String, &TensorSpec>> = vec![BTreeMap::new(); n_shards];
    for s in &specs {
        shards[shard_of(&s.name)].insert(s.name.clone(), s);
    }
    let mut files = vec![config_path];
    let mut weight_map = serde_json::Map::new();
    let mut index_order = BTreeMap::new();
    let mut total = 0u64;
    let progress = Progress::new("writing checkpoint", specs.iter().map(TensorSpec::byte_len).sum());
    for (i, shard) in shards.iter().enumerate() {
        let name = format!("model-{:05}-of-{:05}.safetensors", i + 1, n_shards);
        let path = dir.join(&name);
        total += write_shard(&path, shard, seed, values, &progress).map_err(io(&path))?;
        for t in shard.keys() {
            index_order.insert(t.clone(), name.clone());
        }
        files.push(path);
    }
    for (t, f) in index_order {
        weight_map.insert(t, f.into());
    }
    let index = serde_json::json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
    let index_path = dir.join(INDEX_FILE);
    let text = serde_json::to_string_pretty(&index).unwrap_or_default() + "\n";
    std::fs::write(&index_path, text).map_err(io(&index_path))?;
    files.insert(1, index_path);
    progress.finish();
    Ok(TinySummary { files, tensors: specs.len(), bytes: total })
}

/// Shard of a tensor: 0 backbone layers, 1 everything else, 2 the engram tables (as the release keeps them apart).
fn shard_of(name: &str) -> usize {
    if name.contains(".engram.embed.") {
        2
    } else if name.starts_with("layers.") {
        0
    } else {
        1
    }
}

/// Streams one shard: header, then each tensor in name order, written by a second thread while the next tensor is generated; returns the payload bytes.
fn write_shard(path: &Path, tensors: &BTreeMap<String, &TensorSpec>, seed: u64, values: Values, progress: &Progress) -> std::io::Result<u64> {
    let list: Vec<(&str, Dtype, &[usize])> = tensors.values().map(|s| (s.name.as_str(), s.dtype, s.shape.as_slice())).collect();
    let (header, _) = header_bytes(&list)?;
    let file = std::fs::File::create(path)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
    std::thread::scope(|sc| {
        let writer = sc.spawn(move || -> std::io::Result<()> {
            let mut w = std::io::BufWriter::new(file);
            w.write_all(&header)?;
            for bytes in rx {
                w.write_all(&bytes)?;
                progress.advance(bytes.len() as u64);
            }
            w.flush()
        });
        let generated = generate_shard(tensors, seed, values, &tx);
        drop(tx);
        let written = writer.join().map_err(|_| std::io::Error::other("the shard writer thread panicked"))?;
        written?;
        generated
    })
}

/// Generates each tensor of a shard in name order and sends its bytes to the writer; returns the payload bytes.
fn generate_shard(tensors: &BTreeMap<String, &TensorSpec>, seed: u64, values: Values, tx: &std::sync::mpsc::SyncSender<Vec<u8>>) -> std::io::Result<u64> {
    let mut pending: HashMap<String, Vec<u8>> = HashMap::new();
    let mut total = 0u64;
    for (name, spec) in tensors {
        let bytes = if let Some(b) = pending.remove(name) {
            b
        } else if spec.quant == Quant::Scale {
            let weight = format!("{}.weight", name.strip_suffix(".scale").unwrap_or(name));
            let wspec = tensors.get(&weight).ok_or_else(|| std::io::Error::other(format!("scale `{name}` has no weight")))?;
            let (wb, sb) = generate(wspec, seed, values);
            pending.insert(weight, wb);
            sb.unwrap_or_default()
        } else {
            let (wb, sb) = generate(spec, seed, values);
            if let Some(sb) = sb {
                pending.insert(scale_name_of(name), sb);
            }
            wb
        };
        if bytes.len() as u64 != spec.byte_len() {
            return Err(std::io::Error::other(format!("generated {} bytes for `{name}`, expected {}", bytes.len(), spec.byte_len())));
        }
        total += bytes.len() as u64;
        if tx.send(bytes).is_err() {
            break;
        }
    }
    Ok(total)
}

/// Stored bytes of a tensor, and of its scale when quantized.
fn generate(spec: &TensorSpec, seed: u64, kind: Values) -> (Vec<u8>, Option<Vec<u8>>) {
    let shape = spec.logical_shape();
    let n: usize = shape.iter().product();
    let (mean, std) = init_of(&spec.name);
    if let [rows, cols] = shape[..] {
        if n >= fill::CHUNKED_MIN {
            return fill::generate_chunked(spec, rows, cols, seed, (mean, std), kind);
        }
    }
    let mut rng = Rng::new(seed ^ fnv1a(&spec.name));
    let mut values: Vec<f32> = (0..n).map(|_| (mean + std * rng.normal()) as f32).collect();
    if kind == Values::Edge {
        edge::adjust(&spec.name, &mut values);
    }
    let (rows, cols) = (shape[0], shape.get(1).copied().unwrap_or(1));
    match (spec.quant, spec.dtype) {
        (Quant::Fp8Block, _) => split(quantize_fp8_blocks(&values, rows, cols)),
        (Quant::Fp8Rows, _) => split(quantize_fp8_rows(&values, rows, cols)),
        (Quant::Fp4, _) => split(quantize_fp4(&values, rows, cols)),
        (_, Dtype::F32) => (values.iter().flat_map(|v| v.to_le_bytes()).collect(), None),
        _ => (values.iter().flat_map(|&v| bf16_from_f32(v).to_le_bytes()).collect(), None),
    }
}

/// `(weight, scale)` to `(weight, Some(scale))`.
fn split((w, s): (Vec<u8>, Vec<u8>)) -> (Vec<u8>, Option<Vec<u8>>) {
    (w, Some(s))
}

/// Mean and standard deviation of a tensor's random init (spec 1.6 guidance), by name.
fn init_of(name: &str) -> (f64, f64) {
    let last = name.rsplit('.').next().unwrap_or(name);
    let stem = name.strip_suffix(".weight").and_then(|s| s.rsplit('.').next()).unwrap_or("");
    if last.starts_with("hc_") && last.ends_with("_fn") {
        (0.0, 0.01)
    } else if last.starts_with("hc_") && last.ends_with("_base") {
        (0.0, 0.1)
    } else if last.starts_with("hc_") && last.ends_with("_scale") {
        (0.5, 0.02)
    } else if matches!(last, "attn_sink" | "bias_vl") || name.ends_with(".gate.bias") {
        (0.0, 0.1)
    } else if matches!(last, "q_weight" | "k_weight") || stem.contains("norm") {
        (1.0, 0.05)
    } else if last == "bias" {
        (0.0, 0.02)
    } else if name.starts_with("embed.") || name.starts_with("head.") || name.starts_with("image_") || name.contains("markov_head.") || name.contains(".engram.embed.") {
        (0.0, 0.05)
    } else {
        (0.0, 0.03)
    }
}

/// 64-bit FNV-1a of a name, so each tensor's stream depends only on the seed and its name.
pub(super) fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// splitmix64 generator.
pub(super) struct Rng(u64);

impl Rng {
    /// A generator whose state is first mixed once.
    pub(super) fn new(seed: u64) -> Rng {
        let mut r = Rng(seed);
        r.next_u64();
        r
    }

    /// Next 64 random bits.
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits.
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Approximately standard normal: Irwin-Hall sum of 4 uniforms; only IEEE add and multiply, so every platform writes the same bytes.
    fn normal(&mut self) -> f64 {
        let s = self.uniform() + self.uniform() + self.uniform() + self.uniform();
        (s - 2.0) * 1.732_050_807_568_877_2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_samples_have_unit_variance_and_zero_mean() {
        let mut r = Rng::new(7);
        let xs: Vec<f64> = (0..200_000).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.01 && (var - 1.0).abs() < 0.02, "mean {mean} var {var}");
    }

    #[test]
    fn init_rules_follow_the_spec_guidance_by_name() {
        assert_eq!(init_of("layers.0.hc_attn_fn"), (0.0, 0.01));
        assert_eq!(init_of("mtp.1.hc_ffn_base"), (0.0, 0.1));
        assert_eq!(init_of("layers.3.hc_ffn_scale").0, 0.5);
        assert_eq!(init_of("layers.3.attn.attn_sink"), (0.0, 0.1));
        assert_eq!(init_of("layers.3.ffn.gate.bias"), (0.0, 0.1));
        assert_eq!(init_of("layers.3.ffn.gate.bias_vl"), (0.0, 0.1));
        assert_eq!(init_of("layers.1.engram.q_weight").0, 1.0);
        for n in ["layers.2.attn.kv_norm.weight", "layers.2.attn.compressor.norm.weight", "vision.blocks.0.norm1.weight", "mtp.0.main_norm.weight", "norm.weight"] {
            assert_eq!(init_of(n).0, 1.0, "{n}");
        }
        assert_eq!(init_of("layers.0.attn.wq_a.weight"), (0.0, 0.03));
        assert_eq!(init_of("aligner.w1.bias"), (0.0, 0.02));
    }
}
