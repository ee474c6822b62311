//! What a request hands the lane host, and what the host streams back.
use crate::engine::Sampler;
use std::time::Instant;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// One generation request, as the lane host runs it.
pub struct Job {
    /// The request id (echoed in `x-request-id`).
    pub id: String,
    /// Prompt token ids (every position of an image span carries the image token).
    pub prompt: Vec<u32>,
    /// The prompt's images, in prompt order.
    pub images: Vec<JobImage>,
    /// The stream's sampler.
    pub sampler: Sampler,
    /// The seed the sampler draws from (returned so a reply can be replayed).
    pub seed: u64,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Tokens that end the reply (kept in its token ids).
    pub stop_ids: Vec<u32>,
    /// Texts that end the reply (cut from its text).
    pub stop_strings: Vec<String>,
    /// Log-probabilities: `None` off, `Some(n)` the chosen token's and the `n` best.
    pub logprobs: Option<usize>,
    /// Hash every step's logits.
    pub logits_sha: bool,
    /// Return the generated token ids in the reply.
    pub token_ids: bool,
    /// Leave special tokens out of the text.
    pub skip_special: bool,
    /// Whether the stream may draft.
    pub draft: bool,
    /// Drafts forced from an expected reply (a benchmark hook), in place of the draft head's.
    pub forced: Option<Forced>,
    /// Where the host streams events; a dropped receiver cancels the job.
    pub events: EventSender,
    /// When the request arrived.
    pub arrived: Instant,
}

/// An image of a job's prompt: the tower's input, where its span sits, and what the prompt cache knows it by.
#[derive(Clone, Debug)]
pub struct JobImage {
    /// The span's first position in the prompt.
    pub at: usize,
    /// The span's positions (delimiters included).
    pub len: usize,
    /// ViT patch rows.
    pub grid_h: usize,
    /// ViT patch columns.
    pub grid_w: usize,
    /// Aligner rows.
    pub llm_h: usize,
    /// Aligner columns.
    pub llm_w: usize,
    /// `[grid_h * grid_w, 3 * patch^2]` patch values (emptied once the tower has run).
    pub patches: Vec<f32>,
    /// sha256 over the decoded pixels' hash, the preprocessing settings and the grids.
    pub key: [u8; 32],
}

/// Drafts taken from an expected reply: each block right for its first `acceptance` share, wrong after.
#[derive(Clone, Debug, PartialEq)]
pub struct Forced {
    /// The reply the stream is expected to give (its undrafted tokens).
    pub reply: Vec<u32>,
    /// The share of each block proposed right.
    pub acceptance: f64,
}

impl Forced {
    /// Up to `k` proposals after `generated` tokens: the reply's next ones, the block's tail made wrong.
    pub fn propose(&self, generated: usize, k: usize, vocab: usize) -> Vec<u32> {
        let right = (self.acceptance * k as f64).round() as usize;
        let next = self.reply.get(generated..).unwrap_or(&[]);
        next.iter().take(k).enumerate().map(|(i, &t)| if i < right { t } else { ((t as usize + 1) % vocab.max(1)) as u32 }).collect()
    }
}

/// One generated token's log-probabilities.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The chosen token's log-probability.
    pub logprob: f32,
    /// The best tokens and theirs, best first.
    pub top: Vec<(u32, f32)>,
}

/// Why a reply ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token.
    Stop,
    /// One of the request's stop texts (which one).
    StopString(String),
    /// The token budget or the context ran out.
    Length,
}

/// What drafting did for one stream: rounds that verified drafts, drafts fed, drafts accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Speculative {
    /// Rounds whose window carried drafts.
    pub rounds: usize,
    /// Drafted tokens fed.
    pub drafted: usize,
    /// Drafted tokens that equalled the stream's own.
    pub accepted: usize,
}

/// The end of a reply: its figures and hashes.
#[derive(Clone, Debug)]
pub struct Finish {
    /// Why it ended.
    pub reason: FinishReason,
    /// Generated token ids (the stop token included).
    pub tokens: Vec<u32>,
    /// sha256 over `tokens` as little-endian u32, hex.
    pub token_sha: String,
    /// sha256 over every step's logits bits, hex, when asked.
    pub logits_sha: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Prompt tokens resumed from the prompt cache.
    pub cached_tokens: usize,
    /// Prompt tokens this request computed.
    pub prefilled_tokens: usize,
    /// Seconds in the queue before a lane took it.
    pub queue_s: f64,
    /// Seconds from arrival to the first token.
    pub ttft_s: f64,
    /// Seconds from taking a lane to the first token.
    pub prefill_s: f64,
    /// Tokens per second after the first.
    pub decode_tok_s: f64,
    /// Its verify rounds and drafts.
    pub speculative: Speculative,
    /// Whether the reply lists the token ids.
    pub token_ids: bool,
}

/// What the lane host streams for one job.
#[derive(Clone, Debug)]
pub enum Event {
    /// A lane took the job.
    Started {
        /// Prompt tokens resumed from the cache.
        cached_tokens: usize,
    },
    /// A generated token and the text it completes (possibly empty while a character or a stop text is pending).
    Token {
        /// Token id.
        id: u32,
        /// New text.
        text: String,
        /// Log-probabilities when asked.
        logprob: Option<TokenLogprob>,
    },
    /// Text held back until the end (the tail of the detokenizer).
    Text(String),
    /// The reply ended.
    Done(Finish),
    /// The job failed; nothing more follows.
    Error(JobError),
}

/// Why a job failed, with the status an API gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobError {
    /// The request cannot run (e.g. its prompt does not fit the context).
    Invalid(String),
    /// The server is busy or draining.
    Unavailable(String),
    /// The engine failed while running it.
    Engine(String),
    /// It held its lane past the server's time limit and was cancelled.
    TimedOut(String),
}

impl JobError {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            JobError::Invalid(m) | JobError::Unavailable(m) | JobError::Engine(m) | JobError::TimedOut(m) => m,
        }
    }
}

/// What handlers send the lane host.
pub enum Command {
    /// Queue a job.
    Submit(Job),
    /// Stop admitting; finish running jobs by the deadline, then cancel the rest and return.
    Drain(Instant),
}

/// How far a stream's reader lags: the bytes sent and not yet taken, and when it last took one.
#[derive(Debug)]
struct Flow {
    unsent: AtomicUsize,
    taken_ms: AtomicU64,
    origin: Instant,
}

impl Flow {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

/// The host's end of a job's events, counting what the reader has not taken yet.
#[derive(Debug, Clone)]
pub struct EventSender {
    tx: UnboundedSender<Event>,
    flow: Arc<Flow>,
}

/// The request's end of a job's events.
#[derive(Debug)]
pub struct EventReceiver {
    rx: UnboundedReceiver<Event>,
    flow: Arc<Flow>,
}

/// A job's event channel.
pub fn event_channel() -> (EventSender, EventReceiver) {
    let (tx, rx) = unbounded_channel();
    let flow = Arc::new(Flow { unsent: AtomicUsize::new(0), taken_ms: AtomicU64::new(0), origin: Instant::now() });
    (EventSender { tx, flow: flow.clone() }, EventReceiver { rx, flow })
}

impl Event {
    /// About how many bytes the event holds until its reader takes it.
    pub fn bytes(&self) -> usize {
        64 + match self {
            Event::Token { text, logprob, .. } => text.len() + logprob.as_ref().map_or(0, |l| 8 * (1 + l.top.len())),
            Event::Text(t) => t.len(),
            Event::Done(f) => 4 * f.tokens.len(),
            Event::Started { .. } | Event::Error(_) => 0,
        }
    }
}

impl EventSender {
    /// Sends `e`; an error when the reader is gone.
    pub fn send(&self, e: Event) -> Result<(), Box<tokio::sync::mpsc::error::SendError<Event>>> {
        let n = e.bytes();
        if self.flow.unsent.fetch_add(n, Ordering::Relaxed) == 0 {
            self.flow.taken_ms.store(self.flow.now_ms(), Ordering::Relaxed);
        }
        self.tx.send(e).map_err(|e| {
            self.flow.unsent.fetch_sub(n, Ordering::Relaxed);
            Box::new(e)
        })
    }

    /// Whether the reader is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Bytes sent and not yet taken.
    pub fn unsent(&self) -> usize {
        self.flow.unsent.load(Ordering::Relaxed)
    }

    /// How long the reader has left events waiting (zero when none wait).
    pub fn stalled(&self) -> Duration {
        if self.unsent() == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(self.flow.now_ms().saturating_sub(self.flow.taken_ms.load(Ordering::Relaxed)))
    }
}

impl EventReceiver {
    /// The next event; `None` when the host dropped the job.
    pub async fn recv(&mut self) -> Option<Event> {
        let e = self.rx.recv().await;
        if let Some(e) = &e {
            self.flow.unsent.fetch_sub(e.bytes(), Ordering::Relaxed);
            self.flow.taken_ms.store(self.flow.now_ms(), Ordering::Relaxed);
        }
        e
    }
}
