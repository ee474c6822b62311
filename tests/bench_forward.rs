//! `lockstep bench forward` on the tiny model (every measurement line with positive rates) and the byte count of one decode step.
mod forward_support;

use lockstep::cli::bench_counted::{Counted, StepBytes};
use lockstep::engine::Session;
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;
use std::path::PathBuf;
use std::process::{Command, Output};

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep")).args(args).env("RUST_BACKTRACE", "0").output().expect("run lockstep")
}

/// The number right before `unit` in `line` (e.g. `12.5 tok/s`).
fn number_before(line: &str, unit: &str) -> f64 {
    let head = line.split(unit).next().unwrap_or_else(|| panic!("no `{unit}` in `{line}`"));
    let word = head.split_whitespace().last().unwrap_or_else(|| panic!("nothing before `{unit}` in `{line}`"));
    word.parse().unwrap_or_else(|_| panic!("`{word}` before `{unit}` is not a number in `{line}`"))
}

#[test]
fn bench_forward_on_the_tiny_model_prints_every_measurement_with_positive_rates() {
    let dir = TempDir(std::env::temp_dir().join(format!("lockstep-bench-forward-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let model = dir.0.to_str().expect("utf-8 temp dir");
    let out = lockstep(&["make-tiny", model, "--seed", "4"]);
    assert!(out.status.success(), "make-tiny failed: {}", String::from_utf8_lossy(&out.stderr));
    let out = lockstep(&["bench", "forward", "--model", model, "--reps", "1", "--prefill", "16,32", "--context", "16,40", "--profile"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench forward failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let line = |prefix: &str| stdout.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no `{prefix}` line in\n{stdout}")).to_string();
    assert!(line("bench forward model=").contains("layers=9"));
    let ceilings = line("ceiling stream-read kernel:");
    assert!(number_before(&ceilings, "GB/s;") > 0.0 && number_before(&ceilings, "GB/s (read + written)") > 0.0, "{ceilings}");
    for prefix in ["prefill tokens=16 chunk=16 seqs=1", "prefill tokens=32 chunk=32 seqs=1", "decode rows=1 context=16", "decode rows=4 context=16 seqs=4"] {
        let l = line(prefix);
        assert!(number_before(&l, "tok/s") > 0.0, "{l}");
        assert!(number_before(&l, "ms") > 0.0, "{l}");
        assert!(number_before(&l, "ms device") > 0.0, "every submit's pass timestamps read back (kept ones reused): {l}");
    }
    assert!(line("decode rows=4").contains("one forward of 4 sequences"));
    let (w16, w32) = (line("prefill tokens=16 work:"), line("prefill tokens=32 work:"));
    assert!(number_before(&w16, "GFLOP,") > 0.0 && number_before(&w16, "GFLOP/s over the wall") > 0.0 && number_before(&w16, "% of the FMA kernel") >= 0.0, "{w16}");
    assert!(number_before(&w32, "in GEMMs") > number_before(&w16, "in GEMMs"), "GEMM work grows with the tokens:\n{w16}\n{w32}");
    for prefix in ["profile decode rows=1 context=16:", "profile prefill tokens=16:"] {
        let l = line(prefix);
        assert!(number_before(&l, "dispatches,") > 0.0, "{l}");
    }
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("gemm_e2m1") && l.contains("dispatches")), "per-kernel rows:\n{stdout}");
    let state = line("state compressed rows and index keys as allocated for");
    let cfg = lockstep::model::Config::from_dir(std::path::Path::new(model)).expect("config");
    let packed = |kind, cols| lockstep::kernels::state::Packing::new(kind, cols).expect("packing").row_bytes() as f64;
    let row = packed(lockstep::exec::Qat::Fp4Rows, cfg.head_dim) + packed(lockstep::exec::Qat::Fp4Index, cfg.index_head_dim);
    let per_row = number_before(&state, "bytes per compressed row");
    assert!(per_row >= row && per_row < row + 1.0, "{per_row} bytes per row as allocated, {row} packed:\n{state}");
    assert!((number_before(&state, "bytes per token") - 2.5 * per_row).abs() < 0.2, "{state}");
    let bw = line("decode bandwidth rows=1 context=16:");
    assert!(number_before(&bw, "MB/step") > 0.0 && number_before(&bw, "GB/s:") > 0.0, "{bw}");
    assert!(number_before(&bw, "% of the copy kernel") > 0.0 && number_before(&bw, "GB/s (") > 0.0, "{bw}");
    assert!(bw.contains("for 18 expert picks"), "9 layers x top-2 experts: {bw}");
    let bw4 = line("decode bandwidth rows=4 context=16:");
    let picks = number_before(&bw4, "expert picks");
    assert!((18.0..=72.0).contains(&picks), "four rows pick at least one row's 2 and at most all 8 experts a layer: {bw4}");
    assert!(number_before(&bw4, "MB/step") >= number_before(&bw, "MB/step") && number_before(&bw4, "% of the copy kernel") > 0.0, "{bw}\n{bw4}");
    assert!(bw4.contains("rows=1's shares of copy"), "{bw4}");
    let (short, long) = (line("decode scaling rows=1 context=16 "), line("decode scaling rows=1 context=40 "));
    for l in [&short, &long] {
        assert!(number_before(l, "tok/s") > 0.0 && number_before(l, "MB/step read by the indexer") >= 0.0, "{l}");
    }
    let (at, idx) = ("MB by attention", "MB/step read by the indexer");
    assert!(number_before(&long, idx) > number_before(&short, idx), "the indexer's reads grow with the context:\n{short}\n{long}");
    assert!(number_before(&long, at) >= number_before(&short, at), "attention's reads do not shrink with the context:\n{short}\n{long}");
}

#[test]
fn bench_forward_refuses_the_cpu_oracle_and_make_tiny_refuses_unknown_presets() {
    let out = lockstep(&["bench", "forward", "--model", "/nonexistent", "--device", "cpu"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a GPU adapter"));
    let out = lockstep(&["make-tiny", "/nonexistent-lockstep-preset", "--preset", "flash"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a preset"));
    let out = lockstep(&["make-tiny", "/nonexistent-lockstep-preset", "--preset", "flash-scaled", "--layers", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--layers"));
}

/// The bytes one counted decode step after a 21-token prompt read, on `ex`.
fn counted_step<E: Executor>(ex: E, model: &Model, ckpt: &lockstep::weights::Checkpoint) -> StepBytes {
    let mut s = Session::new(Counted::new(ex, ckpt), model).expect("session");
    s.run(&forward_support::prompt(21), LogitRows::Last, &mut Taps::default()).expect("prefill");
    s.ex.obs.counting = true;
    s.run(&[77], LogitRows::Last, &mut Taps::default()).expect("decode");
    s.ex.obs.bytes
}

#[test]
fn counted_decode_step_reads_top_k_experts_per_layer_and_every_dense_weight_once_on_the_cpu_and_the_gpu() {
    let t = forward_support::tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let b = counted_step(CpuExecutor::new(&t.ckpt), &model, &t.ckpt);
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    assert_eq!(counted_step(GpuExecutor::new(&gpu, &t.ckpt), &model, &t.ckpt), b, "the GPU's step (routed on the device) counts the CPU's bytes");
    let size = |n: &str| t.ckpt.get(n).map_or(0, |v| v.bytes.len() as u64);
    let layers = t.cfg.num_hidden_layers;
    assert_eq!(b.expert_picks, layers * t.cfg.num_experts_per_tok);
    let one_expert: u64 = ["w1", "w2", "w3"].iter().flat_map(|w| ["weight", "scale"].map(|k| size(&format!("layers.0.ffn.experts.0.{w}.{k}")))).sum();
    assert_eq!(b.experts, b.expert_picks as u64 * one_expert);
    let embed_row = size("embed.weight") / t.cfg.vocab_size as u64;
    let dense = ["attn_norm.weight", "ffn_norm.weight", "hc_attn_fn", "hc_ffn_fn", "attn.wq_a.weight", "attn.wq_b.weight", "attn.wkv.weight", "attn.wo_a.weight", "attn.wo_b.weight", "ffn.gate.weight", "ffn.shared_experts.w2.weight"];
    let lower: u64 = size("head.weight") + embed_row + (0..layers).flat_map(|l| dense.map(|n| size(&format!("layers.{l}.{n}")))).sum::<u64>();
    let unused = |n: &str| n.contains(".ffn.experts.") || n.contains(".engram.embed.") || n.ends_with("bias_vl") || ["mtp.", "vision.", "aligner.", "image_", "embed."].iter().any(|p| n.starts_with(p));
    let upper: u64 = embed_row + t.ckpt.names().filter(|n| !unused(n)).map(size).sum::<u64>();
    assert!(lower <= b.weights && b.weights <= upper, "{lower} <= {} <= {upper}", b.weights);
    let window = 22.min(t.cfg.sliding_window) as u64 * t.cfg.head_dim as u64 * 4;
    assert!(b.kv > layers as u64 * window, "KV state {} B", b.kv);
    assert!(b.index > 0, "index keys {} B", b.index);
    assert!(b.packed > 0 && b.packed < b.kv + b.index, "packed state {} B read for {} B unpacked", b.packed, b.kv + b.index);
    assert_eq!(b.attn_flops, b.kv * t.cfg.num_attention_heads as u64, "scores and values: 4 FLOPs per key element per head");
    let (hidden, inter) = (t.cfg.hidden_size as u64, t.cfg.moe_intermediate_size as u64);
    let floor = 2 * t.cfg.vocab_size as u64 * hidden + b.expert_picks as u64 * 3 * 2 * inter * hidden;
    assert!(b.gemm_flops > floor, "GEMM FLOPs {} over the head's and the routed experts' {floor}", b.gemm_flops);
}
