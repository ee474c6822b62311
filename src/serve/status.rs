//! What the lane host publishes after every round, for `/health`, `/metrics` and the page.
use std::time::Instant;

/// One running stream.
#[derive(Clone, Debug)]
pub struct LaneStatus {
    /// The request id.
    pub id: String,
    /// Whether its prompt is still filling.
    pub prefilling: bool,
    /// Its position (tokens consumed and generated).
    pub position: usize,
    /// Its prompt's tokens.
    pub prompt_tokens: usize,
    /// Tokens generated so far.
    pub generated: usize,
    /// When it took its lane.
    pub since: Instant,
}

/// The host's figures.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// The host is serving (the model is loaded).
    pub ready: bool,
    /// Why serving stopped, once the device is lost.
    pub failure: Option<String>,
    /// Running streams.
    pub lanes: Vec<LaneStatus>,
    /// Jobs waiting for a lane.
    pub waiting: usize,
    /// Prompt-cache bytes held.
    pub cache_bytes: usize,
    /// Prompt-cache budget.
    pub cache_budget: usize,
    /// Prompt-cache entries.
    pub cache_entries: usize,
    /// Prompt tokens looked up in the cache.
    pub cache_queries: u64,
    /// Prompt tokens found there.
    pub cache_hits: u64,
    /// Prompt tokens computed since the start (cached ones excluded).
    pub prefilled_total: u64,
    /// Tokens generated since the start.
    pub generated_total: u64,
}
