//! `cargo bench --bench kernels`: the GEMM benchmark of `lockstep bench kernels`, on the adapter LOCKSTEP_DEVICE names; `LOCKSTEP_BENCH_ONLY` and `LOCKSTEP_BENCH_REPS` narrow it.
use lockstep::gpu::{DeviceChoice, Gpu};

fn main() -> anyhow::Result<()> {
    let choice = DeviceChoice::from_flag_or_env(None);
    let gpu = Gpu::open(&choice)?;
    let reps = std::env::var("LOCKSTEP_BENCH_REPS").ok().and_then(|r| r.parse().ok()).unwrap_or(20);
    let only = std::env::var("LOCKSTEP_BENCH_ONLY").ok();
    lockstep::cli::bench_kernels::kernels(&gpu, reps, only.as_deref())
}
