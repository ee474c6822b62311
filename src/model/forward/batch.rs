//! A round of several sequences: each sequence's input, its row range in the round, and the row split and join the per-sequence stages use.
use super::{ForwardError, LogitRows};
use crate::model::SeqState;
use crate::exec::{ExecError, Executor};
use crate::model::taps::Taps;

/// One sequence's part of a round: its state, its tokens this round (a prompt chunk or one decode token), and which of its rows get logits.
pub struct SeqInput<'s, T> {
    /// The sequence's state, advanced by the round.
    pub state: &'s mut SeqState<T>,
    /// Its tokens this round, at positions `state.pos..`.
    pub tokens: &'s [u32],
    /// Which of its rows get logits.
    pub rows: LogitRows,
    /// Image span rows among its tokens: each piece's rows take their embeddings from the span's and route as image rows.
    pub images: &'s [ImagePiece<'s, T>],
}

/// Rows of one image span inside a call: call rows `at..at + len` take rows `from..from + len` of the span's embeddings.
pub struct ImagePiece<'s, T> {
    /// The first call row of the piece.
    pub at: usize,
    /// The whole span's embeddings `[span, D]` (see `vision::span_embeds`).
    pub embeds: &'s T,
    /// The span row of call row `at`.
    pub from: usize,
    /// Rows of the piece.
    pub len: usize,
}

impl<T> SeqInput<'_, T> {
    /// Which of the call's rows lie in an image span.
    pub fn image_mask(&self) -> Vec<bool> {
        let mut m = vec![false; self.tokens.len()];
        for p in self.images {
            m.iter_mut().skip(p.at).take(p.len).for_each(|v| *v = true);
        }
        m
    }
}

/// One sequence's place in the round and what its index sources published this round.
pub(crate) struct SeqCtx<T> {
    /// Absolute position of the sequence's first token this round.
    pub start: usize,
    /// Its tokens this round.
    pub len: usize,
    /// Its first row in the round's rows.
    pub row: usize,
    /// Top-k published by each index source for this sequence.
    pub topk: Vec<Option<T>>,
    /// Candidate mask published by the candidate source for this sequence.
    pub candidates: Option<T>,
    /// Whether this call journals the sequence's compressor rows (a mark was made).
    pub journal: bool,
}

/// A sequence's rows of a round tensor: the tensor itself when the round has one sequence, else a copy of its rows.
pub(crate) enum Part<'a, T> {
    /// The whole tensor.
    Whole(&'a T),
    /// A sliced copy.
    Rows(T),
}

impl<T> Part<'_, T> {
    /// The tensor.
    pub fn get(&self) -> &T {
        match self {
            Part::Whole(t) => t,
            Part::Rows(t) => t,
        }
    }

    /// The rows as a tensor of their own (the whole tensor copied).
    pub fn owned<E: Executor<Tensor = T>>(self, ex: &mut E) -> Result<T, ExecError> {
        match self {
            Part::Whole(t) => ex.copy(t),
            Part::Rows(t) => Ok(t),
        }
    }
}

/// Rows `row..row + len` of `x`, without a copy when they are all of `x`.
pub(crate) fn part<'a, E: Executor>(ex: &mut E, x: &'a E::Tensor, row: usize, len: usize) -> Result<Part<'a, E::Tensor>, ExecError> {
    if row == 0 && ex.dims(x).0 == len {
        Ok(Part::Whole(x))
    } else {
        Ok(Part::Rows(ex.slice_rows(x, row, len)?))
    }
}

/// The rows of `parts` one after another (a single part is returned as is); `cols` sizes the empty result.
pub(crate) fn concat<E: Executor>(ex: &mut E, parts: Vec<E::Tensor>, cols: usize) -> Result<E::Tensor, ExecError> {
    let mut it = parts.into_iter();
    let (first, second) = (it.next(), it.next());
    match (first, second) {
        (None, _) => ex.zeros(0, cols),
        (Some(one), None) => Ok(one),
        (Some(a), Some(b)) => {
            let mut out = ex.zeros(0, cols)?;
            for t in [a, b].into_iter().chain(it) {
                ex.append_rows(&mut out, &t)?;
            }
            Ok(out)
        }
    }
}

/// Records the rows of `parts` one after another as tap `name` when taps are on.
pub(crate) fn tap_parts<E: Executor>(ex: &mut E, taps: &mut Taps<f32>, name: impl Into<String>, parts: &[&E::Tensor]) -> Result<(), ExecError> {
    if taps.enabled {
        let (mut rows, mut cols, mut data) = (0, 0, Vec::new());
        for t in parts {
            let (r, c) = ex.dims(t);
            (rows, cols) = (rows + r, c);
            data.extend(ex.read(t)?);
        }
        taps.record(name, rows, cols, &data);
    }
    Ok(())
}

/// Checks every sequence's call before the round touches any state.
pub(crate) fn check_inputs<T>(cfg: &crate::model::Config, seqs: &[SeqInput<'_, T>]) -> Result<(), ForwardError> {
    if seqs.is_empty() {
        return Err(ForwardError::Input("a round needs at least one sequence".into()));
    }
    for (i, q) in seqs.iter().enumerate() {
        let (start, s) = (q.state.pos, q.tokens.len());
        let at = |what: String| ForwardError::Input(if seqs.len() > 1 { format!("sequence {i}: {what}") } else { what });
        if s == 0 {
            return Err(at("a forward call needs at least one token".into()));
        }
        if let Some(bad) = q.tokens.iter().find(|&&t| t as usize >= cfg.vocab_size) {
            return Err(at(format!("token id {bad} is outside the vocabulary of {}", cfg.vocab_size)));
        }
        if start + s > cfg.max_position_embeddings {
            return Err(at(format!("positions up to {} exceed max_position_embeddings {}", start + s, cfg.max_position_embeddings)));
        }
        let mut end = 0;
        for p in q.images {
            if p.len == 0 || p.at < end || p.at + p.len > s {
                return Err(at(format!("image rows {}..{} overlap or leave the call of {s} tokens", p.at, p.at + p.len)));
            }
            if let Some(&t) = q.tokens[p.at..p.at + p.len].iter().find(|&&t| t as usize != cfg.image_token_id) {
                return Err(at(format!("an image row carries token {t}, not the image token {}", cfg.image_token_id)));
            }
            end = p.at + p.len;
        }
        if q.state.layers.len() != cfg.num_hidden_layers {
            return Err(at(format!("the state has {} layers, the model {}", q.state.layers.len(), cfg.num_hidden_layers)));
        }
    }
    Ok(())
}
