//! Benchmarks: GEMM bandwidth and FLOP rate at the model's shapes, next to the device's measured ceilings.
use crate::contract::Rng;
use crate::gpu::{Arg, Buf, Gpu, PipelineKey, Recorder};
use crate::kernels::gemm::{self, GemmArgs, GemmVariant, WeightFormat};
use anyhow::Result;
use std::time::Instant;

/// The bandwidth instrument's shader.
pub use crate::kernels::ceiling::STREAM;

/// Median device seconds of `reps` runs of `record` (timestamps where the device has them, else host time).
fn time_median(gpu: &Gpu, reps: usize, record: &dyn Fn(&mut Recorder) -> Result<()>) -> Result<f64> {
    let mut times = Vec::with_capacity(reps);
    for i in 0..reps + 2 {
        let mut rec = Recorder::new(gpu);
        record(&mut rec)?;
        let t0 = Instant::now();
        let dev = rec.submit()?;
        let t = dev.unwrap_or_else(|| t0.elapsed().as_secs_f64());
        if i >= 2 {
            times.push(t);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn random_bytes(rng: &mut Rng, n: usize, fmt: WeightFormat) -> Vec<u8> {
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(n);
    if fmt == WeightFormat::E4m3 {
        v.iter_mut().filter(|b| **b & 0x7f == 0x7f).for_each(|b| *b = 0x3e);
    }
    if fmt == WeightFormat::Bf16 {
        v.iter_mut().skip(1).step_by(2).for_each(|b| *b = 0x3c + (*b & 3));
    }
    v
}

/// Measured ceilings in GB/s: (streaming read kernel, copy kernel counting read + write, copy_buffer_to_buffer).
pub fn ceilings(gpu: &Gpu, reps: usize) -> Result<(f64, f64, f64)> {
    let bytes = (gpu.max_binding() / 2).min(1 << 30) / 16 * 16;
    let src = gpu.alloc(bytes)?;
    let dst = gpu.alloc(bytes)?;
    gpu.fill_u32(&src, 0x3c3c_3c3c);
    let n = (bytes / 16) as u32;
    let groups = 132 * 16;
    let stride = groups * 256;
    let mut out = [0.0; 3];
    for mode in 0..2u32 {
        let key = PipelineKey::new(STREAM, &[("MODE", f64::from(mode))]);
        let t = time_median(gpu, reps, &|rec| Ok(rec.dispatch(&key, &[n, stride], &[Arg::Whole(&src), Arg::Whole(&dst)], [groups, 1, 1])?))?;
        out[mode as usize] = bytes as f64 * f64::from(mode + 1) / t / 1e9;
    }
    let mut times = Vec::new();
    for _ in 0..reps.max(3) {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&src.buffer, 0, &dst.buffer, 0, bytes);
        let t0 = Instant::now();
        gpu.queue.submit([enc.finish()]);
        gpu.wait()?;
        times.push(t0.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    out[2] = 2.0 * bytes as f64 / times[times.len() / 2] / 1e9;
    Ok((out[0], out[1], out[2]))
}

/// Measured fp32 FMA ceiling in GFLOP/s (an FMA counts two): independent vec4 chains on every thread of a full grid.
pub fn fma_ceiling(gpu: &Gpu, reps: usize) -> Result<f64> {
    let groups = 132 * 16;
    let dst = gpu.alloc(u64::from(groups) * 256 * 16)?;
    let iters = if gpu.info.device_type == wgpu::DeviceType::Cpu { 16 } else { 4096 };
    let key = PipelineKey::new(crate::kernels::ceiling::FMA, &[]);
    let t = time_median(gpu, reps, &|rec| Ok(rec.dispatch(&key, &[iters, 0x7f80_0001], &[Arg::Whole(&dst)], [groups, 1, 1])?))?;
    let flops = f64::from(groups) * 256.0 * f64::from(iters) * 8.0 * 4.0 * 2.0;
    Ok(flops / t / 1e9)
}

struct Shape {
    label: &'static str,
    fmt: WeightFormat,
    n: usize,
    k: usize,
}

const SHAPES: &[Shape] = &[
    Shape { label: "expert.w1 e2m1", fmt: WeightFormat::E2m1, n: 2304, k: 5120 },
    Shape { label: "expert.w2 e2m1", fmt: WeightFormat::E2m1, n: 5120, k: 2304 },
    Shape { label: "wq_a e4m3", fmt: WeightFormat::E4m3, n: 1280, k: 5120 },
    Shape { label: "wq_b e4m3", fmt: WeightFormat::E4m3, n: 32768, k: 1280 },
    Shape { label: "wo_a e4m3", fmt: WeightFormat::E4m3, n: 8192, k: 4096 },
    Shape { label: "wo_b e4m3", fmt: WeightFormat::E4m3, n: 5120, k: 8192 },
    Shape { label: "shared.w2 e4m3", fmt: WeightFormat::E4m3, n: 5120, k: 2304 },
    Shape { label: "head bf16", fmt: WeightFormat::Bf16, n: 129280, k: 5120 },
];

/// Runs the kernel benchmark and prints one line per shape and row count.
pub fn kernels(gpu: &Gpu, reps: usize, only: Option<&str>) -> Result<()> {
    println!("bench on {} driver={:?}", gpu.describe(), gpu.info.driver_info);
    let (read, copy, c2c) = ceilings(gpu, reps)?;
    let fma = fma_ceiling(gpu, reps)?;
    println!("ceilings: stream-read kernel {read:.0} GB/s, copy kernel {copy:.0} GB/s (read+write), copy_buffer_to_buffer {c2c:.0} GB/s, fp32 FMA kernel {fma:.0} GFLOP/s");
    let mut rng = Rng::new(7);
    for s in SHAPES.iter().filter(|s| only.is_none_or(|o| s.label.contains(o))) {
        let wbytes = gemm::row_bytes(s.fmt, s.k) * s.n;
        let sbytes = gemm::scale_bytes(s.fmt, s.n, s.k);
        if wbytes as u64 > gpu.max_binding() {
            println!("{:<16} skipped: {wbytes} B exceeds this device's binding limit", s.label);
            continue;
        }
        let copies = (256usize << 20).div_ceil(wbytes).clamp(1, 64);
        let weights: Vec<(Buf, Option<Buf>)> = (0..copies)
            .map(|_| gpu.upload_gemm_weights(&random_bytes(&mut rng, wbytes, s.fmt), &(0..sbytes).map(|_| 120 + rng.below(10) as u8).collect::<Vec<_>>()))
            .collect::<Result<_, _>>()?;
        for m in [1usize, 4, 512, 2048] {
            let x: Vec<f32> = (0..m * s.k).map(|_| crate::numerics::round_bf16(rng.normal())).collect();
            let xs: Vec<f32> = vec![1.0; m * s.k / 32];
            let (xb, xsb) = (gpu.upload_pod(&x)?, gpu.upload_pod(&xs)?);
            let outs: Vec<Buf> = (0..copies).map(|_| gpu.alloc((m * s.n * 4) as u64)).collect::<Result<_, _>>()?;
            let variant = GemmVariant::for_rows(m);
            let t = time_median(gpu, reps, &|rec| {
                for (c, (w, ws)) in weights.iter().enumerate() {
                    let a = GemmArgs { fmt: s.fmt, m, n: s.n, k: s.k, x: &xb, xs: Some(&xsb), w, ws: ws.as_ref(), out: &outs[c], n_base: 0, ldo: s.n, round: false };
                    gemm::record(rec, &a, variant, 0)?;
                }
                Ok(())
            })? / copies as f64;
            let bytes = (wbytes + sbytes + m * s.k * 4 + m * s.k / 8 + m * s.n * 4) as f64;
            let gbs = bytes / t / 1e9;
            let gflops = 2.0 * (m * s.n * s.k) as f64 / t / 1e9;
            println!(
                "{:<16} rows={:<5} {:<5} {:>9.1} us  {:>7.0} GB/s ({:>3.0}% of stream-read, {:>3.0}% of copy kernel)  {:>8.0} GFLOP/s",
                s.label,
                m,
                variant.name(),
                t * 1e6,
                gbs,
                100.0 * gbs / read,
                100.0 * gbs / copy,
                gflops
            );
        }
    }
    Ok(())
}
