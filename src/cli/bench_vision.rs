//! `lockstep bench vision`: the tower and aligner's time per image on the GPU executor at a patch grid (a 1024x701 image is 51 x 74).
use crate::exec::Executor;
use crate::gpu::{DeviceChoice, Gpu};
use crate::model::forward::vision::{encode_image, vision_config, ImagePatches};
use crate::model::forward::Model;
use crate::model::taps::Taps;
use crate::model::{load, LoadMode, ValueCheck};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `bench vision`.
#[derive(clap::Args, Debug, Clone)]
pub struct VisionArgs {
    /// Checkpoint directory (with a vision tower).
    #[arg(long)]
    pub model: PathBuf,
    /// Adapter: index, name substring or backend name.
    #[arg(long)]
    pub device: Option<String>,
    /// ViT patch grid as ROWSxCOLS.
    #[arg(long, default_value = "51x74")]
    pub grid: String,
    /// Timed images (after one warm-up).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
}

/// Times `reps` images through the tower and the aligner, each through its rows' readback.
pub fn run(args: &VisionArgs, out: &mut dyn Write) -> Result<()> {
    let (gh, gw) = args.grid.split_once('x').and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?))).filter(|g| g.0 > 0 && g.1 > 0).context("--grid must be ROWSxCOLS, both positive")?;
    let gpu = match DeviceChoice::from_flag_or_env(args.device.as_deref()) {
        DeviceChoice::Cpu => bail!("bench vision needs a GPU adapter, not the CPU oracle"),
        choice => Gpu::open(&choice).context("opening the device")?,
    };
    let (cfg, ckpt) = load(&args.model, LoadMode::Mapped, ValueCheck::Off).with_context(|| format!("loading {}", args.model.display()))?;
    let map = crate::cli::bench_forward::bench_token_map(&cfg, &args.model)?;
    let model = Model::new(cfg, &ckpt, map)?;
    let vc = vision_config(&model)?.clone();
    let label = args.device.clone().unwrap_or_else(|| "default".into());
    let mut ex = crate::cli::run::gpu_executor(&gpu, &ckpt, &label)?;
    let patch = 3 * vc.patch_size * vc.patch_size;
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let data: Vec<f32> = (0..gh * gw * patch).map(|_| {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 33) % 256) as f32 / 127.5 - 1.0
    }).collect();
    let img = ImagePatches { grid_h: gh, grid_w: gw, data: &data };
    let cells = gh.div_ceil(vc.downsample_ratio) * gw.div_ceil(vc.downsample_ratio);
    writeln!(out, "bench vision model={} device=\"{}\" tower={} blocks x {} ({} heads), aligner {} -> {}, grid {gh}x{gw} = {} patches, {cells} image rows", args.model.display(), gpu.info.name, vc.num_hidden_layers, vc.hidden_size, vc.num_attention_heads, vc.hidden_size * vc.downsample_ratio * vc.downsample_ratio, model.cfg.hidden_size, gh * gw)?;
    let t0 = Instant::now();
    let rows = encode_image(&mut ex, &model, &img, &mut Taps::default())?;
    ex.read(&rows)?;
    writeln!(out, "first image (weights uploaded, pipelines built): {:.3} s", t0.elapsed().as_secs_f64())?;
    let mut walls = Vec::new();
    let mut devices = Vec::new();
    for _ in 0..args.reps.max(1) {
        let d0 = ex.device_seconds();
        let t0 = Instant::now();
        let rows = encode_image(&mut ex, &model, &img, &mut Taps::default())?;
        ex.read(&rows)?;
        walls.push(t0.elapsed().as_secs_f64());
        devices.push(ex.device_seconds() - d0);
    }
    let med = |mut v: Vec<f64>| { v.sort_by(f64::total_cmp); v[v.len() / 2] };
    writeln!(out, "image reps={}: median {:.1} ms wall, {:.1} ms device per image (min {:.1} ms wall)", walls.len(), med(walls.clone()) * 1e3, med(devices) * 1e3, walls.iter().copied().fold(f64::INFINITY, f64::min) * 1e3)?;
    Ok(())
}
