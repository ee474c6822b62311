//! The DSpark draft head (spec 2.8): the target features fed into the stages' rings on every position, and a draft block through the three stages, the head, the Markov head and the confidence head.
use super::batch::{concat, part};
use super::{ffn, tap, ForwardError, Model};
use crate::exec::{AttnInputs, ExecError, Executor, Out, Qat};
use crate::model::taps::Taps;
use crate::model::{RopeTable, SeqState};

/// One sequence's draft request: its state (at the position after its last committed token) and the token sampled there.
pub struct DraftInput<'s, T> {
    /// The sequence's state; its rings must hold the positions the block attends to.
    pub state: &'s SeqState<T>,
    /// The token the target sampled at `state.pos` (the block's first entry).
    pub first: u32,
}

/// A draft block's proposals.
#[derive(Clone, Debug, PartialEq)]
pub struct Draft {
    /// Tokens proposed for positions `pos + 1..`, in order.
    pub tokens: Vec<u32>,
    /// Each proposal's acceptance logit (the confidence head).
    pub confidence: Vec<f32>,
}

/// Greatest common divisor.
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The columns of `parts` (same rows) side by side `[S, sum of widths]`: each part viewed as rows of the widths' common divisor, stacked, gathered in row order (a copy, exact).
pub(crate) fn concat_cols<E: Executor>(ex: &mut E, parts: &[&E::Tensor]) -> Result<E::Tensor, ExecError> {
    let dims: Vec<(usize, usize)> = parts.iter().map(|t| ex.dims(t)).collect();
    let s = dims.first().map_or(0, |d| d.0);
    if dims.iter().any(|d| d.0 != s || d.1 == 0) {
        return Err(ExecError::Shape { op: "concat_cols", problem: format!("parts {dims:?} differ in rows or are empty") });
    }
    let g = dims.iter().fold(0, |a, d| gcd(a, d.1));
    let width: usize = dims.iter().map(|d| d.1).sum();
    let mut stacked = ex.zeros(0, g)?;
    let mut offsets = Vec::with_capacity(parts.len());
    for (t, d) in parts.iter().zip(&dims) {
        offsets.push(ex.dims(&stacked).0);
        let v = ex.reshape(t, d.0 * d.1 / g, g)?;
        ex.append_rows(&mut stacked, &v)?;
    }
    let mut idx = Vec::with_capacity(s * width / g);
    for r in 0..s {
        for (off, d) in offsets.iter().zip(&dims) {
            let per = d.1 / g;
            idx.extend((0..per).map(|c| (off + r * per + c) as u32));
        }
    }
    let idx = ex.upload_index(&idx)?;
    let rows = ex.gather_rows(&stacked, &idx)?;
    ex.reshape(&rows, s, width)
}

/// The collapse mix `[S, hc]` of 1/hc each that takes the mean over the streams of `S` rows.
pub(super) fn mean_mix<E: Executor>(ex: &mut E, m: &Model, s: usize) -> Result<E::Tensor, ExecError> {
    let hc = m.cfg.hc_mult;
    ex.upload(s, hc, &vec![1.0 / hc as f32; s * hc])
}

/// Feeds every row's main_x into each stage's ring for the sequences that carry rings: `main_x = main_norm(main_proj(features))`, `kv = fp8(rope(kv_norm(wkv main_x)))` at the row's position.
pub(super) fn feed_rings<E: Executor>(ex: &mut E, m: &Model, feats: &[E::Tensor], states: &mut [&mut SeqState<E::Tensor>], rows: &[(usize, usize, usize)], cs: &E::Tensor, taps: &mut Taps<f32>) -> Result<(), ForwardError> {
    let eps = m.eps();
    let refs: Vec<&E::Tensor> = feats.iter().collect();
    let hidden = concat_cols(ex, &refs)?;
    tap(ex, taps, "D.hidden", &hidden)?;
    let x = ex.linear(&hidden, "mtp.0.main_proj", Out::Bf16)?;
    let x = ex.rmsnorm(&x, "mtp.0.main_norm", eps, Out::Bf16)?;
    tap(ex, taps, "D.main_x", &x)?;
    for s in 0..m.cfg.num_nextn_predict_layers {
        let a = format!("mtp.{s}.attn");
        let kv = ex.linear(&x, &format!("{a}.wkv"), Out::Bf16)?;
        let kv = ex.rmsnorm(&kv, &format!("{a}.kv_norm"), eps, Out::Bf16)?;
        let kv = ex.rope(&kv, cs, 1, false)?;
        let kv = ex.qat(&kv, Qat::Fp8)?;
        tap(ex, taps, format!("S{s}.ring_kv"), &kv)?;
        for (st, &(row, len, start)) in states.iter_mut().zip(rows) {
            let Some(d) = st.drafts.as_mut() else { continue };
            let ki = part(ex, &kv, row, len)?;
            let ring = d.rings.get_mut(s).ok_or_else(|| ForwardError::Input(format!("the state has no ring for stage {s}")))?;
            ex.ring_write(ring, ki.get(), start)?;
        }
    }
    Ok(())
}

/// Drafts a block for each input in one pass: block `[first, noise...]` at positions `pos..pos + block`, the stages (mHC, attention over the ring and the whole block with the sink, MoE), collapse, norm, head; then the Markov head picks each proposal in turn and the confidence head scores it.
pub fn draft_batch<E: Executor>(ex: &mut E, m: &Model, inputs: &[DraftInput<'_, E::Tensor>], taps: &mut Taps<f32>) -> Result<Vec<Draft>, ForwardError> {
    let cfg = &m.cfg;
    let (b, n, stages) = (cfg.dspark_block_size, inputs.len(), cfg.num_nextn_predict_layers);
    if b == 0 || stages == 0 || n == 0 {
        return Err(ForwardError::Input("the model has no draft head, or nothing to draft".into()));
    }
    for q in inputs {
        if !q.state.can_draft(cfg.sliding_window) || q.state.pos + b > cfg.max_position_embeddings || q.first as usize >= cfg.vocab_size {
            return Err(ForwardError::Input(format!("a draft at position {} needs rings fed over the window before it, room for {b} positions and a token in the vocabulary", q.state.pos)));
        }
    }
    let (eps, hc, heads, hd) = (m.eps(), cfg.hc_mult, cfg.num_attention_heads, cfg.head_dim);
    let noise = cfg.dspark_noise_token_id as u32;
    let ids: Vec<u32> = inputs.iter().flat_map(|q| std::iter::once(q.first).chain(std::iter::repeat_n(noise, b - 1))).collect();
    let positions: Vec<usize> = inputs.iter().flat_map(|q| q.state.pos..q.state.pos + b).collect();
    let cs = ex.upload(n * b, cfg.qk_rope_head_dim, &m.rope_rows(RopeTable::Main, positions.into_iter()))?;
    let e = ex.embed("embed", &ids)?;
    let mut h = ex.hc_repeat(&e, hc)?;
    let mix_dim = m.hc().mix_dim();
    let one_hot: Vec<f32> = (0..n * b * mix_dim).map(|i| if i % mix_dim == 0 { 1.0 } else { 0.0 }).collect();
    let mut pre = ex.upload(n * b, mix_dim, &one_hot)?;
    let text_only = vec![false; n * b];
    let scale = (1.0 / (hd as f64).sqrt()) as f32;
    for s in 0..stages {
        let l = cfg.num_hidden_layers + s;
        let (p, name) = (m.plan[l].prefix(), format!("S{s}"));
        let mix_a = ex.hc_mixes(&h, &m.hc_site(&p, "attn"), &m.hc())?;
        let x = ex.hc_collapse(&h, &pre, hc)?;
        let x = ex.rmsnorm(&x, &format!("{p}.attn_norm"), eps, Out::Bf16)?;
        tap(ex, taps, format!("{name}.attn.x"), &x)?;
        let a = format!("{p}.attn");
        let (qr, kv) = ex.normed_linears(&x, [&format!("{a}.wq_a"), &format!("{a}.q_norm")], [&format!("{a}.wkv"), &format!("{a}.kv_norm")], eps)?;
        let q = ex.linear(&qr, &format!("{a}.wq_b"), Out::Bf16)?;
        let q = ex.rope(&q, &cs, heads, false)?;
        tap(ex, taps, format!("{name}.attn.q"), &q)?;
        let kv = ex.rope(&kv, &cs, 1, false)?;
        let kv = ex.qat(&kv, Qat::Fp8)?;
        tap(ex, taps, format!("{name}.attn.kv"), &kv)?;
        let sink = format!("{a}.attn_sink");
        let mut outs = Vec::with_capacity(n);
        for (i, q_in) in inputs.iter().enumerate() {
            let ring = q_in.state.drafts.as_ref().and_then(|d| d.rings.get(s)).ok_or_else(|| ForwardError::Input(format!("the state has no ring for stage {s}")))?;
            let (qi, kvi) = (part(ex, &q, i * b, b)?, part(ex, &kv, i * b, b)?);
            let inputs = AttnInputs { kv: kvi.get(), ring, compressed: None, sink: &sink, start: q_in.state.pos, window: cfg.sliding_window, scale, block: true };
            outs.push(ex.sparse_attention(qi.get(), &inputs)?);
        }
        let o = concat(ex, outs, heads * hd)?;
        let o = ex.rope(&o, &cs, heads, true)?;
        tap(ex, taps, format!("{name}.attn.o"), &o)?;
        let z = ex.block_linear(&o, &format!("{a}.wo_a"), cfg.o_groups, cfg.o_lora_rank)?;
        let out = ex.linear(&z, &format!("{a}.wo_b"), Out::Bf16)?;
        tap(ex, taps, format!("{name}.attn.out"), &out)?;
        h = ex.hc_expand(&out, &h, &mix_a, hc)?;
        tap(ex, taps, format!("{name}.h_attn"), &h)?;
        let mix_f = ex.hc_mixes(&h, &m.hc_site(&p, "ffn"), &m.hc())?;
        let x = ex.hc_collapse(&h, &mix_a, hc)?;
        let x = ex.rmsnorm(&x, &format!("{p}.ffn_norm"), eps, Out::Bf16)?;
        tap(ex, taps, format!("{name}.ffn.x"), &x)?;
        let y = ffn::moe(ex, m, l, &name, &x, &text_only, taps)?;
        h = ex.hc_expand(&y, &h, &mix_f, hc)?;
        tap(ex, taps, format!("{name}.h_ffn"), &h)?;
        pre = mix_f;
    }
    let last = format!("mtp.{}", stages - 1);
    let xc = ex.hc_collapse(&h, &pre, hc)?;
    tap(ex, taps, "D.x", &xc)?;
    let xn = ex.rmsnorm(&xc, &format!("{last}.norm"), eps, Out::Bf16)?;
    tap(ex, taps, "D.x_norm", &xn)?;
    let head = ex.linear(&xn, "head", Out::F32)?;
    tap(ex, taps, "D.head", &head)?;
    markov(ex, m, inputs, &head, &xc, &last, taps)
}

/// The Markov head, one proposal at a time over all blocks (`prev` starts at each block's first token), then the confidence head.
fn markov<E: Executor>(ex: &mut E, m: &Model, inputs: &[DraftInput<'_, E::Tensor>], head: &E::Tensor, xc: &E::Tensor, last: &str, taps: &mut Taps<f32>) -> Result<Vec<Draft>, ForwardError> {
    let (b, n, v) = (m.cfg.dspark_block_size, inputs.len(), m.cfg.vocab_size);
    let mut prev: Vec<u32> = inputs.iter().map(|q| q.first).collect();
    let mut tokens = vec![Vec::with_capacity(b); n];
    let (mut embeds, mut logits) = (Vec::with_capacity(b), Vec::with_capacity(b));
    for i in 0..b {
        let idx: Vec<u32> = (0..n).map(|j| (j * b + i) as u32).collect();
        let idx = ex.upload_index(&idx)?;
        let rows = ex.gather_rows(head, &idx)?;
        let e = ex.embed(&format!("{last}.markov_head.embed"), &prev)?;
        let bias = ex.linear(&e, &format!("{last}.markov_head.head"), Out::F32)?;
        let li = ex.add(&rows, &bias, Out::F32)?;
        let pick = ex.index_topk(&li, &vec![v; n], 1)?;
        let pick = ex.read(&pick)?;
        for (j, &t) in pick.iter().enumerate() {
            let t = if t >= 0.0 && (t as usize) < v { t as u32 } else { 0 };
            tokens[j].push(t);
            prev[j] = t;
        }
        embeds.push(e);
        logits.push(li);
    }
    // the step-major rows back in block order: row (j, i) is step i's row j
    let order: Vec<u32> = (0..n).flat_map(|j| (0..b).map(move |i| (i * n + j) as u32)).collect();
    let order = ex.upload_index(&order)?;
    let rank = m.cfg.dspark_markov_rank;
    let e_steps = concat(ex, embeds, rank)?;
    let e_all = ex.gather_rows(&e_steps, &order)?;
    tap(ex, taps, "D.markov_e", &e_all)?;
    if taps.enabled {
        let l_steps = concat(ex, logits, v)?;
        let l_all = ex.gather_rows(&l_steps, &order)?;
        tap(ex, taps, "D.logits", &l_all)?;
        let t: Vec<f32> = tokens.iter().flatten().map(|&t| t as f32).collect();
        taps.record("D.tokens", n * b, 1, &t);
    }
    let joined = concat_cols(ex, &[xc, &e_all])?;
    let c = ex.linear(&joined, &format!("{last}.confidence_head.proj"), Out::F32)?;
    tap(ex, taps, "D.confidence", &c)?;
    let c = ex.read(&c)?;
    Ok(tokens.into_iter().enumerate().map(|(j, tokens)| Draft { tokens, confidence: c[j * b..(j + 1) * b].to_vec() }).collect())
}
