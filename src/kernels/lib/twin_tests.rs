//! The WGSL twin: naga validation, banned operations, constants and functions matching the Rust, and equal bits on the default adapter.
use crate::numerics::math::tests::Rng;
use crate::numerics::math::*;
use crate::gpu::{Arg, DeviceChoice, Gpu, PipelineKey, Recorder, Shader};

const WGSL: &str = include_str!("../../../wgsl/lib/math.wgsl");

/// The WGSL source with `//` comments removed.
fn wgsl_code() -> String {
    WGSL.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

#[test]
fn wgsl_parses_validates_and_uses_no_banned_operation() {
    let src = format!("{WGSL}\n{}", include_str!("../../../wgsl/lib/edge.wgsl"));
    let module = wgpu::naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| panic!("{}", e.emit_to_string(&src)));
    let mut validator = wgpu::naga::valid::Validator::new(
        wgpu::naga::valid::ValidationFlags::all(),
        wgpu::naga::valid::Capabilities::empty(),
    );
    if let Err(e) = validator.validate(&module) {
        panic!("{}", e.emit_to_string(&src));
    }
    let code = wgsl_code();
    let banned = [
        "exp",
        "exp2",
        "log",
        "log2",
        "sqrt",
        "inverseSqrt",
        "pow",
        "sin",
        "cos",
        "tanh",
        "fma",
        "dot",
        "mix",
        "length",
        "normalize",
        "smoothstep",
    ];
    let bytes = code.as_bytes();
    for name in banned {
        for (i, _) in code.match_indices(&format!("{name}(")) {
            let prev = if i == 0 { b' ' } else { bytes[i - 1] };
            assert!(prev.is_ascii_alphanumeric() || prev == b'_', "banned built-in {name}( at byte {i}");
        }
    }
    assert!(!code.contains("fma"), "fma in math.wgsl");
    assert!(!code.contains('/'), "division in math.wgsl");
    assert!(!code.contains("f16"), "f16 in math.wgsl");
    let stars = code.matches('*').count();
    assert_eq!(stars, 1, "every float product must go through ls_mul_nf (mul_rn flushes it); found {stars} '*'");
}

/// Bits of an exact WGSL hexadecimal float literal such as `-0x1.702dfep-2f`.
fn hex_float_bits(s: &str) -> Option<u32> {
    let s = s.strip_suffix('f')?;
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let (mant, exp) = s.strip_prefix("0x")?.split_once('p')?;
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let m = u64::from_str_radix(&format!("{int}{frac}"), 16).ok()?;
    let v = m as f64 * 2f64.powi(exp.parse::<i32>().ok()? - 4 * frac.len() as i32);
    let f = if neg { -v as f32 } else { v as f32 };
    (f64::from(f).abs() == v).then_some(f.to_bits())
}

/// `(NAME, bits)` of every `const NAME: f32 = <value>;` line, the value read by `bits`.
fn consts(src: &str, prefix: &str, bits: impl Fn(&str) -> Option<u32>) -> Vec<(String, u32)> {
    src.lines()
        .filter_map(|l| {
            let rest = l.trim().trim_start_matches("pub(super) ").strip_prefix("const ")?;
            let (name, val) = rest.split_once(": f32 = ")?;
            let v = val.strip_suffix(';').filter(|v| *v != "f32::INFINITY")?;
            Some((name.strip_prefix(prefix)?.to_string(), bits(v).unwrap_or_else(|| panic!("unreadable constant {l}"))))
        })
        .collect()
}

#[test]
fn wgsl_constants_equal_rust_constants() {
    let rust_src = [include_str!("../../numerics/math/mod.rs"), include_str!("../../numerics/math/parts.rs")].concat();
    let from_bits = |v: &str| {
        let h = v.strip_prefix("f32::from_bits(0x")?.strip_suffix(')')?;
        u32::from_str_radix(&h.replace('_', ""), 16).ok()
    };
    let mut rust = consts(&rust_src, "", from_bits);
    let mut wgsl = consts(WGSL, "LS_", hex_float_bits);
    rust.sort();
    wgsl.sort();
    assert!(rust.len() > 30, "found only {} Rust constants", rust.len());
    assert_eq!(rust, wgsl);
}

#[test]
fn every_rust_function_has_a_wgsl_twin() {
    let rust_src = [include_str!("../../numerics/math/mod.rs"), include_str!("../../numerics/math/parts.rs")].concat();
    let code = wgsl_code();
    for line in rust_src.lines() {
        let l = line.trim().trim_start_matches("pub(super) ").trim_start_matches("pub ");
        if let Some(rest) = l.strip_prefix("fn ") {
            let name = rest.split(['(', '<']).next().unwrap_or("");
            let twin = if name == "mul_rn" { "fn mul_rn(".to_string() } else { format!("fn ls_{name}(") };
            if name != "select" {
                assert!(code.contains(&twin), "no WGSL twin `{twin}` for Rust fn {name}");
            }
        }
    }
}

const GPU_PROBE: &str = r#"
override FUNC: u32 = 0u;
struct Params { zero: u32, n: u32, func: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    LS_ZERO = P.zero;
    let i = gid.x;
    if (i >= P.n) { return; }
    let a = x[i].x;
    let b = x[i].y;
    var r = 0.0;
    switch select(P.func, FUNC - 1u, FUNC > 0u) {
        case 0u: { r = ls_exp2(a); }
        case 1u: { r = ls_exp(a); }
        case 2u: { r = ls_log2(a); }
        case 3u: { r = ls_log(a); }
        case 4u: { r = ls_log1p(a); }
        case 5u: { r = ls_rsqrt(a); }
        case 6u: { r = ls_recip(a); }
        case 7u: { r = ls_sqrt(a); }
        case 8u: { r = ls_div(a, b); }
        case 9u: { r = ls_sigmoid(a); }
        case 10u: { r = ls_silu(a); }
        case 11u: { r = ls_softplus(a); }
        default: { r = ls_erf(a); }
    }
    y[i] = bitcast<u32>(r);
}
"#;

/// Inputs per function: 2^18, or 2^LOCKSTEP_MATH_GPU_LOG2N (at most 2^21, one dispatch row).
fn gpu_inputs_per_function() -> usize {
    let log2n = std::env::var("LOCKSTEP_MATH_GPU_LOG2N").ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(18);
    1 << log2n.min(21)
}

/// Probe inputs: bit patterns, values on [lo, hi), and small values down to 2^-40.
fn probe_input(rng: &mut Rng, i: usize, lo: f32, hi: f32) -> f32 {
    let a = match i % 4 {
        0 => rng.bits(),
        1 => rng.uniform(lo, hi),
        2 => rng.uniform(-1e-3, 1e-3),
        _ => rng.uniform(-1.0, 1.0) * 2f32.powi(-((rng.next() % 40) as i32)),
    };
    if a.is_finite() {
        a
    } else {
        1.5
    }
}

/// A probed function: name, Rust twin, and the range of its uniform inputs.
type Probe = (&'static str, fn(f32, f32) -> f32, f32, f32);

/// Runs on the adapter `LOCKSTEP_DEVICE` names (else the first); passes with a note when there is none.
#[test]
fn wgsl_matches_rust_bits_on_the_default_adapter() {
    let Ok(gpu) = Gpu::open(&DeviceChoice::from_flag_or_env(None)) else {
        eprintln!("no adapter: skipped");
        return;
    };
    let shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "math_probe", variant: "test", source: GPU_PROBE };
    let fs: [Probe; 13] = [
        ("exp2", |a, _| exp2(a), -130.0, 130.0),
        ("exp", |a, _| exp(a), -90.0, 90.0),
        ("log2", |a, _| log2(a), 0.0, 4.0),
        ("log", |a, _| log(a), 0.0, 4.0),
        ("log1p", |a, _| log1p(a), -1.0, 4.0),
        ("rsqrt", |a, _| rsqrt(a), 0.0, 8.0),
        ("recip", |a, _| recip(a), -8.0, 8.0),
        ("sqrt", |a, _| sqrt(a), 0.0, 8.0),
        ("div", div, -8.0, 8.0),
        ("sigmoid", |a, _| sigmoid(a), -100.0, 100.0),
        ("silu", |a, _| silu(a), -100.0, 100.0),
        ("softplus", |a, _| softplus(a), -100.0, 100.0),
        ("erf", |a, _| erf(a), -5.0, 5.0),
    ];
    let mut rng = Rng(21);
    let mut bad = Vec::new();
    for (id, (name, f, lo, hi)) in fs.iter().enumerate() {
        let n = gpu_inputs_per_function();
        let pairs: Vec<[f32; 2]> =
            (0..n).map(|i| [probe_input(&mut rng, i, *lo, *hi), probe_input(&mut rng, i + 1, 0.5, 8.0)]).collect();
        let x = gpu.upload_pod(&pairs).expect("upload");
        let y = gpu.alloc(4 * n as u64).expect("alloc");
        for special in [0.0, id as f64 + 1.0] {
            let key = PipelineKey::new(shader, &[("FUNC", special)]);
            let mut rec = Recorder::new(&gpu);
            rec.dispatch(
                &key,
                &[n as u32, id as u32],
                &[Arg::Whole(&x), Arg::Whole(&y)],
                [(n as u32).div_ceil(64), 1, 1],
            )
            .expect("dispatch");
            rec.submit().expect("submit");
            let got = gpu.read_u32(&y).expect("read");
            let mut diffs = 0;
            for (i, p) in pairs.iter().enumerate() {
                let want = f(p[0], p[1]).to_bits();
                if got[i] != want {
                    if diffs < 6 {
                        eprintln!(
                            "{name}({:e} [{:#010x}], {:e}): gpu {:#010x} rust {want:#010x}",
                            p[0],
                            p[0].to_bits(),
                            p[1],
                            got[i]
                        );
                    }
                    diffs += 1;
                }
            }
            eprintln!("{name} (FUNC={special}): {diffs} of {n} differ on {}", gpu.describe());
            if diffs > 0 {
                bad.push(*name);
            }
        }
    }
    assert!(bad.is_empty(), "WGSL differs from Rust for {bad:?}");
}
