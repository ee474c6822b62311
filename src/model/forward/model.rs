//! What the forward needs besides the executor: config, layer plan, the mapped checkpoint (engram rows), engram hash and RoPE tables.
use super::ForwardError;
use crate::exec::{EngramGate, HcParams, HcSite, RouteParams, ScoreFunc};
use crate::kernels::rope::table_row;
use crate::model::config::engram_layout::engram_primes;
use crate::weights::Checkpoint;
use crate::model::{Config, LayerPlan, RopeTable, ScoringFunc};
use crate::text::{hash_multipliers, LayerHash, NgramHasher, TokenMap};

/// One model ready to run: config, plan, checkpoint and the host-side tables.
pub struct Model<'c> {
    /// The config.
    pub cfg: Config,
    /// Every layer's role.
    pub plan: Vec<LayerPlan>,
    /// The checkpoint (engram table rows are read from it on the host).
    pub ckpt: &'c Checkpoint,
    /// Token id to engram compressed class.
    pub token_map: TokenMap,
    /// The engram hash, when the model has engram layers.
    pub hasher: Option<NgramHasher>,
    inv_freq_main: Vec<f64>,
    inv_freq_compress: Vec<f64>,
}

impl<'c> Model<'c> {
    /// Checks the token map against the config and builds the engram hash.
    pub fn new(cfg: Config, ckpt: &'c Checkpoint, token_map: TokenMap) -> Result<Model<'c>, ForwardError> {
        if token_map.classes_of.len() < cfg.vocab_size {
            return Err(ForwardError::Input(format!("the engram token map covers {} ids, the vocabulary has {}", token_map.classes_of.len(), cfg.vocab_size)));
        }
        let hasher = if cfg.engram_layer_ids.is_empty() {
            None
        } else {
            token_map.check_classes(cfg.engram_compressed_vocab_size)?;
            let vocab = cfg.engram_compressed_vocab_size as u64;
            let mut layers = Vec::new();
            for p in engram_primes(&cfg) {
                layers.push(LayerHash {
                    multipliers: hash_multipliers(p.layer_id as u64, vocab, cfg.engram_max_ngram_size)?,
                    primes: p.primes.iter().flatten().copied().collect(),
                    offsets: p.offsets.clone(),
                });
            }
            let pad = token_map.class(cfg.engram_pad_token_id as u32).ok_or_else(|| ForwardError::Input("the engram pad token has no class".into()))?;
            Some(NgramHasher::new(cfg.engram_max_ngram_size, cfg.engram_n_heads, pad, vocab, layers)?)
        };
        Ok(Model {
            plan: cfg.layer_plan(),
            inv_freq_main: cfg.rope_inv_freq(RopeTable::Main),
            inv_freq_compress: cfg.rope_inv_freq(RopeTable::Compress),
            cfg,
            ckpt,
            token_map,
            hasher,
        })
    }

    /// cos/sin rows `[n, rope_dim]` of `positions` in `table`.
    pub fn rope_rows(&self, table: RopeTable, positions: impl Iterator<Item = usize>) -> Vec<f32> {
        let f = match table {
            RopeTable::Main => &self.inv_freq_main,
            RopeTable::Compress => &self.inv_freq_compress,
        };
        positions.flat_map(|p| table_row(p, f)).collect()
    }

    /// `rms_norm_eps` as f32.
    pub fn eps(&self) -> f32 {
        self.cfg.rms_norm_eps as f32
    }

    /// mHC constants.
    pub fn hc(&self) -> HcParams {
        HcParams { hc: self.cfg.hc_mult, iters: self.cfg.hc_sinkhorn_iters, norm_eps: self.eps(), hc_eps: self.cfg.hc_eps as f32 }
    }

    /// The tensors of `prefix`'s mHC site `site` (`attn` or `ffn`).
    pub fn hc_site(&self, prefix: &str, site: &str) -> HcSite {
        HcSite { hc_fn: format!("{prefix}.hc_{site}_fn"), base: format!("{prefix}.hc_{site}_base"), scale: format!("{prefix}.hc_{site}_scale") }
    }

    /// Engram gate constants.
    pub fn engram_gate(&self) -> EngramGate {
        EngramGate { hc: self.cfg.hc_mult, d: self.cfg.hidden_size, eps: self.eps() }
    }

    /// Router constants of `plan`'s MoE.
    pub fn route(&self, plan: &LayerPlan) -> RouteParams {
        let func = match self.cfg.scoring_func {
            ScoringFunc::SqrtSoftplus => ScoreFunc::SqrtSoftplus,
            ScoringFunc::Sigmoid => ScoreFunc::Sigmoid,
            ScoringFunc::Softmax => ScoreFunc::Softmax,
        };
        let t = self.cfg.gate_temp;
        RouteParams {
            k: plan.num_experts_per_tok,
            func,
            inv_temp: (t != 1.0).then(|| (1.0 / t) as f32),
            normalize: self.cfg.norm_topk_prob,
            route_scale: self.cfg.routed_scaling_factor as f32,
        }
    }

    /// SwiGLU clamp: `swiglu_limit`, or none when it is not positive.
    pub fn swiglu_limit(&self) -> f32 {
        if self.cfg.swiglu_limit > 0.0 {
            self.cfg.swiglu_limit as f32
        } else {
            f32::INFINITY
        }
    }
}
