//! The float64 reference of DeepSeek-V4.1's text forward (spec 2): the official function with its exact quantization operators and bf16 rounding points, every computation in f64.
pub mod attention;
pub mod draft;
pub mod engram;
mod forward;
pub mod index;
pub mod mhc;
pub mod moe;
pub mod quant;
pub mod vision;
mod state;
pub mod weights;

pub use forward::Forcing;
pub use state::{LayerState, State};

use crate::model::{CheckpointError, Config, Dtype, LayerMode, LayerPlan};
use crate::weights::Checkpoint;
use crate::model::config::engram_layout::engram_primes;
use crate::text::{hash_multipliers, EngramHashError, LayerHash, NgramHasher, TokenMap};
use attention::Attention;
use engram::Engram;
use index::{Compressor, Indexer};
use mhc::HcSite;
use moe::{Expert, Moe};
use weights::{bf16_linear, fp4_linear, fp8_as_bf16_linear, fp8_linear, fp8_rows, vector, Linear};

/// Why the reference could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// A tensor is missing or the checkpoint is unusable.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A tensor has an unexpected dtype.
    #[error("tensor `{name}` has dtype {found}, the reference expects {expected}")]
    Dtype { name: String, expected: Dtype, found: Dtype },
    /// A tensor has an unexpected shape.
    #[error("tensor `{name}` has shape {found:?}, the reference expects {expected:?}")]
    Shape { name: String, expected: Vec<usize>, found: Vec<usize> },
    /// The engram hash could not be set up or run.
    #[error(transparent)]
    Engram(#[from] EngramHashError),
    /// An input does not fit the model.
    #[error("input: {0}")]
    Input(String),
}

/// One backbone layer's weights and role.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Role from the layer plan.
    pub plan: LayerPlan,
    /// `attn_norm` weight.
    pub attn_norm: Vec<f64>,
    /// `ffn_norm` weight.
    pub ffn_norm: Vec<f64>,
    /// Attention-site mHC (`hc_attn_*`).
    pub hc_attn: HcSite,
    /// FFN-site mHC (`hc_ffn_*`).
    pub hc_ffn: HcSite,
    /// Attention weights.
    pub attn: Attention,
    /// MoE weights.
    pub ffn: Moe,
    /// Engram weights, at engram layers.
    pub engram: Option<Engram>,
}

/// The reference model: config, f64 weights of the backbone, and the engram hash.
#[derive(Debug, Clone)]
pub struct Model {
    /// The config it was built from.
    pub cfg: Config,
    /// `embed.weight` `[V, D]`.
    pub embed: Vec<f64>,
    /// Backbone layers in order.
    pub layers: Vec<Layer>,
    /// Final `norm.weight`.
    pub norm: Vec<f64>,
    /// `head.weight` `[V, D]`.
    pub head: Linear,
    /// Token id to engram class.
    pub token_map: TokenMap,
    /// The n-gram hash of every engram layer.
    pub hasher: Option<NgramHasher>,
    /// The DSpark draft head, when the model has one.
    pub dspark: Option<draft::Dspark>,
    /// The vision tower and aligner, when the config has one.
    pub vision: Option<vision::Vision>,
}

/// One site's `hc_{site}_fn`, `_base`, `_scale`.
fn hc_site(ck: &Checkpoint, cfg: &Config, p: &str, site: &str) -> Result<HcSite, ReferenceError> {
    let (mix, width) = (cfg.hc_mix_dim(), cfg.hc_mult * cfg.hidden_size);
    let s = vector(ck, &format!("{p}.hc_{site}_scale"), 3)?;
    Ok(HcSite {
        r#fn: vector(ck, &format!("{p}.hc_{site}_fn"), mix * width)?,
        base: vector(ck, &format!("{p}.hc_{site}_base"), mix)?,
        scale: [s[0], s[1], s[2]],
    })
}

/// One SwiGLU expert under `base` (fp8 shared or fp4 routed).
fn expert(ck: &Checkpoint, cfg: &Config, base: &str, fp4: bool) -> Result<Expert, ReferenceError> {
    let (d, i) = (cfg.hidden_size, cfg.moe_intermediate_size);
    let load = if fp4 { fp4_linear } else { fp8_linear };
    Ok(Expert { w1: load(ck, &format!("{base}.w1"), i, d)?, w2: load(ck, &format!("{base}.w2"), d, i)?, w3: load(ck, &format!("{base}.w3"), i, d)? })
}

/// Loads one backbone layer or DSpark stage.
fn layer(ck: &Checkpoint, cfg: &Config, plan: LayerPlan) -> Result<Layer, ReferenceError> {
    let p = plan.prefix();
    let (d, h, hd, q) = (cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim, cfg.q_lora_rank);
    let (g, r, ihd, inh) = (cfg.o_groups, cfg.o_lora_rank, cfg.index_head_dim, cfg.index_n_heads);
    let compressor = if plan.mode == LayerMode::Full {
        Some(Compressor {
            wkv: bf16_linear(ck, &format!("{p}.attn.compressor.wkv"), hd, d)?,
            wgate: if plan.has_wgate { Some(bf16_linear(ck, &format!("{p}.attn.compressor.wgate"), hd, d)?) } else { None },
            norm: vector(ck, &format!("{p}.attn.compressor.norm.weight"), hd)?,
            wk: bf16_linear(ck, &format!("{p}.attn.indexer.wk"), ihd, hd)?,
            k_norm: vector(ck, &format!("{p}.attn.indexer.k_norm.weight"), ihd)?,
        })
    } else {
        None
    };
    let indexer = if plan.is_index_source() {
        Some(Indexer {
            wq_b: fp8_linear(ck, &format!("{p}.attn.indexer.wq_b"), inh * ihd, q)?,
            weights_proj: bf16_linear(ck, &format!("{p}.attn.indexer.weights_proj"), inh, d)?,
        })
    } else {
        None
    };
    let attn = Attention {
        wq_a: fp8_linear(ck, &format!("{p}.attn.wq_a"), q, d)?,
        q_norm: vector(ck, &format!("{p}.attn.q_norm.weight"), q)?,
        wq_b: fp8_linear(ck, &format!("{p}.attn.wq_b"), h * hd, q)?,
        wkv: fp8_linear(ck, &format!("{p}.attn.wkv"), hd, d)?,
        kv_norm: vector(ck, &format!("{p}.attn.kv_norm.weight"), hd)?,
        wo_a: fp8_as_bf16_linear(ck, &format!("{p}.attn.wo_a"), g * r, h * hd / g)?,
        wo_b: fp8_linear(ck, &format!("{p}.attn.wo_b"), d, g * r)?,
        attn_sink: vector(ck, &format!("{p}.attn.attn_sink"), h)?,
        compressor,
        indexer,
        inv_freq: cfg.rope_inv_freq(plan.rope),
    };
    let n_exp = plan.n_routed_experts;
    let bias_vl_name = format!("{p}.ffn.gate.bias_vl");
    let ffn = Moe {
        gate: bf16_linear(ck, &format!("{p}.ffn.gate"), n_exp, d)?,
        bias: vector(ck, &format!("{p}.ffn.gate.bias"), n_exp)?,
        bias_vl: if ck.get(&bias_vl_name).is_some() { Some(vector(ck, &bias_vl_name, n_exp)?) } else { None },
        experts: (0..n_exp).map(|e| expert(ck, cfg, &format!("{p}.ffn.experts.{e}"), true)).collect::<Result<_, _>>()?,
        shared_experts: expert(ck, cfg, &format!("{p}.ffn.shared_experts"), false)?,
        topk: plan.num_experts_per_tok,
    };
    let engram = match plan.engram {
        None => None,
        Some(index) => {
            let (rows, w, hc) = (cfg.engram_num_embeddings[index], cfg.engram_head_dim, cfg.hc_mult);
            let qw = vector(ck, &format!("{p}.engram.q_weight"), hc * d)?;
            let kw = vector(ck, &format!("{p}.engram.k_weight"), hc * d)?;
            Some(Engram {
                index,
                embed: fp8_rows(ck, &format!("{p}.engram.embed"), rows, w)?,
                head_dim: w,
                wkv: fp8_linear(ck, &format!("{p}.engram.wkv"), d * (hc + 1), cfg.engram_hash_cols() * w)?,
                weight: qw.iter().zip(&kw).map(|(a, b)| a * b).collect(),
            })
        }
    };
    Ok(Layer {
        attn_norm: vector(ck, &format!("{p}.attn_norm.weight"), d)?,
        ffn_norm: vector(ck, &format!("{p}.ffn_norm.weight"), d)?,
        hc_attn: hc_site(ck, cfg, &p, "attn")?,
        hc_ffn: hc_site(ck, cfg, &p, "ffn")?,
        attn,
        ffn,
        engram,
        plan,
    })
}

impl Model {
    /// Builds the reference with the synthetic engram map `id mod engram_compressed_vocab_size` (tiny checkpoints).
    pub fn new(cfg: &Config, ck: &Checkpoint) -> Result<Model, ReferenceError> {
        let map = TokenMap::synthetic(cfg.vocab_size, cfg.engram_compressed_vocab_size.max(1) as u32);
        Model::with_token_map(cfg, ck, map)
    }

    /// Builds the reference with a given engram token map.
    pub fn with_token_map(cfg: &Config, ck: &Checkpoint, token_map: TokenMap) -> Result<Model, ReferenceError> {
        let (v, d) = (cfg.vocab_size, cfg.hidden_size);
        let embed = vector(ck, "embed.weight", v * d)?;
        let head = if cfg.tie_word_embeddings {
            Linear { out: v, inp: d, w: embed.clone(), quant_input: false }
        } else {
            bf16_linear(ck, "head", v, d)?
        };
        let layers = cfg.layer_plan().into_iter().take(cfg.num_hidden_layers).map(|p| layer(ck, cfg, p)).collect::<Result<_, _>>()?;
        let hasher = if cfg.engram_layer_ids.is_empty() {
            None
        } else {
            let pad = token_map.class(cfg.engram_pad_token_id as u32).ok_or_else(|| ReferenceError::Input("engram pad id outside the token map".into()))?;
            let vocab = cfg.engram_compressed_vocab_size as u64;
            let layers = engram_primes(cfg)
                .into_iter()
                .map(|e| {
                    Ok(LayerHash {
                        multipliers: hash_multipliers(e.layer_id as u64, vocab, cfg.engram_max_ngram_size)?,
                        primes: e.primes.iter().flatten().copied().collect(),
                        offsets: e.offsets,
                    })
                })
                .collect::<Result<_, EngramHashError>>()?;
            Some(NgramHasher::new(cfg.engram_max_ngram_size, cfg.engram_n_heads, pad, vocab, layers)?)
        };
        let norm = vector(ck, "norm.weight", d)?;
        let dspark = draft::Dspark::load(ck, cfg)?;
        let vision = vision::Vision::load(ck, cfg)?;
        Ok(Model { cfg: cfg.clone(), embed, layers, norm, head, token_map, hasher, dspark, vision })
    }

    /// A fresh per-sequence state at position 0.
    pub fn new_state(&self) -> State {
        State::new(self.layers.len())
    }
}
