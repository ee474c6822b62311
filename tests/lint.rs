//! Lint: no banned built-ins, float division or NaN self-comparison in any shader (rules N5, N7), checked on naga's IR with types; MSL sources (hand-written and naga's translations) by text, each with the exactness header; no source file over 600 lines.
use lockstep::gpu::WGSL_LIB;
use std::path::Path;
use wgpu::naga::{self, BinaryOperator, Expression, MathFunction, ScalarKind, Statement, SubgroupOperation, TypeInner};

const BANNED_MATH: &[MathFunction] = &[
    MathFunction::Exp,
    MathFunction::Exp2,
    MathFunction::Log,
    MathFunction::Log2,
    MathFunction::Pow,
    MathFunction::Sqrt,
    MathFunction::InverseSqrt,
    MathFunction::Sin,
    MathFunction::Cos,
    MathFunction::Tan,
    MathFunction::Sinh,
    MathFunction::Cosh,
    MathFunction::Tanh,
    MathFunction::Asin,
    MathFunction::Acos,
    MathFunction::Atan,
    MathFunction::Atan2,
    MathFunction::Asinh,
    MathFunction::Acosh,
    MathFunction::Atanh,
    MathFunction::Dot,
    MathFunction::Length,
    MathFunction::Distance,
    MathFunction::Normalize,
    MathFunction::Mix,
    MathFunction::SmoothStep,
    MathFunction::Refract,
    MathFunction::Reflect,
    MathFunction::FaceForward,
];

fn is_float(inner: &TypeInner) -> bool {
    inner.scalar_kind() == Some(ScalarKind::Float)
}

fn walk_block(block: &naga::Block, out: &mut Vec<String>) {
    for s in block.iter() {
        match s {
            Statement::SubgroupCollectiveOperation { op: SubgroupOperation::Add | SubgroupOperation::Mul, .. } => {
                out.push("subgroup arithmetic reduction".into())
            }
            Statement::Block(b) => walk_block(b, out),
            Statement::If { accept, reject, .. } => {
                walk_block(accept, out);
                walk_block(reject, out);
            }
            Statement::Loop { body, continuing, .. } => {
                walk_block(body, out);
                walk_block(continuing, out);
            }
            Statement::Switch { cases, .. } => cases.iter().for_each(|c| walk_block(&c.body, out)),
            _ => {}
        }
    }
}

/// Whether two expressions are one value: the same handle, or loads of the same pointer.
fn same_value(f: &naga::Function, a: naga::Handle<Expression>, b: naga::Handle<Expression>) -> bool {
    a == b || matches!((&f.expressions[a], &f.expressions[b]), (Expression::Load { pointer: p }, Expression::Load { pointer: q }) if p == q)
}

/// Banned operations in one WGSL module (the library prepended), found on the validated IR.
fn banned_in(source: &str) -> Result<Vec<String>, String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| format!("{e:?}"))?;
    let mut out = Vec::new();
    let mut check = |f: &naga::Function, fi: &naga::valid::FunctionInfo| {
        for (h, e) in f.expressions.iter() {
            match e {
                Expression::Math { fun, .. } if BANNED_MATH.contains(fun) => out.push(format!("{fun:?} in {:?}", f.name)),
                Expression::Binary { op: BinaryOperator::Divide | BinaryOperator::Modulo, .. } if is_float(fi[h].ty.inner_with(&module.types)) => {
                    out.push(format!("float division in {:?}", f.name))
                }
                Expression::Binary { op: BinaryOperator::Equal | BinaryOperator::NotEqual, left, right } if is_float(fi[*left].ty.inner_with(&module.types)) && same_value(f, *left, *right) => {
                    out.push(format!("a NaN test by self-comparison in {:?} (compilers fold it; test the bits)", f.name))
                }
                _ => {}
            }
        }
        walk_block(&f.body, &mut out);
    };
    for (h, f) in module.functions.iter() {
        check(f, &info[h]);
    }
    for (i, ep) in module.entry_points.iter().enumerate() {
        check(&ep.function, info.get_entry_point(i));
    }
    Ok(out)
}

#[test]
fn every_shader_is_free_of_banned_builtins_and_float_division() {
    let shaders = lockstep::kernels::registry::all();
    assert!(shaders.len() > 10);
    for s in shaders {
        if s.lang == lockstep::gpu::Lang::Msl {
            let faults = msl_faults(&format!("{}/{}", s.kernel, s.variant), s.source);
            assert!(faults.is_empty(), "{faults:?}");
            continue;
        }
        let src = format!("{WGSL_LIB}{}", s.source);
        let banned = banned_in(&src).unwrap_or_else(|e| panic!("{}/{} does not parse: {e}", s.kernel, s.variant));
        assert!(banned.is_empty(), "{}/{} uses banned operations: {banned:?}", s.kernel, s.variant);
    }
}

#[test]
fn the_lint_catches_planted_banned_operations() {
    let planted = [
        "fn f(x: f32) -> f32 { return exp(x); }",
        "fn f(x: f32, y: f32) -> f32 { return x / y; }",
        "fn f(x: vec2<f32>) -> f32 { return dot(x, x); }",
        "fn f(x: f32) -> f32 { return inverseSqrt(x); }",
        "fn f(x: f32) -> bool { return x != x; }",
        "fn f(y: f32) -> bool { var x = y; return x == x; }",
    ];
    for p in planted {
        assert!(!banned_in(&format!("{WGSL_LIB}{p}")).unwrap().is_empty(), "missed: {p}");
    }
    assert!(banned_in(&format!("{WGSL_LIB}fn f(x: u32, y: u32) -> u32 {{ return x / y; }}")).unwrap().is_empty());
}

fn each_file(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            each_file(&p, f);
        } else {
            f(&p);
        }
    }
}

/// Built-ins MSL sources must not call (rule N5 and hardware-ordered reductions), as written in source text.
const MSL_BANNED: &[&str] = &["exp(", "exp2(", "log(", "log2(", "sqrt(", "rsqrt(", "pow(", "tanh(", "simd_sum", "simd_prefix", "simd_product", "simd_max", "simd_min", "simdgroup_multiply_accumulate", "fast::", "dot("];

/// The banned built-ins in one MSL source, outside `//` comments, as whole names (`ls_exp(` and `act_scale_exp(` are other functions).
fn msl_banned(text: &str) -> Vec<&'static str> {
    let called = |code: &str, bad: &str| code.match_indices(bad).any(|(i, _)| !code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
    MSL_BANNED.iter().copied().filter(|bad| text.lines().any(|l| called(l.split("//").next().unwrap_or(""), bad))).collect()
}

/// What is wrong with one MSL source: its banned built-ins, and a missing exactness header.
fn msl_faults(name: &str, text: &str) -> Vec<String> {
    let mut out: Vec<String> = msl_banned(text).into_iter().map(|b| format!("{name} uses {b}")).collect();
    if !lockstep::gpu::msl::has_header(text) {
        out.push(format!("{name} lacks the exactness header"));
    }
    out
}

/// Every `.metal` file under `dir` with its faults; an error when `dir` is absent, so a missing folder is never a silent pass.
fn lint_msl_dir(dir: &Path) -> Result<Vec<String>, String> {
    if !dir.is_dir() {
        return Err(format!("{} does not exist", dir.display()));
    }
    let mut found = Vec::new();
    each_file(dir, &mut |p| {
        if p.extension().and_then(|e| e.to_str()) == Some("metal") {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            found.extend(msl_faults(&p.display().to_string(), &text));
        }
    });
    Ok(found)
}

#[test]
fn every_wgsl_kernel_as_metal_would_get_it_carries_the_header_and_no_banned_builtin() {
    let mut found = Vec::new();
    let mut n = 0;
    for (k, v) in lockstep::kernels::registry::variants() {
        for s in v.shaders.iter().filter(|s| s.lang == lockstep::gpu::Lang::Wgsl) {
            let t = lockstep::gpu::msl::translate(s, &[]).unwrap_or_else(|e| panic!("{e}"));
            found.extend(msl_faults(&format!("{k}/{} (naga's MSL)", v.name), &t.source));
            n += 1;
        }
    }
    assert!(n > 50 && found.is_empty(), "{n} translations: {found:?}");
}

#[test]
fn no_source_file_exceeds_600_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    for d in ["src", "wgsl", "msl", "tests", "benches", "scripts"] {
        each_file(&root.join(d), &mut |p| {
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !["rs", "wgsl", "metal", "py", "sh"].contains(&ext) && !p.starts_with(root.join("scripts")) {
                return;
            }
            let text = std::fs::read_to_string(p).unwrap_or_default();
            if text.lines().count() > 600 {
                long.push(p.display().to_string());
            }
        });
    }
    assert!(long.is_empty(), "files over 600 lines: {long:?}");
}

#[test]
fn msl_sources_have_no_banned_builtins_and_an_absent_msl_folder_means_no_msl_variant() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let msl_variants: Vec<String> = lockstep::kernels::registry::variants()
        .into_iter()
        .filter(|(_, v)| v.lang() == lockstep::gpu::Lang::Msl)
        .map(|(k, v)| format!("{k}/{}", v.name))
        .collect();
    match lint_msl_dir(&root.join("msl")) {
        Ok(found) => assert!(found.is_empty(), "{found:?}"),
        Err(absent) => {
            assert!(msl_variants.is_empty(), "{absent}, yet MSL variants are registered: {msl_variants:?}");
            eprintln!("{absent}: no MSL variant is registered, so there is no MSL source to lint");
        }
    }
}

#[test]
fn the_msl_lint_catches_a_planted_banned_builtin_and_refuses_an_absent_folder() {
    let dir = std::env::temp_dir().join(format!("lockstep-msl-lint-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("attention")).expect("temp dir");
    let header = lockstep::gpu::msl::EXACTNESS_HEADER;
    std::fs::write(dir.join("clean.metal"), format!("#include <metal_stdlib>\n{header}// exp( in a comment is fine\nfloat f(float x) {{ return ls_exp(x); }}\n")).expect("write");
    assert_eq!(lint_msl_dir(&dir), Ok(vec![]), "a clean source passes");
    // one planted call per banned class: transcendentals, roots, hardware-ordered reductions, fast math, dot products
    for (i, call) in ["exp(x)", "sqrt(x)", "simd_sum(x)", "fast::sin(x)", "dot(x, x)", "simdgroup_multiply_accumulate(d, a, b, c)"].iter().enumerate() {
        std::fs::write(dir.join(format!("attention/planted{i}.metal")), format!("{header}float f(float x) {{ return {call}; }}\n")).expect("write");
    }
    std::fs::write(dir.join("attention/headless.metal"), "float f(float x) { return x; }\n").expect("write");
    let found = lint_msl_dir(&dir).expect("the folder exists");
    std::fs::remove_dir_all(&dir).ok();
    for (i, bad) in ["exp(", "sqrt(", "simd_sum", "fast::", "dot(", "simdgroup_multiply_accumulate"].iter().enumerate() {
        assert!(found.iter().any(|f| f.ends_with(&format!("planted{i}.metal uses {bad}"))), "the planted {bad} is caught: {found:?}");
    }
    assert!(found.iter().any(|f| f.ends_with("headless.metal lacks the exactness header")), "a missing header is caught: {found:?}");
    assert!(lint_msl_dir(&dir).is_err(), "an absent folder is an error, not a pass");
}
