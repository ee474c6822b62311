//! The MSL harness: every registered WGSL kernel's translation carries the exactness header and builds against the shim; kernels run in the harness give the CPU oracle's bits with subnormals flushed or kept and under shuffled schedules; a barrier some threads skip is refused and a missing one shows.
mod cli_support;

use cli_support::{lockstep, tiny_model};
use lockstep::gpu::msl::{has_header, translate, BufferSlot, Translated, EXACTNESS_HEADER, THREADGROUP_VAR};
use lockstep::gpu::msl_emu::EmuKernel;
use lockstep::gpu::{Lang, Shader};
use lockstep::kernels::ops::{rmsnorm, RmsNorm};
use lockstep::kernels::registry;

fn reference(kernel: &str) -> Shader {
    registry::variants().into_iter().find(|(k, v)| *k == kernel && v.name == "ref").map(|(_, v)| v.shaders[0]).unwrap_or_else(|| panic!("no {kernel}/ref"))
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
        })
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect()
}

/// The parameter uniform as the recorder writes it: the runtime zero, the words, padded to 16 bytes.
fn params(words: &[u32]) -> Vec<u8> {
    let mut w = vec![0u32];
    w.extend(words);
    w.resize(w.len().div_ceil(4) * 4, 0);
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn every_registered_wgsl_kernel_translates_with_the_exactness_header_and_builds_in_the_harness() {
    let shaders: Vec<(String, Shader)> = registry::variants().into_iter().flat_map(|(k, v)| v.shaders.iter().filter(|s| s.lang == Lang::Wgsl).map(move |s| (format!("{k}/{}", v.name), *s))).collect();
    let translated: Vec<(String, Translated)> = shaders.iter().map(|(n, s)| (n.clone(), translate(s, &[]).unwrap_or_else(|e| panic!("{e}")))).collect();
    for (n, t) in &translated {
        assert!(has_header(&t.source), "{n}: no exactness header before the first declaration");
        assert!(!t.source.contains("threadgroup type") || t.source.contains("LS_THREADGROUP_VAR"), "{n}: threadgroup memory left as a parameter");
    }
    let chunks: Vec<&[(String, Translated)]> = translated.chunks(translated.len().div_ceil(2)).collect();
    std::thread::scope(|s| {
        let hs: Vec<_> = chunks.iter().map(|c| s.spawn(move || c.iter().map(|(n, t)| EmuKernel::build(t).map(|_| ()).map_err(|e| format!("{n}: {e}"))).collect::<Vec<_>>())).collect();
        let failed: Vec<String> = hs.into_iter().flat_map(|h| h.join().unwrap()).filter_map(Result::err).collect();
        assert!(failed.is_empty(), "{} of {} kernels did not build:\n{}", failed.len(), translated.len(), failed.join("\n"));
    });
    println!("{} WGSL kernels translated with the exactness header and built in the harness", translated.len());
}

#[test]
fn rmsnorm_in_the_harness_gives_the_oracle_bits_flushed_or_not_under_any_schedule() {
    let t = translate(&reference("rmsnorm"), &[]).expect("translate");
    let k = EmuKernel::build(&t).expect("build");
    for (m, d, bf16_out) in [(3usize, 300usize, false), (2, 4096, true), (1, 7, false)] {
        let p = RmsNorm { m, d, eps: 1e-6, bf16_out };
        let (x, w) = (random(m * d, 11 + d as u64), random(d, 5));
        let want: Vec<u32> = rmsnorm(&p, &x, &w).iter().map(|v| v.to_bits()).collect();
        for (seed, flush) in [(1u64, false), (2, true), (3, false)] {
            let mut bufs = vec![params(&[m as u32, d as u32, p.inv_d().to_bits(), p.eps.to_bits(), u32::from(bf16_out)]), bytes(&x), bytes(&w), vec![0xffu8; m * d * 4], bytes(&x)];
            let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
            k.launch(&mut views, [m as u32, 1, 1], seed, flush).expect("launch");
            let got: Vec<u32> = bufs[3].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(differ, 0, "rmsnorm m={m} d={d} bf16={bf16_out} seed={seed} flush={flush}: {differ} of {} values differ", want.len());
        }
    }
}

/// A hand-written kernel of 64 threads over one output buffer, with `body` between the threadgroup array's fill and the output's write.
fn planted(body: &str) -> EmuKernel {
    let source = format!(
        "#include <metal_stdlib>\n{EXACTNESS_HEADER}{THREADGROUP_VAR}using metal::uint;\nkernel void planted_(\n  uint lid [[thread_index_in_threadgroup]]\n, device uint* out [[buffer(1)]]\n) {{\n    LS_THREADGROUP_VAR uint s[64];\n    s[lid] = lid * 3u + 1u;\n{body}\n    out[lid] = s[63u - lid];\n}}\n"
    );
    let t = Translated { source, entry: "planted_".into(), workgroup: [64, 1, 1], buffers: vec![BufferSlot { binding: 1, slot: 1, mutable: true }], sizes_slot: 2, sized: vec![] };
    EmuKernel::build(&t).expect("build the planted kernel")
}

fn run_planted(k: &EmuKernel, seed: u64) -> Result<Vec<u8>, String> {
    let mut bufs = vec![vec![0u8; 16], vec![0u8; 256]];
    let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
    k.launch(&mut views, [2, 1, 1], seed, false).map_err(|e| e.to_string())?;
    Ok(bufs.swap_remove(1))
}

#[test]
fn a_barrier_some_threads_skip_is_refused_and_a_missing_barrier_shows_as_schedules_that_differ() {
    let good = planted("    metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup);");
    let want: Vec<u8> = (0..64u32).flat_map(|l| ((63 - l) * 3 + 1).to_le_bytes()).collect();
    for seed in [1, 2, 3] {
        assert_eq!(run_planted(&good, seed).expect("a barrier every thread reaches"), want, "seed {seed}");
    }
    let skipped = planted("    if (lid < 32u) { metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup); }");
    let err = run_planted(&skipped, 1).expect_err("a barrier only half the threads reach");
    assert!(err.contains("ended while") && err.contains("wait at a barrier"), "{err}");
    let racy = planted("");
    let outs: std::collections::HashSet<Vec<u8>> = (0..8).map(|seed| run_planted(&racy, seed).expect("runs")).collect();
    assert!(outs.len() > 1, "without the barrier, shuffled schedules give different bytes");
}

fn stdout_of(args: &[&str]) -> String {
    let out = lockstep(args);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "lockstep {args:?} failed:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

#[test]
fn the_contract_on_metal_emu_passes_the_attention_kernels_and_their_msl_variants_with_their_controls_red() {
    let out = stdout_of(&["contract", "--device", "metal-emu", "--only", "attention", "--quick"]);
    println!("{out}");
    assert!(out.contains("device=\"metal-emu") && out.contains("5 pass gates 1-4, 0 fail") && out.contains(", 0 missed"), "{out}");
    for v in ["sparse_attention       msl_simd", "vit_attention          msl_simd"] {
        assert!(out.lines().any(|l| l.starts_with("ok ") && l.contains(v)), "{v} ran and passed: {out}");
    }
    for line in out.lines().filter(|l| l.starts_with("ok ")) {
        let red: usize = line.split("controls=").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(red >= 3, "fewer than 3 controls red: {line}");
    }
    assert!(out.contains("edges: subnormals flushed"), "the harness flushes as Apple GPUs do: {out}");
}

#[test]
fn the_tiny_model_on_metal_emu_equals_the_cpu_oracle_stage_by_stage_for_text_and_an_image() {
    let dir = tiny_model("msl", "diff", "7");
    let d = dir.0.to_str().expect("utf-8");
    let png = dir.0.join("picture.png");
    cli_support::noise_rgb(90, 61, 0x51).save(&png).expect("write png");
    let p = png.to_str().expect("utf-8");
    let text = stdout_of(&["diff", "--a", "cpu", "--b", "metal-emu", "--model", d, "--prompt", "The quick brown fox jumps over the lazy dog", "--max-tokens", "3", "--prefill-chunk", "5"]);
    assert!(text.contains("stages equal") && text.contains("b=metal-emu"), "{text}");
    let image = stdout_of(&["diff", "--a", "cpu", "--b", "metal-emu", "--model", d, "--chat", "--prompt", "What is in this picture?", "--image", p, "--max-tokens", "2", "--prefill-chunk", "9"]);
    assert!(image.contains("stages equal"), "{image}");
    let sha = |device: &str, t: &str| stdout_of(&["run", "--model", d, "--chat", "--prompt", "What is in this picture?", "--image", p, "--max-tokens", "6", "--temperature", t, "--seed", "9", "--device", device]).lines().find_map(|l| l.strip_prefix("token_sha256=").map(str::to_string)).expect("a token hash");
    for t in ["0", "1"] {
        assert_eq!(sha("metal-emu", t), sha("cpu", t), "token_sha256 at temperature {t}");
    }
    println!("{}{}", text.lines().last().unwrap_or(""), image.lines().last().map(|l| format!("\n{l}")).unwrap_or_default());
}

#[test]
fn a_reordered_sum_planted_in_the_msl_gemms_is_caught_against_the_oracle_and_the_unplanted_kernels_match_it() {
    use lockstep::contract::{Case, Rng};
    use lockstep::gpu::{DeviceChoice, Gpu};
    let gpu = Gpu::open(&DeviceChoice::MetalEmu).expect("metal-emu opens");
    let mut caught = Vec::new();
    for k in registry::registry().into_iter().filter(|k| ["gemm_bf16", "gemm_e4m3", "gemm_e2m1"].contains(&k.name())) {
        let case = Case::new("planted 9x40x2336", 9, 40, 2336);
        let inputs = k.inputs(&case, &mut Rng::new(7));
        let oracle = k.oracle(&case, &inputs);
        for v in k.variants().iter().filter(|v| v.lang() == Lang::Msl) {
            let clean = k.run(&gpu, v, &case, &inputs, 0).expect("run");
            assert!(clean == oracle, "{}/{}: the unplanted kernel differs from the oracle", k.name(), v.name);
            let reordered = k.run(&gpu, v, &case, &inputs, 2).expect("run the planted reorder");
            let differ = reordered[0].iter().zip(&oracle[0]).filter(|(a, b)| a != b).count();
            assert!(differ > 0, "{}/{}: summing the segments in reverse went unnoticed", k.name(), v.name);
            caught.push(format!("{}/{} {differ} of {}", k.name(), v.name, oracle[0].len()));
        }
    }
    assert_eq!(caught.len(), 5, "two MSL variants per scaled format, one for bf16: {caught:?}");
    println!("segments summed in reverse, words differing from the oracle: {}", caught.join(", "));
}

#[test]
fn a_running_sum_planted_in_the_msl_sparse_attention_is_caught_against_the_oracle_and_the_unplanted_kernel_matches_it() {
    use lockstep::contract::Rng;
    use lockstep::gpu::{DeviceChoice, Gpu};
    let gpu = Gpu::open(&DeviceChoice::MetalEmu).expect("metal-emu opens");
    let mut caught = Vec::new();
    // control 2 sums the weighted values in one running sum instead of blocks of 32 keys in segments of 8
    for (name, control) in [("sparse_attention", 2)] {
        let k = registry::registry().into_iter().find(|k| k.name() == name).expect("registered");
        // the first case's rows see 128 window keys and up to 512 selected ones: many blocks of 32 keys, so the order shows
        let case = k.cases(true).into_iter().next().expect("a case");
        let inputs = k.inputs(&case, &mut Rng::new(11));
        let oracle = k.oracle(&case, &inputs);
        let v = k.variants().iter().find(|v| v.lang() == Lang::Msl).expect("an MSL variant");
        assert!(k.run(&gpu, v, &case, &inputs, 0).expect("run") == oracle, "{name}/{}: the unplanted kernel differs from the oracle", v.name);
        let planted = k.run(&gpu, v, &case, &inputs, control).expect("run the planted change");
        let differ = planted[0].iter().zip(&oracle[0]).filter(|(a, b)| a != b).count();
        assert!(differ > 0, "{name}/{}: control {control} went unnoticed", v.name);
        caught.push(format!("{name}/{} {differ} of {}", v.name, oracle[0].len()));
    }
    println!("planted changes, words differing from the oracle: {}", caught.join(", "));
}
