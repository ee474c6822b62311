//! Properties of the float64 reference that a wrong implementation would break: Sinkhorn, routing, top-k visibility, QAT grids, ratio-2 pooling, the window.
use lockstep::model::reference::index::{candidate_blocks, comp_row, select_topk};
use lockstep::model::reference::mhc::{mixes, rms_norm, sigmoid, softplus};
use lockstep::model::reference::quant::{act_scale_exp, bf16, e4m3, fp4_index_scale_exp, fp4_row_qat, fp4_row_scale, on_grid, pow2};
use lockstep::model::reference::Model;
use lockstep::model::taps::Taps;
use lockstep::model::{load, make_tiny, LayerMode, LoadMode, ValueCheck};
use std::sync::OnceLock;

/// The tiny model (seed 11), its checkpoint directory removed once loaded.
fn model() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("lockstep-reference-properties-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        make_tiny(&dir, 11, None).unwrap();
        let (cfg, ck) = load(&dir, LoadMode::Copied, ValueCheck::Off).unwrap();
        let m = Model::new(&cfg, &ck).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        m
    })
}

/// 64 pseudo-random ids with an image span at 20..27, and its mask.
fn prompt() -> (Vec<u32>, Vec<bool>) {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..64)
        .map(|p| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let image = (20..27).contains(&p);
            (if image { 129_264 } else { ((s >> 33) % 129_000) as u32 }, image)
        })
        .unzip()
}

/// Taps of a one-shot forward of the prompt.
fn taps() -> &'static Taps<f64> {
    static T: OnceLock<Taps<f64>> = OnceLock::new();
    T.get_or_init(|| {
        let m = model();
        let (ids, mask) = prompt();
        let mut taps = Taps::on();
        m.forward(&mut m.new_state(), &ids, Some(&mask), &mut taps).unwrap();
        taps
    })
}

fn tap<'a>(t: &'a Taps<f64>, name: &str) -> &'a [f64] {
    &t.get(name).unwrap_or_else(|| panic!("no tap {name}")).data
}

#[test]
fn sinkhorn_comb_is_doubly_stochastic_within_hc_eps_and_pre_post_stay_in_range() {
    let m = model();
    let cfg = &m.cfg;
    let w = cfg.hc_mult * cfg.hidden_size;
    let t = taps();
    let (mut worst_row, mut worst_col) = (0.0f64, 0.0f64);
    for (l, layer) in m.layers.iter().enumerate() {
        let h = tap(t, &format!("L{l}.h_attn"));
        for flat in h.chunks(w) {
            let mx = mixes(&layer.hc_ffn, flat, cfg.hc_mult, cfg.hc_sinkhorn_iters, cfg.hc_eps, cfg.rms_norm_eps);
            let n = cfg.hc_mult;
            for i in 0..n {
                worst_row = worst_row.max((mx.comb[i * n..(i + 1) * n].iter().sum::<f64>() - 1.0).abs());
                worst_col = worst_col.max(((0..n).map(|k| mx.comb[k * n + i]).sum::<f64>() - 1.0).abs());
                assert!(mx.pre[i] > cfg.hc_eps && mx.pre[i] < 1.0 + cfg.hc_eps && mx.post[i] > 0.0 && mx.post[i] < 2.0);
            }
            assert!(mx.comb.iter().all(|&c| c > 0.0));
        }
    }
    println!("Sinkhorn: worst |row sum - 1| {worst_row:e}, worst |column sum - 1| {worst_col:e}");
    assert!(worst_col <= 2.0 * cfg.hc_mult as f64 * cfg.hc_eps, "column sums off by {worst_col:e}");
    assert!(worst_row <= 2.0 * cfg.hc_mult as f64 * cfg.hc_eps, "row sums off by {worst_row:e}");
}

#[test]
fn router_weights_sum_to_route_scale_and_image_rows_select_by_bias_vl() {
    let m = model();
    let (cfg, t, (_, mask)) = (&m.cfg, taps(), prompt());
    let d = cfg.hidden_size;
    for (l, layer) in m.layers.iter().enumerate() {
        let k = layer.ffn.topk;
        let (idx, wts, x) = (tap(t, &format!("L{l}.ffn.gate_idx")), tap(t, &format!("L{l}.ffn.gate_w")), tap(t, &format!("L{l}.ffn.x")));
        for (p, &image) in mask.iter().enumerate() {
            let sum: f64 = wts[p * k..(p + 1) * k].iter().sum();
            assert!((sum - cfg.routed_scaling_factor).abs() <= 1e-12, "L{l} p{p}: weights sum to {sum}");
            let xp = &x[p * d..(p + 1) * d];
            let score = |e: usize| softplus(layer.ffn.gate.w[e * d..(e + 1) * d].iter().zip(xp).map(|(a, b)| a * b).sum::<f64>() / cfg.gate_temp).sqrt();
            let bias = if image { layer.ffn.bias_vl.as_ref().unwrap() } else { &layer.ffn.bias };
            let mut order: Vec<usize> = (0..layer.ffn.experts.len()).collect();
            order.sort_by(|&a, &b| (score(b) + bias[b]).total_cmp(&(score(a) + bias[a])).then(a.cmp(&b)));
            let got: Vec<usize> = idx[p * k..(p + 1) * k].iter().map(|&e| e as usize).collect();
            assert_eq!(got, order[..k], "L{l} p{p} image {image}");
        }
    }
}

#[test]
fn topk_picks_are_distinct_visible_ascending_and_as_many_as_allowed() {
    let m = model();
    let (cfg, t) = (&m.cfg, taps());
    let k = cfg.index_topk;
    let mut checked = 0;
    for layer in m.layers.iter().filter(|l| l.plan.is_index_source()) {
        let (l, r) = (layer.plan.layer_id, layer.plan.ratio);
        let picks = tap(t, &format!("L{l}.attn.topk"));
        for (p, row) in picks.chunks(k).enumerate() {
            let sel: Vec<usize> = row.iter().filter(|&&v| v >= 0.0).map(|&v| v as usize).collect();
            assert!(row[sel.len()..].iter().all(|&v| v == -1.0), "L{l} p{p}: -1 padding only at the end");
            assert!(sel.windows(2).all(|w| w[0] < w[1]), "L{l} p{p}: not ascending and distinct: {sel:?}");
            let visible = (p + 1) / r;
            assert!(sel.iter().all(|&s| s < visible), "L{l} p{p}: pick beyond {visible} visible rows: {sel:?}");
            if layer.plan.candidate_mask {
                assert!(sel.len() == k.min(visible) || sel.len() >= k.min(cfg.candidate_topk_blocks * cfg.candidate_block_size - 1));
            } else {
                assert_eq!(sel.len(), k.min(visible), "L{l} p{p}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 4 * 64);
}

#[test]
fn quantized_kv_rows_and_index_keys_lie_on_their_grids() {
    let m = model();
    let (cfg, t) = (&m.cfg, taps());
    let mut nonzero = 0usize;
    for layer in &m.layers {
        let l = layer.plan.layer_id;
        for block in tap(t, &format!("L{l}.attn.kv")).chunks(32) {
            let s = pow2(act_scale_exp(block));
            assert!(block.iter().all(|&v| on_grid(v / s, 3, -6) && (v / s).abs() <= 448.0 && bf16(v) == v), "L{l} kv block {block:?}");
            nonzero += block.iter().filter(|&&v| v != 0.0).count();
        }
        if layer.plan.mode != LayerMode::Full {
            continue;
        }
        let comp = tap(t, &format!("L{l}.attn.comp"));
        assert_eq!(comp.len(), (64 / layer.plan.ratio) * cfg.head_dim);
        for block in comp.chunks(16) {
            let s = fp4_row_scale(block);
            assert!(on_grid(s, 3, -6) && block.iter().all(|&v| on_grid(v / s, 1, 0) && bf16(v) == v), "L{l} comp block {block:?}");
        }
        for block in tap(t, &format!("L{l}.attn.index_keys")).chunks(32) {
            let s = pow2(fp4_index_scale_exp(block));
            assert!(block.iter().all(|&v| on_grid(v / s, 1, 0) && (v / s).abs() <= 6.0 && bf16(v) == v), "L{l} key block {block:?}");
        }
    }
    assert!(nonzero > 1000);
}

#[test]
fn ratio2_compressed_row_is_the_softmax_gated_mix_of_its_two_members() {
    let m = model();
    let (cfg, t) = (&m.cfg, taps());
    let d = cfg.hidden_size;
    for layer in m.layers.iter().filter(|l| l.plan.mode == LayerMode::Full && l.plan.ratio == 2) {
        let l = layer.plan.layer_id;
        let c = layer.attn.compressor.as_ref().unwrap();
        let (x, comp) = (tap(t, &format!("L{l}.attn.x")), tap(t, &format!("L{l}.attn.comp")));
        for j in 0..32 {
            let (k0, g0) = c.project(&x[2 * j * d..(2 * j + 1) * d]);
            let (k1, g1) = c.project(&x[(2 * j + 1) * d..(2 * j + 2) * d]);
            let mixed: Vec<f64> = (0..cfg.head_dim)
                .map(|ch| {
                    let w0 = sigmoid(g0[ch] - g1[ch]);
                    let v = bf16(w0 * k0[ch] + (1.0 - w0) * k1[ch]);
                    assert!(v >= bf16(k0[ch].min(k1[ch])) && v <= bf16(k0[ch].max(k1[ch])), "L{l} group {j} ch {ch}: not between its members");
                    v
                })
                .collect();
            let latent = rms_norm(&mixed, &c.norm, cfg.rms_norm_eps);
            let want = comp_row(&latent, 2 * j, &layer.attn.inv_freq).value;
            let got = &comp[j * cfg.head_dim..(j + 1) * cfg.head_dim];
            assert_eq!(want, got, "L{l} group {j}");
        }
    }
}

#[test]
fn window_attention_sees_exactly_the_last_sliding_window_positions() {
    let m = model();
    let win = m.cfg.sliding_window;
    let (ids, _) = prompt();
    let ids = &ids[..40];
    let p = 30;
    let o_at = |ids: &[u32]| {
        let mut taps = Taps::on();
        m.forward(&mut m.new_state(), ids, None, &mut taps).unwrap();
        let o = tap(&taps, "L0.attn.o");
        let w = o.len() / ids.len();
        o[p * w..(p + 1) * w].to_vec()
    };
    let base = o_at(ids);
    let mut outside = ids.to_vec();
    outside[p - win] = outside[p - win] ^ 1;
    assert_eq!(o_at(&outside), base, "a token just outside the window changed the output");
    let mut inside = ids.to_vec();
    inside[p + 1 - win] = inside[p + 1 - win] ^ 1;
    assert_ne!(o_at(&inside), base, "the oldest token inside the window did not change the output");
}

#[test]
fn candidate_blocks_pin_the_newest_block_drop_unreachable_ones_and_break_ties_low() {
    let ninf = f64::NEG_INFINITY;
    let scores = [5.0, 1.0, 2.0, 2.0, 2.0, 0.5, 0.0, 7.0, ninf, ninf];
    let keep = candidate_blocks(&scores, 7, 3, 2);
    assert_eq!(keep, [true, true, true, true, false, false, true, true, false, false]);
    assert_eq!(candidate_blocks(&scores, 7, 2, 2), [true, true, false, false, false, false, true, true, false, false]);
    assert_eq!(candidate_blocks(&scores[..4], 4, 3, 2), [true; 4]);
    assert_eq!(select_topk(&[1.0, 3.0, 3.0, 0.0, 3.0, ninf], 6, 2), vec![1, 2]);
    assert_eq!(select_topk(&[0.0, ninf, ninf], 1, 3), vec![0]);
    assert_eq!(select_topk(&[ninf, 2.0, ninf, ninf, ninf], 4, 3), vec![0, 1, 2]);
}

#[test]
fn qat_operators_round_ties_to_even_and_keep_scales_exact() {
    assert_eq!(e4m3(1.0625), 1.0);
    assert_eq!(e4m3(1.1875), 1.25);
    assert_eq!(e4m3(3.0 * pow2(-10)), 2.0 * pow2(-9));
    assert_eq!(act_scale_exp(&[448.0 * 0.125]), -3);
    assert_eq!(act_scale_exp(&[448.0 * 0.125 + 1e-9]), -2);
    assert_eq!(act_scale_exp(&[0.0]), (1e-4f64 / 448.0).log2().ceil() as i32);
    let row: Vec<f64> = (0..16).map(|i| i as f64 * 0.37 - 2.0).collect();
    let s = fp4_row_scale(&row);
    assert_eq!(s, e4m3(3.55 / 6.0));
    let q = fp4_row_qat(&row);
    assert_eq!(fp4_row_qat(&q), q, "fp4 row QAT is idempotent");
    assert!(q.iter().zip(&row).all(|(a, b)| (a - b).abs() <= s));
}
