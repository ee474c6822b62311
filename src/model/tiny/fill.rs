//! Large tensors of a random checkpoint: fixed 32-row chunks, each from its own stream, generated and quantized on every core; the bytes do not depend on the thread count.
use crate::model::checkpoint::quantize::{quantize_fp4, quantize_fp8_blocks, quantize_fp8_rows, BLOCK};
use crate::weights::Dtype;
use crate::weights::{Quant, TensorSpec};
use crate::model::tiny::{edge, fnv1a, Rng, Values};
use crate::numerics::bf16_from_f32;
use std::sync::Mutex;

/// Tensors with at least this many values are generated in chunks (the spec 1.6 tiny config has none).
pub(super) const CHUNKED_MIN: usize = 1 << 23;

/// Rows per chunk: one fp8 block row, so each chunk quantizes on its own.
const CHUNK_ROWS: usize = BLOCK;

/// Approximately standard normal from one draw: Irwin-Hall sum of its four 16-bit lanes, in exact-or-IEEE f32 steps.
fn normal16(u: u64) -> f32 {
    let s = (u & 0xffff) + ((u >> 16) & 0xffff) + ((u >> 32) & 0xffff) + (u >> 48);
    ((s as f32 + 2.0) * (1.0 / 65536.0) - 2.0) * 1.732_050_8
}

/// Stored bytes per row and scale bytes per chunk of `spec` with `cols` logical columns.
fn layout(spec: &TensorSpec, cols: usize) -> (usize, usize) {
    let nb = cols.div_ceil(BLOCK);
    match spec.quant {
        Quant::Fp8Block => (cols, nb),
        Quant::Fp8Rows => (cols, CHUNK_ROWS * nb),
        Quant::Fp4 => (cols.div_ceil(2), CHUNK_ROWS * nb),
        _ => (cols * spec.dtype.size(), 0),
    }
}

/// Bytes of one chunk of `rows` x `cols` values drawn with mean and std from `rng`: (weight, scale).
fn chunk(spec: &TensorSpec, rows: usize, cols: usize, (mean, std): (f32, f32), kind: Values, rng: &mut Rng) -> (Vec<u8>, Vec<u8>) {
    let mut values: Vec<f32> = (0..rows * cols).map(|_| mean + std * normal16(rng.next_u64())).collect();
    if kind == Values::Edge {
        edge::adjust(&spec.name, &mut values);
    }
    match (spec.quant, spec.dtype) {
        (Quant::Fp8Block, _) => quantize_fp8_blocks(&values, rows, cols),
        (Quant::Fp8Rows, _) => quantize_fp8_rows(&values, rows, cols),
        (Quant::Fp4, _) => quantize_fp4(&values, rows, cols),
        (_, Dtype::F32) => (values.iter().flat_map(|v| v.to_le_bytes()).collect(), Vec::new()),
        _ => (values.iter().flat_map(|&v| bf16_from_f32(v).to_le_bytes()).collect(), Vec::new()),
    }
}

/// Stored bytes of a `[rows, cols]` tensor and of its scale when quantized, generated in parallel chunks.
pub(super) fn generate_chunked(spec: &TensorSpec, rows: usize, cols: usize, seed: u64, mean_std: (f64, f64), kind: Values) -> (Vec<u8>, Option<Vec<u8>>) {
    let (row_bytes, chunk_scale) = layout(spec, cols);
    let n_chunks = rows.div_ceil(CHUNK_ROWS);
    let mut weight = vec![0u8; rows * row_bytes];
    let mut scale = vec![0u8; n_chunks * chunk_scale];
    let base = seed ^ fnv1a(&spec.name);
    let ms = (mean_std.0 as f32, mean_std.1 as f32);
    let w_parts = weight.chunks_mut(CHUNK_ROWS * row_bytes);
    let mut s_parts: Vec<&mut [u8]> = scale.chunks_mut(chunk_scale.max(1)).collect();
    s_parts.resize_with(n_chunks, || &mut []);
    let jobs = Mutex::new(w_parts.zip(s_parts).enumerate());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(n_chunks);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                while let Some((i, (w, s))) = jobs.lock().ok().and_then(|mut j| j.next()) {
                    let r = (rows - i * CHUNK_ROWS).min(CHUNK_ROWS);
                    let mut rng = Rng::new(base ^ Rng::new(i as u64).next_u64());
                    let (wb, sb) = chunk(spec, r, cols, ms, kind, &mut rng);
                    w.copy_from_slice(&wb);
                    let n = sb.len().min(s.len());
                    s[..n].copy_from_slice(&sb[..n]);
                }
            });
        }
    });
    let scale = (chunk_scale > 0).then(|| {
        scale.truncate(spec_scale_len(spec, rows, cols));
        scale
    });
    (weight, scale)
}

/// Scale bytes of the whole tensor (the last chunk may hold fewer rows).
fn spec_scale_len(spec: &TensorSpec, rows: usize, cols: usize) -> usize {
    let nb = cols.div_ceil(BLOCK);
    match spec.quant {
        Quant::Fp8Block => rows.div_ceil(BLOCK) * nb,
        _ => rows * nb,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::quantize::{dequantize_fp4, dequantize_fp8_blocks};

    /// A quantized spec of the given kind and logical shape.
    fn spec(name: &str, quant: Quant, rows: usize, cols: usize) -> TensorSpec {
        let (dtype, shape) = match quant {
            Quant::Fp4 => (Dtype::I8, vec![rows, cols / 2]),
            Quant::Plain => (Dtype::BF16, vec![rows, cols]),
            _ => (Dtype::F8E4M3, vec![rows, cols]),
        };
        TensorSpec {
            name: name.into(),
            dtype,
            shape,
            quant,
        }
    }

    #[test]
    fn normal16_has_unit_variance_and_zero_mean() {
        let mut r = Rng::new(3);
        let xs: Vec<f64> = (0..200_000).map(|_| f64::from(normal16(r.next_u64()))).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.01 && (var - 1.0).abs() < 0.02, "mean {mean} var {var}");
    }

    #[test]
    fn chunked_fp4_and_fp8_follow_the_init_and_chunks_differ() {
        let s = spec("layers.0.ffn.experts.0.w1.weight", Quant::Fp4, 70, 256);
        let (w, sc) = generate_chunked(&s, 70, 256, 5, (0.0, 0.03), Values::Random);
        let sc = sc.expect("fp4 has scales");
        assert_eq!((w.len(), sc.len()), (70 * 128, 70 * 8));
        let v = dequantize_fp4(&w, &sc, 70, 256);
        let rms = (v.iter().map(|x| f64::from(x * x)).sum::<f64>() / v.len() as f64).sqrt();
        assert!((rms - 0.03).abs() < 0.005, "rms {rms}");
        assert_ne!(w[..128 * 32], w[128 * 32..128 * 64], "chunks 0 and 1 must not repeat");
        let f = spec("layers.0.attn.wq_b.weight", Quant::Fp8Block, 70, 96);
        let (fw, fs) = generate_chunked(&f, 70, 96, 5, (0.0, 0.03), Values::Random);
        let fs = fs.expect("fp8 has scales");
        assert_eq!((fw.len(), fs.len()), (70 * 96, 3 * 3));
        let fv = dequantize_fp8_blocks(&fw, &fs, 70, 96);
        let mean = fv.iter().map(|&x| f64::from(x)).sum::<f64>() / fv.len() as f64;
        assert!(mean.abs() < 0.005, "mean {mean}");
    }

    #[test]
    fn chunked_bytes_depend_on_seed_and_name_only() {
        let s = spec("head.weight", Quant::Plain, 65, 64);
        let a = generate_chunked(&s, 65, 64, 9, (0.0, 0.05), Values::Random);
        assert_eq!(a, generate_chunked(&s, 65, 64, 9, (0.0, 0.05), Values::Random));
        assert!(a.1.is_none() && a.0.len() == 65 * 64 * 2);
        assert_ne!(a, generate_chunked(&s, 65, 64, 10, (0.0, 0.05), Values::Random));
        assert_ne!(a, generate_chunked(&spec("embed.weight", Quant::Plain, 65, 64), 65, 64, 9, (0.0, 0.05), Values::Random));
    }
}
