//! Per-sequence state of the reference (spec 6): absolute position, engram history, window rows, compressed rows, index keys, partial groups.
use crate::text::EngramHistory;

/// One layer's cached values, indexed by absolute position or group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerState {
    /// Window KV rows after fp8 QAT, one per position so far (a query reads only the last `sliding_window`).
    pub window: Vec<Vec<f64>>,
    /// Compressed KV rows after fp4 QAT, one per completed group (KV sources).
    pub comp: Vec<Vec<f64>>,
    /// Index keys after fp4 QAT, one per completed group (KV sources).
    pub index_keys: Vec<Vec<f64>>,
    /// Raw `(k, g)` of the incomplete trailing group (ratio-2 KV sources).
    pub pending: Vec<(Vec<f64>, Vec<f64>)>,
}

/// The state of one sequence: everything a later call needs from earlier ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// Absolute position of the next token.
    pub pos: usize,
    /// Engram compressed-id history (DEAD in image spans).
    pub history: EngramHistory,
    /// Per backbone layer.
    pub layers: Vec<LayerState>,
    /// Whether calls feed the DSpark rings.
    pub feeding: bool,
    /// Each DSpark stage's ring rows after fp8 QAT, one per position so far (a draft reads only the last `sliding_window`).
    pub rings: Vec<Vec<Vec<f64>>>,
}

impl State {
    /// An empty state for `n_layers` backbone layers.
    pub fn new(n_layers: usize) -> State {
        State { pos: 0, history: EngramHistory::new(), layers: vec![LayerState::default(); n_layers], feeding: false, rings: Vec::new() }
    }

    /// An empty state that feeds the rings of `stages` DSpark stages.
    pub fn drafting(n_layers: usize, stages: usize) -> State {
        State { feeding: true, rings: vec![Vec::new(); stages], ..State::new(n_layers) }
    }
}
