//! Attention in f64 (spec 2.5): q and kv paths with RoPE, the sliding window plus selected compressed rows with the sink, inverse RoPE, grouped low-rank output.
use super::index::{Compressor, Indexer};
use super::mhc::{rms_norm, rope};
use super::quant::{act_quant, bf16};
use super::weights::Linear;

/// One layer's attention weights.
#[derive(Debug, Clone)]
pub struct Attention {
    /// `wq_a` `[q_lora_rank, D]`.
    pub wq_a: Linear,
    /// `q_norm` weight.
    pub q_norm: Vec<f64>,
    /// `wq_b` `[H hd, q_lora_rank]`.
    pub wq_b: Linear,
    /// `wkv` `[hd, D]`.
    pub wkv: Linear,
    /// `kv_norm` weight.
    pub kv_norm: Vec<f64>,
    /// `wo_a` `[G R, H hd / G]`, dequantized to bf16 and applied without input quantization.
    pub wo_a: Linear,
    /// `wo_b` `[D, G R]`.
    pub wo_b: Linear,
    /// Per-head sink logit.
    pub attn_sink: Vec<f64>,
    /// Compressor and index-key projection (KV sources).
    pub compressor: Option<Compressor>,
    /// Query side of the indexer (index sources).
    pub indexer: Option<Indexer>,
    /// Inverse frequencies of this layer's RoPE table, one per pair.
    pub inv_freq: Vec<f64>,
}

/// Rounds the last `rd` values to bf16 (the official rounds only the rotated slice after RoPE).
fn bf16_tail(v: &mut [f64], rd: usize) {
    let n = v.len();
    v[n - rd..].iter_mut().for_each(|x| *x = bf16(*x));
}

/// Values of one query token's q path.
#[derive(Debug, Clone, PartialEq)]
pub struct QTrace {
    /// `q_norm(wq_a x)` (bf16), the input of `wq_b` and the indexer.
    pub qr: Vec<f64>,
    /// q after RoPE before its last bf16 rounding, `[H hd]`.
    pub raw: Vec<f64>,
    /// q after RoPE, `[H hd]`.
    pub q: Vec<f64>,
}

/// Values of one token's window-KV path.
#[derive(Debug, Clone, PartialEq)]
pub struct KvTrace {
    /// `kv_norm(wkv x)` after RoPE (bf16): the fp8 QAT input.
    pub raw: Vec<f64>,
    /// After fp8 QAT: what is cached and attended.
    pub kv: Vec<f64>,
}

/// Values of one token's attention output path.
#[derive(Debug, Clone, PartialEq)]
pub struct OutTrace {
    /// `wo_a` output per group (bf16), `[G R]`.
    pub z: Vec<f64>,
    /// `wo_b` output before its bf16 rounding.
    pub raw: Vec<f64>,
    /// `bf16(raw)`.
    pub out: Vec<f64>,
}

impl Attention {
    /// q path: `qr = q_norm(wq_a x)`, `q = wq_b qr` with RoPE on each head's tail at `pos`.
    pub fn q_path(&self, x: &[f64], pos: usize, heads: usize, eps: f64) -> QTrace {
        let a: Vec<f64> = self.wq_a.apply(x).into_iter().map(bf16).collect();
        let qr = rms_norm(&a, &self.q_norm, eps);
        let raw_b = self.wq_b.apply(&qr);
        let mut q: Vec<f64> = raw_b.iter().map(|&v| bf16(v)).collect();
        let mut raw = raw_b;
        let hd = q.len() / heads;
        let rd = 2 * self.inv_freq.len();
        for h in 0..heads {
            let head = &mut q[h * hd..(h + 1) * hd];
            rope(head, pos, &self.inv_freq, false);
            raw[h * hd + hd - rd..(h + 1) * hd].copy_from_slice(&head[hd - rd..]);
            bf16_tail(head, rd);
        }
        QTrace { qr, raw, q }
    }

    /// Window-KV path: `kv_norm(wkv x)`, RoPE at `pos`, fp8 QAT.
    pub fn kv_path(&self, x: &[f64], pos: usize, eps: f64) -> KvTrace {
        let a: Vec<f64> = self.wkv.apply(x).into_iter().map(bf16).collect();
        let mut raw = rms_norm(&a, &self.kv_norm, eps);
        rope(&mut raw, pos, &self.inv_freq, false);
        bf16_tail(&mut raw, 2 * self.inv_freq.len());
        let kv = act_quant(&raw);
        KvTrace { raw, kv }
    }

    /// Sparse attention of one query over `keys` (window rows and selected compressed rows) with the sink; returns o per head before rounding.
    pub fn attend_raw(&self, q: &[f64], keys: &[&[f64]], heads: usize) -> Vec<f64> {
        let hd = q.len() / heads;
        let scale = 1.0 / (hd as f64).sqrt();
        let mut o = vec![0.0; q.len()];
        for h in 0..heads {
            let qh = &q[h * hd..(h + 1) * hd];
            let s: Vec<f64> = keys.iter().map(|k| qh.iter().zip(k.iter()).map(|(a, b)| a * b).sum::<f64>() * scale).collect();
            let m = s.iter().fold(-1e30f64, |a, &b| a.max(b));
            let e: Vec<f64> = s.iter().map(|&v| (v - m).exp()).collect();
            let denom = e.iter().sum::<f64>() + (self.attn_sink[h] - m).exp();
            let oh = &mut o[h * hd..(h + 1) * hd];
            for (w, k) in e.iter().zip(keys) {
                oh.iter_mut().zip(k.iter()).for_each(|(acc, v)| *acc += w / denom * v);
            }
        }
        o
    }

    /// bf16 attention output with the inverse RoPE at `pos`: returns `(raw before the last rounding, o)`.
    pub fn unrotate(&self, o_raw: &[f64], pos: usize, heads: usize) -> (Vec<f64>, Vec<f64>) {
        let hd = o_raw.len() / heads;
        let rd = 2 * self.inv_freq.len();
        let mut raw = o_raw.to_vec();
        let mut o: Vec<f64> = o_raw.iter().map(|&v| bf16(v)).collect();
        for h in 0..heads {
            let head = &mut o[h * hd..(h + 1) * hd];
            rope(head, pos, &self.inv_freq, true);
            raw[h * hd + hd - rd..(h + 1) * hd].copy_from_slice(&head[hd - rd..]);
            bf16_tail(head, rd);
        }
        (raw, o)
    }

    /// Grouped low-rank output: `z_g = bf16(wo_a[g] o_g)`, `out = bf16(wo_b z)`.
    pub fn output(&self, o: &[f64], groups: usize) -> OutTrace {
        let (gin, r) = (o.len() / groups, self.wo_a.out / groups);
        let mut z = Vec::with_capacity(self.wo_a.out);
        for g in 0..groups {
            let og = &o[g * gin..(g + 1) * gin];
            for row in self.wo_a.w[g * r * gin..(g + 1) * r * gin].chunks_exact(gin) {
                z.push(bf16(row.iter().zip(og).map(|(a, b)| a * b).sum()));
            }
        }
        let raw = self.wo_b.apply(&z);
        let out = raw.iter().map(|&v| bf16(v)).collect();
        OutTrace { z, raw, out }
    }
}
