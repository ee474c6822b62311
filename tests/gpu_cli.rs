//! `lockstep run --device` and `lockstep diff` on the tiny model: the same token hashes and tap files on the CPU oracle and the default GPU adapter, and a planted one-ulp difference named by its stage.
mod cli_support;

use cli_support::{lockstep, tiny_model, TempDir};
use std::path::Path;

/// A fresh temp dir path for `tag`, removed when dropped.
fn temp(tag: &str) -> TempDir {
    cli_support::temp("gpu-cli", tag)
}

/// A tiny model written by `lockstep make-tiny`.
fn model_dir(tag: &str) -> TempDir {
    let dir = tiny_model("gpu-cli", tag, "7");
    let has_tokenizer = dir.0.join("tokenizer.json").is_file() || std::env::var_os("LOCKSTEP_TOKENIZER").is_some();
    assert!(has_tokenizer, "make-tiny found no tokenizer to copy; run scripts/fetch_tokenizer.sh");
    dir
}

const PROMPT: &str = "The engine gives the same bits everywhere, on every device.";

/// `lockstep run` on `device`; returns the token_sha256 value.
fn run_hash(dir: &Path, device: &str, extra: &[&str]) -> String {
    let mut args = vec!["run", "--model", dir.to_str().expect("utf-8"), "--prompt", PROMPT, "--max-tokens", "5", "--device", device];
    args.extend_from_slice(extra);
    let out = lockstep(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "run {device} {extra:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find_map(|l| l.strip_prefix("token_sha256=")).unwrap_or_else(|| panic!("no token_sha256 line in {stdout}"));
    assert_eq!(line.len(), 64);
    line.to_string()
}

/// Every file under `dir`, relative path and bytes, sorted.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("prefix").to_string_lossy().to_string();
                out.push((rel, std::fs::read(&p).expect("read tap")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn greedy_and_seeded_runs_give_the_same_hash_and_tap_files_on_cpu_and_gpu() {
    let dir = model_dir("hash");
    let (tc, tg) = (temp("taps-cpu"), temp("taps-gpu"));
    let cpu = run_hash(&dir.0, "cpu", &["--taps", tc.0.to_str().expect("utf-8")]);
    let gpu = run_hash(&dir.0, "gpu", &["--taps", tg.0.to_str().expect("utf-8"), "--prefill-chunk", "5"]);
    assert_eq!(cpu, gpu, "greedy token hash, cpu vs gpu");
    let (fc, fg) = (files(&tc.0), files(&tg.0));
    assert!(fc.len() > 100, "{} tap files", fc.len());
    let call0 = lockstep::cli::run::read_tap(&tc.0.join("call0000/logits.tap")).expect("read logits tap");
    assert_eq!((call0.0.as_str(), call0.1, call0.3.len()), ("logits", 1, call0.2));
    let cpu_calls = fc.iter().filter(|(p, _)| p.ends_with("index.json")).count();
    let gpu_decode: Vec<_> = fg.iter().filter(|(p, _)| !p.starts_with("call0000")).collect();
    assert!(cpu_calls > 1 && !gpu_decode.is_empty());
    let sampled = |device: &str, seed: &str| run_hash(&dir.0, device, &["--temperature", "1.0", "--top-p", "0.95", "--seed", seed]);
    assert_eq!(sampled("cpu", "23"), sampled("gpu", "23"), "seeded sampling, cpu vs gpu");
    let (tc2, tg2) = (temp("taps-cpu2"), temp("taps-gpu2"));
    run_hash(&dir.0, "cpu", &["--taps", tc2.0.to_str().expect("utf-8")]);
    run_hash(&dir.0, "gpu", &["--taps", tg2.0.to_str().expect("utf-8")]);
    assert!(files(&tc2.0) == files(&tg2.0), "tap files of the same calls differ between cpu and gpu");
}

#[test]
fn diff_finds_all_stages_equal_and_names_a_planted_one_ulp_difference_in_the_backbone_or_the_draft_head() {
    let dir = model_dir("diff");
    let d = dir.0.to_str().expect("utf-8");
    let base = ["diff", "--a", "cpu", "--b", "gpu", "--model", d, "--prompt", PROMPT, "--max-tokens", "3"];
    let out = lockstep(&base);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "diff failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("stages equal (4 calls"), "{stdout}");
    let mut planted = base.to_vec();
    planted.extend(["--perturb-b", "rmsnorm"]);
    let out = lockstep(&planted);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a planted difference passed: {stdout}");
    assert!(stdout.contains("first difference: call 0 stage L0.attn.x: 1 of"), "{stdout}");
    assert!(stdout.contains("65536 ulp (1 bf16 ulp)") && stdout.contains("f64 reference error"), "{stdout}");
    let late = ["diff", "--a", "gpu", "--b", "cpu", "--model", d, "--prompt", PROMPT, "--max-tokens", "3", "--perturb-b", "hc_expand:36"];
    let out = lockstep(&late);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && stdout.contains("first difference: call 1 stage L6.h_attn: 1 of 256 values"), "{stdout}");
    let draft = ["diff", "--a", "cpu", "--b", "gpu", "--model", d, "--prompt", PROMPT, "--max-tokens", "3", "--perturb-b", "sparse_attention:9"];
    let out = lockstep(&draft);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && stdout.contains("first difference: call 0 stage S0.attn.o:") && stdout.contains("f64 reference error"), "{stdout}");
}

#[test]
fn diff_with_an_image_finds_the_tower_and_the_span_equal_and_names_a_planted_difference_in_the_tower() {
    let dir = model_dir("diff-image");
    let d = dir.0.to_str().expect("utf-8");
    let png = dir.0.join("picture.png");
    cli_support::noise_rgb(150, 97, 0x51).save(&png).expect("write png");
    let p = png.to_str().expect("utf-8");
    let base = ["diff", "--a", "cpu", "--b", "gpu", "--model", d, "--prompt", PROMPT, "--image", p, "--max-tokens", "2", "--prefill-chunk", "9"];
    let out = lockstep(&base);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("stages equal"), "diff --image failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let mut planted = base.to_vec();
    planted.extend(["--perturb-b", "vit_attention:1"]);
    let out = lockstep(&planted);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && stdout.contains("stage V1.attn:"), "{stdout}");
    let junk = dir.0.join("junk.png");
    std::fs::write(&junk, b"\x89PNG\r\n\x1a\n truncated").expect("write");
    let mut bad = base.to_vec();
    bad[10] = junk.to_str().expect("utf-8");
    let out = lockstep(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("junk.png") && stderr.contains("decode") && !stderr.contains("panicked"), "{stderr}");
}
