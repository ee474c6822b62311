//! The DeepSeek-V4.1 forward written once over the Executor trait: embed, engram, mHC sites, attention, MoE, final collapse, norm and head.
mod attn;
mod batch;
pub mod dspark;
mod engram;
mod ffn;
mod model;
pub mod vision;

pub use batch::{ImagePiece, SeqInput};
pub use dspark::{draft_batch, Draft, DraftInput};
pub use ffn::{routed_experts, EXPERT_MATRICES};
pub use model::Model;

use crate::model::{LayerState, SeqState};
use batch::{check_inputs, concat, part, tap_parts, Part, SeqCtx};
use crate::exec::{ExecError, Executor, Out};
use crate::model::taps::Taps;
use crate::model::RopeTable;
use crate::text::{EngramHashError, EngramMapError};

/// Why a forward call failed.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// An op failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The engram hash failed.
    #[error(transparent)]
    Engram(#[from] EngramHashError),
    /// The engram token map does not fit the config.
    #[error(transparent)]
    EngramMap(#[from] EngramMapError),
    /// The call's input is unusable.
    #[error("{0}")]
    Input(String),
}

/// Which rows get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitRows {
    /// Every token of the call.
    All,
    /// Only the call's last token.
    Last,
}

/// Per-round values shared by the layers: each sequence's place and publications, and the RoPE rows of every row.
pub(crate) struct CallCtx<T> {
    /// The round's sequences in batch order.
    pub seqs: Vec<SeqCtx<T>>,
    /// Main-table cos/sin rows of every row's position.
    pub cs_main: T,
    /// Compress-table cos/sin rows of every row's position.
    pub cs_compress: T,
}

impl<T> CallCtx<T> {
    /// The cos/sin rows of `table`.
    pub fn cs(&self, table: RopeTable) -> &T {
        match table {
            RopeTable::Main => &self.cs_main,
            RopeTable::Compress => &self.cs_compress,
        }
    }
}

/// Records `t` as tap `name` when taps are on (the only readback the forward does).
pub(crate) fn tap<E: Executor>(ex: &mut E, taps: &mut Taps<f32>, name: impl Into<String>, t: &E::Tensor) -> Result<(), ExecError> {
    tap_parts(ex, taps, name, &[t])
}

/// Runs one chunk of one sequence's tokens at positions `state.pos..`, updating the state; returns the logits `[rows, vocab]` (f32).
pub fn forward<E: Executor>(ex: &mut E, m: &Model, st: &mut SeqState<E::Tensor>, tokens: &[u32], rows: LogitRows, taps: &mut Taps<f32>) -> Result<E::Tensor, ForwardError> {
    let mut logits = forward_batch(ex, m, &mut [SeqInput { state: st, tokens, rows, images: &[] }], taps)?;
    logits.pop().ok_or_else(|| ForwardError::Input("the round returned no logits".into()))
}

/// Runs one round over several sequences: row-wise stages once over all rows (sequences in batch order), per-sequence stages on each sequence's rows; returns each sequence's logits `[rows, vocab]` (f32). Taps cover all rows of the round in batch order.
pub fn forward_batch<E: Executor>(ex: &mut E, m: &Model, seqs: &mut [SeqInput<'_, E::Tensor>], taps: &mut Taps<f32>) -> Result<Vec<E::Tensor>, ForwardError> {
    let cfg = &m.cfg;
    check_inputs(cfg, seqs)?;
    let mut hash_ids = Vec::new();
    if let Some(hasher) = &m.hasher {
        for q in seqs.iter_mut() {
            let (start, s) = (q.state.pos, q.tokens.len());
            q.state.history.truncate(start);
            q.state.history.extend(&m.token_map, q.tokens, Some(&q.image_mask()))?;
            hash_ids.extend(hasher.hash(&q.state.history, start, s)?);
        }
    }
    let (mut seq_ctx, mut positions, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
    for q in seqs.iter() {
        let (start, len) = (q.state.pos, q.tokens.len());
        seq_ctx.push(SeqCtx { start, len, row: tokens.len(), topk: (0..cfg.num_hidden_layers).map(|_| None).collect(), candidates: None, journal: q.state.journal });
        positions.extend(start..start + len);
        tokens.extend_from_slice(q.tokens);
    }
    let (rd, s) = (cfg.qk_rope_head_dim, tokens.len());
    let mut ctx = CallCtx {
        seqs: seq_ctx,
        cs_main: ex.upload(s, rd, &m.rope_rows(RopeTable::Main, positions.iter().copied()))?,
        cs_compress: ex.upload(s, rd, &m.rope_rows(RopeTable::Compress, positions.iter().copied()))?,
    };
    let hc = cfg.hc_mult;
    let image: Vec<bool> = seqs.iter().flat_map(|q| q.image_mask()).collect();
    let e = ex.embed("embed", &tokens)?;
    let e = vision::with_images(ex, &*seqs, &ctx.seqs, e)?;
    tap(ex, taps, "embed", &e)?;
    let mut h = ex.hc_repeat(&e, hc)?;
    let mix_dim = m.hc().mix_dim();
    let one_hot: Vec<f32> = (0..s * mix_dim).map(|i| if i % mix_dim == 0 { 1.0 } else { 0.0 }).collect();
    let mut pre = ex.upload(s, mix_dim, &one_hot)?;
    let feeding = cfg.has_drafts() && seqs.iter().any(|q| q.state.drafts.is_some());
    let mean = if feeding { Some(dspark::mean_mix(ex, m, s)?) } else { None };
    let mut feats: Vec<Option<E::Tensor>> = cfg.dspark_target_layer_ids.iter().map(|_| None).collect();
    let mut layers: Vec<&mut [LayerState<E::Tensor>]> = seqs.iter_mut().map(|q| q.state.layers.as_mut_slice()).collect();
    for l in 0..cfg.num_hidden_layers {
        let plan = &m.plan[l];
        let p = plan.prefix();
        if let Some(li) = plan.engram {
            h = engram::engram(ex, m, &p, li, &hash_ids, &image, &h)?;
            tap(ex, taps, format!("L{l}.engram"), &h)?;
        }
        if let (Some(mean), Some(t)) = (&mean, plan.dspark_target) {
            feats[t] = Some(ex.hc_collapse(&h, mean, hc)?);
        }
        let mix_a = ex.hc_mixes(&h, &m.hc_site(&p, "attn"), &m.hc())?;
        let x = ex.hc_collapse(&h, &pre, hc)?;
        let x = ex.rmsnorm(&x, &format!("{p}.attn_norm"), m.eps(), Out::Bf16)?;
        tap(ex, taps, format!("L{l}.attn.x"), &x)?;
        let a = attn::attention(ex, m, &mut layers, l, &x, &mut ctx, taps)?;
        h = ex.hc_expand(&a, &h, &mix_a, hc)?;
        tap(ex, taps, format!("L{l}.h_attn"), &h)?;
        let mix_f = ex.hc_mixes(&h, &m.hc_site(&p, "ffn"), &m.hc())?;
        let x = ex.hc_collapse(&h, &mix_a, hc)?;
        let x = ex.rmsnorm(&x, &format!("{p}.ffn_norm"), m.eps(), Out::Bf16)?;
        tap(ex, taps, format!("L{l}.ffn.x"), &x)?;
        let y = ffn::moe(ex, m, l, &format!("L{l}"), &x, &image, taps)?;
        h = ex.hc_expand(&y, &h, &mix_f, hc)?;
        tap(ex, taps, format!("L{l}.h_ffn"), &h)?;
        pre = mix_f;
    }
    if feeding {
        let feats = feats.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| ForwardError::Input("a DSpark target layer is outside the model".into()))?;
        let rows: Vec<(usize, usize, usize)> = ctx.seqs.iter().map(|c| (c.row, c.len, c.start)).collect();
        let mut states: Vec<&mut SeqState<E::Tensor>> = seqs.iter_mut().map(|q| &mut *q.state).collect();
        dspark::feed_rings(ex, m, &feats, &mut states, &rows, &ctx.cs_main, taps)?;
    }
    let x = ex.hc_collapse(&h, &pre, hc)?;
    let x = ex.rmsnorm(&x, "norm", m.eps(), Out::Bf16)?;
    tap(ex, taps, "final.x", &x)?;
    let picks: Vec<(usize, usize)> = seqs.iter().zip(&ctx.seqs).map(|(q, c)| match q.rows {
        LogitRows::All => (c.row, c.len),
        LogitRows::Last => (c.row + c.len - 1, 1),
    }).collect();
    let mut parts = Vec::new();
    for &(row, len) in &picks {
        match part(ex, &x, row, len)? {
            Part::Whole(_) => {}
            Part::Rows(t) => parts.push(t),
        }
    }
    let x = if parts.is_empty() { x } else { concat(ex, parts, cfg.hidden_size)? };
    let logits = ex.linear(&x, "head", Out::F32)?;
    tap(ex, taps, "logits", &logits)?;
    let mut out = Vec::new();
    if picks.len() == 1 {
        out.push(logits);
    } else {
        let mut row = 0;
        for &(_, len) in &picks {
            out.push(ex.slice_rows(&logits, row, len)?);
            row += len;
        }
    }
    for q in seqs.iter_mut() {
        q.state.pos += q.tokens.len();
    }
    Ok(out)
}
