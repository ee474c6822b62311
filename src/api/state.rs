//! What every handler shares: the lane host's channel, the tokenizer, the status, the metrics, the bits' identity, and the admission rules.
use super::error::ApiError;
use super::metrics::Metrics;
use crate::serve::{Command, Event, Job, JobError, Status};
use crate::text::Tokenizer;
use axum::http::StatusCode;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use crate::serve::{event_channel, EventReceiver, EventSender};

/// Which bits the server serves: the same figures on every device that gives the same bits.
#[derive(Clone, Debug)]
pub struct Identity {
    /// lockstep's version.
    pub version: String,
    /// The contract hash of the device (`None` until `lockstep contract --hash` recorded one for it).
    pub contract_hash: Option<String>,
    /// sha256 over the checkpoint's config, index and tensor headers, hex.
    pub fingerprint: String,
    /// The device, in words.
    pub device: String,
}

impl Identity {
    /// As JSON.
    pub fn json(&self) -> Value {
        json!({ "version": self.version, "contract_hash": self.contract_hash, "checkpoint_fingerprint": self.fingerprint, "device": self.device })
    }
}

/// The model the server serves, as requests see it.
pub struct ModelInfo {
    /// The id requests name.
    pub id: String,
    /// Positions per lane.
    pub context: usize,
    /// Reply budget when a request sets none.
    pub max_tokens: usize,
    /// BOS.
    pub bos: u32,
    /// Tokens that end a reply unless `ignore_eos`.
    pub stop_ids: Vec<u32>,
    /// Vocabulary rows of the model.
    pub vocab: usize,
}

/// The shared state.
pub struct AppState {
    /// Commands to the lane host.
    pub host: Mutex<mpsc::Sender<Command>>,
    /// The tokenizer.
    pub tok: Arc<Tokenizer>,
    /// The host's figures.
    pub status: Arc<Mutex<Status>>,
    /// Counters and histograms.
    pub metrics: Metrics,
    /// The bits' identity, once the model is loaded.
    pub identity: Mutex<Option<Identity>>,
    /// The model.
    pub model: ModelInfo,
    /// The key requests must carry.
    pub api_key: Option<String>,
    /// Most jobs waiting for a lane.
    pub max_queue: usize,
    /// Lanes.
    pub parallel: usize,
    /// Submitted jobs no lane has taken yet.
    pub queued: AtomicUsize,
    /// Set by SIGTERM: new requests get 503.
    pub draining: AtomicBool,
    /// Image input, when served (`--vision`).
    pub vision: Option<super::images::Vision>,
    /// Whether `GET /` serves the page (off with `--no-ui`).
    pub ui: bool,
    /// Token rates for the page.
    pub rates: super::metrics::Rates,
    /// Most time a request may hold a lane (`--request-timeout`).
    pub request_timeout: Duration,
    /// Most time a request body may go without a byte arriving (`--idle-timeout`).
    pub idle_timeout: Duration,
    next: AtomicU64,
}

/// A job's events; it counts as queued until its first event, and from then has `request_timeout` to end.
pub struct JobEvents {
    rx: EventReceiver,
    state: Arc<AppState>,
    waiting: bool,
    deadline: Option<tokio::time::Instant>,
    tokens: usize,
}

impl JobEvents {
    /// The next event; `None` when the host dropped the job; an error once the job has held its lane past the time limit (dropping the events then frees the lane).
    pub async fn next(&mut self) -> Option<Event> {
        let e = match self.deadline {
            None => self.rx.recv().await,
            Some(at) if at <= tokio::time::Instant::now() => return Some(Event::Error(self.timed_out())),
            Some(at) => match tokio::time::timeout_at(at, self.rx.recv()).await {
                Ok(e) => e,
                Err(_) => return Some(Event::Error(self.timed_out())),
            },
        };
        if self.waiting && e.is_some() {
            self.deadline = Some(tokio::time::Instant::now() + self.state.request_timeout);
        }
        if let Some(Event::Token { .. }) = e {
            self.tokens += 1;
        }
        self.taken();
        e
    }

    fn timed_out(&self) -> JobError {
        let limit = self.state.request_timeout.as_secs_f64();
        JobError::TimedOut(format!("the request ran past this server's time limit of {limit} s on a lane (--request-timeout) after {} tokens and was cancelled; ask for fewer tokens", self.tokens))
    }

    fn taken(&mut self) {
        if std::mem::take(&mut self.waiting) {
            self.state.queued.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for JobEvents {
    fn drop(&mut self) {
        self.taken();
    }
}

impl AppState {
    /// State for a host on `host`.
    pub fn new(host: mpsc::Sender<Command>, tok: Arc<Tokenizer>, status: Arc<Mutex<Status>>, model: ModelInfo, api_key: Option<String>, max_queue: usize, parallel: usize) -> Self {
        AppState { host: Mutex::new(host), tok, status, metrics: Metrics::default(), identity: Mutex::new(None), model, api_key, max_queue, parallel, queued: AtomicUsize::new(0), draining: AtomicBool::new(false), vision: None, ui: true, rates: Default::default(), request_timeout: Duration::from_secs(600), idle_timeout: Duration::from_secs(60), next: AtomicU64::new(1) }
    }

    /// Cancels a request that holds a lane longer than `request`, and refuses a body that stalls for `idle`.
    pub fn with_timeouts(mut self, request: Duration, idle: Duration) -> Self {
        (self.request_timeout, self.idle_timeout) = (request, idle);
        self
    }

    /// Takes images under `vision`.
    pub fn with_vision(mut self, vision: Option<super::images::Vision>) -> Self {
        self.vision = vision;
        self
    }

    /// Serves the page at `/` when `ui`.
    pub fn with_ui(mut self, ui: bool) -> Self {
        self.ui = ui;
        self
    }

    /// The largest request body: room for the largest allowed images when images are taken.
    pub fn body_limit(&self) -> usize {
        self.vision.as_ref().map_or(super::BODY_LIMIT, |v| v.body_limit(super::BODY_LIMIT))
    }

    /// A fresh job id.
    pub fn job_id(&self) -> String {
        format!("job-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// The identity once loaded.
    pub fn identity(&self) -> Option<Identity> {
        self.identity.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Refuses requests while loading, draining, or after the device is lost.
    pub fn available(&self) -> Result<(), ApiError> {
        if self.draining.load(Ordering::Relaxed) {
            return Err(ApiError { retry_after: Some(1), ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down") });
        }
        let st = self.status.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = &st.failure {
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("the server cannot serve: {f}")));
        }
        if !st.ready {
            return Err(ApiError { retry_after: Some(2), ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the model is still loading") });
        }
        Ok(())
    }

    /// Queues the job `make` builds around its event sender; 429 when the queue is full.
    pub fn submit(self: &Arc<Self>, make: impl FnOnce(EventSender) -> Job) -> Result<JobEvents, ApiError> {
        self.available()?;
        let running = self.status.lock().unwrap_or_else(|p| p.into_inner()).lanes.len();
        let queued = self.queued.load(Ordering::Relaxed);
        if queued >= self.max_queue + self.parallel.saturating_sub(running) {
            return Err(ApiError { retry_after: Some(1), ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, format!("the queue is full ({queued} waiting for {} lanes, --max-queue {}); retry later", self.parallel, self.max_queue)) });
        }
        let (tx, rx) = event_channel();
        let job = make(tx);
        self.queued.fetch_add(1, Ordering::Relaxed);
        let events = JobEvents { rx, state: self.clone(), waiting: true, deadline: None, tokens: 0 };
        let sent = self.host.lock().unwrap_or_else(|p| p.into_inner()).send(Command::Submit(job));
        if sent.is_err() {
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped"));
        }
        Ok(events)
    }
}
