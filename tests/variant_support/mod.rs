//! Twins of a checkpoint as other tools write them: the same shards less some tensors, an edited config, an edited tokenizer.json.
#![allow(dead_code)]
use lockstep::weights::safetensors::{read_file, write_file};
use lockstep::weights::INDEX_FILE;
use serde_json::Value;
use std::path::Path;

/// Whether a tensor belongs to the vision tower, the aligner or the image delimiters.
pub fn is_vision_tower(name: &str) -> bool {
    name.starts_with("vision.") || name.starts_with("aligner.") || matches!(name, "image_start" | "image_end" | "image_newline")
}

/// Whether a tensor is a gate's image-row routing bias.
pub fn is_bias_vl(name: &str) -> bool {
    name.ends_with(".ffn.gate.bias_vl")
}

/// Copies the checkpoint in `src` to `dst` with the tensors `drop` selects left out of every shard and of the index.
pub fn copy_without(src: &Path, dst: &Path, drop: impl Fn(&str) -> bool) {
    std::fs::create_dir_all(dst).expect("twin dir");
    for e in std::fs::read_dir(src).expect("checkpoint dir").flatten() {
        let (path, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
        if name.ends_with(".safetensors") {
            let mut kept = read_file(&path).expect("shard");
            kept.retain(|t| !drop(&t.0));
            write_file(&dst.join(&name), &kept).expect("write shard");
        } else if name == INDEX_FILE {
            let mut index: Value = serde_json::from_slice(&std::fs::read(&path).expect("index")).expect("index json");
            index["weight_map"].as_object_mut().expect("weight_map").retain(|k, _| !drop(k));
            std::fs::write(dst.join(&name), index.to_string()).expect("write index");
        } else {
            std::fs::copy(&path, dst.join(&name)).expect("copy");
        }
    }
}

/// Rewrites the JSON file `path` after `edit` changes it.
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(path).expect("read json")).expect("json");
    edit(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).expect("json text")).expect("write json");
}

/// A tokenizer.json text with the added token `content` removed, or renamed to `rename` when given.
pub fn tokenizer_without(json: &str, content: &str, rename: Option<&str>) -> String {
    let mut v: Value = serde_json::from_str(json).expect("tokenizer json");
    let added = v["added_tokens"].as_array_mut().expect("added_tokens");
    let at = added.iter().position(|t| t["content"] == content).unwrap_or_else(|| panic!("no added token {content}"));
    match rename {
        Some(r) => added[at]["content"] = r.into(),
        None => {
            added.remove(at);
        }
    }
    v.to_string()
}
