//! WGSL kernels as the MSL Metal would be given them: naga's translation (the naga wgpu uses), override constants resolved, buffer slots by binding number, and the exactness header after naga's preamble.
use super::shader::{Lang, Shader, WGSL_LIB};
use naga::back::msl;

/// What every MSL source carries: MSL 3.2 or a refusal, safe math, no contraction.
pub const EXACTNESS_HEADER: &str = "#if __METAL_VERSION__ < 320\n#error \"exact kernels need MSL 3.2\"\n#endif\n#pragma METAL fp math_mode(safe)\n#pragma METAL fp contract(off)\n";

/// One buffer argument of a translated kernel: its binding in group 0, its Metal buffer slot, and whether the kernel writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferSlot {
    /// The WGSL binding number (0 is the parameter uniform).
    pub binding: u32,
    /// The `[[buffer(n)]]` index.
    pub slot: u8,
    /// Whether the kernel may write it (a `read_write` storage buffer).
    pub mutable: bool,
}

/// A kernel translated for Metal.
#[derive(Clone, Debug)]
pub struct Translated {
    /// The whole MSL source: naga's includes, the exactness header, the rest of naga's text.
    pub source: String,
    /// The kernel function's name in `source`.
    pub entry: String,
    /// Threads per threadgroup.
    pub workgroup: [u32; 3],
    /// Its buffers, by binding.
    pub buffers: Vec<BufferSlot>,
    /// The slot of the buffer of runtime-array sizes, the slot after the last binding.
    pub sizes_slot: u8,
    /// The bindings whose byte sizes that buffer holds, one u32 each, in order.
    pub sized: Vec<u32>,
}

/// Why a kernel could not be translated.
#[derive(Debug, thiserror::Error)]
#[error("{kernel}/{variant}: {stage}: {message}")]
pub struct MslError {
    /// The kernel.
    pub kernel: &'static str,
    /// Its variant.
    pub variant: &'static str,
    /// Which step failed.
    pub stage: &'static str,
    /// What naga said.
    pub message: String,
}

/// Translates a WGSL shader (the shared numerics prepended, as every backend compiles it) with `constants` for its overrides.
pub fn translate(shader: &Shader, constants: &[(&str, f64)]) -> Result<Translated, MslError> {
    let err = |stage: &'static str, message: String| MslError { kernel: shader.kernel, variant: shader.variant, stage, message };
    if shader.lang != Lang::Wgsl {
        return Err(err("language", format!("{:?} sources are not translated", shader.lang)));
    }
    let text = format!("{WGSL_LIB}{}", shader.source);
    let module = naga::front::wgsl::parse_str(&text).map_err(|e| err("parse", e.emit_to_string(&text)))?;
    let flags = naga::valid::ValidationFlags::all();
    let info = naga::valid::Validator::new(flags, naga::valid::Capabilities::all()).validate(&module).map_err(|e| err("validate", format!("{e:?}")))?;
    let values: naga::back::PipelineConstants = constants.iter().map(|&(n, v)| (n.to_string(), v)).collect();
    let (module, info) = naga::back::pipeline_constants::process_overrides(&module, &info, Some((naga::ShaderStage::Compute, "main")), &values).map_err(|e| err("overrides", format!("{e:?}")))?;
    let ep = module.entry_points.iter().find(|e| e.name == "main" && e.stage == naga::ShaderStage::Compute).ok_or_else(|| err("entry", "no compute entry point `main`".into()))?;
    let mut resources = msl::EntryPointResources::default();
    let mut buffers = Vec::new();
    let mut sized = Vec::new();
    for (_, var) in module.global_variables.iter() {
        let Some(rb) = var.binding else { continue };
        if runtime_sized(&module, var.ty) {
            sized.push(rb.binding);
        }
        if rb.group != 0 || rb.binding > u8::MAX as u32 {
            return Err(err("bindings", format!("binding {}:{} is outside group 0's 256 slots", rb.group, rb.binding)));
        }
        let mutable = matches!(var.space, naga::AddressSpace::Storage { access } if access.contains(naga::StorageAccess::STORE));
        let slot = rb.binding as u8;
        resources.resources.insert(rb, msl::BindTarget { buffer: Some(slot), texture: None, sampler: None, external_texture: None, mutable });
        buffers.push(BufferSlot { binding: rb.binding, slot, mutable });
    }
    buffers.sort_by_key(|b| b.binding);
    let sizes_slot = buffers.last().map_or(0, |b| b.slot + 1);
    resources.sizes_buffer = Some(sizes_slot);
    let options = msl::Options {
        lang_version: (3, 2),
        per_entry_point_map: msl::EntryPointResourceMap::from([("main".to_string(), resources)]),
        fake_missing_bindings: false,
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Restrict,
            buffer: naga::proc::BoundsCheckPolicy::Restrict,
            image_load: naga::proc::BoundsCheckPolicy::Restrict,
            binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
        },
        zero_initialize_workgroup_memory: false,
        ..msl::Options::default()
    };
    let pipeline = msl::PipelineOptions { entry_point: Some((naga::ShaderStage::Compute, "main".into())), ..msl::PipelineOptions::default() };
    let workgroup = ep.workgroup_size;
    let (naga_text, tinfo) = msl::write_string(&module, &info, &options, &pipeline).map_err(|e| err("msl", format!("{e:?}")))?;
    let entry = tinfo.entry_point_names.first().cloned().ok_or_else(|| err("entry", "naga named no entry point".into()))?.map_err(|e| err("entry", e.to_string()))?;
    let moved = scope_threadgroup(&naga_text, &entry).map_err(|m| err("threadgroup", m))?;
    Ok(Translated { source: with_header(&moved), entry, workgroup, buffers, sizes_slot, sized })
}

/// Whether a type is a runtime-sized array or a struct ending in one (naga gives such buffers a size field).
fn runtime_sized(module: &naga::Module, ty: naga::Handle<naga::Type>) -> bool {
    match &module.types[ty].inner {
        naga::TypeInner::Array { size: naga::ArraySize::Dynamic, .. } => true,
        naga::TypeInner::Struct { members, .. } => members.last().is_some_and(|m| runtime_sized(module, m.ty)),
        _ => false,
    }
}

/// Declares before any kernel: Metal gets `threadgroup`, the harness its own storage for one threadgroup.
pub const THREADGROUP_VAR: &str = "#ifndef LS_THREADGROUP_VAR\n#define LS_THREADGROUP_VAR threadgroup\n#endif\n";

/// Moves the kernel's `threadgroup T& name` parameters (which a passthrough pipeline never sizes) into declarations at the top of its body.
pub fn scope_threadgroup(text: &str, entry: &str) -> Result<String, String> {
    let lines: Vec<&str> = text.lines().collect();
    let head = lines.iter().position(|l| l.contains(&format!("kernel void {entry}("))).ok_or_else(|| format!("no `kernel void {entry}(` line"))?;
    let close = (head + 1..lines.len()).find(|&i| lines[i].starts_with(") {")).ok_or("no end of the kernel's parameters")?;
    let params: Vec<&str> = lines[head + 1..close].iter().map(|l| l.trim_start_matches(", ").trim()).collect();
    let (shared, kept): (Vec<&str>, Vec<&str>) = params.into_iter().partition(|p| p.starts_with("threadgroup "));
    let mut out: Vec<String> = lines[..=head].iter().map(|l| l.to_string()).collect();
    out.extend(kept.iter().enumerate().map(|(i, p)| format!("{}{p}", if i == 0 { "  " } else { ", " })));
    out.push(lines[close].to_string());
    for p in &shared {
        let decl = p.trim_start_matches("threadgroup ").replacen('&', "", 1);
        out.push(format!("    LS_THREADGROUP_VAR {};", decl.trim()));
    }
    out.extend(lines[close + 1..].iter().map(|l| l.to_string()));
    let mut joined = out.join("\n");
    joined.push('\n');
    Ok(joined)
}

/// `text` with the exactness header after its leading preprocessor lines (naga's `#include`s and `using`).
pub fn with_header(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + EXACTNESS_HEADER.len());
    let mut placed = false;
    for line in text.lines() {
        let lead = line.starts_with("#include") || line.starts_with("// language:") || line.trim().is_empty();
        if !placed && !lead {
            out.push_str(EXACTNESS_HEADER);
            out.push_str(THREADGROUP_VAR);
            placed = true;
        }
        out.push_str(line);
        out.push('\n');
    }
    if !placed {
        out.push_str(EXACTNESS_HEADER);
        out.push_str(THREADGROUP_VAR);
    }
    out
}

/// Whether an MSL source carries the exactness header before its first declaration.
pub fn has_header(text: &str) -> bool {
    let Some(at) = text.find(EXACTNESS_HEADER) else { return false };
    text[..at].lines().all(|l| l.starts_with("#include") || l.starts_with("//") || l.trim().is_empty())
}

/// A hand-written MSL shader as Metal gets it: its text with `constants` as `#define`s after the exactness header, its entry, threadgroup size and buffers read from its signature (`[[max_total_threads_per_threadgroup(N)]]`, one parameter per line, `[[buffer(n)]]` at binding n).
pub fn hand_written(shader: &Shader, constants: &[(&str, f64)]) -> Result<Translated, MslError> {
    let err = |stage: &'static str, message: String| MslError { kernel: shader.kernel, variant: shader.variant, stage, message };
    if shader.lang != Lang::Msl {
        return Err(err("language", format!("{:?} sources are translated, not passed through", shader.lang)));
    }
    let text = shader.source;
    let at = text.find(EXACTNESS_HEADER).filter(|_| has_header(text)).ok_or_else(|| err("header", "no exactness header before the first declaration".into()))? + EXACTNESS_HEADER.len();
    let mut defines = String::from(THREADGROUP_VAR);
    for &(name, v) in constants {
        let value = if v.fract() == 0.0 && (0.0..4294967296.0).contains(&v) { format!("{}u", v as u64) } else { format!("as_type<float>({}u)", (v as f32).to_bits()) };
        defines.push_str(&format!("#define {name} {value}\n"));
    }
    let source = format!("{}{defines}{}", &text[..at], &text[at..]);
    let kernels: Vec<(usize, &str)> = source.match_indices("kernel void ").collect();
    let [(head, _)] = kernels[..] else { return Err(err("entry", format!("{} kernel functions, not one", kernels.len()))) };
    let open = head + source[head..].find('(').ok_or_else(|| err("entry", "no parameter list".into()))?;
    let entry = source[head + "kernel void ".len()..open].trim().to_string();
    let lead = source[..head].trim_end();
    let threads = lead
        .strip_suffix(")]]")
        .and_then(|l| l.rsplit_once("[[max_total_threads_per_threadgroup(").map(|(_, n)| n))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .ok_or_else(|| err("entry", format!("`{entry}` has no [[max_total_threads_per_threadgroup(N)]]")))?;
    let close = open + source[open..].find("\n) {").ok_or_else(|| err("entry", "the parameters do not end with a line `) {`".into()))?;
    let mut buffers = Vec::new();
    for p in source[open + 1..close].lines().map(|l| l.trim().trim_start_matches(',').trim()).filter(|l| !l.is_empty()) {
        let Some(n) = p.split_once("[[buffer(").and_then(|(_, r)| r.split_once(")]]")).map(|(n, _)| n) else { continue };
        let slot = n.trim().parse::<u8>().map_err(|_| err("bindings", format!("`{p}`: buffer index {n}")))?;
        let mutable = p.starts_with("device ");
        if !mutable && !p.starts_with("const device ") && !p.starts_with("constant ") {
            return Err(err("bindings", format!("`{p}`: a buffer is `device`, `const device` or `constant`")));
        }
        buffers.push(BufferSlot { binding: u32::from(slot), slot, mutable });
    }
    buffers.sort_by_key(|b| b.binding);
    if buffers.iter().enumerate().any(|(i, b)| b.binding != i as u32) {
        return Err(err("bindings", format!("buffer indices {:?} are not 0, 1, 2, ... as the layout gives them", buffers.iter().map(|b| b.binding).collect::<Vec<_>>())));
    }
    let sizes_slot = buffers.last().map_or(0, |b| b.slot + 1);
    Ok(Translated { source, entry, workgroup: [threads, 1, 1], buffers, sizes_slot, sized: Vec::new() })
}

/// The MSL of any registered shader: naga's translation of WGSL, or a hand-written source as given.
pub fn metal_text(shader: &Shader, constants: &[(&str, f64)]) -> Result<Translated, MslError> {
    match shader.lang {
        Lang::Wgsl => translate(shader, constants),
        Lang::Msl => hand_written(shader, constants),
    }
}
