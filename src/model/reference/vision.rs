//! The float64 vision tower and aligner (spec 4, the reference's vision.py): bf16 at every point the official module rounds, with taps and forcing like the backbone.
use super::forward::{cat, Rec};
use super::mhc::{rms_norm_raw, silu};
use super::quant::bf16;
use super::weights::{bf16_linear, vector, Linear};
use super::{Forcing, ReferenceError};
use crate::model::config::VisionConfig;
use crate::model::taps::Taps;
use crate::model::Config;
use crate::weights::Checkpoint;

/// Vision RMSNorm epsilon.
const EPS: f64 = 1e-6;

/// One ViT block's weights.
#[derive(Debug, Clone)]
pub struct Block {
    pub norm1: Vec<f64>,
    pub norm2: Vec<f64>,
    pub wqkv: Linear,
    pub wqkv_b: Vec<f64>,
    pub wo: Linear,
    pub wo_b: Vec<f64>,
    pub w1: Linear,
    pub w2: Linear,
}

/// The tower and aligner weights.
#[derive(Debug, Clone)]
pub struct Vision {
    pub cfg: VisionConfig,
    pub patch: Linear,
    pub patch_b: Vec<f64>,
    pub blocks: Vec<Block>,
    pub norm: Vec<f64>,
    pub a1: Linear,
    pub a1_b: Vec<f64>,
    pub a2: Linear,
    pub a2_b: Vec<f64>,
}

/// `W x + b` per row of `x` (`inp` wide), unrounded.
fn affine(l: &Linear, b: Option<&[f64]>, x: &[f64]) -> Vec<f64> {
    cat(x.chunks(l.inp).map(|r| {
        let y = l.apply(r);
        match b {
            Some(b) => y.iter().zip(b).map(|(a, c)| a + c).collect(),
            None => y,
        }
    }))
}

fn rounded(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| bf16(x)).collect()
}

impl Vision {
    /// Loads the tower when the config has one.
    pub fn load(ck: &Checkpoint, cfg: &Config) -> Result<Option<Vision>, ReferenceError> {
        let Some(vc) = cfg.vision.clone().filter(|v| v.num_hidden_layers > 0) else { return Ok(None) };
        let (vd, inter, d, r) = (vc.hidden_size, vc.intermediate_size, cfg.hidden_size, vc.downsample_ratio);
        let patch = 3 * vc.patch_size * vc.patch_size;
        let blocks = (0..vc.num_hidden_layers)
            .map(|b| {
                let p = format!("vision.blocks.{b}");
                Ok(Block {
                    norm1: vector(ck, &format!("{p}.norm1.weight"), vd)?,
                    norm2: vector(ck, &format!("{p}.norm2.weight"), vd)?,
                    wqkv: bf16_linear(ck, &format!("{p}.attn.wqkv"), 3 * vd, vd)?,
                    wqkv_b: vector(ck, &format!("{p}.attn.wqkv.bias"), 3 * vd)?,
                    wo: bf16_linear(ck, &format!("{p}.attn.wo"), vd, vd)?,
                    wo_b: vector(ck, &format!("{p}.attn.wo.bias"), vd)?,
                    w1: bf16_linear(ck, &format!("{p}.mlp.w1"), 2 * inter, vd)?,
                    w2: bf16_linear(ck, &format!("{p}.mlp.w2"), vd, inter)?,
                })
            })
            .collect::<Result<Vec<_>, ReferenceError>>()?;
        Ok(Some(Vision {
            patch: bf16_linear(ck, "vision.patch_embed.proj", vd, patch)?,
            patch_b: vector(ck, "vision.patch_embed.proj.bias", vd)?,
            blocks,
            norm: vector(ck, "vision.norm.weight", vd)?,
            a1: bf16_linear(ck, "aligner.w1", d, vd * r * r)?,
            a1_b: vector(ck, "aligner.w1.bias", d)?,
            a2: bf16_linear(ck, "aligner.w2", d, d)?,
            a2_b: vector(ck, "aligner.w2.bias", d)?,
            cfg: vc,
        }))
    }

    /// One image through the tower and aligner (patches `[grid_h * grid_w, 3 p^2]`), recording the oracle's stage names and forcing each recorded stage when `force` is given; returns the image rows.
    pub fn encode_forced(&self, patches: &[f32], grid_h: usize, grid_w: usize, taps: &mut Taps<f64>, force: Option<&mut Forcing>) -> Result<Vec<f64>, ReferenceError> {
        let vc = &self.cfg;
        let (n, vd, heads) = (grid_h * grid_w, vc.hidden_size, vc.num_attention_heads);
        if n == 0 || patches.len() != n * self.patch.inp {
            return Err(ReferenceError::Input(format!("{} patch values for a {grid_h} x {grid_w} grid", patches.len())));
        }
        let mut rec = Rec { taps, force };
        let p: Vec<f64> = patches.iter().map(|&v| bf16(f64::from(v))).collect();
        let raw = affine(&self.patch, Some(&self.patch_b), &p);
        let mut x = rec.stage("V.patch".into(), vd, rounded(&raw), Some(raw));
        let hd = vd / heads;
        let angles = angles(grid_h, grid_w, hd, vc.rope_theta);
        for (b, blk) in self.blocks.iter().enumerate() {
            let h_raw = cat(x.chunks(vd).map(|r| rms_norm_raw(r, &blk.norm1, EPS)));
            let h = rec.stage(format!("V{b}.norm1"), vd, rounded(&h_raw), Some(h_raw));
            let qkv_raw = affine(&blk.wqkv, Some(&blk.wqkv_b), &h);
            let qkv = rec.stage(format!("V{b}.qkv"), 3 * vd, rounded(&qkv_raw), Some(qkv_raw));
            let part = |k: usize| cat(qkv.chunks(3 * vd).map(|r| r[k * vd..(k + 1) * vd].to_vec()));
            let (q_raw, k_raw) = (rotate(&part(0), &angles, heads), rotate(&part(1), &angles, heads));
            let q = rec.stage(format!("V{b}.q"), vd, rounded(&q_raw), Some(q_raw));
            let k = rec.stage(format!("V{b}.k"), vd, rounded(&k_raw), Some(k_raw));
            let v = rec.stage(format!("V{b}.v"), vd, part(2), None);
            let a_raw = attend(&q, &k, &v, heads, hd);
            let a = rec.stage(format!("V{b}.attn"), vd, rounded(&a_raw), Some(a_raw));
            let o_raw = affine(&blk.wo, Some(&blk.wo_b), &a);
            let o = rec.stage(format!("V{b}.attn.o"), vd, rounded(&o_raw), Some(o_raw));
            let xa: Vec<f64> = x.iter().zip(&o).map(|(a, c)| a + c).collect();
            x = rec.stage(format!("V{b}.x_attn"), vd, rounded(&xa), Some(xa));
            let h_raw = cat(x.chunks(vd).map(|r| rms_norm_raw(r, &blk.norm2, EPS)));
            let h = rec.stage(format!("V{b}.norm2"), vd, rounded(&h_raw), Some(h_raw));
            let gu_raw = affine(&blk.w1, None, &h);
            let gu = rec.stage(format!("V{b}.w1"), 2 * vc.intermediate_size, rounded(&gu_raw), Some(gu_raw));
            let inter = vc.intermediate_size;
            let act_raw = cat(gu.chunks(2 * inter).map(|r| (0..inter).map(|i| bf16(silu(r[i])) * r[inter + i]).collect()));
            let act = rec.stage(format!("V{b}.mlp"), inter, rounded(&act_raw), Some(act_raw));
            let y_raw = affine(&blk.w2, None, &act);
            let y = rec.stage(format!("V{b}.w2"), vd, rounded(&y_raw), Some(y_raw));
            let xo: Vec<f64> = x.iter().zip(&y).map(|(a, c)| a + c).collect();
            x = rec.stage(format!("V{b}.out"), vd, rounded(&xo), Some(xo));
        }
        let xn_raw = cat(x.chunks(vd).map(|r| rms_norm_raw(r, &self.norm, EPS)));
        let xn = rec.stage("V.norm".into(), vd, rounded(&xn_raw), Some(xn_raw));
        let cells = unfold(&xn, grid_h, grid_w, vd, vc.downsample_ratio);
        let z_raw = affine(&self.a1, Some(&self.a1_b), &cells);
        let z = rec.stage("A.w1".into(), self.a1.out, rounded(&z_raw), Some(z_raw));
        let g_raw: Vec<f64> = z.iter().map(|&t| 0.5 * t * (1.0 + crate::kernels::lib::erf64(t * std::f64::consts::FRAC_1_SQRT_2))).collect();
        let g = rec.stage("A.gelu".into(), self.a1.out, rounded(&g_raw), Some(g_raw));
        let rows_raw = affine(&self.a2, Some(&self.a2_b), &g);
        Ok(rec.stage("A.rows".into(), self.a2.out, rounded(&rows_raw), Some(rows_raw)))
    }
}

/// Per patch, the head's half angles `[r f_0 .. r f_{q-1}, c f_0 .. c f_{q-1}]`, f_k = theta^(-2k / (hd / 2)).
fn angles(grid_h: usize, grid_w: usize, hd: usize, theta: f64) -> Vec<Vec<f64>> {
    let half = hd / 2;
    let freq: Vec<f64> = (0..half / 2).map(|k| theta.powf(-((2 * k) as f64) / half as f64)).collect();
    (0..grid_h * grid_w).map(|i| freq.iter().map(|f| (i / grid_w) as f64 * f).chain(freq.iter().map(|f| (i % grid_w) as f64 * f)).collect()).collect()
}

/// Split-half rotation of every head of every row by its patch's angles: `[x1 cos - x2 sin, x2 cos + x1 sin]`, unrounded.
fn rotate(x: &[f64], angles: &[Vec<f64>], heads: usize) -> Vec<f64> {
    let width = x.len() / angles.len();
    let (hd, half) = (width / heads, width / heads / 2);
    let mut y = x.to_vec();
    for (r, a) in angles.iter().enumerate() {
        for h in 0..heads {
            let base = r * width + h * hd;
            for i in 0..half {
                let (x1, x2, (s, c)) = (x[base + i], x[base + half + i], a[i].sin_cos());
                y[base + i] = x1 * c - x2 * s;
                y[base + half + i] = x2 * c + x1 * s;
            }
        }
    }
    y
}

/// Softmax attention of every row over every row, per head, scale hd^-1/2, unrounded.
fn attend(q: &[f64], k: &[f64], v: &[f64], heads: usize, hd: usize) -> Vec<f64> {
    let width = heads * hd;
    let n = q.len() / width;
    let scale = 1.0 / (hd as f64).sqrt();
    let mut out = vec![0.0; n * width];
    for i in 0..n {
        for h in 0..heads {
            let qi = &q[i * width + h * hd..i * width + (h + 1) * hd];
            let s: Vec<f64> = (0..n).map(|j| qi.iter().zip(&k[j * width + h * hd..j * width + (h + 1) * hd]).map(|(a, b)| a * b).sum::<f64>() * scale).collect();
            let m = s.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
            let p: Vec<f64> = s.iter().map(|&t| (t - m).exp()).collect();
            let den: f64 = p.iter().sum();
            for (j, pj) in p.iter().enumerate() {
                for c in 0..hd {
                    out[i * width + h * hd + c] += pj * v[j * width + h * hd + c] / den;
                }
            }
        }
    }
    out
}

/// torch's `F.unfold` of the zero-padded grid: per cell in raster order, entry `c r^2 + ky r + kx`.
fn unfold(x: &[f64], grid_h: usize, grid_w: usize, ch: usize, r: usize) -> Vec<f64> {
    let (cy, cx) = (grid_h.div_ceil(r), grid_w.div_ceil(r));
    let mut out = vec![0.0; cy * cx * ch * r * r];
    for cell in 0..cy * cx {
        for e in 0..ch * r * r {
            let (c, ky, kx) = (e / (r * r), e % (r * r) / r, e % r);
            let (row, col) = (cell / cx * r + ky, cell % cx * r + kx);
            if row < grid_h && col < grid_w {
                out[cell * ch * r * r + e] = x[(row * grid_w + col) * ch + c];
            }
        }
    }
    out
}
