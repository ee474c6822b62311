//! Per-sequence state (spec 6): window rings, compressed KV and index keys at KV sources, the ratio-2 partial group, engram history, the DSpark rings, position.
use crate::exec::{ExecError, Executor, Qat};
use crate::kernels::state::{pack_rows, unpack_rows, Packing};
use crate::model::{Config, LayerMode, LayerPlan};
use crate::text::EngramHistory;

/// Magic prefix of serialized state (with the DSpark rings section).
const MAGIC: &[u8; 8] = b"LKSTATE2";
/// Magic prefix of state written before the DSpark rings (read as rings empty).
const MAGIC_V1: &[u8; 8] = b"LKSTATE1";

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
    /// The raw k and g rows `[len, head_dim]` each of the one call fed since a mark (kept only then, for a partial rewind).
    pub journal: Option<(T, T)>,
}

/// The DSpark stages' rings `[sliding_window, head_dim]` each (spec 6), fed from main_x at every position from `from` on.
pub struct DraftRings<T> {
    /// One ring per stage, slot = position mod window.
    pub rings: Vec<T>,
    /// First position fed: the rings hold positions `from..pos`.
    pub from: usize,
}

/// One backbone layer's state.
pub struct LayerState<T> {
    /// Window ring `[sliding_window, head_dim]`, slot = position mod window.
    pub window: T,
    /// Compressed caches, at KV sources only.
    pub comp: Option<CompCache<T>>,
}

/// A sequence's state at one position, as much of it as the next few positions can change.
pub struct Mark<T> {
    pos: usize,
    history: usize,
    layers: Vec<LayerMark<T>>,
    drafts: Vec<T>,
}

/// One layer's part of a [`Mark`]: the ring rows to restore, and the cache's rows, pending count and buffered group.
struct LayerMark<T> {
    ring: Option<T>,
    comp: Option<(usize, usize, Option<T>)>,
}

/// Everything one sequence carries between forward calls.
pub struct SeqState<T> {
    /// Next absolute position (tokens consumed so far).
    pub pos: usize,
    /// Engram compressed-id history by absolute position.
    pub history: EngramHistory,
    /// Backbone layers in order.
    pub layers: Vec<LayerState<T>>,
    /// The DSpark rings, while the sequence can draft.
    pub drafts: Option<DraftRings<T>>,
    /// Whether the next call journals its compressor rows (set by a mark).
    pub journal: bool,
}

/// Ring rows `pos..pos + len` (at most the ring) saved before a call overwrites them.
fn saved_rows<E: Executor>(ex: &mut E, ring: &E::Tensor, pos: usize, len: usize) -> Result<Option<E::Tensor>, ExecError> {
    let slots = ex.dims(ring).0;
    let idx: Vec<u32> = (pos..pos + len.min(slots)).map(|p| (p % slots.max(1)) as u32).collect();
    if idx.is_empty() {
        return Ok(None);
    }
    let idx = ex.upload_index(&idx)?;
    Ok(Some(ex.gather_rows(ring, &idx)?))
}

/// Writes back the saved rows of positions `pos + keep..` (the first `keep` stay as the call wrote them).
fn restore_rows<E: Executor>(ex: &mut E, ring: &mut E::Tensor, saved: &E::Tensor, pos: usize, keep: usize) -> Result<(), ExecError> {
    let n = ex.dims(saved).0;
    if keep == 0 {
        ex.ring_write(ring, saved, pos)
    } else if keep < n {
        let rest = ex.slice_rows(saved, keep, n - keep)?;
        ex.ring_write(ring, &rest, pos + keep)
    } else {
        Ok(())
    }
}

impl<T> SeqState<T> {
    /// Fresh state for `plan`'s backbone layers, allocated on `ex`, its compressed caches growing as positions arrive.
    pub fn new<E: Executor<Tensor = T>>(ex: &mut E, cfg: &Config, plan: &[LayerPlan]) -> Result<SeqState<T>, ExecError> {
        SeqState::with_context(ex, cfg, plan, 0)
    }

    /// Fresh state with its compressed caches allocated for `context` positions (they grow only past it).
    pub fn with_context<E: Executor<Tensor = T>>(ex: &mut E, cfg: &Config, plan: &[LayerPlan], context: usize) -> Result<SeqState<T>, ExecError> {
        let mut layers = Vec::new();
        for p in plan.iter().take(cfg.num_hidden_layers) {
            let rows = context / p.ratio.max(1);
            let window = ex.zeros(cfg.sliding_window, cfg.head_dim)?;
            let comp = if p.mode == LayerMode::Full {
                let partial = if p.ratio > 1 { Some(ex.zeros(p.ratio - 1, 2 * cfg.head_dim)?) } else { None };
                Some(CompCache {
                    ratio: p.ratio,
                    kv: ex.packed_cache(Qat::Fp4Rows, cfg.head_dim, rows)?,
                    index_keys: ex.packed_cache(Qat::Fp4Index, cfg.index_head_dim, rows)?,
                    rows: 0,
                    partial,
                    pending: 0,
                    journal: None,
                })
            } else {
                None
            };
            layers.push(LayerState { window, comp });
        }
        Ok(SeqState { pos: 0, history: EngramHistory::new(), layers, drafts: None, journal: false })
    }

    /// Gives the sequence empty DSpark rings fed from its current position on (nothing when it has them).
    pub fn start_rings<E: Executor<Tensor = T>>(&mut self, ex: &mut E, cfg: &Config) -> Result<(), ExecError> {
        if self.drafts.is_none() && cfg.has_drafts() {
            let rings = (0..cfg.num_nextn_predict_layers).map(|_| ex.zeros(cfg.sliding_window, cfg.head_dim)).collect::<Result<_, _>>()?;
            self.drafts = Some(DraftRings { rings, from: self.pos });
        }
        Ok(())
    }

    /// Whether the rings hold every position a draft after the current one attends to (`pos - window..pos`).
    pub fn can_draft(&self, window: usize) -> bool {
        self.pos > 0 && self.drafts.as_ref().is_some_and(|d| d.from <= self.pos.saturating_sub(window))
    }

    /// A deep copy on the device: every ring, cache and buffered group copied, so the copy and `self` continue independently; its compressed caches hold only their rows.
    pub fn copy<E: Executor<Tensor = T>>(&self, ex: &mut E) -> Result<SeqState<T>, ExecError> {
        self.copy_with_context(ex, 0)
    }

    /// `copy` with the compressed caches allocated for `context` positions (as [`SeqState::with_context`]).
    pub fn copy_with_context<E: Executor<Tensor = T>>(&self, ex: &mut E, context: usize) -> Result<SeqState<T>, ExecError> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            let comp = match &l.comp {
                Some(c) => Some(CompCache {
                    ratio: c.ratio,
                    kv: ex.copy_with_room(&c.kv, context / c.ratio.max(1))?,
                    index_keys: ex.copy_with_room(&c.index_keys, context / c.ratio.max(1))?,
                    rows: c.rows,
                    partial: c.partial.as_ref().map(|p| ex.copy(p)).transpose()?,
                    pending: c.pending,
                    journal: None,
                }),
                None => None,
            };
            layers.push(LayerState { window: ex.copy(&l.window)?, comp });
        }
        let drafts = match &self.drafts {
            Some(d) => Some(DraftRings { rings: d.rings.iter().map(|r| ex.copy(r)).collect::<Result<_, _>>()?, from: d.from }),
            None => None,
        };
        Ok(SeqState { pos: self.pos, history: self.history.clone(), layers, drafts, journal: false })
    }

    /// What [`SeqState::rewind`] needs to undo up to `len` positions of the one call fed after now: the ring rows that call will overwrite, each cache's counts and buffered group, the history's length; the call journals its compressor rows.
    pub fn mark<E: Executor<Tensor = T>>(&mut self, ex: &mut E, len: usize) -> Result<Mark<T>, ExecError> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            let ring = saved_rows(ex, &l.window, self.pos, len)?;
            let comp = match &l.comp {
                Some(c) => Some((c.rows, c.pending, c.partial.as_ref().map(|p| ex.copy(p)).transpose()?)),
                None => None,
            };
            layers.push(LayerMark { ring, comp });
        }
        let mut drafts = Vec::new();
        for r in self.drafts.iter().flat_map(|d| &d.rings) {
            drafts.extend(saved_rows(ex, r, self.pos, len)?);
        }
        self.journal = true;
        Ok(Mark { pos: self.pos, history: self.history.len(), layers, drafts })
    }

    /// Keeps the first `keep` positions of the one call fed since `mark` and undoes the rest: the state's bytes are those the kept positions alone would have made.
    pub fn rewind<E: Executor<Tensor = T>>(&mut self, ex: &mut E, mark: Mark<T>, keep: usize) -> Result<(), ExecError> {
        let fed = self.pos.checked_sub(mark.pos);
        let slots = self.layers.first().map_or(0, |l| ex.dims(&l.window).0);
        let fits = fed.is_some_and(|f| keep <= f && (keep == 0 || f <= slots));
        if mark.layers.len() != self.layers.len() || !fits {
            return Err(ExecError::Shape { op: "rewind", problem: format!("keep {keep} of a call from position {} of {} layers, for a state at {} of {} layers with {slots} ring slots", mark.pos, mark.layers.len(), self.pos, self.layers.len()) });
        }
        let at = mark.pos + keep;
        if at == self.pos {
            self.release();
            return Ok(());
        }
        for (l, m) in self.layers.iter_mut().zip(mark.layers) {
            if let Some(rows) = &m.ring {
                restore_rows(ex, &mut l.window, rows, mark.pos, keep)?;
            }
            if let (Some(c), Some((rows, pending, partial))) = (l.comp.as_mut(), m.comp) {
                let kept = (at / c.ratio.max(1)).clamp(rows, c.rows);
                ex.truncate_rows(&mut c.kv, kept)?;
                ex.truncate_rows(&mut c.index_keys, kept)?;
                c.rows = kept;
                if let Some(mut p) = partial {
                    if keep > 0 {
                        let (k, g) = c.journal.as_ref().ok_or_else(|| ExecError::Shape { op: "rewind", problem: "no journal of the call since the mark".into() })?;
                        let (k, g) = (ex.slice_rows(k, 0, keep)?, ex.slice_rows(g, 0, keep)?);
                        ex.compress_pool(&k, &g, &mut p, pending, c.ratio)?;
                    }
                    c.partial = Some(p);
                }
                c.pending = at % c.ratio.max(1);
            }
        }
        self.release();
        if let Some(d) = self.drafts.as_mut() {
            for (r, saved) in d.rings.iter_mut().zip(&mark.drafts) {
                restore_rows(ex, r, saved, mark.pos, keep)?;
            }
        }
        self.history.truncate(mark.history + keep);
        self.pos = at;
        Ok(())
    }

    /// Stops journaling and forgets the journal (a mark's window was kept whole).
    fn release(&mut self) {
        self.journal = false;
        for l in &mut self.layers {
            if let Some(c) = l.comp.as_mut() {
                c.journal = None;
            }
        }
    }

    /// The state as bytes: position, engram history, per layer the ring, compressed rows, index keys and buffered rows, then the DSpark rings (count, first position fed, each ring; count 0 when empty) (f32 LE).
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
        match &self.drafts {
            None => b.extend(0u64.to_le_bytes()),
            Some(d) => {
                b.extend((d.rings.len() as u64).to_le_bytes());
                b.extend((d.from as u64).to_le_bytes());
                for r in &d.rings {
                    put(&mut b, &ex.read(r)?);
                }
            }
        }
        Ok(b)
    }

    /// Bytes the state's buffers hold on its executor (every ring, cache and buffered group, as allocated).
    pub fn resident_bytes<E: Executor<Tensor = T>>(&self, ex: &E) -> usize {
        let size = |t: &T| ex.allocated_bytes(t);
        let mut n = self.history.len() * 8;
        for l in &self.layers {
            n += size(&l.window);
            if let Some(c) = &l.comp {
                n += size(&c.kv) + size(&c.index_keys) + c.partial.as_ref().map_or(0, size);
            }
        }
        n + self.drafts.iter().flat_map(|d| &d.rings).map(size).sum::<usize>()
    }

    /// The state [`SeqState::to_bytes`] wrote, uploaded to `ex`; refused when the bytes do not fit `plan`'s layout.
    pub fn from_bytes<E: Executor<Tensor = T>>(ex: &mut E, cfg: &Config, plan: &[LayerPlan], bytes: &[u8]) -> Result<SeqState<T>, StateError> {
        let mut r = Reader { b: bytes, at: 0 };
        let magic = r.take(8)?;
        let with_rings = magic == MAGIC;
        if !with_rings && magic != MAGIC_V1 {
            return Err(StateError::Format("not a lockstep state (bad magic)".into()));
        }
        let pos = r.u64()? as usize;
        let hist = r.u64()? as usize;
        let mut ids = Vec::with_capacity(hist.min(bytes.len() / 8));
        for _ in 0..hist {
            ids.push(r.u64()? as i64);
        }
        let mut history = EngramHistory::new();
        history.extend_raw(&ids);
        let fresh = SeqState::new(ex, cfg, plan)?;
        let mut layers = Vec::with_capacity(fresh.layers.len());
        for (i, l) in fresh.layers.into_iter().enumerate() {
            let window = r.rows(ex, cfg.head_dim, Some(cfg.sliding_window), i, "window")?;
            let comp = match l.comp {
                Some(c) => {
                    let rows = r.u64()? as usize;
                    let (mut kv, mut index_keys) = (c.kv, c.index_keys);
                    let values = r.grid_rows(ex, cfg.head_dim, Some(rows), i, "compressed kv", Some(Qat::Fp4Rows))?;
                    ex.append_rows(&mut kv, &values)?;
                    let values = r.grid_rows(ex, cfg.index_head_dim, Some(rows), i, "index keys", Some(Qat::Fp4Index))?;
                    ex.append_rows(&mut index_keys, &values)?;
                    let pending = r.u64()? as usize;
                    let partial = match c.partial {
                        Some(_) => Some(r.rows(ex, 2 * cfg.head_dim, Some(c.ratio - 1), i, "partial group")?),
                        None => None,
                    };
                    if pending >= c.ratio.max(1) || rows * c.ratio + pending != pos {
                        return Err(StateError::Format(format!("layer {i}: {rows} compressed rows and {pending} pending do not make position {pos} at ratio {}", c.ratio)));
                    }
                    Some(CompCache { ratio: c.ratio, kv, index_keys, rows, partial, pending, journal: None })
                }
                None => None,
            };
            layers.push(LayerState { window, comp });
        }
        let n = if with_rings { r.u64()? as usize } else { 0 };
        let drafts = if n == 0 {
            None
        } else {
            if n != cfg.num_nextn_predict_layers {
                return Err(StateError::Format(format!("{n} DSpark rings for a model of {} stages", cfg.num_nextn_predict_layers)));
            }
            let from = r.u64()? as usize;
            if from > pos {
                return Err(StateError::Format(format!("DSpark rings fed from position {from}, after the state's {pos}")));
            }
            let rings = (0..n).map(|s| r.rows(ex, cfg.head_dim, Some(cfg.sliding_window), s, "DSpark ring")).collect::<Result<_, _>>()?;
            Some(DraftRings { rings, from })
        };
        if r.at != bytes.len() {
            return Err(StateError::Format(format!("{} bytes after the last section", bytes.len() - r.at)));
        }
        Ok(SeqState { pos, history, layers, drafts, journal: false })
    }
}

/// Why state bytes could not be restored.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The bytes do not follow the layout.
    #[error("state bytes: {0}")]
    Format(String),
    /// Uploading failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// A cursor over state bytes.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], StateError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| StateError::Format(format!("truncated at byte {}", self.at)))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u64(&mut self) -> Result<u64, StateError> {
        let s = self.take(8)?;
        Ok(u64::from_le_bytes(s.try_into().expect("8 bytes")))
    }

    /// A `[rows, cols]` f32 block written by `put`, uploaded; `rows` checked when known.
    fn rows<E: Executor>(&mut self, ex: &mut E, cols: usize, rows: Option<usize>, layer: usize, what: &str) -> Result<E::Tensor, StateError> {
        self.grid_rows(ex, cols, rows, layer, what, None)
    }

    /// `rows`, refused unless every value is exact in `grid`'s packed format when given.
    fn grid_rows<E: Executor>(&mut self, ex: &mut E, cols: usize, rows: Option<usize>, layer: usize, what: &str, grid: Option<Qat>) -> Result<E::Tensor, StateError> {
        let n = self.u64()? as usize;
        if cols == 0 || n % cols != 0 || rows.is_some_and(|r| r * cols != n) {
            return Err(StateError::Format(format!("layer {layer} {what}: {n} values for rows of {cols}")));
        }
        let bytes = self.take(n.checked_mul(4).ok_or_else(|| StateError::Format("size overflow".into()))?)?;
        let vals: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        if let Some(kind) = grid {
            let p = Packing::new(kind, cols).map_err(|e| StateError::Format(format!("layer {layer} {what}: {e}")))?;
            let (back, _) = unpack_rows(p, &pack_rows(p, &vals), None);
            if back.iter().zip(&vals).any(|(a, b)| a.to_bits() != b.to_bits()) {
                return Err(StateError::Format(format!("layer {layer} {what}: values off the {kind:?} grid")));
            }
        }
        Ok(if n == 0 { ex.zeros(0, cols)? } else { ex.upload(n / cols, cols, &vals)? })
    }
}
