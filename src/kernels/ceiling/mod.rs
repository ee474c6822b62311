//! The benchmarks' ceiling instruments: a streaming-read kernel and a copy kernel (override MODE), measuring what the device's memory gives a WGSL kernel.
use crate::gpu::Shader;

/// The bandwidth instrument's shader.
pub const STREAM: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "bench_stream", variant: "wgsl", source: include_str!("../../../wgsl/ceiling/stream.wgsl") };
