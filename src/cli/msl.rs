//! `lockstep msl`: every registered WGSL kernel as the MSL Metal would be given (naga's translation with the exactness header), written out with a manifest of entry points, threadgroup sizes and buffer slots.
use crate::gpu::msl::{translate, Translated};
use crate::gpu::Lang;
use crate::kernels::registry;
use anyhow::{Context, Result};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

/// Options of `lockstep msl`.
#[derive(clap::Args, Debug, Clone)]
pub struct MslArgs {
    /// Folder to write `KERNEL.VARIANT.N.metal` files and `manifest.json` into.
    #[arg(long)]
    pub out: PathBuf,
    /// Only kernels whose name contains this.
    #[arg(long)]
    pub only: Option<String>,
}

/// Every registered WGSL shader (its default override constants), translated; `(file name, translation)` in registry order.
pub fn translate_all(only: Option<&str>) -> Result<Vec<(String, Translated)>> {
    let mut out = Vec::new();
    for (kernel, v) in registry::variants() {
        if only.is_some_and(|o| !kernel.contains(o)) {
            continue;
        }
        for (i, s) in v.shaders.iter().enumerate().filter(|(_, s)| s.lang == Lang::Wgsl) {
            let t = translate(s, &[])?;
            out.push((format!("{kernel}.{}.{i}.metal", v.name), t));
        }
    }
    Ok(out)
}

/// Runs `lockstep msl`.
pub fn run(args: &MslArgs, log: &mut dyn Write) -> Result<()> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let all = translate_all(args.only.as_deref())?;
    let mut manifest = Vec::new();
    for (name, t) in &all {
        let path = args.out.join(name);
        std::fs::write(&path, &t.source).with_context(|| format!("writing {}", path.display()))?;
        let buffers: Vec<_> = t.buffers.iter().map(|b| json!({ "binding": b.binding, "slot": b.slot, "mutable": b.mutable })).collect();
        manifest.push(json!({ "file": name, "entry": t.entry, "threadgroup": t.workgroup, "buffers": buffers, "sizes_slot": t.sizes_slot }));
    }
    let path = args.out.join("manifest.json");
    std::fs::write(&path, serde_json::to_string_pretty(&manifest)?).with_context(|| format!("writing {}", path.display()))?;
    writeln!(log, "wrote {} MSL sources and {}", all.len(), path.display())?;
    Ok(())
}
