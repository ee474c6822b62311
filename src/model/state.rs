//! Per-sequence state (spec 6): window rings, compressed KV and index keys at KV sources, the ratio-2 partial group, engram history, position.
use crate::exec::{ExecError, Executor};
use crate::model::{Config, LayerMode, LayerPlan};
use crate::text::EngramHistory;

/// Magic prefix of serialized state.
const MAGIC: &[u8; 8] = b"LKSTATE1";

/// The compressed caches a KV source owns.
pub struct CompCache<T> {
    /// Compression ratio.
    pub ratio: usize,
    /// Compressed KV rows `[rows, head_dim]` (after RoPE and fp4 QAT).
    pub kv: T,
    /// Index keys `[rows, index_head_dim]` (after RoPE and fp4 QAT).
    pub index_keys: T,
    /// Rows emitted so far: `pos / ratio`.
    pub rows: usize,
    /// Buffered raw rows of the incomplete group `[ratio - 1, 2 * head_dim]` (k then g, f32); `None` for ratio 1.
    pub partial: Option<T>,
    /// Buffered rows in `partial`: `pos % ratio`.
    pub pending: usize,
}

/// One backbone layer's state.
pub struct LayerState<T> {
    /// Window ring `[sliding_window, head_dim]`, slot = position mod window.
    pub window: T,
    /// Compressed caches, at KV sources only.
    pub comp: Option<CompCache<T>>,
}

/// Everything one sequence carries between forward calls.
pub struct SeqState<T> {
    /// Next absolute position (tokens consumed so far).
    pub pos: usize,
    /// Engram compressed-id history by absolute position.
    pub history: EngramHistory,
    /// Backbone layers in order.
    pub layers: Vec<LayerState<T>>,
}

impl<T> SeqState<T> {
    /// Fresh state for `plan`'s backbone layers, allocated on `ex`.
    pub fn new<E: Executor<Tensor = T>>(ex: &mut E, cfg: &Config, plan: &[LayerPlan]) -> Result<SeqState<T>, ExecError> {
        let mut layers = Vec::new();
        for p in plan.iter().take(cfg.num_hidden_layers) {
            let window = ex.zeros(cfg.sliding_window, cfg.head_dim)?;
            let comp = if p.mode == LayerMode::Full {
                let partial = if p.ratio > 1 { Some(ex.zeros(p.ratio - 1, 2 * cfg.head_dim)?) } else { None };
                Some(CompCache {
                    ratio: p.ratio,
                    kv: ex.zeros(0, cfg.head_dim)?,
                    index_keys: ex.zeros(0, cfg.index_head_dim)?,
                    rows: 0,
                    partial,
                    pending: 0,
                })
            } else {
                None
            };
            layers.push(LayerState { window, comp });
        }
        Ok(SeqState { pos: 0, history: EngramHistory::new(), layers })
    }

    /// A deep copy on the device: every ring, cache and buffered group copied, so the copy and `self` continue independently.
    pub fn copy<E: Executor<Tensor = T>>(&self, ex: &mut E) -> Result<SeqState<T>, ExecError> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            let comp = match &l.comp {
                Some(c) => Some(CompCache {
                    ratio: c.ratio,
                    kv: ex.copy(&c.kv)?,
                    index_keys: ex.copy(&c.index_keys)?,
                    rows: c.rows,
                    partial: c.partial.as_ref().map(|p| ex.copy(p)).transpose()?,
                    pending: c.pending,
                }),
                None => None,
            };
            layers.push(LayerState { window: ex.copy(&l.window)?, comp });
        }
        Ok(SeqState { pos: self.pos, history: self.history.clone(), layers })
    }

    /// The state as bytes: position, engram history, then per layer the ring, compressed rows, index keys and buffered rows (f32 LE).
    pub fn to_bytes<E: Executor<Tensor = T>>(&self, ex: &mut E) -> Result<Vec<u8>, ExecError> {
        let mut b = MAGIC.to_vec();
        b.extend((self.pos as u64).to_le_bytes());
        b.extend((self.history.len() as u64).to_le_bytes());
        self.history.as_slice().iter().for_each(|v| b.extend(v.to_le_bytes()));
        let put = |b: &mut Vec<u8>, vals: &[f32]| {
            b.extend((vals.len() as u64).to_le_bytes());
            vals.iter().for_each(|v| b.extend(v.to_bits().to_le_bytes()));
        };
        for l in &self.layers {
            put(&mut b, &ex.read(&l.window)?);
            if let Some(c) = &l.comp {
                b.extend((c.rows as u64).to_le_bytes());
                put(&mut b, &ex.read(&c.kv)?);
                put(&mut b, &ex.read(&c.index_keys)?);
                b.extend((c.pending as u64).to_le_bytes());
                if let Some(p) = &c.partial {
                    put(&mut b, &ex.read(p)?);
                }
            }
        }
        Ok(b)
    }
}
