//! The expected tensor table (spec 3): every tensor of the release layout, with dtype and shape, derived from a config.
use crate::model::checkpoint::quantize::BLOCK;
use crate::model::config::Config;
use crate::model::plan::{LayerMode, LayerPlan};
pub use crate::weights::{scale_name_of, Quant, TensorSpec};
use crate::weights::Dtype;


/// Accumulates specs under a prefix.
struct Table {
    out: Vec<TensorSpec>,
}

impl Table {
    /// A plain BF16 or F32 tensor.
    fn plain(&mut self, name: String, dtype: Dtype, shape: &[usize]) {
        self.out.push(TensorSpec { name, dtype, shape: shape.to_vec(), quant: Quant::Plain });
    }

    /// BF16 `name.weight`.
    fn bf16(&mut self, name: &str, shape: &[usize]) {
        self.plain(format!("{name}.weight"), Dtype::BF16, shape);
    }

    /// F32 tensor stored under exactly `name`.
    fn f32(&mut self, name: &str, shape: &[usize]) {
        self.plain(name.to_string(), Dtype::F32, shape);
    }

    /// A quantized weight and its scale.
    fn quantized(&mut self, name: &str, quant: Quant, storage: Dtype, shape: [usize; 2], scale: [usize; 2]) {
        self.out.push(TensorSpec { name: format!("{name}.weight"), dtype: storage, shape: shape.to_vec(), quant });
        self.out.push(TensorSpec { name: format!("{name}.scale"), dtype: Dtype::F8E8M0, shape: scale.to_vec(), quant: Quant::Scale });
    }

    /// fp8 dense weight `[out, inp]` with 32x32 block scales.
    fn fp8(&mut self, name: &str, out: usize, inp: usize) {
        self.quantized(name, Quant::Fp8Block, Dtype::F8E4M3, [out, inp], [out.div_ceil(BLOCK), inp.div_ceil(BLOCK)]);
    }

    /// fp4 expert weight `[out, inp]` with per-32 scales along K.
    fn fp4(&mut self, name: &str, out: usize, inp: usize) {
        self.quantized(name, Quant::Fp4, Dtype::I8, [out, inp / 2], [out, inp / BLOCK]);
    }
}

/// Every tensor a checkpoint of `cfg` holds, in a fixed order (the config must be valid).
pub fn expected_tensors(cfg: &Config) -> Vec<TensorSpec> {
    let mut t = Table { out: Vec::new() };
    let (d, v) = (cfg.hidden_size, cfg.vocab_size);
    t.bf16("embed", &[v, d]);
    if !cfg.tie_word_embeddings {
        t.bf16("head", &[v, d]);
    }
    t.bf16("norm", &[d]);
    for plan in cfg.layer_plan() {
        layer_tensors(&mut t, cfg, &plan);
    }
    if let Some(vc) = &cfg.vision {
        for name in ["image_start", "image_end", "image_newline"] {
            t.plain(name.into(), Dtype::BF16, &[d]);
        }
        let (vd, p, ds) = (vc.hidden_size, vc.patch_size, vc.downsample_ratio);
        t.bf16("vision.patch_embed.proj", &[vd, 3 * p * p]);
        t.plain("vision.patch_embed.proj.bias".into(), Dtype::BF16, &[vd]);
        for b in 0..vc.num_hidden_layers {
            let pre = format!("vision.blocks.{b}");
            t.bf16(&format!("{pre}.norm1"), &[vd]);
            t.bf16(&format!("{pre}.norm2"), &[vd]);
            t.bf16(&format!("{pre}.attn.wqkv"), &[3 * vd, vd]);
            t.plain(format!("{pre}.attn.wqkv.bias"), Dtype::BF16, &[3 * vd]);
            t.bf16(&format!("{pre}.attn.wo"), &[vd, vd]);
            t.plain(format!("{pre}.attn.wo.bias"), Dtype::BF16, &[vd]);
            t.bf16(&format!("{pre}.mlp.w1"), &[2 * vc.intermediate_size, vd]);
            t.bf16(&format!("{pre}.mlp.w2"), &[vd, vc.intermediate_size]);
        }
        t.bf16("vision.norm", &[vd]);
        t.bf16("aligner.w1", &[d, vd * ds * ds]);
        t.plain("aligner.w1.bias".into(), Dtype::BF16, &[d]);
        t.bf16("aligner.w2", &[d, d]);
        t.plain("aligner.w2.bias".into(), Dtype::BF16, &[d]);
    }
    t.out
}

/// The tensors of one backbone layer or DSpark stage.
fn layer_tensors(t: &mut Table, cfg: &Config, plan: &LayerPlan) {
    let p = plan.prefix();
    let (d, hc, mix) = (cfg.hidden_size, cfg.hc_mult, cfg.hc_mix_dim());
    let (h, hd, q, g, r) = (cfg.num_attention_heads, cfg.head_dim, cfg.q_lora_rank, cfg.o_groups, cfg.o_lora_rank);
    t.bf16(&format!("{p}.attn_norm"), &[d]);
    t.bf16(&format!("{p}.ffn_norm"), &[d]);
    for site in ["attn", "ffn"] {
        t.f32(&format!("{p}.hc_{site}_fn"), &[mix, hc * d]);
        t.f32(&format!("{p}.hc_{site}_base"), &[mix]);
        t.f32(&format!("{p}.hc_{site}_scale"), &[3]);
    }
    t.fp8(&format!("{p}.attn.wq_a"), q, d);
    t.bf16(&format!("{p}.attn.q_norm"), &[q]);
    t.fp8(&format!("{p}.attn.wq_b"), h * hd, q);
    t.fp8(&format!("{p}.attn.wkv"), hd, d);
    t.bf16(&format!("{p}.attn.kv_norm"), &[hd]);
    t.fp8(&format!("{p}.attn.wo_a"), g * r, h * hd / g);
    t.fp8(&format!("{p}.attn.wo_b"), d, g * r);
    t.f32(&format!("{p}.attn.attn_sink"), &[h]);
    if plan.mode == LayerMode::Full {
        t.bf16(&format!("{p}.attn.compressor.wkv"), &[hd, d]);
        t.bf16(&format!("{p}.attn.compressor.norm"), &[hd]);
        if plan.has_wgate {
            t.bf16(&format!("{p}.attn.compressor.wgate"), &[hd, d]);
        }
        t.bf16(&format!("{p}.attn.indexer.wk"), &[cfg.index_head_dim, hd]);
        t.bf16(&format!("{p}.attn.indexer.k_norm"), &[cfg.index_head_dim]);
    }
    if plan.is_index_source() {
        t.fp8(&format!("{p}.attn.indexer.wq_b"), cfg.index_n_heads * cfg.index_head_dim, q);
        t.bf16(&format!("{p}.attn.indexer.weights_proj"), &[cfg.index_n_heads, d]);
    }
    let (e, inter) = (plan.n_routed_experts, cfg.moe_intermediate_size);
    t.bf16(&format!("{p}.ffn.gate"), &[e, d]);
    t.f32(&format!("{p}.ffn.gate.bias"), &[e]);
    if cfg.vision.is_some() {
        t.f32(&format!("{p}.ffn.gate.bias_vl"), &[e]);
    }
    for x in 0..e {
        t.fp4(&format!("{p}.ffn.experts.{x}.w1"), inter, d);
        t.fp4(&format!("{p}.ffn.experts.{x}.w2"), d, inter);
        t.fp4(&format!("{p}.ffn.experts.{x}.w3"), inter, d);
    }
    t.fp8(&format!("{p}.ffn.shared_experts.w1"), inter, d);
    t.fp8(&format!("{p}.ffn.shared_experts.w2"), d, inter);
    t.fp8(&format!("{p}.ffn.shared_experts.w3"), inter, d);
    if let Some(i) = plan.engram {
        let (rows, w) = (cfg.engram_num_embeddings[i], cfg.engram_head_dim);
        t.quantized(&format!("{p}.engram.embed"), Quant::Fp8Rows, Dtype::F8E4M3, [rows, w], [rows, w.div_ceil(BLOCK)]);
        t.fp8(&format!("{p}.engram.wkv"), d * (hc + 1), cfg.engram_hash_cols() * w);
        t.plain(format!("{p}.engram.q_weight"), Dtype::BF16, &[hc, d]);
        t.plain(format!("{p}.engram.k_weight"), Dtype::BF16, &[hc, d]);
    }
    let Some(stage) = plan.dspark_stage else { return };
    if stage == 0 {
        t.fp8(&format!("{p}.main_proj"), d, d * cfg.dspark_target_layer_ids.len());
        t.bf16(&format!("{p}.main_norm"), &[d]);
    }
    if stage + 1 == cfg.num_nextn_predict_layers {
        let m = cfg.dspark_markov_rank;
        t.bf16(&format!("{p}.norm"), &[d]);
        t.bf16(&format!("{p}.markov_head.embed"), &[cfg.vocab_size, m]);
        t.bf16(&format!("{p}.markov_head.head"), &[cfg.vocab_size, m]);
        t.bf16(&format!("{p}.confidence_head.proj"), &[1, d + m]);
    }
}
