//! Model configuration read from either config.json layout: nested HF (`text_config` folded over the top level) or flat `inference/config.json`.
pub mod engram_layout;
mod keys;
pub mod preset;
mod validate;

use keys::{spelled, to_bool, to_f64, to_list, to_object, to_str, to_usize, Keys, Spelling};
use serde_json::{Map, Value};
use std::path::Path;

/// The release's nested `config.json` (spec 1.2, 1.3).
pub const RELEASE_CONFIG_JSON: &str = include_str!("configs/release.json");
/// The tiny config of spec 1.6 that exercises every feature; make-tiny's default.
pub const TINY_CONFIG_JSON: &str = include_str!("configs/tiny.json");

/// Why a config could not be read or is not a valid DeepSeek-V4.1 config; keys are named as the file spells them.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// The text is not JSON, or not a JSON object.
    #[error("config: not a JSON object: {0}")]
    Json(String),
    /// A required key is absent (`section` is the nested object it belongs in, `None` at the top level).
    #[error("config: missing key `{}`", spelled(.section, .key))]
    Missing { section: Option<String>, key: String },
    /// A key holds a value of the wrong type.
    #[error("config: key `{}` must be {expected}", spelled(.section, .key))]
    Type { section: Option<String>, key: String, expected: &'static str },
    /// A key holds a value the model cannot use.
    #[error("config: `{}` {problem}", spelled(.section, .key))]
    Invalid { section: Option<String>, key: String, problem: String },
}

/// Shorthand for a validation error on `key`, named as validation knows it (respelled as the file has it by [`Config::from_json`]).
pub(crate) fn invalid(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { section: None, key: key.into(), problem: problem.into() }
}

/// Router scoring function (`scoring_func` / `score_func`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoringFunc {
    /// `sqrt(softplus(z))`, the release's function.
    SqrtSoftplus,
    /// `sigmoid(z)`.
    Sigmoid,
    /// `softmax(z)` over the experts.
    Softmax,
}

/// YaRN scaling of the compress rope (`rope_scaling` / `rope_factor`, `original_seq_len`, `beta_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// Frequency divisor for the long-wavelength pairs.
    pub factor: f64,
    /// Training context length; the ramp band is derived from it.
    pub original_seq_len: usize,
    /// Rotations that end the unscaled band.
    pub beta_fast: f64,
    /// Rotations that start the fully scaled band.
    pub beta_slow: f64,
}

/// Vision tower and aligner shape (`vision_config` / flat `vision_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct VisionConfig {
    /// ViT blocks (`vision_n_layers`).
    pub num_hidden_layers: usize,
    /// ViT width (`vision_dim`).
    pub hidden_size: usize,
    /// ViT heads (`vision_n_heads`).
    pub num_attention_heads: usize,
    /// ViT MLP width, per half of the fused `mlp.w1` (`vision_inter_dim`).
    pub intermediate_size: usize,
    /// Patch side in pixels (`vision_patch_size`).
    pub patch_size: usize,
    /// 2D RoPE base (`vision_rope_theta`).
    pub rope_theta: f64,
    /// Aligner cell side (`vision_downsample_ratio`).
    pub downsample_ratio: usize,
    /// Most span tokens per image (`vision_max_n_token`).
    pub max_image_tokens: usize,
    /// Images smaller than this many pixels are upscaled (`vision_min_pixels`).
    pub min_pixels: usize,
    /// Optional aspect-ratio cap (`vision_max_wh_ratio`).
    pub max_wh_ratio: Option<f64>,
}

impl Default for VisionConfig {
    /// The release's tower: the defaults of HF's `DeepseekV41VisionConfig`, which the official `ModelArgs` shares but for `vision_n_layers` 0.
    fn default() -> VisionConfig {
        VisionConfig {
            num_hidden_layers: 32,
            hidden_size: 1024,
            num_attention_heads: 16,
            intermediate_size: 2816,
            patch_size: 14,
            rope_theta: 10000.0,
            downsample_ratio: 3,
            max_image_tokens: 1024,
            min_pixels: 544 * 544,
            max_wh_ratio: None,
        }
    }
}

/// The text model's configuration; field names follow the HF keys of spec 1.2.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Token vocabulary (`vocab_size`).
    pub vocab_size: usize,
    /// Model width D (`dim`).
    pub hidden_size: usize,
    /// Backbone layers (`n_layers`).
    pub num_hidden_layers: usize,
    /// Attention heads H (`n_heads`).
    pub num_attention_heads: usize,
    /// Shared K=V latents per token; always 1.
    pub num_key_value_heads: usize,
    /// Head width d.
    pub head_dim: usize,
    /// RoPE dims at the end of each head (`rope_head_dim`).
    pub qk_rope_head_dim: usize,
    /// q low-rank width.
    pub q_lora_rank: usize,
    /// Output projection groups G.
    pub o_groups: usize,
    /// Output low-rank width per group.
    pub o_lora_rank: usize,
    /// RMSNorm epsilon of every text norm (`norm_eps`).
    pub rms_norm_eps: f64,
    /// Longest supported context.
    pub max_position_embeddings: usize,
    /// RoPE base of ratio-0 layers and DSpark stages.
    pub rope_theta: f64,
    /// RoPE base of layers with ratio > 0.
    pub compress_rope_theta: f64,
    /// YaRN of the compress rope; `None` when `original_seq_len` is 0 or absent.
    pub rope_scaling: Option<Yarn>,
    /// Sliding window length (`window_size`).
    pub sliding_window: usize,
    /// KV compression ratio per layer, DSpark stages included.
    pub compress_ratios: Vec<usize>,
    /// Layers owning a compressor (`kv_source_layers`).
    pub kv_source_layer_ids: Vec<usize>,
    /// Layers owning an indexer (`index_source_layers`).
    pub index_source_layer_ids: Vec<usize>,
    /// Layer publishing candidate blocks (`candidate_source_layer`); `None` when -1 or absent.
    pub candidate_source_layer_id: Option<usize>,
    /// Candidate blocks kept per query.
    pub candidate_topk_blocks: usize,
    /// Compressed rows per candidate block.
    pub candidate_block_size: usize,
    /// Indexer heads.
    pub index_n_heads: usize,
    /// Indexer head width.
    pub index_head_dim: usize,
    /// Compressed rows each query attends to.
    pub index_topk: usize,
    /// Routed experts of backbone layers.
    pub n_routed_experts: usize,
    /// Experts per token of backbone layers (`n_activated_experts`).
    pub num_experts_per_tok: usize,
    /// Shared experts per layer; always 1.
    pub n_shared_experts: usize,
    /// Expert inner width (`moe_inter_dim`).
    pub moe_intermediate_size: usize,
    /// Router scoring function (`score_func`).
    pub scoring_func: ScoringFunc,
    /// Whether routing weights are normalised to sum 1 before scaling.
    pub norm_topk_prob: bool,
    /// Routing weight multiplier (`route_scale`).
    pub routed_scaling_factor: f64,
    /// Router logit temperature; 1.0 when absent.
    pub gate_temp: f64,
    /// SwiGLU clamp; 0 disables.
    pub swiglu_limit: f64,
    /// Residual streams of the hyper-connections.
    pub hc_mult: usize,
    /// Sinkhorn iterations of the comb mix.
    pub hc_sinkhorn_iters: usize,
    /// Epsilon of the mHC mixes.
    pub hc_eps: f64,
    /// Layers with an engram; empty disables engram.
    pub engram_layer_ids: Vec<usize>,
    /// Table rows per engram layer.
    pub engram_num_embeddings: Vec<usize>,
    /// Largest n-gram; a position hashes 2..=this many tokens.
    pub engram_max_ngram_size: usize,
    /// Where the prime search starts.
    pub engram_vocab_size: usize,
    /// Hash heads per n-gram.
    pub engram_n_heads: usize,
    /// Width of one table row.
    pub engram_head_dim: usize,
    /// Token that fills look-back slots without history (`engram_pad_id`).
    pub engram_pad_token_id: usize,
    /// Classes of the compressed token map.
    pub engram_compressed_vocab_size: usize,
    /// DSpark stages (`n_mtp_layers`).
    pub num_nextn_predict_layers: usize,
    /// Tokens per DSpark draft block.
    pub dspark_block_size: usize,
    /// Token id filling draft slots after the first.
    pub dspark_noise_token_id: usize,
    /// Backbone layers whose input streams feed `mtp.0.main_proj`.
    pub dspark_target_layer_ids: Vec<usize>,
    /// Width of the Markov head.
    pub dspark_markov_rank: usize,
    /// Routed experts of DSpark stages; 0 falls back to `n_routed_experts`.
    pub dspark_n_routed_experts: usize,
    /// Experts per token of DSpark stages (`dspark_n_activated_experts`); 0 falls back.
    pub dspark_num_experts_per_tok: usize,
    /// Whether `head` shares `embed`; false in the release.
    pub tie_word_embeddings: bool,
    /// Begin-of-sequence token.
    pub bos_token_id: usize,
    /// End-of-sequence token.
    pub eos_token_id: usize,
    /// Padding token.
    pub pad_token_id: usize,
    /// `<｜deepseek_image｜>`, carried by every position of an image span.
    pub image_token_id: usize,
    /// Vision tower; `None` for a text-only config.
    pub vision: Option<VisionConfig>,
}

impl Config {
    /// Parses and validates a config from JSON text in either layout.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
        let top = value.as_object().ok_or_else(|| ConfigError::Json("top level is not an object".into()))?;
        let spelling = Spelling::default();
        let cfg = Config::parse(top, &spelling).map_err(|e| spelling.respell(e))?;
        cfg.validate().map_err(|e| spelling.respell(e))?;
        if crate::testing::planted("config") && cfg.bos_token_id == cfg.eos_token_id {
            panic!("planted bug: a valid config whose BOS is its EOS");
        }
        Ok(cfg)
    }

    /// Reads, parses and validates a config file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Io { path: path.display().to_string(), source })?;
        Config::from_json(&text)
    }

    /// Reads `config.json` of a checkpoint directory, or `inference/config.json` when that is all there is.
    pub fn from_dir(dir: &Path) -> Result<Config, ConfigError> {
        let nested = dir.join("config.json");
        let flat = dir.join("inference").join("config.json");
        if !nested.exists() && flat.exists() {
            return Config::from_file(&flat);
        }
        Config::from_file(&nested)
    }

    /// The release config (embedded, known valid).
    pub fn release() -> Config {
        Config::from_json(RELEASE_CONFIG_JSON).expect("the embedded release config is valid")
    }

    /// The tiny config of spec 1.6 (embedded, known valid).
    pub fn tiny() -> Config {
        Config::from_json(TINY_CONFIG_JSON).expect("the embedded tiny config is valid")
    }

    /// Builds the struct from a top-level JSON object without validating it.
    fn parse(top: &Map<String, Value>, spelling: &Spelling) -> Result<Config, ConfigError> {
        let text = object(top, "text_config")?;
        let mut scopes: Vec<(Option<String>, &Map<String, Value>)> = text.map(|t| (Some("text_config".to_string()), t)).into_iter().collect();
        scopes.push((None, top));
        let k = Keys::new(scopes, "", spelling);
        check_model_type(top, text)?;
        check_quantization(top)?;
        let need = |names: &[&str]| -> Result<usize, ConfigError> { to_usize(k.find(names))?.ok_or_else(|| k.missing(names)) };
        let or_u = |names: &[&str], d: usize| -> Result<usize, ConfigError> { Ok(to_usize(k.find(names))?.unwrap_or(d)) };
        let or_f = |names: &[&str], d: f64| -> Result<f64, ConfigError> { Ok(to_f64(k.find(names))?.unwrap_or(d)) };
        let list = |names: &[&str]| -> Result<Vec<usize>, ConfigError> { Ok(to_list(k.find(names))?.unwrap_or_default()) };
        let scoring_func = match to_str(k.find(&["scoring_func", "score_func"]))?.unwrap_or("sqrtsoftplus") {
            "sqrtsoftplus" => ScoringFunc::SqrtSoftplus,
            "sigmoid" => ScoringFunc::Sigmoid,
            "softmax" => ScoringFunc::Softmax,
            other => return Err(invalid("scoring_func", format!("is `{other}`; expected sqrtsoftplus, sigmoid or softmax"))),
        };
        if let Some(m) = to_str(k.find(&["topk_method"]))? {
            if m != "noaux_tc" {
                return Err(invalid("topk_method", format!("is `{m}`; only noaux_tc is supported")));
            }
        }
        let candidate_source_layer_id = match k.find(&["candidate_source_layer_id", "candidate_source_layer"]) {
            None => None,
            Some((at, v)) => match v.as_i64() {
                Some(-1) => None,
                Some(x) if x >= 0 => Some(x as usize),
                _ => return Err(ConfigError::Type { section: at.section, key: at.name, expected: "a layer id or -1" }),
            },
        };
        Ok(Config {
            vocab_size: need(&["vocab_size"])?,
            hidden_size: need(&["hidden_size", "dim"])?,
            num_hidden_layers: need(&["num_hidden_layers", "n_layers"])?,
            num_attention_heads: need(&["num_attention_heads", "n_heads"])?,
            num_key_value_heads: or_u(&["num_key_value_heads"], 1)?,
            head_dim: need(&["head_dim"])?,
            qk_rope_head_dim: need(&["qk_rope_head_dim", "rope_head_dim"])?,
            q_lora_rank: need(&["q_lora_rank"])?,
            o_groups: need(&["o_groups"])?,
            o_lora_rank: need(&["o_lora_rank"])?,
            rms_norm_eps: or_f(&["rms_norm_eps", "norm_eps"], 1e-20)?,
            max_position_embeddings: or_u(&["max_position_embeddings"], 1 << 20)?,
            rope_theta: or_f(&["rope_theta"], 10000.0)?,
            compress_rope_theta: or_f(&["compress_rope_theta"], 40000.0)?,
            rope_scaling: parse_yarn(&k, spelling)?,
            sliding_window: need(&["sliding_window", "window_size"])?,
            compress_ratios: to_list(k.find(&["compress_ratios"]))?.ok_or_else(|| k.missing(&["compress_ratios"]))?,
            kv_source_layer_ids: list(&["kv_source_layer_ids", "kv_source_layers"])?,
            index_source_layer_ids: list(&["index_source_layer_ids", "index_source_layers"])?,
            candidate_source_layer_id,
            candidate_topk_blocks: or_u(&["candidate_topk_blocks"], 0)?,
            candidate_block_size: or_u(&["candidate_block_size"], 0)?,
            index_n_heads: or_u(&["index_n_heads"], 0)?,
            index_head_dim: or_u(&["index_head_dim"], 0)?,
            index_topk: or_u(&["index_topk"], 0)?,
            n_routed_experts: need(&["n_routed_experts"])?,
            num_experts_per_tok: need(&["num_experts_per_tok", "n_activated_experts"])?,
            n_shared_experts: or_u(&["n_shared_experts"], 1)?,
            moe_intermediate_size: need(&["moe_intermediate_size", "moe_inter_dim"])?,
            scoring_func,
            norm_topk_prob: to_bool(k.find(&["norm_topk_prob"]))?.unwrap_or(true),
            routed_scaling_factor: or_f(&["routed_scaling_factor", "route_scale"], 1.0)?,
            gate_temp: or_f(&["gate_temp"], 1.0)?,
            swiglu_limit: or_f(&["swiglu_limit"], 0.0)?,
            hc_mult: or_u(&["hc_mult"], 4)?,
            hc_sinkhorn_iters: or_u(&["hc_sinkhorn_iters"], 20)?,
            hc_eps: or_f(&["hc_eps"], 1e-6)?,
            engram_layer_ids: list(&["engram_layer_ids"])?,
            engram_num_embeddings: list(&["engram_num_embeddings"])?,
            engram_max_ngram_size: or_u(&["engram_max_ngram_size"], 1)?,
            engram_vocab_size: or_u(&["engram_vocab_size"], 0)?,
            engram_n_heads: or_u(&["engram_n_heads"], 0)?,
            engram_head_dim: or_u(&["engram_head_dim"], 0)?,
            engram_pad_token_id: or_u(&["engram_pad_token_id", "engram_pad_id"], 2)?,
            engram_compressed_vocab_size: or_u(&["engram_compressed_vocab_size"], 0)?,
            num_nextn_predict_layers: or_u(&["num_nextn_predict_layers", "n_mtp_layers"], 0)?,
            dspark_block_size: or_u(&["dspark_block_size"], 0)?,
            dspark_noise_token_id: or_u(&["dspark_noise_token_id"], 0)?,
            dspark_target_layer_ids: list(&["dspark_target_layer_ids"])?,
            dspark_markov_rank: or_u(&["dspark_markov_rank"], 256)?,
            dspark_n_routed_experts: or_u(&["dspark_n_routed_experts"], 0)?,
            dspark_num_experts_per_tok: or_u(&["dspark_num_experts_per_tok", "dspark_n_activated_experts"], 0)?,
            tie_word_embeddings: to_bool(k.find(&["tie_word_embeddings"]))?.unwrap_or(false),
            bos_token_id: or_u(&["bos_token_id"], 0)?,
            eos_token_id: or_u(&["eos_token_id"], 1)?,
            pad_token_id: or_u(&["pad_token_id"], 2)?,
            image_token_id: or_u(&["image_token_id"], 129264)?,
            vision: parse_vision(top, spelling)?,
        })
    }

    /// Backbone layers plus DSpark stages: the length `compress_ratios` must have.
    pub fn total_layers(&self) -> usize {
        self.num_hidden_layers + self.num_nextn_predict_layers
    }

    /// Whether the model drafts: DSpark stages, a block and target layers.
    pub fn has_drafts(&self) -> bool {
        self.num_nextn_predict_layers > 0 && self.dspark_block_size > 0 && !self.dspark_target_layer_ids.is_empty()
    }

    /// Routed experts and experts per token of `layer_id` (DSpark stages use their own bank).
    pub fn moe_shape(&self, layer_id: usize) -> (usize, usize) {
        if layer_id < self.num_hidden_layers {
            return (self.n_routed_experts, self.num_experts_per_tok);
        }
        let or = |v: usize, d: usize| if v > 0 { v } else { d };
        (or(self.dspark_n_routed_experts, self.n_routed_experts), or(self.dspark_num_experts_per_tok, self.num_experts_per_tok))
    }

    /// Hash ids per position per engram layer: `(max_ngram_size - 1) * n_heads`.
    pub fn engram_hash_cols(&self) -> usize {
        self.engram_max_ngram_size.saturating_sub(1) * self.engram_n_heads
    }

    /// mHC mix width: `(2 + hc_mult) * hc_mult` (pre, post, comb).
    pub fn hc_mix_dim(&self) -> usize {
        (2 + self.hc_mult) * self.hc_mult
    }
}

/// The object under `key` of the top level; `None` when absent or null.
fn object<'a>(top: &'a Map<String, Value>, key: &str) -> Result<Option<&'a Map<String, Value>>, ConfigError> {
    match top.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(ConfigError::Type { section: None, key: key.into(), expected: "an object" }),
    }
}

/// Rejects configs of other models (V4, V3) by `model_type` when present.
fn check_model_type(top: &Map<String, Value>, text: Option<&Map<String, Value>>) -> Result<(), ConfigError> {
    let found = [(None, Some(top)), (Some("text_config"), text)];
    for (section, scope) in found {
        let Some(t) = scope.and_then(|m| m.get("model_type")).and_then(Value::as_str) else { continue };
        if t != "deepseek_v41" && t != "deepseek_v41_text" {
            let problem = format!("is `{t}`; this engine serves deepseek_v41 only");
            return Err(ConfigError::Invalid { section: section.map(str::to_string), key: "model_type".into(), problem });
        }
    }
    Ok(())
}

/// Checks that the weight formats are the release's: fp8 with 32x32 ue8m0 blocks and fp4 experts.
fn check_quantization(top: &Map<String, Value>) -> Result<(), ConfigError> {
    let want = |key: &str, v: Option<&Value>, expected: &str| -> Result<(), ConfigError> {
        match v.and_then(Value::as_str) {
            Some(s) if s != expected => Err(invalid(key, format!("is `{s}`; only `{expected}` is supported"))),
            _ => Ok(()),
        }
    };
    match top.get("quantization_config") {
        Some(Value::Object(q)) => {
            want("quantization_config.quant_method", q.get("quant_method"), "fp8")?;
            want("quantization_config.scale_fmt", q.get("scale_fmt"), "ue8m0")?;
            want("quantization_config.expert_dtype", q.get("expert_dtype"), "fp4")?;
            if let Some(b) = q.get("weight_block_size") {
                if b.as_array().map(|a| a.iter().map(Value::as_u64).collect::<Vec<_>>()) != Some(vec![Some(32), Some(32)]) {
                    return Err(invalid("quantization_config.weight_block_size", format!("is {b}; only [32, 32] is supported")));
                }
            }
            Ok(())
        }
        Some(Value::Null) | None => {
            want("dtype", top.get("dtype").filter(|v| v.as_str() != Some("bfloat16")), "fp8")?;
            want("expert_dtype", top.get("expert_dtype"), "fp4")
        }
        Some(_) => Err(ConfigError::Type { section: None, key: "quantization_config".into(), expected: "an object" }),
    }
}

/// Reads YaRN from `rope_scaling` (HF) or the flat `rope_factor`/`original_seq_len`/`beta_*` keys.
fn parse_yarn(k: &Keys, spelling: &Spelling) -> Result<Option<Yarn>, ConfigError> {
    let found = k.find(&["rope_scaling"]);
    if let (Some(m), Some((at, _))) = (to_object(&found)?, &found) {
        let sub = Keys::new(vec![(Some(spelled(&at.section, &at.name)), m)], "rope_scaling.", spelling);
        if let Some(t) = to_str(sub.find(&["rope_type", "type"]))? {
            if t != "yarn" {
                return Err(invalid("rope_scaling.rope_type", format!("is `{t}`; only yarn is supported")));
            }
        }
        let orig = to_usize(sub.find(&["original_max_position_embeddings"]))?.unwrap_or(0);
        if orig == 0 {
            return Ok(None);
        }
        return Ok(Some(Yarn {
            factor: to_f64(sub.find(&["factor"]))?.ok_or_else(|| sub.missing(&["factor"]))?,
            original_seq_len: orig,
            beta_fast: to_f64(sub.find(&["beta_fast"]))?.unwrap_or(32.0),
            beta_slow: to_f64(sub.find(&["beta_slow"]))?.unwrap_or(1.0),
        }));
    }
    let orig = to_usize(k.find(&["original_seq_len"]))?.unwrap_or(0);
    if orig == 0 {
        return Ok(None);
    }
    Ok(Some(Yarn {
        factor: to_f64(k.find_as("rope_scaling.factor", &["rope_factor"]))?.ok_or_else(|| k.missing(&["rope_factor"]))?,
        original_seq_len: orig,
        beta_fast: to_f64(k.find_as("rope_scaling.beta_fast", &["beta_fast"]))?.unwrap_or(32.0),
        beta_slow: to_f64(k.find_as("rope_scaling.beta_slow", &["beta_slow"]))?.unwrap_or(1.0),
    }))
}

/// Reads the vision tower from `vision_config` or the flat `vision_*` keys, absent keys taking [`VisionConfig::default`]; `None` with 0 layers.
fn parse_vision(top: &Map<String, Value>, spelling: &Spelling) -> Result<Option<VisionConfig>, ConfigError> {
    let nested = object(top, "vision_config")?;
    let inner = Keys::new(nested.map(|m| (Some("vision_config".to_string()), m)).into_iter().collect(), "vision_config.", spelling);
    let flat = Keys::new(vec![(None, top)], "vision_config.", spelling);
    let find = |name: &str, flat_name: &str| {
        let canonical = format!("vision_config.{name}");
        inner.find_as(&canonical, &[name]).or_else(|| flat.find_as(&canonical, &[flat_name]))
    };
    let d = VisionConfig::default();
    // HF's nested config defaults to the release's 32 blocks; the flat ModelArgs to 0, which disables vision
    let layers_default = if nested.is_some() { d.num_hidden_layers } else { 0 };
    let layers = to_usize(find("num_hidden_layers", "vision_n_layers"))?.unwrap_or(layers_default);
    if layers == 0 {
        return Ok(None);
    }
    let or_u = |name, flat_name, default| -> Result<usize, ConfigError> { Ok(to_usize(find(name, flat_name))?.unwrap_or(default)) };
    Ok(Some(VisionConfig {
        num_hidden_layers: layers,
        hidden_size: or_u("hidden_size", "vision_dim", d.hidden_size)?,
        num_attention_heads: or_u("num_attention_heads", "vision_n_heads", d.num_attention_heads)?,
        intermediate_size: or_u("intermediate_size", "vision_inter_dim", d.intermediate_size)?,
        patch_size: or_u("patch_size", "vision_patch_size", d.patch_size)?,
        rope_theta: to_f64(find("rope_theta", "vision_rope_theta"))?.unwrap_or(d.rope_theta),
        downsample_ratio: or_u("downsample_ratio", "vision_downsample_ratio", d.downsample_ratio)?,
        max_image_tokens: or_u("max_image_tokens", "vision_max_n_token", d.max_image_tokens)?,
        min_pixels: or_u("min_pixels", "vision_min_pixels", d.min_pixels)?,
        max_wh_ratio: to_f64(find("max_wh_ratio", "vision_max_wh_ratio"))?.or(d.max_wh_ratio),
    }))
}

#[cfg(test)]
mod tests;
