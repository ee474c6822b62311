//! The engine: one executor, the loaded model and any number of sequences; a round runs the rows of several sequences through one forward.
use crate::exec::{ExecError, Executor};
use crate::model::forward::vision::{encode_image, span_embeds, ImagePatches};
use crate::model::forward::{draft_batch, forward_batch, Draft, DraftInput, ForwardError, ImagePiece, LogitRows, Model, SeqInput};
use crate::model::taps::Taps;
use crate::model::{Mark, SeqState, StateError};

/// A sequence of an engine (stable while the sequence lives; not reused after `remove`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(usize);

/// An image of an engine: its span's embeddings, made once by the tower, fed by any number of sequences until removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageId(usize);

impl ImageId {
    /// An id for tests of span arithmetic (names no image of any engine).
    #[cfg(test)]
    pub(crate) fn test(n: usize) -> ImageId {
        ImageId(n)
    }
}

/// One span of a sequence's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span<'a> {
    /// Text token ids.
    Tokens(&'a [u32]),
    /// Positions `from..from + len` of an image's span (every one carries the image token).
    Image { image: ImageId, from: usize, len: usize },
}

/// One sequence's part of a round: its input spans (a prompt chunk or a decode token) and which of its rows get logits.
#[derive(Clone, Copy, Debug)]
pub struct Work<'a> {
    /// The sequence.
    pub seq: SeqId,
    /// Its input this round, at positions `pos..`.
    pub input: &'a [Span<'a>],
    /// Which of its rows get logits.
    pub rows: LogitRows,
}

/// Why an engine call failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The sequence is not (or no longer) in the engine.
    #[error("no sequence {0:?} in the engine")]
    Unknown(SeqId),
    /// The image is not (or no longer) in the engine, or a span reaches past its end.
    #[error("image {0:?}: {1}")]
    Image(ImageId, String),
    /// A round named one sequence twice.
    #[error("sequence {0:?} appears twice in one round")]
    Twice(SeqId),
    /// A fault the tests injected.
    #[error("injected fault: {0}")]
    Fault(&'static str),
    /// The forward failed.
    #[error(transparent)]
    Forward(#[from] ForwardError),
    /// An op outside the forward failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// State bytes could not be restored.
    #[error(transparent)]
    State(#[from] StateError),
}

/// One executor serving many sequences of one model.
pub struct Engine<'m, 'c, E: Executor> {
    /// The executor.
    pub ex: E,
    /// The model.
    pub model: &'m Model<'c>,
    /// Sequence states by id; `None` once removed.
    seqs: Vec<Option<SeqState<E::Tensor>>>,
    /// Whether sequences carry DSpark rings (fed on every position, so that any of them can draft).
    drafts: bool,
    /// Image span embeddings `[span, D]` by id; `None` once removed.
    images: Vec<Option<E::Tensor>>,
    /// Positions a sequence's compressed caches are allocated for when it is added or forked.
    context: usize,
}

impl<'m, 'c, E: Executor> Engine<'m, 'c, E> {
    /// An engine with no sequences.
    pub fn new(ex: E, model: &'m Model<'c>) -> Self {
        Engine { ex, model, seqs: Vec::new(), drafts: false, images: Vec::new(), context: 0 }
    }

    /// Allocates the compressed caches of every sequence added or forked from now on for `context` positions, so they never grow below it.
    pub fn with_context(mut self, context: usize) -> Self {
        self.context = context;
        self
    }

    /// `with_context` on an engine in place (sequences reset from now on take it).
    pub fn set_context(&mut self, context: usize) {
        self.context = context;
    }

    /// Feeds DSpark rings from now on (when the model has draft stages): every sequence added, reset or restored carries them.
    pub fn with_drafts(mut self, on: bool) -> Self {
        self.drafts = on && self.model.cfg.has_drafts();
        self
    }

    /// Whether sequences carry DSpark rings.
    pub fn drafts(&self) -> bool {
        self.drafts
    }

    /// A new state at position 0 (with rings when drafting).
    fn fresh(&mut self) -> Result<SeqState<E::Tensor>, ExecError> {
        let mut st = SeqState::with_context(&mut self.ex, &self.model.cfg, &self.model.plan, self.context)?;
        if self.drafts {
            st.start_rings(&mut self.ex, &self.model.cfg)?;
        }
        Ok(st)
    }

    /// A fresh sequence at position 0.
    pub fn add(&mut self) -> Result<SeqId, ExecError> {
        let st = self.fresh()?;
        self.seqs.push(Some(st));
        Ok(SeqId(self.seqs.len() - 1))
    }

    /// Runs an image through the tower and the aligner once and keeps its span's embeddings (`llm_h x llm_w` cells): the id spans of sequences name.
    pub fn add_image(&mut self, img: &ImagePatches<'_>, llm_h: usize, llm_w: usize, taps: &mut Taps<f32>) -> Result<ImageId, EngineError> {
        let rows = encode_image(&mut self.ex, self.model, img, taps)?;
        let embeds = span_embeds(&mut self.ex, self.model, &rows, llm_h, llm_w)?;
        self.images.push(Some(embeds));
        Ok(ImageId(self.images.len() - 1))
    }

    /// Positions of an image's span.
    pub fn image_len(&self, id: ImageId) -> Result<usize, EngineError> {
        let t = self.images.get(id.0).and_then(Option::as_ref).ok_or_else(|| EngineError::Image(id, "not in the engine".into()))?;
        Ok(self.ex.dims(t).0)
    }

    /// Frees an image's embeddings.
    pub fn remove_image(&mut self, id: ImageId) -> Result<(), EngineError> {
        self.images.get_mut(id.0).and_then(Option::take).map(|_| ()).ok_or_else(|| EngineError::Image(id, "not in the engine".into()))
    }

    /// A new sequence whose state is a copy of `id`'s on the device, allocated for the engine's context: the two continue independently.
    pub fn fork(&mut self, id: SeqId) -> Result<SeqId, EngineError> {
        let st = self.seqs.get(id.0).and_then(Option::as_ref).ok_or(EngineError::Unknown(id))?;
        let copy = st.copy_with_context(&mut self.ex, self.context)?;
        self.seqs.push(Some(copy));
        Ok(SeqId(self.seqs.len() - 1))
    }

    /// `fork` holding only the rows `id` has (a snapshot to fork from later).
    pub fn snapshot(&mut self, id: SeqId) -> Result<SeqId, EngineError> {
        let st = self.seqs.get(id.0).and_then(Option::as_ref).ok_or(EngineError::Unknown(id))?;
        let copy = st.copy(&mut self.ex)?;
        self.seqs.push(Some(copy));
        Ok(SeqId(self.seqs.len() - 1))
    }

    /// Removes a sequence, freeing its state.
    pub fn remove(&mut self, id: SeqId) -> Result<(), EngineError> {
        self.seqs.get_mut(id.0).and_then(Option::take).map(|_| ()).ok_or(EngineError::Unknown(id))
    }

    /// A sequence holding `state` (restored from bytes, or made elsewhere on this executor).
    pub fn adopt(&mut self, state: SeqState<E::Tensor>) -> SeqId {
        self.seqs.push(Some(state));
        SeqId(self.seqs.len() - 1)
    }

    /// A sequence restored from [`Engine::state_bytes`] (made on any executor).
    pub fn restore(&mut self, bytes: &[u8]) -> Result<SeqId, EngineError> {
        let mut st = SeqState::from_bytes(&mut self.ex, &self.model.cfg, &self.model.plan, bytes)?;
        if self.drafts {
            st.start_rings(&mut self.ex, &self.model.cfg)?;
        } else {
            st.drafts = None;
        }
        Ok(self.adopt(st))
    }

    /// Bytes `id`'s state holds on the executor.
    pub fn resident_bytes(&self, id: SeqId) -> Result<usize, EngineError> {
        Ok(self.state(id)?.resident_bytes(&self.ex))
    }

    /// Restarts `id` at position 0 with a fresh state.
    pub fn reset(&mut self, id: SeqId) -> Result<(), EngineError> {
        let fresh = self.fresh()?;
        *self.state_mut(id)? = fresh;
        Ok(())
    }

    /// The state of `id`.
    pub fn state(&self, id: SeqId) -> Result<&SeqState<E::Tensor>, EngineError> {
        self.seqs.get(id.0).and_then(Option::as_ref).ok_or(EngineError::Unknown(id))
    }

    fn state_mut(&mut self, id: SeqId) -> Result<&mut SeqState<E::Tensor>, EngineError> {
        self.seqs.get_mut(id.0).and_then(Option::as_mut).ok_or(EngineError::Unknown(id))
    }

    /// The next position of `id` (tokens consumed so far).
    pub fn pos(&self, id: SeqId) -> Result<usize, EngineError> {
        Ok(self.state(id)?.pos)
    }

    /// The state of `id` as bytes (`SeqState::to_bytes`): equal bytes, equal state.
    pub fn state_bytes(&mut self, id: SeqId) -> Result<Vec<u8>, EngineError> {
        let st = self.seqs.get(id.0).and_then(Option::as_ref).ok_or(EngineError::Unknown(id))?;
        Ok(st.to_bytes(&mut self.ex)?)
    }

    /// A mark of `id`'s state that [`Engine::rewind`] returns to after the next round feeds it up to `len` positions (a verify window).
    pub fn mark(&mut self, id: SeqId, len: usize) -> Result<Mark<E::Tensor>, EngineError> {
        let st = self.seqs.get_mut(id.0).and_then(Option::as_mut).ok_or(EngineError::Unknown(id))?;
        Ok(st.mark(&mut self.ex, len)?)
    }

    /// Keeps the first `keep` positions `id` was fed since `mark` and undoes the rest.
    pub fn rewind(&mut self, id: SeqId, mark: Mark<E::Tensor>, keep: usize) -> Result<(), EngineError> {
        let st = self.seqs.get_mut(id.0).and_then(Option::as_mut).ok_or(EngineError::Unknown(id))?;
        Ok(st.rewind(&mut self.ex, mark, keep)?)
    }

    /// Runs one round: every work item's input through one forward (sequences in work order); returns each item's logits `[rows, vocab]` (f32).
    pub fn round(&mut self, work: &[Work<'_>], taps: &mut Taps<f32>) -> Result<Vec<E::Tensor>, EngineError> {
        let mut taken: Vec<SeqState<E::Tensor>> = Vec::with_capacity(work.len());
        let mut err = None;
        for w in work {
            match self.seqs.get_mut(w.seq.0).and_then(Option::take) {
                Some(st) => taken.push(st),
                None => {
                    err = Some(if work.iter().filter(|x| x.seq == w.seq).count() > 1 { EngineError::Twice(w.seq) } else { EngineError::Unknown(w.seq) });
                    break;
                }
            }
        }
        let result = match err {
            Some(e) => Err(e),
            None => self.forward_round(work, &mut taken, taps),
        };
        for (w, st) in work.iter().zip(taken) {
            self.seqs[w.seq.0] = Some(st);
        }
        result
    }

    /// The forward of a round over states taken out of the engine.
    fn forward_round(&mut self, work: &[Work<'_>], taken: &mut [SeqState<E::Tensor>], taps: &mut Taps<f32>) -> Result<Vec<E::Tensor>, EngineError> {
        let Engine { ex, model, seqs: _, drafts: _, images, context: _ } = self;
        let parts: Vec<(Vec<u32>, Vec<ImagePiece<'_, E::Tensor>>)> = work.iter().map(|w| pieces(ex, images, w.input, model.cfg.image_token_id as u32)).collect::<Result<_, _>>()?;
        let mut inputs: Vec<SeqInput<'_, E::Tensor>> = taken.iter_mut().zip(&parts).zip(work).map(|((state, (t, p)), w)| SeqInput { state, tokens: t, rows: w.rows, images: p }).collect();
        forward_batch(ex, model, &mut inputs, taps).map_err(EngineError::from)
    }

    /// Whether `id`'s rings hold what a draft at its position attends to.
    pub fn can_draft(&self, id: SeqId) -> bool {
        self.drafts && self.state(id).is_ok_and(|st| st.can_draft(self.model.cfg.sliding_window))
    }

    /// Drafts one block for each `(sequence, token sampled at its position)` in one pass; the states are read, not changed.
    pub fn draft(&mut self, items: &[(SeqId, u32)], taps: &mut Taps<f32>) -> Result<Vec<Draft>, EngineError> {
        let mut inputs = Vec::with_capacity(items.len());
        for &(id, first) in items {
            let state = self.seqs.get(id.0).and_then(Option::as_ref).ok_or(EngineError::Unknown(id))?;
            inputs.push(DraftInput { state, first });
        }
        Ok(draft_batch(&mut self.ex, self.model, &inputs, taps)?)
    }

    /// Runs `tokens` of `id` as a round of its own; returns the logits of `rows`, row-major.
    pub fn run(&mut self, id: SeqId, tokens: &[u32], rows: LogitRows, taps: &mut Taps<f32>) -> Result<Vec<f32>, EngineError> {
        let input = [Span::Tokens(tokens)];
        let mut logits = self.round(&[Work { seq: id, input: &input, rows }], taps)?;
        let l = logits.pop().ok_or(EngineError::Forward(ForwardError::Input("the round returned no logits".into())))?;
        Ok(self.ex.read(&l)?)
    }
}

/// The token ids and the image pieces of a work item's spans, checked against the images' lengths.
fn pieces<'t, E: Executor>(ex: &E, images: &'t [Option<E::Tensor>], input: &[Span<'_>], image_token: u32) -> Result<(Vec<u32>, Vec<ImagePiece<'t, E::Tensor>>), EngineError> {
    let (mut ids, mut out) = (Vec::new(), Vec::new());
    for s in input {
        match *s {
            Span::Tokens(t) => ids.extend_from_slice(t),
            Span::Image { image, from, len } => {
                let embeds = images.get(image.0).and_then(Option::as_ref).ok_or_else(|| EngineError::Image(image, "not in the engine".into()))?;
                let n = ex.dims(embeds).0;
                if len == 0 || from + len > n {
                    return Err(EngineError::Image(image, format!("span rows {from}..{} of a span of {n}", from + len)));
                }
                out.push(ImagePiece { at: ids.len(), embeds, from, len });
                ids.extend(std::iter::repeat_n(image_token, len));
            }
        }
    }
    Ok((ids, out))
}
