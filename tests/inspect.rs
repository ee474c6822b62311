//! `lockstep inspect`: the release's config alone implies its 96,085 tensors and 510,286,023,000 payload bytes, split into GPU-resident and host bytes; a tiny checkpoint matches its table and is canonical as stored; a missing source is a clear error.
mod cli_support;

use cli_support::{lockstep, tiny_model};
use serde_json::Value;

fn inspect_json(args: &[&str]) -> Value {
    let mut all = vec!["inspect", "--json"];
    all.extend_from_slice(args);
    let out = lockstep(&all);
    assert!(out.status.success(), "inspect {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn the_release_config_alone_gives_its_tensor_count_payload_and_resident_split() {
    let release = concat!(env!("CARGO_MANIFEST_DIR"), "/src/model/config/configs/release.json");
    let v = inspect_json(&["--config", release, "--context", "1048576"]);
    assert_eq!(v["expected"]["tensors"], 96_085);
    assert_eq!(v["expected"]["bytes"], 510_286_023_000u64);
    let (resident, host) = (v["resident_bytes"].as_u64().expect("resident"), v["host_bytes"].as_u64().expect("host"));
    assert_eq!(resident + host, 510_286_023_000, "every byte is resident or on the host");
    assert!(host > 200_000_000_000 && resident > 300_000_000_000, "the engram tables stay on the host: {host} / {resident}");
    let dtypes: u64 = v["expected"]["by_dtype"].as_object().expect("by dtype").values().map(|d| d["bytes"].as_u64().unwrap_or(0)).sum();
    assert_eq!(dtypes, 510_286_023_000, "the dtype rows add up");
    assert_eq!(v["state"]["per_token_bytes"], 890.0, "three ratio-2 and one ratio-1 KV sources of packed rows (288 + 68 bytes): the model card's 890");
    assert!(v["checkpoint"].is_null(), "no weights were read");
}

#[test]
fn a_tiny_checkpoint_matches_its_table_and_a_missing_source_is_refused() {
    let dir = tiny_model("inspect", "tiny", "7");
    let v = inspect_json(&["--model", dir.0.to_str().expect("utf-8")]);
    assert_eq!(v["checkpoint"]["layout"], "matches the config's table");
    assert_eq!(v["checkpoint"]["tensors"], v["expected"]["tensors"]);
    assert_eq!(v["checkpoint"]["bytes"], v["expected"]["bytes"]);
    assert_eq!(v["checkpoint"]["values"]["summary"], "finite, canonical as stored", "the generator writes canonical values");
    assert_eq!(v["checkpoint"]["values"]["tensors_changed"], 0);
    let text = lockstep(&["inspect", "--model", dir.0.to_str().expect("utf-8")]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("layers: 0 window; 1 window (engram); 2 full r2;"), "{stdout}");
    assert!(stdout.contains("values: finite, canonical as stored"), "{stdout}");
    let none = lockstep(&["inspect"]);
    assert!(!none.status.success() && String::from_utf8_lossy(&none.stderr).contains("--model DIR or --config FILE"));
    let missing = lockstep(&["inspect", "--model", "/nonexistent/lockstep"]);
    assert!(!missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/lockstep"));
}

#[test]
fn a_planted_subnormal_is_counted_by_inspect_and_reported_by_run() {
    let dir = tiny_model("inspect", "subnormal", "7");
    let shard = dir.0.join("model-00002-of-00003.safetensors");
    let h = lockstep::weights::safetensors::read_header(&shard).expect("header");
    let e = h.entries.iter().find(|e| e.name == "norm.weight").expect("norm.weight");
    let mut bytes = std::fs::read(&shard).expect("shard");
    let at = (h.data_start + e.start) as usize + 2 * 5;
    bytes[at..at + 2].copy_from_slice(&0x8001u16.to_le_bytes());
    std::fs::write(&shard, bytes).expect("write");
    let model = dir.0.to_str().expect("utf-8");
    let v = inspect_json(&["--model", model]);
    let values = &v["checkpoint"]["values"];
    assert_eq!((values["tensors_changed"].as_u64(), values["values_flushed"].as_u64(), values["blocks_zeroed"].as_u64()), (Some(1), Some(1), Some(0)), "{values}");
    assert_eq!(values["changed"][0]["name"], "norm.weight");
    assert!(inspect_json(&["--model", model, "--no-values"])["checkpoint"]["values"].is_null(), "headers only");
    let run = lockstep(&["run", "--model", model, "--prompt", "Same bits everywhere.", "--max-tokens", "1"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("canonical values:")).collect();
    assert_eq!(lines, ["canonical values: 1 tensors changed, 1 subnormal values flushed to zero, 0 quantized blocks below their scale floor zeroed (first: norm.weight)"], "{stderr}");
}

#[test]
fn make_tiny_with_edge_values_writes_a_checkpoint_that_is_canonical_as_stored() {
    let dir = cli_support::temp("inspect", "edge");
    let model = dir.0.to_str().expect("utf-8");
    let out = lockstep(&["make-tiny", model, "--seed", "7", "--edge-values"]);
    assert!(out.status.success(), "make-tiny --edge-values: {}", String::from_utf8_lossy(&out.stderr));
    let v = inspect_json(&["--model", model]);
    assert_eq!(v["checkpoint"]["layout"], "matches the config's table");
    assert_eq!(v["checkpoint"]["values"]["summary"], "finite, canonical as stored");
}
