//! Built-in configs for make-tiny's `--preset`: the release's layer widths with a few layers, so one step reads the bytes real layers read.
use crate::model::config::{invalid, Config, ConfigError};
use serde_json::{json, Value};
use std::str::FromStr;

/// The flash-scaled preset at its default 3 layers: window-only with engram, ratio-2 Full, ratio-1 Full candidate source; the release's three DSpark stages reading all three.
pub const FLASH_SCALED_CONFIG_JSON: &str = include_str!("configs/flash_scaled.json");

/// Most backbone layers a preset takes (the release's count).
pub const MAX_PRESET_LAYERS: usize = 40;

/// A built-in checkpoint preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// Release widths (hidden 5120, 384 experts of 2304, vocab 129280), few layers, a tiny engram table, the release's DSpark head (3 stages of 128 experts) on the last three layers, no vision.
    FlashScaled,
    /// The same with the release's vision tower and aligner (32 blocks of 1024, aligner into 5120).
    FlashScaledVision,
    /// The tiny model's widths with the release's attention thresholds (a 128-position window, 512 picks, candidate blocks from 16,384 compressed rows, a million positions): long contexts cross every threshold cheaply.
    TinyThresholds,
}

impl FromStr for Preset {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Preset, ConfigError> {
        match s {
            "flash-scaled" => Ok(Preset::FlashScaled),
            "flash-scaled-vision" => Ok(Preset::FlashScaledVision),
            "tiny-thresholds" => Ok(Preset::TinyThresholds),
            other => Err(invalid("--preset", format!("`{other}` is not a preset; known: flash-scaled, flash-scaled-vision, tiny-thresholds"))),
        }
    }
}

/// The layer roles of `n` flash-scaled layers: compress ratios, KV sources, index sources, candidate source.
struct Roles {
    ratios: Vec<usize>,
    kv: Vec<usize>,
    index: Vec<usize>,
    candidate: i64,
}

/// 1: one ratio-2 Full layer; 2: window-only then ratio-2 Full; 3: then a ratio-1 Full candidate source; 4+: then a Reindex layer and ratio-1 Reuse layers.
fn flash_scaled_roles(n: usize) -> Roles {
    match n {
        1 => Roles { ratios: vec![2], kv: vec![0], index: vec![0], candidate: -1 },
        2 => Roles { ratios: vec![0, 2], kv: vec![1], index: vec![1], candidate: -1 },
        _ => {
            let mut ratios = vec![0, 2];
            ratios.resize(n, 1);
            let index = if n >= 4 { vec![1, 2, 3] } else { vec![1, 2] };
            Roles { ratios, kv: vec![1, 2], index, candidate: 2 }
        }
    }
}

/// The config JSON of `preset` with `layers` backbone layers (the preset's default when `None`), validated.
pub fn preset_config_json(preset: Preset, layers: Option<usize>) -> Result<String, ConfigError> {
    if preset == Preset::TinyThresholds {
        return tiny_thresholds(layers);
    }
    let mut v: Value = serde_json::from_str(FLASH_SCALED_CONFIG_JSON).map_err(|e| ConfigError::Json(e.to_string()))?;
    if preset == Preset::FlashScaledVision {
        let top = v.as_object_mut().ok_or_else(|| ConfigError::Json("the preset is not an object".into()))?;
        top.insert("vision_config".into(), json!({
            "model_type": "deepseek_v41_vision", "num_hidden_layers": 32, "hidden_size": 1024, "num_attention_heads": 16,
            "intermediate_size": 2816, "patch_size": 14, "rope_theta": 10000, "downsample_ratio": 3,
            "max_image_tokens": 1024, "min_pixels": 295936, "max_wh_ratio": null
        }));
    }
    if let Some(n) = layers {
        if n == 0 || n > MAX_PRESET_LAYERS {
            return Err(invalid("--layers", format!("is {n}; must be between 1 and {MAX_PRESET_LAYERS}")));
        }
        let r = flash_scaled_roles(n);
        let t = v.get_mut("text_config").and_then(Value::as_object_mut).ok_or_else(|| ConfigError::Missing { section: None, key: "text_config".into() })?;
        t.insert("num_hidden_layers".into(), json!(n));
        let stages = t.get("num_nextn_predict_layers").and_then(Value::as_u64).unwrap_or(0) as usize;
        let mut ratios = r.ratios.clone();
        ratios.resize(n + stages, 0);
        t.insert("compress_ratios".into(), json!(ratios));
        t.insert("dspark_target_layer_ids".into(), json!((n.saturating_sub(3)..n).collect::<Vec<_>>()));
        t.insert("kv_source_layer_ids".into(), json!(r.kv));
        t.insert("index_source_layer_ids".into(), json!(r.index));
        t.insert("candidate_source_layer_id".into(), json!(r.candidate));
    }
    let text = serde_json::to_string_pretty(&v).map_err(|e| ConfigError::Json(e.to_string()))? + "\n";
    Config::from_json(&text)?;
    Ok(text)
}

/// The tiny config with the release's window, top-k, candidate level and position limit (its layers are its own).
fn tiny_thresholds(layers: Option<usize>) -> Result<String, ConfigError> {
    if layers.is_some() {
        return Err(invalid("--layers", "the tiny-thresholds preset keeps the tiny model's layers"));
    }
    let mut v: Value = serde_json::from_str(crate::model::config::TINY_CONFIG_JSON).map_err(|e| ConfigError::Json(e.to_string()))?;
    let t = v.get_mut("text_config").and_then(Value::as_object_mut).ok_or_else(|| ConfigError::Missing { section: None, key: "text_config".into() })?;
    for (k, n) in [("sliding_window", 128), ("index_topk", 512), ("candidate_topk_blocks", 2048), ("candidate_block_size", 8), ("max_position_embeddings", 1 << 20)] {
        t.insert(k.into(), json!(n));
    }
    let text = serde_json::to_string_pretty(&v).map_err(|e| ConfigError::Json(e.to_string()))? + "\n";
    Config::from_json(&text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{expected_tensors, LayerMode};

    #[test]
    fn every_layer_count_gives_a_valid_config_with_release_widths() {
        for n in 1..=MAX_PRESET_LAYERS {
            let cfg = Config::from_json(&preset_config_json(Preset::FlashScaled, Some(n)).expect("valid")).expect("parses");
            assert_eq!((cfg.num_hidden_layers, cfg.hidden_size, cfg.n_routed_experts, cfg.moe_intermediate_size, cfg.vocab_size), (n, 5120, 384, 2304, 129280));
            assert_eq!(cfg.engram_layer_ids, vec![0]);
            assert!(cfg.has_drafts() && cfg.dspark_target_layer_ids.last() == Some(&(n - 1)));
        }
    }

    #[test]
    fn default_preset_has_a_window_layer_a_ratio_two_source_and_a_ratio_one_candidate_source() {
        let cfg = Config::from_json(&preset_config_json(Preset::FlashScaled, None).expect("valid")).expect("parses");
        let plan = cfg.layer_plan();
        let modes: Vec<_> = plan.iter().map(|p| (p.mode, p.ratio)).collect();
        assert_eq!(modes, vec![(LayerMode::Window, 0), (LayerMode::Full, 2), (LayerMode::Full, 1), (LayerMode::Window, 0), (LayerMode::Window, 0), (LayerMode::Window, 0)]);
        assert!(plan[3..].iter().all(|p| p.dspark_stage.is_some() && p.n_routed_experts == 128 && p.num_experts_per_tok == 3));
        assert!(plan[2].candidate_source);
        let experts = expected_tensors(&cfg).iter().filter(|s| s.name.contains(".ffn.experts.")).count();
        assert_eq!(experts, 3 * 384 * 6 + 3 * 128 * 6);
    }

    #[test]
    fn four_layers_add_a_reindex_layer_and_bad_counts_are_refused() {
        let cfg = Config::from_json(&preset_config_json(Preset::FlashScaled, Some(5)).expect("valid")).expect("parses");
        let modes: Vec<_> = cfg.layer_plan().iter().map(|p| p.mode).collect();
        assert_eq!(modes[3..5], [LayerMode::Reindex, LayerMode::Reuse]);
        assert!(preset_config_json(Preset::FlashScaled, Some(0)).is_err());
        assert!(preset_config_json(Preset::FlashScaled, Some(MAX_PRESET_LAYERS + 1)).is_err());
        assert!("flash".parse::<Preset>().is_err());
    }
}
