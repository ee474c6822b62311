//! Config parsing tests: both layouts agree, defaults apply, and type errors name the key.
use super::*;

/// The release's flat `inference/config.json` (right-hand column of spec 1.2 and 1.3).
const RELEASE_FLAT: &str = r#"{
  "vocab_size": 129280, "dim": 5120, "moe_inter_dim": 2304, "n_layers": 40, "n_mtp_layers": 3,
  "dspark_block_size": 5, "dspark_noise_token_id": 128799, "dspark_target_layer_ids": [37, 38, 39],
  "dspark_markov_rank": 256, "dspark_n_routed_experts": 128, "dspark_n_activated_experts": 3,
  "n_heads": 64, "n_routed_experts": 384, "n_shared_experts": 1, "n_activated_experts": 6,
  "score_func": "sqrtsoftplus", "route_scale": 1.5, "swiglu_limit": 10.0, "q_lora_rank": 1280,
  "head_dim": 512, "rope_head_dim": 64, "norm_eps": 1e-20, "o_groups": 8, "o_lora_rank": 1024,
  "window_size": 128, "kv_source_layers": [2, 8, 14, 20], "index_source_layers": [2, 8, 14, 20, 24, 28, 32, 36],
  "original_seq_len": 65536, "rope_theta": 10000, "rope_factor": 16, "beta_fast": 32, "beta_slow": 1,
  "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512, "candidate_source_layer": 20,
  "candidate_topk_blocks": 2048, "candidate_block_size": 8, "hc_mult": 4, "hc_sinkhorn_iters": 20,
  "hc_eps": 1e-06, "engram_layer_ids": [1, 14], "engram_vocab_size": 16000000,
  "engram_num_embeddings": [384006168, 384016682], "engram_max_ngram_size": 4, "engram_pad_id": 2,
  "engram_compressed_vocab_size": 99092, "dtype": "fp8", "expert_dtype": "fp4", "compress_rope_theta": 160000,
  "compress_ratios": [0,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0],
  "vision_n_layers": 32, "vision_dim": 1024, "vision_n_heads": 16, "vision_inter_dim": 2816,
  "vision_patch_size": 14, "vision_downsample_ratio": 3, "vision_max_n_token": 1024,
  "vision_min_pixels": 295936, "vision_max_wh_ratio": null, "image_token_id": 129264,
  "engram_n_heads": 8, "engram_head_dim": 256, "vision_rope_theta": 10000
}"#;

#[test]
fn flat_and_nested_release_configs_parse_to_the_same_config() {
    let nested = Config::release();
    let flat = Config::from_json(RELEASE_FLAT).expect("flat release config is valid");
    assert_eq!(nested, flat);
}

#[test]
fn release_config_has_the_spec_values() {
    let c = Config::release();
    assert_eq!((c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads), (129280, 5120, 40, 64));
    assert_eq!((c.head_dim, c.qk_rope_head_dim, c.q_lora_rank, c.o_groups, c.o_lora_rank), (512, 64, 1280, 8, 1024));
    assert_eq!(c.rms_norm_eps, 1e-20);
    assert_eq!(c.rope_scaling, Some(Yarn { factor: 16.0, original_seq_len: 65536, beta_fast: 32.0, beta_slow: 1.0 }));
    assert_eq!((c.rope_theta, c.compress_rope_theta), (10000.0, 160000.0));
    assert_eq!(c.candidate_source_layer_id, Some(20));
    assert_eq!(c.gate_temp, 1.0, "absent gate_temp defaults to 1.0");
    assert_eq!(c.moe_shape(39), (384, 6));
    assert_eq!(c.moe_shape(40), (128, 3));
    assert_eq!(c.engram_hash_cols(), 24);
    assert_eq!(c.hc_mix_dim(), 24);
    let v = c.vision.expect("vision");
    assert_eq!((v.num_hidden_layers, v.hidden_size, v.intermediate_size, v.max_wh_ratio), (32, 1024, 2816, None));
}

#[test]
fn candidate_minus_one_disables_level_one() {
    let text = TINY_CONFIG_JSON.replace("\"candidate_source_layer_id\": 5", "\"candidate_source_layer_id\": -1");
    let c = Config::from_json(&text).expect("valid without candidates");
    assert_eq!(c.candidate_source_layer_id, None);
    assert!(c.layer_plan().iter().all(|p| !p.candidate_source && !p.candidate_mask));
}

#[test]
fn type_and_missing_key_errors_name_the_key() {
    let e = Config::from_json(&TINY_CONFIG_JSON.replace("\"hidden_size\": 64", "\"hidden_size\": \"64\"")).expect_err("string");
    assert!(matches!(&e, ConfigError::Type { key, .. } if key == "hidden_size"), "{e}");
    let e = Config::from_json(&TINY_CONFIG_JSON.replace("\"head_dim\": 64,", "")).expect_err("missing");
    assert!(e.to_string().contains("head_dim"), "{e}");
    let e = Config::from_json("[1, 2]").expect_err("not an object");
    assert!(matches!(e, ConfigError::Json(_)));
    let e = Config::from_json(&TINY_CONFIG_JSON.replace("\"deepseek_v41_text\"", "\"deepseek_v4\"")).expect_err("V4");
    assert!(e.to_string().contains("model_type"), "{e}");
    let e = Config::from_json(&TINY_CONFIG_JSON.replace("[32, 32]", "[128, 128]")).expect_err("block");
    assert!(e.to_string().contains("weight_block_size"), "{e}");
}

#[test]
fn a_directory_with_only_the_flat_inference_config_is_read() {
    let dir = std::env::temp_dir().join(format!("lockstep-model-flatdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("inference")).expect("dir");
    std::fs::write(dir.join("inference").join("config.json"), RELEASE_FLAT).expect("write");
    assert_eq!(Config::from_dir(&dir).expect("flat config"), Config::release());
    std::fs::write(dir.join("config.json"), "{").expect("write");
    let e = Config::from_dir(&dir).expect_err("nested config.json wins and is broken");
    assert!(matches!(e, ConfigError::Json(_)), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The release's nested config with its `vision_config` object replaced by `vision`.
fn release_with_vision(vision: &str) -> String {
    let at = RELEASE_CONFIG_JSON.find("\"vision_config\"").expect("vision_config");
    let end = at + RELEASE_CONFIG_JSON[at..].find('}').expect("end of vision_config") + 1;
    format!("{}\"vision_config\": {vision}{}", &RELEASE_CONFIG_JSON[..at], &RELEASE_CONFIG_JSON[end..])
}

#[test]
fn a_sparse_vision_config_takes_the_defaults_of_the_official_configs() {
    let sparse = release_with_vision(r#"{"model_type": "deepseek_v41_vision", "num_hidden_layers": 32}"#);
    assert_eq!(Config::from_json(&sparse).expect("sparse nested vision"), Config::release());
    let bare = Config::from_json(&release_with_vision("{}")).expect("empty vision_config");
    assert_eq!(bare.vision, Config::release().vision, "an empty vision_config is HF's default tower");
    let off = Config::from_json(&release_with_vision(r#"{"num_hidden_layers": 0}"#)).expect("no tower");
    assert_eq!(off.vision, None);
    let custom = Config::from_json(&release_with_vision(r#"{"num_hidden_layers": 2, "min_pixels": 12544}"#)).expect("partial");
    let v = custom.vision.expect("vision");
    assert_eq!((v.num_hidden_layers, v.min_pixels, v.hidden_size, v.max_image_tokens), (2, 12544, 1024, 1024));
    let mut flat: Map<String, Value> = serde_json::from_str(RELEASE_FLAT).expect("json");
    flat.retain(|k, _| !k.starts_with("vision_") || k == "vision_n_layers");
    let flat = Value::Object(flat).to_string();
    assert_eq!(Config::from_json(&flat).expect("sparse flat vision"), Config::release(), "flat keys take ModelArgs' defaults");
    let none = RELEASE_FLAT.replace("\"vision_n_layers\": 32,", "");
    assert_eq!(Config::from_json(&none).expect("flat without layers").vision, None, "ModelArgs' vision_n_layers is 0");
}

#[test]
fn errors_name_the_key_as_the_file_spells_it() {
    let text = |c: &str| Config::from_json(c).expect_err("rejected").to_string();
    let nested = release_with_vision(r#"{"num_hidden_layers": 2, "min_pixels": "many"}"#);
    assert!(text(&nested).contains("`vision_config.min_pixels`"), "{}", text(&nested));
    let flat = RELEASE_FLAT.replace("\"vision_min_pixels\": 295936", "\"vision_min_pixels\": \"many\"");
    assert!(text(&flat).contains("`vision_min_pixels`"), "{}", text(&flat));
    let e = text(&release_with_vision(r#"{"hidden_size": 0}"#));
    assert!(e.contains("`vision_config.hidden_size` must be > 0"), "{e}");
    let e = text(&RELEASE_FLAT.replace("\"vision_dim\": 1024", "\"vision_dim\": 0"));
    assert!(e.contains("`vision_dim` must be > 0"), "{e}");
    let e = text(&RELEASE_CONFIG_JSON.replace("\"hidden_size\": 5120", "\"hidden_size\": 5121"));
    assert!(e.contains("`text_config.hidden_size` is 5121"), "{e}");
    let e = text(&RELEASE_FLAT.replace("\"dim\": 5120", "\"dim\": 5121"));
    assert!(e.contains("`dim` is 5121"), "{e}");
    let e = text(&RELEASE_CONFIG_JSON.replace("\"factor\": 16", "\"factor\": 0.5"));
    assert!(e.contains("`text_config.rope_scaling.factor` is 0.5"), "{e}");
    let e = text(&RELEASE_FLAT.replace("\"rope_factor\": 16", "\"rope_factor\": 0.5"));
    assert!(e.contains("`rope_factor` is 0.5"), "{e}");
    let e = text(&RELEASE_CONFIG_JSON.replace("\"head_dim\": 512,", ""));
    assert!(e.contains("missing key `text_config.head_dim`"), "{e}");
    let e = text(&RELEASE_CONFIG_JSON.replace("\"scoring_func\": \"sqrtsoftplus\"", "\"scoring_func\": \"relu\""));
    assert!(e.contains("`text_config.scoring_func` is `relu`"), "{e}");
    let e = text(&RELEASE_FLAT.replace("\"score_func\": \"sqrtsoftplus\"", "\"score_func\": \"relu\""));
    assert!(e.contains("`score_func` is `relu`"), "{e}");
    let e = text(&RELEASE_CONFIG_JSON.replace("\"deepseek_v41_text\"", "\"deepseek_v4\""));
    assert!(e.contains("`text_config.model_type` is `deepseek_v4`"), "{e}");
}
