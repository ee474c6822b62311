//! Row independence of the executor's ops on the tiny model's weights: a call's rows give the same bits computed together or split into parts.
mod forward_support;

use forward_support::tiny;
use lockstep::exec::{AttnInputs, CpuExecutor, CpuTensor, Executor, Out, Qat};
use lockstep::model::forward::{routed_experts, Model};
use lockstep::numerics::round_bf16;

/// Deterministic pseudo-random bf16 values in about [-scale, scale].
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            round_bf16(((s >> 40) as f32 / 8_388_608.0 - 1.0) * scale)
        })
        .collect()
}

fn t(rows: usize, cols: usize, seed: u64, scale: f32) -> CpuTensor {
    CpuTensor { rows, cols, data: values(rows * cols, seed, scale), pack: None }
}

fn rows(x: &CpuTensor, a: usize, b: usize) -> CpuTensor {
    CpuTensor { rows: b - a, cols: x.cols, data: x.data[a * x.cols..b * x.cols].to_vec(), pack: None }
}

/// Asserts that `f` on all 9 rows equals `f` on rows 0..4 and 4..9 and on each row alone, bit for bit.
fn row_independent(name: &str, n: usize, mut f: impl FnMut(usize, usize) -> CpuTensor) {
    let whole: Vec<u32> = f(0, n).data.iter().map(|v| v.to_bits()).collect();
    for cuts in [vec![0, 4, n], (0..=n).collect::<Vec<_>>()] {
        let split: Vec<u32> = cuts.windows(2).flat_map(|w| f(w[0], w[1]).data).map(|v| v.to_bits()).collect();
        assert!(split == whole, "{name}: split rows {cuts:?} differ from the whole call");
    }
}

#[test]
fn every_row_op_gives_the_same_bits_for_a_row_alone_or_in_a_batch() {
    let tm = tiny();
    let cfg = &tm.cfg;
    let model = Model::new(cfg.clone(), &tm.ckpt, tm.map.clone()).expect("model");
    let mut ex = CpuExecutor::new(&tm.ckpt);
    let n = 9;
    let (d, hc, hd) = (cfg.hidden_size, cfg.hc_mult, cfg.head_dim);
    let x = t(n, d, 1, 2.0);
    let h = t(n, hc * d, 2, 0.3);
    for module in ["layers.0.attn.wq_a", "layers.0.ffn.gate", "layers.0.ffn.experts.3.w1", "layers.2.attn.compressor.wkv"] {
        row_independent(module, n, |a, b| ex.linear(&rows(&x, a, b), module, Out::F32).expect(module));
    }
    let o = t(n, cfg.num_attention_heads * hd, 3, 1.0);
    row_independent("block_linear", n, |a, b| ex.block_linear(&rows(&o, a, b), "layers.0.attn.wo_a", cfg.o_groups, cfg.o_lora_rank).expect("wo_a"));
    row_independent("rmsnorm", n, |a, b| ex.rmsnorm(&rows(&x, a, b), "layers.0.attn_norm", model.eps(), Out::Bf16).expect("norm"));
    let site = model.hc_site("layers.3", "ffn");
    row_independent("hc_mixes", n, |a, b| ex.hc_mixes(&rows(&h, a, b), &site, &model.hc()).expect("mixes"));
    let mix = ex.hc_mixes(&h, &site, &model.hc()).expect("mixes");
    row_independent("hc_collapse", n, |a, b| ex.hc_collapse(&rows(&h, a, b), &rows(&mix, a, b), hc).expect("collapse"));
    row_independent("hc_expand", n, |a, b| ex.hc_expand(&rows(&x, a, b), &rows(&h, a, b), &rows(&mix, a, b), hc).expect("expand"));
    let kv = t(n, (hc + 1) * d, 4, 1.0);
    let live = vec![true; n];
    let gate = |ex: &mut CpuExecutor, a: usize, b: usize| {
        ex.engram_gate(&rows(&h, a, b), &rows(&kv, a, b), "layers.1.engram.q_weight", "layers.1.engram.k_weight", &model.engram_gate(), &live[a..b]).expect("gate")
    };
    row_independent("engram_gate", n, |a, b| gate(&mut ex, a, b));
    let cs = CpuTensor { rows: n, cols: cfg.qk_rope_head_dim, data: model.rope_rows(lockstep::model::RopeTable::Compress, 100..100 + n), pack: None };
    row_independent("rope", n, |a, b| ex.rope(&rows(&o, a, b), &rows(&cs, a, b), cfg.num_attention_heads, true).expect("rope"));
    for kind in [Qat::Fp8, Qat::Fp4Rows, Qat::Fp4Index] {
        row_independent("qat", n, |a, b| ex.qat(&rows(&o, a, b), kind).expect("qat"));
    }
    let (ih, idim) = (cfg.index_n_heads, cfg.index_head_dim);
    let q = ex.qat(&t(n, ih * idim, 5, 1.0), Qat::Fp4Index).expect("qat");
    let w = t(n, ih, 6, 0.5);
    let keys = ex.qat(&t(23, idim, 7, 1.0), Qat::Fp4Index).expect("qat");
    let visible: Vec<usize> = (0..n).map(|i| 14 + i).collect();
    row_independent("index_scores", n, |a, b| ex.index_scores(&rows(&q, a, b), &rows(&w, a, b), &keys, &visible[a..b]).expect("scores"));
    let scores = ex.index_scores(&q, &w, &keys, &visible).expect("scores");
    row_independent("candidate_mask", n, |a, b| ex.candidate_mask(&rows(&scores, a, b), &visible[a..b], 3, 2).expect("mask"));
    row_independent("index_topk", n, |a, b| ex.index_topk(&rows(&scores, a, b), &visible[a..b], cfg.index_topk).expect("topk"));
    let logits = t(n, cfg.n_routed_experts, 8, 3.0);
    let route = model.route(&model.plan[3]);
    row_independent("moe_route", n, |a, b| {
        let image: Vec<bool> = (a..b).map(|r| r % 3 == 1).collect();
        let (i, w) = ex.moe_route(&rows(&logits, a, b), "layers.3.ffn.gate.bias", Some("layers.3.ffn.gate.bias_vl"), &image, &route).expect("route");
        CpuTensor { rows: i.rows, cols: 2 * i.cols, data: (0..i.rows).flat_map(|r| i.row(r).iter().chain(w.row(r)).copied().collect::<Vec<_>>()).collect(), pack: None }
    });
    let (ids, rw) = ex.moe_route(&logits, "layers.3.ffn.gate.bias", None, &[false; 9], &route).expect("route");
    let shared = t(n, x.cols, 12, 1.0);
    row_independent("routed_experts", n, |a, b| {
        routed_experts(&mut ex, &rows(&x, a, b), &rows(&ids, a, b), &rows(&rw, a, b), &rows(&shared, a, b), "layers.3.ffn.experts", cfg.n_routed_experts, model.swiglu_limit()).expect("experts")
    });
}

#[test]
fn attention_and_pooling_give_the_same_bits_when_a_call_is_split_through_their_state() {
    let tm = tiny();
    let cfg = &tm.cfg;
    let mut ex = CpuExecutor::new(&tm.ckpt);
    let (n, hd, heads, w) = (13, cfg.head_dim, cfg.num_attention_heads, cfg.sliding_window);
    let start = 21;
    let q = t(n, heads * hd, 9, 1.0);
    let kv = ex.qat(&t(n, hd, 10, 2.0), Qat::Fp8).expect("qat");
    let comp = t(17, hd, 11, 1.0);
    let sel: Vec<f32> = (0..n).flat_map(|i| [(i % 5) as f32, 7.0, (9 + i % 8) as f32, -1.0]).collect();
    let sel = CpuTensor { rows: n, cols: 4, data: sel, pack: None };
    let ring0 = t(w, hd, 12, 2.0);
    let attend = |ex: &mut CpuExecutor, a: usize, b: usize, ring: &CpuTensor| {
        let (kvp, selp) = (rows(&kv, a, b), rows(&sel, a, b));
        let inputs = AttnInputs { kv: &kvp, ring, compressed: Some((&comp, &selp)), sink: "layers.2.attn.attn_sink", start: start + a, window: w, scale: 0.125, block: false };
        ex.sparse_attention(&rows(&q, a, b), &inputs).expect("attention")
    };
    let whole = attend(&mut ex, 0, n, &ring0);
    for cut in [1, 5, 9] {
        let first = attend(&mut ex, 0, cut, &ring0);
        let mut ring = ring0.clone();
        ex.ring_write(&mut ring, &rows(&kv, 0, cut), start).expect("ring");
        let second = attend(&mut ex, cut, n, &ring);
        let split: Vec<f32> = first.data.into_iter().chain(second.data).collect();
        assert!(split.iter().zip(&whole.data).all(|(a, b)| a.to_bits() == b.to_bits()), "attention split at {cut}");
    }
    let (k, g) = (t(n, hd, 13, 1.0), t(n, hd, 14, 3.0));
    let pool = |ex: &mut CpuExecutor, cuts: &[usize]| {
        let mut partial = CpuTensor { rows: 1, cols: 2 * hd, data: vec![0.0; 2 * hd], pack: None };
        let mut out = Vec::new();
        for c in cuts.windows(2) {
            let pending = c[0] % 2;
            out.extend(ex.compress_pool(&rows(&k, c[0], c[1]), &rows(&g, c[0], c[1]), &mut partial, pending, 2).expect("pool").data);
        }
        (out, partial.data)
    };
    let whole = pool(&mut ex, &[0, n]);
    assert_eq!(whole.0.len(), (n / 2) * hd);
    for cuts in [vec![0, 1, n], vec![0, 3, 4, 10, n], (0..=n).collect()] {
        assert!(pool(&mut ex, &cuts) == whole, "pooling split {cuts:?}");
    }
}
