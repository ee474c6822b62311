//! One running stream: its place in the prompt, its sampled tokens, its text with stop texts held back, and its hashes and timings.
use super::job::{Event, Finish, FinishReason, Job, JobError, Speculative, TokenLogprob};
use crate::engine::{logprobs, SeqId};
use crate::text::{Detokenizer, Tokenizer};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::time::Instant;

/// A job holding a lane.
pub struct Lane {
    /// The job.
    pub job: Job,
    /// Its sequence in the engine.
    pub seq: SeqId,
    /// Prompt tokens consumed (cached ones included).
    pub fed: usize,
    /// Prompt tokens resumed from the cache.
    pub cached: usize,
    /// The prompt's cache key.
    pub key: Vec<u64>,
    /// The images whose spans are still to be fed, in the engine.
    pub images: Vec<crate::engine::Placed>,
    /// The token to feed next round (the last sampled one).
    pub next: Option<u32>,
    /// Logits ready to sample from (a cached prompt's, before any round).
    pub ready: Option<Vec<f32>>,
    /// Drafts proposed to follow `next` in the next round's window.
    pub proposed: Vec<u32>,
    /// The stream's part of the depth rule.
    pub pace: super::pace::LanePace,
    /// Whether the engine state holds positions past the committed tokens (a verify window mid-check).
    pub ahead: bool,
    /// What drafting did so far.
    pub speculative: Speculative,
    /// Generated tokens.
    pub tokens: Vec<u32>,
    /// Times each token was generated (for the penalties).
    counts: HashMap<u32, u32>,
    detok: Detokenizer,
    held: String,
    logits_sha: Option<Sha256>,
    /// When a lane took the job.
    pub admitted: Instant,
    first: Option<Instant>,
}

/// What a sampled token did to the stream.
pub enum Step {
    /// Keep decoding.
    Continue,
    /// The reply ended.
    Finished(FinishReason),
}

impl Lane {
    /// A lane for `job` on `seq`, resuming `cached` prompt tokens.
    pub fn new(job: Job, seq: SeqId, cached: usize, ready: Option<Vec<f32>>, pace: super::pace::LanePace) -> Lane {
        let logits_sha = job.logits_sha.then(Sha256::new);
        let skip = job.skip_special;
        Lane { job, seq, fed: cached, cached, key: Vec::new(), images: Vec::new(), next: None, ready, proposed: Vec::new(), pace, ahead: false, speculative: Speculative::default(), tokens: Vec::new(), counts: HashMap::new(), detok: Detokenizer::new(skip), held: String::new(), logits_sha, admitted: Instant::now(), first: None }
    }

    /// Whether the prompt is still being prefilled.
    pub fn prefilling(&self) -> bool {
        self.fed < self.job.prompt.len()
    }

    /// The absolute position of the next sampled token.
    pub fn position(&self) -> usize {
        self.job.prompt.len() + self.tokens.len()
    }

    /// Whether the client went away.
    pub fn abandoned(&self) -> bool {
        self.job.events.is_closed()
    }

    /// Samples from `logits`, streams the token and its text, and says whether the reply ended.
    pub fn sample(&mut self, logits: &[f32], tok: &Tokenizer, room: usize) -> Result<Step, JobError> {
        let choice = self.choose(logits);
        self.accept(choice, logits, tok, room)
    }

    /// The token for `logits` and its log-probabilities (reads the lane only, so lanes choose in parallel).
    pub fn choose(&self, logits: &[f32]) -> Result<(u32, Option<TokenLogprob>), JobError> {
        let counts: Vec<(u32, u32)> = if self.job.sampler.needs_counts() { self.counts.iter().map(|(&t, &c)| (t, c)).collect() } else { Vec::new() };
        let t = self.job.sampler.sample_counted(logits, self.position(), &counts).map_err(|e| JobError::Engine(e.to_string()))?;
        let logprob = self.job.logprobs.map(|n| {
            let (lp, top) = logprobs(logits, t, n);
            TokenLogprob { logprob: lp, top }
        });
        Ok((t, logprob))
    }

    /// Commits a chosen token: hashes the logits, streams the token and its text, and says whether the reply ended.
    pub fn accept(&mut self, choice: Result<(u32, Option<TokenLogprob>), JobError>, logits: &[f32], tok: &Tokenizer, room: usize) -> Result<Step, JobError> {
        let (t, logprob) = choice?;
        if let Some(h) = &mut self.logits_sha {
            logits.iter().for_each(|v| h.update(v.to_bits().to_le_bytes()));
        }
        self.first.get_or_insert_with(Instant::now);
        self.tokens.push(t);
        *self.counts.entry(t).or_insert(0) += 1;
        let stop_token = self.job.stop_ids.contains(&t);
        let piece = if stop_token { String::new() } else { self.detok.push(tok, t).map_err(|e| JobError::Engine(e.to_string()))? };
        let (text, hit) = self.hold(piece);
        let _ = self.job.events.send(Event::Token { id: t, text, logprob });
        if let Some(s) = hit {
            return Ok(Step::Finished(FinishReason::StopString(s)));
        }
        if stop_token {
            return Ok(Step::Finished(FinishReason::Stop));
        }
        if self.tokens.len() >= self.job.max_tokens || self.position() >= room {
            return Ok(Step::Finished(FinishReason::Length));
        }
        self.next = Some(t);
        Ok(Step::Continue)
    }

    /// Adds new text; returns what can be sent now and the stop text that ended the reply, if any.
    fn hold(&mut self, piece: String) -> (String, Option<String>) {
        if self.job.stop_strings.is_empty() {
            return (piece, None);
        }
        self.held.push_str(&piece);
        let hit = self.job.stop_strings.iter().filter_map(|s| self.held.find(s.as_str()).map(|p| (p, s))).min_by_key(|&(p, _)| p);
        if let Some((p, s)) = hit {
            let s = s.clone();
            let out = self.held[..p].to_string();
            self.held.clear();
            return (out, Some(s));
        }
        let keep = self.job.stop_strings.iter().map(|s| s.chars().count()).max().unwrap_or(1) - 1;
        let cut = self.held.char_indices().rev().nth(keep.saturating_sub(1)).map_or(0, |(i, _)| if keep == 0 { self.held.len() } else { i });
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        (out, None)
    }

    /// Ends the stream: sends held text and the finish with its figures.
    pub fn finish(mut self, reason: FinishReason, tok: &Tokenizer) -> (Job, SeqId, Vec<u32>) {
        let stopped_by_text = matches!(reason, FinishReason::StopString(_));
        let mut tail = std::mem::take(&mut self.held);
        if !stopped_by_text {
            tail.push_str(&self.detok.finish(tok).unwrap_or_default());
        }
        if !tail.is_empty() {
            let _ = self.job.events.send(Event::Text(tail));
        }
        let now = Instant::now();
        let first = self.first.unwrap_or(now);
        let decode_s = now.duration_since(first).as_secs_f64();
        let n = self.tokens.len();
        let finish = Finish {
            reason,
            token_sha: token_sha(&self.tokens),
            logits_sha: self.logits_sha.take().map(|h| hex(&h.finalize())),
            tokens: self.tokens.clone(),
            prompt_tokens: self.job.prompt.len(),
            cached_tokens: self.cached,
            prefilled_tokens: self.job.prompt.len() - self.cached,
            queue_s: self.admitted.duration_since(self.job.arrived).as_secs_f64(),
            ttft_s: first.duration_since(self.job.arrived).as_secs_f64(),
            prefill_s: first.duration_since(self.admitted).as_secs_f64(),
            speculative: self.speculative,
            token_ids: self.job.token_ids,
            decode_tok_s: if n > 1 && decode_s > 0.0 { (n - 1) as f64 / decode_s } else { 0.0 },
        };
        let _ = self.job.events.send(Event::Done(finish));
        (self.job, self.seq, self.tokens)
    }
}

/// Hex of bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// sha256 over ids as little-endian u32, hex (the hash `lockstep run` prints).
pub fn token_sha(ids: &[u32]) -> String {
    let mut h = Sha256::new();
    ids.iter().for_each(|i| h.update(i.to_le_bytes()));
    hex(&h.finalize())
}
