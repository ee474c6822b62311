//! The DeepSeek-V4.1 forward written once over the Executor trait: embed, engram, mHC sites, attention, MoE, final collapse, norm and head.
#[path = "forward_attn.rs"]
mod attn;
#[path = "forward_engram.rs"]
mod engram;
#[path = "forward_ffn.rs"]
mod ffn;
#[path = "forward_model.rs"]
mod setup;

pub use setup::Model;

use crate::engine::SeqState;
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

/// Per-call values shared by the layers: positions, RoPE rows, published top-k and candidates.
pub(crate) struct CallCtx<T> {
    /// Absolute position of the call's first token.
    pub start: usize,
    /// Tokens in the call.
    pub len: usize,
    /// Main-table cos/sin rows of the call's positions.
    pub cs_main: T,
    /// Compress-table cos/sin rows of the call's positions.
    pub cs_compress: T,
    /// Top-k published by each index source this call.
    pub topk: Vec<Option<T>>,
    /// Candidate mask published by the candidate source this call.
    pub candidates: Option<T>,
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
    if taps.enabled {
        let (r, c) = ex.dims(t);
        let data = ex.read(t)?;
        taps.record(name, r, c, &data);
    }
    Ok(())
}

/// Runs one chunk of one sequence's tokens at positions `state.pos..`, updating the state; returns the logits `[rows, vocab]` (f32).
pub fn forward<E: Executor>(ex: &mut E, m: &Model, st: &mut SeqState<E::Tensor>, tokens: &[u32], rows: LogitRows, taps: &mut Taps<f32>) -> Result<E::Tensor, ForwardError> {
    let cfg = &m.cfg;
    let (start, s) = (st.pos, tokens.len());
    if s == 0 {
        return Err(ForwardError::Input("a forward call needs at least one token".into()));
    }
    if let Some(bad) = tokens.iter().find(|&&t| t as usize >= cfg.vocab_size) {
        return Err(ForwardError::Input(format!("token id {bad} is outside the vocabulary of {}", cfg.vocab_size)));
    }
    if start + s > cfg.max_position_embeddings {
        return Err(ForwardError::Input(format!("positions up to {} exceed max_position_embeddings {}", start + s, cfg.max_position_embeddings)));
    }
    if st.layers.len() != cfg.num_hidden_layers {
        return Err(ForwardError::Input(format!("the state has {} layers, the model {}", st.layers.len(), cfg.num_hidden_layers)));
    }
    let hash_ids = match &m.hasher {
        Some(hasher) => {
            st.history.truncate(start);
            st.history.extend(&m.token_map, tokens, None)?;
            hasher.hash(&st.history, start, s)?
        }
        None => Vec::new(),
    };
    let rd = cfg.qk_rope_head_dim;
    let mut ctx = CallCtx {
        start,
        len: s,
        cs_main: ex.upload(s, rd, &m.rope_rows(RopeTable::Main, start..start + s))?,
        cs_compress: ex.upload(s, rd, &m.rope_rows(RopeTable::Compress, start..start + s))?,
        topk: (0..cfg.num_hidden_layers).map(|_| None).collect(),
        candidates: None,
    };
    let hc = cfg.hc_mult;
    let text_only = vec![false; s];
    let e = ex.embed("embed", tokens)?;
    tap(ex, taps, "embed", &e)?;
    let mut h = ex.hc_repeat(&e, hc)?;
    let mix_dim = m.hc().mix_dim();
    let one_hot: Vec<f32> = (0..s * mix_dim).map(|i| if i % mix_dim == 0 { 1.0 } else { 0.0 }).collect();
    let mut pre = ex.upload(s, mix_dim, &one_hot)?;
    for l in 0..cfg.num_hidden_layers {
        let plan = &m.plan[l];
        let p = plan.prefix();
        if let Some(li) = plan.engram {
            h = engram::engram(ex, m, &p, li, &hash_ids, s, &h)?;
            tap(ex, taps, format!("L{l}.engram"), &h)?;
        }
        let mix_a = ex.hc_mixes(&h, &m.hc_site(&p, "attn"), &m.hc())?;
        let x = ex.hc_collapse(&h, &pre, hc)?;
        let x = ex.rmsnorm(&x, &format!("{p}.attn_norm"), m.eps(), Out::Bf16)?;
        tap(ex, taps, format!("L{l}.attn.x"), &x)?;
        let a = attn::attention(ex, m, &mut st.layers, l, &x, &mut ctx, taps)?;
        h = ex.hc_expand(&a, &h, &mix_a, hc)?;
        tap(ex, taps, format!("L{l}.h_attn"), &h)?;
        let mix_f = ex.hc_mixes(&h, &m.hc_site(&p, "ffn"), &m.hc())?;
        let x = ex.hc_collapse(&h, &mix_a, hc)?;
        let x = ex.rmsnorm(&x, &format!("{p}.ffn_norm"), m.eps(), Out::Bf16)?;
        tap(ex, taps, format!("L{l}.ffn.x"), &x)?;
        let y = ffn::moe(ex, m, l, &x, &text_only, taps)?;
        h = ex.hc_expand(&y, &h, &mix_f, hc)?;
        tap(ex, taps, format!("L{l}.h_ffn"), &h)?;
        pre = mix_f;
    }
    let x = ex.hc_collapse(&h, &pre, hc)?;
    let x = ex.rmsnorm(&x, "norm", m.eps(), Out::Bf16)?;
    tap(ex, taps, "final.x", &x)?;
    let x = match rows {
        LogitRows::All => x,
        LogitRows::Last => ex.slice_rows(&x, s - 1, 1)?,
    };
    let logits = ex.linear(&x, "head", Out::F32)?;
    tap(ex, taps, "logits", &logits)?;
    st.pos = start + s;
    Ok(logits)
}
