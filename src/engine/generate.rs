//! One sequence end to end on an engine of its own: chunked prefill, then decode with the sampler until a stop token or the token budget.
use super::rounds::{Engine, EngineError, SeqId, Work};
use super::spans::{chunk_spans, Placed};
use super::sampler::{Sampler, SamplerError};
use crate::exec::{ExecError, Executor};
use crate::model::forward::{ForwardError, LogitRows, Model};
use crate::model::taps::Taps;
use std::ops::{Deref, DerefMut};

/// Why generation stopped early.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// A forward call failed.
    #[error(transparent)]
    Forward(#[from] ForwardError),
    /// Reading logits back failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The engine refused the call.
    #[error(transparent)]
    Engine(EngineError),
    /// Sampling failed.
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    /// The prompt is empty.
    #[error("the prompt has no tokens")]
    EmptyPrompt,
    /// The token callback failed.
    #[error("{0}")]
    Output(String),
}

/// What a generation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generation {
    /// Generated token ids (the stop token included when one was produced).
    pub tokens: Vec<u32>,
    /// Whether a stop token ended it.
    pub stopped: bool,
}

/// How a generation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Prompt tokens per prefill call.
    pub chunk: usize,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Whether forward calls record taps.
    pub taps: bool,
}

impl From<EngineError> for GenerateError {
    fn from(e: EngineError) -> GenerateError {
        match e {
            EngineError::Forward(f) => GenerateError::Forward(f),
            EngineError::Exec(x) => GenerateError::Exec(x),
            other => GenerateError::Engine(other),
        }
    }
}

/// One sequence on an engine of its own (the engine's fields and methods through `Deref`).
pub struct Session<'m, 'c, E: Executor> {
    /// The engine.
    pub engine: Engine<'m, 'c, E>,
    /// The sequence.
    pub seq: SeqId,
}

impl<'m, 'c, E: Executor> Deref for Session<'m, 'c, E> {
    type Target = Engine<'m, 'c, E>;
    fn deref(&self) -> &Self::Target {
        &self.engine
    }
}

impl<E: Executor> DerefMut for Session<'_, '_, E> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.engine
    }
}

impl<'m, 'c, E: Executor> Session<'m, 'c, E> {
    /// A fresh sequence.
    pub fn new(ex: E, model: &'m Model<'c>) -> Result<Self, ExecError> {
        Session::with_drafts(ex, model, false)
    }

    /// A fresh sequence that feeds the DSpark rings when `drafts` (and the model drafts).
    pub fn with_drafts(ex: E, model: &'m Model<'c>, drafts: bool) -> Result<Self, ExecError> {
        let mut engine = Engine::new(ex, model).with_drafts(drafts);
        let seq = engine.add()?;
        Ok(Session { engine, seq })
    }

    /// Runs `tokens` as one forward call; returns the logits of `rows`, row-major.
    pub fn run(&mut self, tokens: &[u32], rows: LogitRows, taps: &mut Taps<f32>) -> Result<Vec<f32>, GenerateError> {
        Ok(self.engine.run(self.seq, tokens, rows, taps)?)
    }

    /// The sequence's state as bytes.
    pub fn state_bytes(&mut self) -> Result<Vec<u8>, GenerateError> {
        Ok(self.engine.state_bytes(self.seq)?)
    }

    /// The sequence's next position.
    pub fn position(&self) -> usize {
        self.engine.pos(self.seq).unwrap_or(0)
    }

    /// Restarts the sequence at position 0.
    pub fn restart(&mut self) -> Result<(), GenerateError> {
        Ok(self.engine.reset(self.seq)?)
    }

    /// Prefills `tokens` (with `images` placed over their spans) in calls of at most `chunk` positions; returns the last position's logits. `on_call` sees each call's taps.
    pub fn prefill(&mut self, tokens: &[u32], images: &[Placed], chunk: usize, taps_on: bool, mut on_call: impl FnMut(Taps<f32>)) -> Result<Vec<f32>, GenerateError> {
        let mut last = Vec::new();
        let chunk = chunk.max(1);
        for lo in (0..tokens.len()).step_by(chunk) {
            let mut taps = if taps_on { Taps::on() } else { Taps::default() };
            let input = chunk_spans(tokens, images, lo, (lo + chunk).min(tokens.len()));
            let seq = self.seq;
            let mut out = self.engine.round(&[Work { seq, input: &input, rows: LogitRows::Last }], &mut taps)?;
            let l = out.pop().ok_or(GenerateError::EmptyPrompt)?;
            last = self.engine.ex.read(&l)?;
            on_call(taps);
        }
        if last.is_empty() {
            return Err(GenerateError::EmptyPrompt);
        }
        Ok(last)
    }

    /// Prefills `prompt` (and its images), then samples up to `max_tokens` tokens (each at its absolute position), stopping after a token `stop` accepts.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        images: &[Placed],
        opts: &GenerateOptions,
        sampler: &Sampler,
        stop: impl Fn(u32) -> bool,
        mut on_call: impl FnMut(Taps<f32>),
        mut on_token: impl FnMut(u32) -> Result<(), String>,
    ) -> Result<Generation, GenerateError> {
        let (max_tokens, taps_on) = (opts.max_tokens, opts.taps);
        let mut logits = self.prefill(prompt, images, opts.chunk, taps_on, &mut on_call)?;
        let mut tokens = Vec::new();
        while tokens.len() < max_tokens {
            let t = sampler.sample(&logits, self.position())?;
            tokens.push(t);
            on_token(t).map_err(GenerateError::Output)?;
            if stop(t) {
                return Ok(Generation { tokens, stopped: true });
            }
            if tokens.len() == max_tokens {
                break;
            }
            let mut taps = if taps_on { Taps::on() } else { Taps::default() };
            logits = self.run(&[t], LogitRows::Last, &mut taps)?;
            on_call(taps);
        }
        Ok(Generation { tokens, stopped: false })
    }
}
