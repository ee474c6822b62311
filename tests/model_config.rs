//! Config acceptance: the release layer plan is spec 1.4, the tiny plan covers spec 1.6, YaRN and engram primes are pinned, bad configs are rejected by name.
use lockstep::model::config::{Config, RELEASE_CONFIG_JSON, TINY_CONFIG_JSON};
use lockstep::model::config::engram_layout::engram_primes;
use lockstep::model::rope::{rope_inv_freq, yarn_band};
use lockstep::model::{expected_tensors, Dtype, LayerMode, LayerPlan, RopeTable};

/// One row of spec 1.4: (ratio, mode, kv source, top-k source, candidate source, candidate mask, engram, DSpark target).
type Row = (usize, LayerMode, Option<usize>, Option<usize>, bool, bool, bool, bool);

/// The spec 1.4 row of release layer `l`.
fn spec_row(l: usize) -> Row {
    use LayerMode::*;
    let engram = l == 1 || l == 14;
    let target = (37..=39).contains(&l);
    match l {
        0 | 1 | 40..=42 => (0, Window, None, None, false, false, engram, false),
        2 | 8 | 14 => (2, Full, Some(l), Some(l), false, false, engram, false),
        3..=19 => {
            let s = [2, 8, 14].into_iter().filter(|&s| s <= l).max();
            (2, Reuse, s, s, false, false, false, false)
        }
        20 => (1, Full, Some(20), Some(20), true, false, false, false),
        21..=23 => (1, Reuse, Some(20), Some(20), false, false, false, false),
        24 | 28 | 32 | 36 => (1, Reindex, Some(20), Some(l), false, true, false, false),
        _ => {
            let s = [24, 28, 32, 36].into_iter().filter(|&s| s <= l).max();
            (1, Reuse, Some(20), s, false, false, false, target)
        }
    }
}

/// The same fields read from a plan.
fn plan_row(p: &LayerPlan) -> Row {
    (p.ratio, p.mode, p.kv_source, p.index_source, p.candidate_source, p.candidate_mask, p.engram.is_some(), p.dspark_target.is_some())
}

#[test]
fn release_layer_plan_reproduces_spec_table_1_4_row_by_row() {
    let cfg = Config::release();
    let plan = cfg.layer_plan();
    assert_eq!(plan.len(), 43);
    for p in &plan {
        assert_eq!(plan_row(p), spec_row(p.layer_id), "layer {}", p.layer_id);
        let backbone = p.layer_id < 40;
        assert_eq!(p.dspark_stage, (!backbone).then(|| p.layer_id - 40));
        assert_eq!(p.rope, if p.ratio > 0 { RopeTable::Compress } else { RopeTable::Main });
        assert_eq!(p.has_wgate, [2, 8, 14].contains(&p.layer_id), "wgate only on ratio-2 sources");
        let experts = if backbone { (384, 6) } else { (128, 3) };
        assert_eq!((p.n_routed_experts, p.num_experts_per_tok), experts);
    }
    assert_eq!(plan[1].engram, Some(0));
    assert_eq!(plan[14].engram, Some(1));
    assert_eq!((plan[37].dspark_target, plan[39].dspark_target), (Some(0), Some(2)));
    assert_eq!((plan[40].prefix(), plan[42].prefix(), plan[7].prefix()), ("mtp.0".into(), "mtp.2".into(), "layers.7".into()));
}

#[test]
fn tiny_layer_plan_covers_every_feature_listed_in_spec_1_6() {
    use LayerMode::*;
    let plan = Config::tiny().layer_plan();
    let modes: Vec<LayerMode> = plan.iter().map(|p| p.mode).collect();
    assert_eq!(modes, [Window, Window, Full, Reuse, Full, Full, Reuse, Reindex, Reuse, Window, Window, Window]);
    assert!(plan[1].engram.is_some() && plan[1].mode == Window, "engram on a window-only layer");
    assert!(plan[4].engram.is_some() && plan[4].mode == Full, "engram on a Full layer");
    assert_eq!((plan[3].kv_source, plan[3].index_source), (Some(2), Some(2)), "ratio-2 Reuse of 2");
    assert_eq!((plan[4].ratio, plan[4].kv_source), (2, Some(4)), "a second ratio-2 source");
    assert!(plan[5].candidate_source && plan[5].ratio == 1 && !plan[5].has_wgate, "ratio-1 Full candidate source");
    assert_eq!((plan[6].kv_source, plan[6].index_source), (Some(5), Some(5)), "Reuse of the ratio-1 source");
    assert!(plan[7].candidate_mask && plan[7].kv_source == Some(5), "Reindex using candidates");
    assert_eq!((plan[8].kv_source, plan[8].index_source), (Some(5), Some(7)), "Reuse of a Reindex top-k");
    let targets: Vec<Option<usize>> = plan[6..9].iter().map(|p| p.dspark_target).collect();
    assert_eq!(targets, [Some(0), Some(1), Some(2)]);
    assert!(plan[9..].iter().all(|p| p.dspark_stage.is_some() && (p.n_routed_experts, p.num_experts_per_tok) == (4, 2)));
    let names: Vec<String> = expected_tensors(&Config::tiny()).into_iter().map(|t| t.name).collect();
    let has = |n: &str| names.iter().any(|x| x == n);
    assert!(has("mtp.0.main_proj.weight") && has("mtp.0.main_norm.weight") && !has("mtp.1.main_proj.weight"));
    assert!(has("mtp.2.markov_head.embed.weight") && has("mtp.2.confidence_head.proj.weight") && !has("mtp.1.norm.weight"));
}

#[test]
fn yarn_band_and_inv_freq_match_spec_1_5() {
    let cfg = Config::release();
    let y = cfg.rope_scaling.expect("yarn");
    assert_eq!(yarn_band(64, 160000.0, &y), (15.0, 25.0));
    let f = cfg.rope_inv_freq(RopeTable::Compress);
    let plain = rope_inv_freq(64, 160000.0, None);
    assert_eq!(f.len(), 32);
    assert!((plain[16] - 0.0025).abs() < 1e-18);
    assert!((f[16] - 0.002265625).abs() < 1e-15, "{}", f[16]);
    for i in 0..32 {
        let want = if i <= 15 { plain[i] } else if i >= 25 { plain[i] / 16.0 } else { plain[i] / 16.0 * ((i - 15) as f64 / 10.0) + plain[i] * (1.0 - (i - 15) as f64 / 10.0) };
        assert!((f[i] - want).abs() <= 1e-15 * want, "pair {i}: {} vs {want}", f[i]);
    }
    let main = cfg.rope_inv_freq(RopeTable::Main);
    assert!((main[1] - 10000f64.powf(-2.0 / 64.0)).abs() < 1e-18 && main[0] == 1.0, "main table has no YaRN");
    let tiny = Config::tiny();
    assert_eq!(yarn_band(16, 160000.0, &tiny.rope_scaling.expect("yarn")), (3.0, 7.0));
    assert_eq!(tiny.rope_inv_freq(RopeTable::Compress).len(), 8);
}

#[test]
fn engram_primes_match_spec_1_5_and_1_6() {
    let rel = engram_primes(&Config::release());
    assert_eq!(rel.len(), 2);
    assert_eq!((rel[0].layer_id, rel[0].rows, rel[1].layer_id, rel[1].rows), (1, 384_006_168, 14, 384_016_682));
    assert_eq!((rel[0].primes[0][0], rel[0].primes[2][7]), (16_000_057, 16_000_463));
    assert_eq!((rel[1].primes[0][0], rel[1].primes[2][7]), (16_000_477, 16_000_889));
    let tiny = engram_primes(&Config::tiny());
    assert_eq!(tiny[0].primes, vec![vec![97, 101], vec![103, 107], vec![109, 113]]);
    assert_eq!(tiny[1].primes, vec![vec![127, 131], vec![137, 139], vec![149, 151]]);
    assert_eq!((tiny[0].rows, tiny[1].rows), (630, 834));
    assert_eq!(tiny[0].offsets, vec![0, 97, 198, 301, 408, 517]);
    assert_eq!(tiny[1].offsets, vec![0, 127, 258, 395, 534, 683]);
}

#[test]
fn release_tensor_table_matches_spec_3_counts_shapes_and_payload() {
    let t = expected_tensors(&Config::release());
    assert_eq!(t.len(), 96_085);
    assert_eq!(t.iter().map(|s| s.byte_len()).sum::<u64>(), 510_286_023_000);
    let count = |pre: &str| t.iter().filter(|s| s.name.starts_with(pre)).count();
    assert_eq!((count("layers.0."), count("layers.24."), count("layers.20."), count("layers.8.")), (2334, 2337, 2341, 2342));
    assert_eq!((count("layers.1."), count("layers.14.")), (2334 + 6, 2342 + 6));
    assert_eq!(t.iter().filter(|s| s.name.starts_with("mtp.") && !s.name.contains(".experts.")).count(), 97);
    assert_eq!(count("vision."), 259);
    let shape = |n: &str| t.iter().find(|s| s.name == n).map(|s| (s.dtype, s.shape.clone())).unwrap_or_else(|| panic!("{n} missing"));
    assert_eq!(shape("layers.0.attn.wq_a.scale"), (Dtype::F8E8M0, vec![40, 160]));
    assert_eq!(shape("layers.0.attn.wq_b.scale"), (Dtype::F8E8M0, vec![1024, 40]));
    assert_eq!(shape("layers.0.attn.wo_a.weight"), (Dtype::F8E4M3, vec![8192, 4096]));
    assert_eq!(shape("layers.0.attn.wo_a.scale"), (Dtype::F8E8M0, vec![256, 128]));
    assert_eq!(shape("layers.5.ffn.experts.383.w1.weight"), (Dtype::I8, vec![2304, 2560]));
    assert_eq!(shape("layers.5.ffn.experts.0.w2.scale"), (Dtype::F8E8M0, vec![5120, 72]));
    assert_eq!(shape("layers.5.ffn.shared_experts.w2.scale"), (Dtype::F8E8M0, vec![160, 72]));
    assert_eq!(shape("layers.2.attn.indexer.wq_b.scale"), (Dtype::F8E8M0, vec![128, 40]));
    assert_eq!(shape("layers.2.attn.compressor.wgate.weight"), (Dtype::BF16, vec![512, 5120]));
    assert_eq!(shape("layers.14.engram.embed.weight"), (Dtype::F8E4M3, vec![384_016_682, 256]));
    assert_eq!(shape("layers.1.engram.embed.scale"), (Dtype::F8E8M0, vec![384_006_168, 8]));
    assert_eq!(shape("layers.1.engram.wkv.scale"), (Dtype::F8E8M0, vec![800, 192]));
    assert_eq!(shape("mtp.0.main_proj.scale"), (Dtype::F8E8M0, vec![160, 480]));
    assert_eq!(shape("mtp.1.ffn.gate.weight"), (Dtype::BF16, vec![128, 5120]));
    assert_eq!(shape("mtp.2.confidence_head.proj.weight"), (Dtype::BF16, vec![1, 5376]));
    assert_eq!(shape("aligner.w1.weight"), (Dtype::BF16, vec![5120, 9216]));
    assert_eq!(shape("vision.blocks.31.mlp.w1.weight"), (Dtype::BF16, vec![5632, 1024]));
}

/// The config error for `text` (which must be rejected) as a string.
fn rejected(text: &str) -> String {
    match Config::from_json(text) {
        Ok(_) => panic!("config accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_configs_are_rejected_with_the_key_named() {
    let tiny = |from: &str, to: &str| {
        assert!(TINY_CONFIG_JSON.contains(from), "{from}");
        rejected(&TINY_CONFIG_JSON.replacen(from, to, 1))
    };
    let e = tiny("\"hidden_size\": 64", "\"hidden_size\": 65");
    assert!(e.contains("hidden_size") && e.contains("32"), "{e}");
    let e = tiny("[0, 0, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0]", "[0, 0, 2, 2, 2, 1, 1, 1, 1, 0, 0]");
    assert!(e.contains("compress_ratios") && e.contains("11"), "{e}");
    let e = tiny("[0, 0, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0]", "[0, 0, 2, 2, 2, 1, 1, 1, 1, 0, 2, 0]");
    assert!(e.contains("compress_ratios") && e.contains("DSpark"), "{e}");
    let e = tiny("\"kv_source_layer_ids\": [2, 4, 5]", "\"kv_source_layer_ids\": [2, 4]");
    assert!(e.contains("kv_source_layer_ids") && e.contains("ratio"), "kv source with mismatching ratio: {e}");
    let e = tiny("\"index_source_layer_ids\": [2, 4, 5, 7]", "\"index_source_layer_ids\": [2, 5, 7]");
    assert!(e.contains("index_source_layer_ids") && e.contains('4'), "{e}");
    let e = tiny("\"candidate_source_layer_id\": 5", "\"candidate_source_layer_id\": 4");
    assert!(e.contains("candidate_source_layer_id") && e.contains("ratio"), "{e}");
    let e = tiny("\"candidate_source_layer_id\": 5", "\"candidate_source_layer_id\": 6");
    assert!(e.contains("candidate_source_layer_id") && e.contains("not an index source"), "{e}");
    let e = tiny("\"dspark_target_layer_ids\": [6, 7, 8]", "\"dspark_target_layer_ids\": [6, 7, 9]");
    assert!(e.contains("dspark_target_layer_ids") && e.contains('9'), "{e}");
    let e = tiny("\"engram_num_embeddings\": [630, 834]", "\"engram_num_embeddings\": [630]");
    assert!(e.contains("engram_num_embeddings") && e.contains("engram_layer_ids"), "{e}");
    let e = tiny("\"engram_num_embeddings\": [630, 834]", "\"engram_num_embeddings\": [630, 835]");
    assert!(e.contains("engram_num_embeddings") && e.contains("834"), "{e}");
    let e = tiny("\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9");
    assert!(e.contains("num_experts_per_tok"), "{e}");
    let e = tiny("\"dspark_num_experts_per_tok\": 2", "\"dspark_num_experts_per_tok\": 5");
    assert!(e.contains("dspark_num_experts_per_tok"), "{e}");
    let e = tiny("\"o_groups\": 2", "\"o_groups\": 3");
    assert!(e.contains("o_groups"), "{e}");
    let e = tiny("\"qk_rope_head_dim\": 16", "\"qk_rope_head_dim\": 96");
    assert!(e.contains("qk_rope_head_dim"), "{e}");
    let e = tiny("\"engram_head_dim\": 32", "\"engram_head_dim\": 48");
    assert!(e.contains("engram_head_dim"), "{e}");
    let e = tiny("\"index_head_dim\": 32", "\"index_head_dim\": 40");
    assert!(e.contains("index_head_dim"), "{e}");
    let e = tiny("\"moe_intermediate_size\": 64", "\"moe_intermediate_size\": 80");
    assert!(e.contains("moe_intermediate_size"), "{e}");
    let e = tiny("\"dspark_noise_token_id\": 128799", "\"dspark_noise_token_id\": 129280");
    assert!(e.contains("dspark_noise_token_id"), "{e}");
    let e = rejected(&RELEASE_CONFIG_JSON.replacen("\"num_key_value_heads\": 1", "\"num_key_value_heads\": 8", 1));
    assert!(e.contains("num_key_value_heads"), "{e}");
}
