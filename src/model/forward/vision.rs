//! The vision tower and aligner (spec 4): patch embedding, the ViT blocks (RMSNorm, 2D split-half RoPE, bidirectional attention, SwiGLU), the final norm, and the aligner's 3x3 cells through its GELU MLP into model rows.
use super::{tap, ForwardError, Model};
use crate::exec::{ExecError, Executor, Out};
use crate::model::config::VisionConfig;
use crate::model::taps::Taps;
use crate::numerics::round_bf16;

/// Vision RMSNorm epsilon (hard-coded in the reference, not from the config).
pub const VISION_EPS: f32 = 1e-6;

/// One image's patches as the tower takes them.
#[derive(Clone, Copy, Debug)]
pub struct ImagePatches<'a> {
    /// Patch rows of the ViT grid.
    pub grid_h: usize,
    /// Patch columns of the ViT grid.
    pub grid_w: usize,
    /// `[grid_h * grid_w, 3 * patch^2]` in raster order, each patch channel-major, normalized to [-1, 1].
    pub data: &'a [f32],
}

/// The tower's cos/sin rows `[grid_h * grid_w, head_dim]`: per patch (r, c), angles `[r f_0 .. r f_{q-1}, c f_0 .. c f_{q-1}]` with `f_k = theta^(-2k / (head_dim / 2))` and q = head_dim / 4, cos then sin, each from f64 rounded once.
pub fn vision_table(grid_h: usize, grid_w: usize, head_dim: usize, theta: f64) -> Vec<f32> {
    let half = head_dim / 2;
    let freq: Vec<f64> = (0..half / 2).map(|k| theta.powf(-((2 * k) as f64) / half as f64)).collect();
    let mut out = Vec::with_capacity(grid_h * grid_w * head_dim);
    for r in 0..grid_h {
        for c in 0..grid_w {
            let angles: Vec<f64> = freq.iter().map(|f| r as f64 * f).chain(freq.iter().map(|f| c as f64 * f)).collect();
            out.extend(angles.iter().map(|a| crate::numerics::edge::flush(a.cos() as f32)));
            out.extend(angles.iter().map(|a| crate::numerics::edge::flush(a.sin() as f32)));
        }
    }
    out
}

/// Column blocks of `x` `[S, n * w]` as `n` tensors `[S, w]` (a reshape to `[S * n, w]` and one gather per block: exact copies).
fn split_cols<E: Executor>(ex: &mut E, x: &E::Tensor, n: usize) -> Result<Vec<E::Tensor>, ExecError> {
    let (s, width) = ex.dims(x);
    if n == 0 || !width.is_multiple_of(n) {
        return Err(ExecError::Shape { op: "split_cols", problem: format!("{width} columns into {n} blocks") });
    }
    let stacked = ex.reshape(x, s * n, width / n)?;
    (0..n)
        .map(|b| {
            let idx = ex.upload_index(&(0..s).map(|r| (r * n + b) as u32).collect::<Vec<_>>())?;
            ex.gather_rows(&stacked, &idx)
        })
        .collect()
}

/// The model's vision config, or an input error when the model has no tower.
pub fn vision_config<'m>(m: &'m Model) -> Result<&'m VisionConfig, ForwardError> {
    m.cfg.vision.as_ref().filter(|v| v.num_hidden_layers > 0).ok_or_else(|| ForwardError::Input("this model has no vision tower".into()))
}

/// Runs one image through the tower and the aligner: the image's rows `[llm_h * llm_w, hidden]` (bf16 values) in reading order.
pub fn encode_image<E: Executor>(ex: &mut E, m: &Model, img: &ImagePatches<'_>, taps: &mut Taps<f32>) -> Result<E::Tensor, ForwardError> {
    let vc = vision_config(m)?;
    let n = img.grid_h * img.grid_w;
    let patch = 3 * vc.patch_size * vc.patch_size;
    if n == 0 || img.data.len() != n * patch {
        return Err(ForwardError::Input(format!("{} patch values for a {} x {} grid of {patch}-value patches", img.data.len(), img.grid_h, img.grid_w)));
    }
    let (heads, vd) = (vc.num_attention_heads, vc.hidden_size);
    let hd = vd / heads;
    let data: Vec<f32> = img.data.iter().map(|&v| round_bf16(v)).collect();
    let p = ex.upload(n, patch, &data)?;
    let cs = ex.upload(n, hd, &vision_table(img.grid_h, img.grid_w, hd, vc.rope_theta))?;
    let e = ex.linear(&p, "vision.patch_embed.proj", Out::F32)?;
    let mut x = ex.bias_add(&e, "vision.patch_embed.proj", Out::Bf16)?;
    tap(ex, taps, "V.patch", &x)?;
    for b in 0..vc.num_hidden_layers {
        let pre = format!("vision.blocks.{b}");
        let h = ex.rmsnorm(&x, &format!("{pre}.norm1"), VISION_EPS, Out::Bf16)?;
        tap(ex, taps, format!("V{b}.norm1"), &h)?;
        let qkv = ex.linear(&h, &format!("{pre}.attn.wqkv"), Out::F32)?;
        let qkv = ex.bias_add(&qkv, &format!("{pre}.attn.wqkv"), Out::Bf16)?;
        tap(ex, taps, format!("V{b}.qkv"), &qkv)?;
        let parts = split_cols(ex, &qkv, 3)?;
        let q = ex.rope_halves(&parts[0], &cs, heads)?;
        let k = ex.rope_halves(&parts[1], &cs, heads)?;
        tap(ex, taps, format!("V{b}.q"), &q)?;
        tap(ex, taps, format!("V{b}.k"), &k)?;
        tap(ex, taps, format!("V{b}.v"), &parts[2])?;
        let a = ex.vit_attention(&q, &k, &parts[2], heads)?;
        tap(ex, taps, format!("V{b}.attn"), &a)?;
        let o = ex.linear(&a, &format!("{pre}.attn.wo"), Out::F32)?;
        let o = ex.bias_add(&o, &format!("{pre}.attn.wo"), Out::Bf16)?;
        tap(ex, taps, format!("V{b}.attn.o"), &o)?;
        x = ex.add(&x, &o, Out::Bf16)?;
        tap(ex, taps, format!("V{b}.x_attn"), &x)?;
        let h = ex.rmsnorm(&x, &format!("{pre}.norm2"), VISION_EPS, Out::Bf16)?;
        tap(ex, taps, format!("V{b}.norm2"), &h)?;
        let gu = ex.linear(&h, &format!("{pre}.mlp.w1"), Out::Bf16)?;
        tap(ex, taps, format!("V{b}.w1"), &gu)?;
        let gu = split_cols(ex, &gu, 2)?;
        let act = ex.swiglu(&gu[0], &gu[1], None, f32::MAX)?;
        tap(ex, taps, format!("V{b}.mlp"), &act)?;
        let y = ex.linear(&act, &format!("{pre}.mlp.w2"), Out::Bf16)?;
        tap(ex, taps, format!("V{b}.w2"), &y)?;
        x = ex.add(&x, &y, Out::Bf16)?;
        tap(ex, taps, format!("V{b}.out"), &x)?;
    }
    let x = ex.rmsnorm(&x, "vision.norm", VISION_EPS, Out::Bf16)?;
    tap(ex, taps, "V.norm", &x)?;
    let cells = ex.unfold_cells(&x, img.grid_h, img.grid_w, vc.downsample_ratio)?;
    let z = ex.linear(&cells, "aligner.w1", Out::F32)?;
    let z = ex.bias_add(&z, "aligner.w1", Out::Bf16)?;
    tap(ex, taps, "A.w1", &z)?;
    let z = ex.gelu(&z, Out::Bf16)?;
    tap(ex, taps, "A.gelu", &z)?;
    let z = ex.linear(&z, "aligner.w2", Out::F32)?;
    let rows = ex.bias_add(&z, "aligner.w2", Out::Bf16)?;
    tap(ex, taps, "A.rows", &rows)?;
    Ok(rows)
}

/// Positions of an image span of `llm_h x llm_w` cells: start, each row of cells and its newline, end.
pub fn span_len(llm_h: usize, llm_w: usize) -> usize {
    llm_h * (llm_w + 1) + 2
}

/// A top-level bf16 vector of the checkpoint (`image_start`, `image_newline`, `image_end`) as a `[1, D]` tensor.
fn delimiter<E: Executor>(ex: &mut E, m: &Model, name: &str) -> Result<E::Tensor, ForwardError> {
    let t = m.ckpt.verified(name).map_err(|e| ForwardError::Input(e.to_string()))?;
    let v = t.to_f32().ok_or_else(|| ForwardError::Input(format!("tensor `{name}` is not bf16 or f32")))?;
    if v.len() != m.cfg.hidden_size {
        return Err(ForwardError::Input(format!("tensor `{name}` has {} values, the model width is {}", v.len(), m.cfg.hidden_size)));
    }
    Ok(ex.upload(1, v.len(), &v)?)
}

/// The span's embeddings `[span_len, D]`: `image_start`, each row of the image's cell rows followed by `image_newline`, `image_end` (copies, exact).
pub fn span_embeds<E: Executor>(ex: &mut E, m: &Model, rows: &E::Tensor, llm_h: usize, llm_w: usize) -> Result<E::Tensor, ForwardError> {
    let (n, d) = ex.dims(rows);
    if n != llm_h * llm_w || d != m.cfg.hidden_size {
        return Err(ForwardError::Input(format!("{n} image rows of {d} for a {llm_h} x {llm_w} grid")));
    }
    let mut stacked = ex.copy(rows)?;
    for name in ["image_start", "image_newline", "image_end"] {
        let v = delimiter(ex, m, name)?;
        ex.append_rows(&mut stacked, &v)?;
    }
    let (start, newline, end) = (n as u32, n as u32 + 1, n as u32 + 2);
    let mut idx = vec![start];
    for r in 0..llm_h {
        idx.extend((r * llm_w..(r + 1) * llm_w).map(|i| i as u32));
        idx.push(newline);
    }
    idx.push(end);
    let idx = ex.upload_index(&idx)?;
    Ok(ex.gather_rows(&stacked, &idx)?)
}

/// The round's embeddings with every image piece's rows replaced by its span's rows (one gather over the token embeddings and the pieces; `e` itself when no sequence has images).
pub(crate) fn with_images<E: Executor>(ex: &mut E, seqs: &[super::SeqInput<'_, E::Tensor>], ctx: &[super::batch::SeqCtx<E::Tensor>], e: E::Tensor) -> Result<E::Tensor, ForwardError> {
    if seqs.iter().all(|q| q.images.is_empty()) {
        return Ok(e);
    }
    let s = ex.dims(&e).0;
    let mut idx: Vec<u32> = (0..s as u32).collect();
    let mut stacked = ex.copy(&e)?;
    for (q, c) in seqs.iter().zip(ctx) {
        for p in q.images {
            let base = ex.dims(&stacked).0;
            let rows = ex.slice_rows(p.embeds, p.from, p.len)?;
            ex.append_rows(&mut stacked, &rows)?;
            for i in 0..p.len {
                idx[c.row + p.at + i] = (base + i) as u32;
            }
        }
    }
    let idx = ex.upload_index(&idx)?;
    Ok(ex.gather_rows(&stacked, &idx)?)
}
