//! The `lockstep` command line: devices, contract, run, diff, bench, make-tiny.
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use lockstep::contract::{run_contract, ContractOptions};
use lockstep::gpu::{list_adapters, DeviceChoice, Gpu};

#[global_allocator]
static HEAP: lockstep::serve::heap::Counting = lockstep::serve::heap::Counting;

#[derive(Parser)]
#[command(name = "lockstep", version, about = "DeepSeek-V4.1-Flash with the same bits on every device")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the adapters wgpu can see.
    Devices,
    /// Prove every registered kernel on a device: gates 1-4, planted controls, limits.
    Contract {
        /// Only kernels whose name contains this.
        #[arg(long)]
        only: Option<String>,
        /// Adapter: index, name substring, backend name, `metal-emu` (the MSL harness), or `cpu` (default: LOCKSTEP_DEVICE, else the first GPU).
        #[arg(long)]
        device: Option<String>,
        /// Print one hash over every kernel's outputs on a fixed seed.
        #[arg(long)]
        hash: bool,
        /// Fewer rows per case (chosen automatically on CPU adapters such as lavapipe).
        #[arg(long)]
        quick: bool,
        /// Seed for random inputs (default: from the clock, printed).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Generate text from a prompt on one sequence; prints token_sha256= at the end.
    Run(lockstep::cli::run::RunArgs),
    /// Serve the model over OpenAI- and Anthropic-compatible HTTP APIs.
    Serve(lockstep::cli::serve::ServeArgs),
    /// Fuzz what a user controls (requests, tool calls, chat, tokenizer, safetensors, configs, snapshots, images) for a budget.
    Fuzz(lockstep::cli::fuzz::FuzzArgs),
    /// Run two executors on the same tokens with taps and name the first stage whose bits differ.
    Diff(lockstep::cli::diff::DiffArgs),
    /// What a checkpoint or a config holds: shape, layer roles, tensors by dtype, resident and host bytes, state per lane.
    Inspect(lockstep::cli::inspect::InspectArgs),
    /// Write every registered WGSL kernel as the MSL Metal would be given (naga's translation, the exactness header), with a manifest.
    Msl(lockstep::cli::msl::MslArgs),
    /// Write a tiny random checkpoint (spec 1.6, or --config) and copy the tokenizer next to it.
    MakeTiny {
        /// Directory to write.
        dir: std::path::PathBuf,
        /// Seed of the random weights.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Config JSON to use instead of the built-in tiny config.
        #[arg(long, conflicts_with = "preset")]
        config: Option<std::path::PathBuf>,
        /// Built-in config instead of the tiny one: `flash-scaled` (release layer widths, few layers), `flash-scaled-vision`, `tiny-thresholds` (tiny widths, the release's attention thresholds).
        #[arg(long)]
        preset: Option<String>,
        /// Backbone layers of the preset (default: the preset's own).
        #[arg(long, requires = "preset")]
        layers: Option<usize>,
        /// The same draws rescaled by powers of two so the forward's activations reach subnormal range (logits stay meaningful).
        #[arg(long)]
        edge_values: bool,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
}

#[derive(Subcommand)]
enum BenchWhat {
    /// GEMM bandwidth and FLOP rate at the model's decode and prefill shapes.
    Kernels {
        #[arg(long)]
        device: Option<String>,
        /// Timed repetitions per shape.
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// Only shapes whose label contains this.
        #[arg(long)]
        only: Option<String>,
    },
    /// Prefill and decode tok/s of a checkpoint on the GPU executor, and decode's bandwidth against the stream-read ceiling.
    Forward(lockstep::cli::bench_forward::ForwardArgs),
    /// The vision tower and aligner's time per image on the GPU executor.
    Vision(lockstep::cli::bench_vision::VisionArgs),
}

fn open_gpu(device: Option<&str>) -> Result<Option<Gpu>> {
    match DeviceChoice::from_flag_or_env(device) {
        DeviceChoice::Cpu => Ok(None),
        choice => Ok(Some(Gpu::open(&choice).context("opening the device")?)),
    }
}

/// The generator's values for the `--edge-values` flag.
fn values_of(edge: bool) -> lockstep::model::Values {
    if edge {
        lockstep::model::Values::Edge
    } else {
        lockstep::model::Values::Random
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Devices => {
            let list = list_adapters();
            if list.is_empty() {
                println!("no adapters (install a Vulkan driver, e.g. mesa-vulkan-drivers for lavapipe)");
            }
            for a in list {
                println!(
                    "[{}] {} | backend={} type={} driver={:?} subgroups={}..{} shader-f16={} max-storage-binding={} B",
                    a.index, a.name, a.backend, a.device_type, a.driver, a.subgroup_sizes.0, a.subgroup_sizes.1, a.shader_f16, a.max_storage_binding
                );
            }
            println!("[cpu] CPU oracle");
        }
        Command::Contract { only, device, hash, quick, seed } => {
            let gpu = open_gpu(device.as_deref())?;
            let auto_quick = gpu.as_ref().is_some_and(|g| g.info.device_type == wgpu::DeviceType::Cpu);
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
            });
            if let Some(g) = &gpu {
                println!("contract on {} driver={:?}", g.describe(), g.info.driver_info);
            }
            let only_all = only.is_none();
            let opts = ContractOptions { only, quick: quick || auto_quick, hash, seed };
            let kernels = lockstep::kernels::registry();
            let summary = run_contract(gpu.as_ref(), &kernels, &opts)?;
            println!("{summary}");
            if let Some(h) = &summary.hash {
                println!("HASH {h}");
                if summary.ok() && only_all {
                    match lockstep::cli::serve::record_contract_hash(gpu.as_ref(), h) {
                        Ok(record) => println!("recorded for `lockstep serve` in {}", record.display()),
                        Err(e) => eprintln!("warning: could not record the hash: {e}"),
                    }
                }
            }
            if !summary.ok() {
                bail!("the contract failed");
            }
        }
        Command::Serve(args) => {
            lockstep::cli::serve::serve(&args)?;
        }
        Command::Run(args) => {
            lockstep::cli::run::run(&args, &mut std::io::stdout())?;
        }
        Command::Fuzz(args) => {
            lockstep::cli::fuzz::run(&args, &mut std::io::stdout())?;
        }
        Command::Diff(args) => {
            lockstep::cli::diff::run(&args, &mut std::io::stdout())?;
        }
        Command::Msl(args) => {
            lockstep::cli::msl::run(&args, &mut std::io::stderr())?;
        }
        Command::Inspect(args) => {
            lockstep::cli::inspect::run(&args, &mut std::io::stdout())?;
        }
        Command::MakeTiny { dir, seed, config: _, preset: Some(p), layers, edge_values } => {
            let json = lockstep::model::preset::preset_config_json(p.parse()?, layers)?;
            let t0 = std::time::Instant::now();
            let s = lockstep::model::write_checkpoint_values(&dir, seed, &json, values_of(edge_values)).with_context(|| format!("writing the {p} checkpoint into {}", dir.display()))?;
            eprintln!("wrote {} tensors ({} bytes) in {} files to {} in {:.1} s", s.tensors, s.bytes, s.files.len(), dir.display(), t0.elapsed().as_secs_f64());
        }
        Command::MakeTiny { dir, seed, config, preset: None, edge_values, .. } => {
            lockstep::cli::run::make_tiny_dir(&dir, seed, config.as_deref(), values_of(edge_values), &mut std::io::stderr())?;
        }
        Command::Bench { what: BenchWhat::Kernels { device, reps, only } } => {
            let gpu = open_gpu(device.as_deref())?.context("bench needs a GPU adapter")?;
            lockstep::cli::bench_kernels::kernels(&gpu, reps, only.as_deref())?;
        }
        Command::Bench { what: BenchWhat::Forward(args) } => {
            lockstep::cli::bench_forward::run(&args, &mut std::io::stdout())?;
        }
        Command::Bench { what: BenchWhat::Vision(args) } => {
            lockstep::cli::bench_vision::run(&args, &mut std::io::stdout())?;
        }
    }
    Ok(())
}
