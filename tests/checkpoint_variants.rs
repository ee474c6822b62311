//! Checkpoints written by other tools: without the vision tower or `bias_vl`, or with a sparse `vision_config`, the tiny model loads and gives its canonical twin's tokens; a group held only in part is still refused by name.
mod cli_support;
mod variant_support;

use cli_support::{temp, tiny_model, TempDir};
use lockstep::cli::run::{run, RunArgs, VerifyWeights};
use lockstep::model::{load, vision_missing, LoadMode, ValueCheck};
use std::path::Path;
use variant_support::{copy_without, edit_json, is_bias_vl, is_vision_tower};

const PROMPT: &str = "A checkpoint written by another tool serves the same text.";

/// The greedy tokens `lockstep run` generates from the checkpoint in `dir` on the CPU oracle.
fn tokens(dir: &Path) -> Vec<u32> {
    let args = RunArgs {
        model: dir.to_path_buf(),
        prompt: PROMPT.into(),
        chat: false,
        max_tokens: 12,
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        device: "cpu".into(),
        prefill_chunk: 128,
        taps: None,
        verify_weights: VerifyWeights::Sampled,
        image: None,
    };
    let report = run(&args, &mut Vec::new()).unwrap_or_else(|e| panic!("run on {}: {e:#}", dir.display()));
    assert!(!report.tokens.is_empty());
    report.tokens
}

/// A twin of `base` in a fresh temp dir without the tensors `drop` selects.
fn twin(base: &Path, tag: &str, drop: impl Fn(&str) -> bool) -> TempDir {
    let dir = temp("variants", tag);
    copy_without(base, &dir.0, drop);
    dir
}

#[test]
fn a_checkpoint_without_the_vision_tower_or_bias_vl_gives_its_canonical_twins_tokens() {
    let base = tiny_model("variants", "base", "7");
    let (cfg, ck) = load(&base.0, LoadMode::Mapped, ValueCheck::All).expect("canonical loads");
    assert_eq!(vision_missing(&cfg, &ck), None, "the canonical tiny model has the whole vision path");
    let want = tokens(&base.0);

    let text_only = twin(&base.0, "text-only", |n| is_vision_tower(n) || is_bias_vl(n));
    edit_json(&text_only.0.join("config.json"), |c| {
        c.as_object_mut().expect("object").remove("vision_config");
    });
    let no_tower = twin(&base.0, "no-tower", |n| is_vision_tower(n) || is_bias_vl(n));
    let no_bias_vl = twin(&base.0, "no-bias-vl", is_bias_vl);
    let cases = [
        (&text_only, "config has no vision tower"),
        (&no_tower, "no vision tower (vision.*, aligner.*, image_start, image_end, image_newline) and no `ffn.gate.bias_vl`"),
        (&no_bias_vl, "the checkpoint has no `ffn.gate.bias_vl` in its MoE gates"),
    ];
    for (dir, why) in cases {
        let (cfg, ck) = load(&dir.0, LoadMode::Mapped, ValueCheck::All).unwrap_or_else(|e| panic!("{}: {e}", dir.0.display()));
        assert!(ck.len() < 938 && ck.names().all(|n| !is_bias_vl(n)), "{}: the twin lacks tensors", dir.0.display());
        let reason = vision_missing(&cfg, &ck).expect("no vision path");
        assert!(reason.contains(why), "{reason}");
        assert_eq!(tokens(&dir.0), want, "{}: the same tokens as the canonical twin", dir.0.display());
    }

    let one_gone = "layers.3.ffn.gate.bias_vl";
    let partial = twin(&base.0, "partial", |n| n == one_gone);
    let e = load(&partial.0, LoadMode::Mapped, ValueCheck::All).err().expect("a group held in part is refused").to_string();
    assert!(e.contains("missing tensor") && e.contains(one_gone), "{e}");
    let tower_part = twin(&base.0, "partial-tower", |n| n.starts_with("vision.blocks.1."));
    let e = load(&tower_part.0, LoadMode::Mapped, ValueCheck::All).err().expect("half a tower is refused").to_string();
    assert!(e.contains("missing tensor `vision.blocks.1."), "{e}");
    let stray = twin(&base.0, "stray", |_| false);
    edit_json(&stray.0.join("config.json"), |c| {
        c.as_object_mut().expect("object").remove("vision_config");
    });
    let e = load(&stray.0, LoadMode::Mapped, ValueCheck::All).err().expect("tower tensors without a vision config").to_string();
    assert!(e.contains("unexpected tensor"), "{e}");
}

#[test]
fn a_sparse_vision_config_in_the_checkpoint_loads_with_the_same_tokens() {
    let base = tiny_model("variants", "sparse-base", "7");
    let sparse = twin(&base.0, "sparse", |_| false);
    edit_json(&sparse.0.join("config.json"), |c| {
        let v = c["vision_config"].as_object_mut().expect("vision_config");
        for k in ["rope_theta", "patch_size", "downsample_ratio", "max_image_tokens", "min_pixels", "max_wh_ratio"] {
            assert!(v.remove(k).is_some(), "{k}");
        }
    });
    let (cfg, ck) = load(&sparse.0, LoadMode::Mapped, ValueCheck::All).expect("sparse vision_config loads");
    let v = cfg.vision.as_ref().expect("vision");
    assert_eq!((v.patch_size, v.downsample_ratio, v.max_image_tokens, v.min_pixels, v.max_wh_ratio), (14, 3, 1024, 295_936, None));
    assert_eq!(vision_missing(&cfg, &ck), None);
    assert_eq!(tokens(&sparse.0), tokens(&base.0));
    let bad = twin(&base.0, "bad-min-pixels", |_| false);
    edit_json(&bad.0.join("config.json"), |c| c["vision_config"]["min_pixels"] = "544x544".into());
    let e = load(&bad.0, LoadMode::Mapped, ValueCheck::All).err().expect("a bad nested value").to_string();
    assert!(e.contains("`vision_config.min_pixels`"), "{e}");
}
