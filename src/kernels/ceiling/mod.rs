//! The benchmarks' ceiling instruments: a streaming-read kernel and a copy kernel (override MODE), measuring what the device's memory gives a WGSL kernel, and an FMA kernel measuring its fp32 arithmetic.
use crate::gpu::Shader;

/// The bandwidth instrument's shader.
pub const STREAM: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "bench_stream", variant: "wgsl", source: include_str!("../../../wgsl/ceiling/stream.wgsl") };

/// The FMA-rate instrument's shader.
pub const FMA: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "bench_fma", variant: "wgsl", source: include_str!("../../../wgsl/ceiling/fma.wgsl") };
