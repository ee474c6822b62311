//! Config validation: block divisibility, the CSA2 source graph, engram, DSpark and vision consistency.
use crate::model::config::{invalid, Config, ConfigError};
use crate::model::config::engram_layout::engram_primes;

/// Longest engram n-gram a config may ask for.
const MAX_NGRAM: usize = 16;
/// Most engram hash heads a config may ask for.
const MAX_ENGRAM_HEADS: usize = 64;

/// The weight and activation quantization block.
const BLOCK: usize = 32;

/// `key` must be > 0.
fn positive(key: &str, v: usize) -> Result<(), ConfigError> {
    if v == 0 {
        return Err(invalid(key, "must be > 0"));
    }
    Ok(())
}

/// `key` must be a positive multiple of the 32 block.
fn blocked(key: &str, v: usize) -> Result<(), ConfigError> {
    if v == 0 || !v.is_multiple_of(BLOCK) {
        return Err(invalid(key, format!("is {v}; must be a positive multiple of the {BLOCK} quantization block")));
    }
    Ok(())
}

/// `key` must list strictly increasing backbone layer ids.
fn layer_list(key: &str, ids: &[usize], n_layers: usize) -> Result<(), ConfigError> {
    for (i, &l) in ids.iter().enumerate() {
        if l >= n_layers {
            return Err(invalid(key, format!("lists layer {l}, outside the {n_layers} backbone layers")));
        }
        if i > 0 && ids[i - 1] >= l {
            return Err(invalid(key, format!("must be strictly increasing; {} then {l}", ids[i - 1])));
        }
    }
    Ok(())
}

/// A token id must lie inside the vocabulary.
fn token(key: &str, id: usize, vocab: usize) -> Result<(), ConfigError> {
    if id >= vocab {
        return Err(invalid(key, format!("is {id}, outside the vocabulary of {vocab}")));
    }
    Ok(())
}

/// A float must be finite and at least `min`.
fn float_at_least(key: &str, v: f64, min: f64) -> Result<(), ConfigError> {
    if !v.is_finite() || v < min {
        return Err(invalid(key, format!("is {v}; must be finite and >= {min}")));
    }
    Ok(())
}

impl Config {
    /// The nearest of `ids` at or before `layer`.
    pub(crate) fn nearest_at_or_before(ids: &[usize], layer: usize) -> Option<usize> {
        ids.iter().copied().filter(|&s| s <= layer).max()
    }

    /// Checks every structural rule the forward and the checkpoint layout rely on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_dims()?;
        self.validate_sources()?;
        self.validate_moe()?;
        self.validate_engram()?;
        self.validate_dspark()?;
        self.validate_vision()
    }

    /// Widths, block divisibility, rope dims, float ranges and token ids.
    fn validate_dims(&self) -> Result<(), ConfigError> {
        positive("vocab_size", self.vocab_size)?;
        positive("num_hidden_layers", self.num_hidden_layers)?;
        positive("num_attention_heads", self.num_attention_heads)?;
        positive("o_groups", self.o_groups)?;
        positive("sliding_window", self.sliding_window)?;
        positive("hc_mult", self.hc_mult)?;
        positive("hc_sinkhorn_iters", self.hc_sinkhorn_iters)?;
        if self.num_key_value_heads != 1 {
            return Err(invalid("num_key_value_heads", format!("is {}; V4.1 has one shared K=V latent", self.num_key_value_heads)));
        }
        blocked("hidden_size", self.hidden_size)?;
        blocked("q_lora_rank", self.q_lora_rank)?;
        blocked("head_dim", self.head_dim)?;
        blocked("o_lora_rank", self.o_lora_rank)?;
        blocked("moe_intermediate_size", self.moe_intermediate_size)?;
        if !self.num_attention_heads.is_multiple_of(self.o_groups) {
            let (h, g) = (self.num_attention_heads, self.o_groups);
            return Err(invalid("o_groups", format!("is {g}; must divide num_attention_heads {h}")));
        }
        blocked("num_attention_heads * head_dim / o_groups", self.num_attention_heads * self.head_dim / self.o_groups)?;
        let rd = self.qk_rope_head_dim;
        if rd == 0 || !rd.is_multiple_of(2) || rd > self.head_dim {
            return Err(invalid("qk_rope_head_dim", format!("is {rd}; must be even, > 0 and <= head_dim {}", self.head_dim)));
        }
        float_at_least("rms_norm_eps", self.rms_norm_eps, 0.0)?;
        float_at_least("hc_eps", self.hc_eps, 0.0)?;
        float_at_least("rope_theta", self.rope_theta, 1.0)?;
        float_at_least("compress_rope_theta", self.compress_rope_theta, 1.0)?;
        if let Some(y) = &self.rope_scaling {
            float_at_least("rope_scaling.factor", y.factor, 1.0)?;
            float_at_least("rope_scaling.beta_fast", y.beta_fast, f64::MIN_POSITIVE)?;
            float_at_least("rope_scaling.beta_slow", y.beta_slow, f64::MIN_POSITIVE)?;
        }
        token("bos_token_id", self.bos_token_id, self.vocab_size)?;
        token("eos_token_id", self.eos_token_id, self.vocab_size)?;
        token("pad_token_id", self.pad_token_id, self.vocab_size)
    }

    /// The compressed-KV source graph: ratios, KV sources, index sources, the candidate source.
    fn validate_sources(&self) -> Result<(), ConfigError> {
        let n = self.num_hidden_layers;
        let r = &self.compress_ratios;
        if r.len() != self.total_layers() {
            return Err(invalid(
                "compress_ratios",
                format!(
                    "has {} entries; need num_hidden_layers {n} + num_nextn_predict_layers {} = {}",
                    r.len(),
                    self.num_nextn_predict_layers,
                    self.total_layers()
                ),
            ));
        }
        if let Some(s) = (n..r.len()).find(|&l| r[l] != 0) {
            return Err(invalid("compress_ratios", format!("entry {s} (DSpark stage {}) is {}; DSpark stages must be 0", s - n, r[s])));
        }
        layer_list("kv_source_layer_ids", &self.kv_source_layer_ids, n)?;
        layer_list("index_source_layer_ids", &self.index_source_layer_ids, n)?;
        for (key, ids) in [("kv_source_layer_ids", &self.kv_source_layer_ids), ("index_source_layer_ids", &self.index_source_layer_ids)] {
            if let Some(&l) = ids.iter().find(|&&l| r[l] == 0) {
                return Err(invalid(key, format!("lists layer {l}, whose compress ratio is 0")));
            }
        }
        if let Some(&l) = self.kv_source_layer_ids.iter().find(|l| !self.index_source_layer_ids.contains(l)) {
            return Err(invalid("index_source_layer_ids", format!("lacks KV source layer {l}; every KV source indexes its own keys")));
        }
        for l in (0..n).filter(|&l| r[l] > 0) {
            let Some(s) = Config::nearest_at_or_before(&self.kv_source_layer_ids, l) else {
                return Err(invalid("kv_source_layer_ids", format!("has no source at or before layer {l} (ratio {})", r[l])));
            };
            if r[s] != r[l] {
                return Err(invalid("kv_source_layer_ids", format!("layer {l} (ratio {}) would read KV source {s} of ratio {}", r[l], r[s])));
            }
        }
        if r[..n].iter().any(|&x| x > 0) {
            blocked("index_head_dim", self.index_head_dim)?;
            positive("index_n_heads", self.index_n_heads)?;
            positive("index_topk", self.index_topk)?;
            if self.qk_rope_head_dim > self.index_head_dim {
                let (rd, ih) = (self.qk_rope_head_dim, self.index_head_dim);
                return Err(invalid("qk_rope_head_dim", format!("is {rd}; must be <= index_head_dim {ih}")));
            }
        }
        let Some(c) = self.candidate_source_layer_id else { return Ok(()) };
        if !self.index_source_layer_ids.contains(&c) {
            return Err(invalid("candidate_source_layer_id", format!("is {c}, which is not an index source")));
        }
        if r[c] != 1 {
            return Err(invalid("candidate_source_layer_id", format!("is {c}, whose ratio is {}; the candidate source must have ratio 1", r[c])));
        }
        positive("candidate_topk_blocks", self.candidate_topk_blocks)?;
        positive("candidate_block_size", self.candidate_block_size)?;
        let src = Config::nearest_at_or_before(&self.kv_source_layer_ids, c);
        if let Some(&l) = self.index_source_layer_ids.iter().find(|&&l| l > c && Config::nearest_at_or_before(&self.kv_source_layer_ids, l) != src) {
            return Err(invalid("candidate_source_layer_id", format!("layer {l} would mask with candidates of layer {c} over a different KV source")));
        }
        Ok(())
    }

    /// Expert counts of the backbone and of the DSpark stages.
    fn validate_moe(&self) -> Result<(), ConfigError> {
        if self.n_shared_experts != 1 {
            return Err(invalid("n_shared_experts", format!("is {}; the model has exactly 1", self.n_shared_experts)));
        }
        float_at_least("gate_temp", self.gate_temp, f64::MIN_POSITIVE)?;
        float_at_least("swiglu_limit", self.swiglu_limit, 0.0)?;
        float_at_least("routed_scaling_factor", self.routed_scaling_factor, 0.0)?;
        let check = |layer: usize, e_key: &str, k_key: &str| -> Result<(), ConfigError> {
            let (e, k) = self.moe_shape(layer);
            positive(e_key, e)?;
            if k == 0 || k > e {
                return Err(invalid(k_key, format!("is {k}; must be between 1 and the {e} experts")));
            }
            Ok(())
        };
        check(0, "n_routed_experts", "num_experts_per_tok")?;
        if self.num_nextn_predict_layers > 0 {
            check(self.num_hidden_layers, "dspark_n_routed_experts", "dspark_num_experts_per_tok")?;
        }
        Ok(())
    }

    /// Engram arrays, table widths and the prime-derived row counts.
    fn validate_engram(&self) -> Result<(), ConfigError> {
        if self.engram_layer_ids.is_empty() {
            return Ok(());
        }
        layer_list("engram_layer_ids", &self.engram_layer_ids, self.num_hidden_layers)?;
        let (ids, rows) = (&self.engram_layer_ids, &self.engram_num_embeddings);
        if rows.len() != ids.len() {
            return Err(invalid("engram_num_embeddings", format!("has {} entries for {} engram_layer_ids", rows.len(), ids.len())));
        }
        if !(2..=MAX_NGRAM).contains(&self.engram_max_ngram_size) {
            return Err(invalid("engram_max_ngram_size", format!("is {}; must be in 2..={MAX_NGRAM}", self.engram_max_ngram_size)));
        }
        positive("engram_n_heads", self.engram_n_heads)?;
        if self.engram_n_heads > MAX_ENGRAM_HEADS {
            return Err(invalid("engram_n_heads", format!("is {}; must be at most {MAX_ENGRAM_HEADS}", self.engram_n_heads)));
        }
        blocked("engram_head_dim", self.engram_head_dim)?;
        positive("engram_vocab_size", self.engram_vocab_size)?;
        positive("engram_compressed_vocab_size", self.engram_compressed_vocab_size)?;
        token("engram_pad_token_id", self.engram_pad_token_id, self.vocab_size)?;
        for (i, p) in engram_primes(self).iter().enumerate() {
            if rows[i] as u64 != p.rows {
                let l = p.layer_id;
                return Err(invalid("engram_num_embeddings", format!("entry {i} is {}; the primes of layer {l} sum to {}", rows[i], p.rows)));
            }
        }
        Ok(())
    }

    /// DSpark stages: targets, block size, special tokens.
    fn validate_dspark(&self) -> Result<(), ConfigError> {
        if self.num_nextn_predict_layers == 0 {
            return Ok(());
        }
        let t = &self.dspark_target_layer_ids;
        if t.is_empty() {
            return Err(invalid("dspark_target_layer_ids", "is empty but num_nextn_predict_layers > 0"));
        }
        layer_list("dspark_target_layer_ids", t, self.num_hidden_layers)?;
        positive("dspark_block_size", self.dspark_block_size)?;
        positive("dspark_markov_rank", self.dspark_markov_rank)?;
        token("dspark_noise_token_id", self.dspark_noise_token_id, self.vocab_size)
    }

    /// Vision tower widths and the image token.
    fn validate_vision(&self) -> Result<(), ConfigError> {
        let Some(v) = &self.vision else { return Ok(()) };
        token("image_token_id", self.image_token_id, self.vocab_size)?;
        positive("vision_config.hidden_size", v.hidden_size)?;
        positive("vision_config.num_attention_heads", v.num_attention_heads)?;
        positive("vision_config.intermediate_size", v.intermediate_size)?;
        positive("vision_config.patch_size", v.patch_size)?;
        positive("vision_config.downsample_ratio", v.downsample_ratio)?;
        if v.hidden_size % v.num_attention_heads != 0 || (v.hidden_size / v.num_attention_heads) % 4 != 0 {
            let (d, h) = (v.hidden_size, v.num_attention_heads);
            return Err(invalid("vision_config.num_attention_heads", format!("is {h}; hidden_size {d} / heads must be a multiple of 4 (2D RoPE)")));
        }
        if v.max_image_tokens < 3 {
            return Err(invalid("vision_config.max_image_tokens", format!("is {}; a span needs at least 3 tokens", v.max_image_tokens)));
        }
        Ok(())
    }
}
