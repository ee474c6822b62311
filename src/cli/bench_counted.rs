//! The forward benchmark's byte counter: an observer that, while counting, adds up the weight and KV-state bytes the ops read.
use crate::exec::observe::{Observed, Observer, Reads};
use crate::exec::{ExecError, Executor};
use crate::weights::Checkpoint;
use std::collections::BTreeSet;

/// Bytes one forward call read, by kind, and the FLOPs of its GEMMs and attention (a multiply-add counts two).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepBytes {
    /// Weights other than routed experts (stored bytes, scales included).
    pub weights: u64,
    /// Routed experts' stored bytes, for the experts the routing ids picked.
    pub experts: u64,
    /// Distinct (layer, expert) pairs the routing ids picked.
    pub expert_picks: usize,
    /// KV state the attention of each query row read: window rows and selected compressed rows (device f32, as unpacked).
    pub kv: u64,
    /// Index keys the indexer scored for each query row, as it reads them (packed rows, or f32 values).
    pub index: u64,
    /// Packed compressed rows and index keys read to unpack them for attention and the indexer.
    pub packed: u64,
    /// FLOPs of the GEMMs: dense, blocks of rows, and routed experts over the rows each took.
    pub gemm_flops: u64,
    /// FLOPs of attention: scores and weighted values over each query row's keys, every head.
    pub attn_flops: u64,
}

impl StepBytes {
    /// Everything read.
    pub fn total(&self) -> u64 {
        self.weights + self.experts + self.kv + self.index + self.packed
    }
}

/// Counts the bytes the observed ops read while `counting` is on.
pub struct ByteCounter<'c> {
    /// The checkpoint the weights come from (their stored sizes).
    ckpt: &'c Checkpoint,
    /// Whether ops are counted (counting reads routing ids and top-k lists back, so timed calls leave it off).
    pub counting: bool,
    /// What the counted ops read.
    pub bytes: StepBytes,
}

/// An executor whose ops' reads are counted.
pub type Counted<'c, E> = Observed<E, ByteCounter<'c>>;

impl<'c, E: Executor> Observed<E, ByteCounter<'c>> {
    /// Wraps `inner`, not counting.
    pub fn new(inner: E, ckpt: &'c Checkpoint) -> Self {
        Observed { inner, obs: ByteCounter { ckpt, counting: false, bytes: StepBytes::default() } }
    }
}

impl ByteCounter<'_> {
    /// Stored bytes of tensor `name` (0 when absent).
    fn tensor(&self, name: &str) -> u64 {
        self.ckpt.get(name).map_or(0, |t| t.bytes.len() as u64)
    }

    /// FLOPs of `x_rows` rows through `module.weight` (0 when it is not a GEMM weight).
    fn gemm(&self, module: &str, x_rows: usize) -> u64 {
        crate::exec::shapes::gemm_shape(self.ckpt, module).map_or(0, |(_, n, k)| 2 * (x_rows * n * k) as u64)
    }

    /// Stored bytes of `module.weight` and its scale.
    fn module(&self, module: &str) -> u64 {
        self.tensor(&format!("{module}.weight")) + self.tensor(&format!("{module}.scale"))
    }
}

impl<E: Executor> Observer<E> for ByteCounter<'_> {
    fn before(&mut self, ex: &mut E, _op: &'static str, reads: Reads<'_, E::Tensor>) -> Result<(), ExecError> {
        if !self.counting {
            return Ok(());
        }
        match reads {
            Reads::Nothing => {}
            Reads::Rows { module, ids } => {
                let row = self.ckpt.get(&format!("{module}.weight")).map_or(0, |t| (t.bytes.len() / t.shape.first().copied().unwrap_or(1).max(1)) as u64);
                self.bytes.weights += row * ids as u64;
            }
            Reads::Module(module) => self.bytes.weights += self.module(module),
            Reads::Linear { module, x_rows } => {
                self.bytes.weights += self.module(module);
                self.bytes.gemm_flops += self.gemm(module, x_rows);
            }
            Reads::Linears { modules, x_rows } => {
                for module in modules {
                    self.bytes.weights += self.module(module);
                    self.bytes.gemm_flops += self.gemm(module, x_rows);
                }
            }
            Reads::ModuleRows { module, rows: (lo, hi), x_rows } => {
                let n = self.ckpt.get(&format!("{module}.weight")).and_then(|t| t.shape.first().copied()).unwrap_or(1).max(1) as u64;
                self.bytes.weights += self.module(module) * (hi - lo) as u64 / n;
                self.bytes.gemm_flops += self.gemm(module, x_rows) * (hi - lo) as u64 / n;
            }
            Reads::Tensors(names) => self.bytes.weights += names.iter().map(|n| self.tensor(n)).sum::<u64>(),
            Reads::IndexKeys { keys, visible } => {
                let row = ex.packing(keys).map_or(ex.dims(keys).1 * 4, |p| p.row_bytes()) as u64;
                self.bytes.index += visible.iter().map(|&v| v as u64 * row).sum::<u64>();
            }
            Reads::Packed { cache, sel } => {
                let Some(p) = ex.packing(cache) else { return Ok(()) };
                let rows = match sel {
                    Some(s) => ex.read(s)?.iter().filter(|&&v| v >= 0.0).count() as u64,
                    None => ex.dims(cache).0 as u64,
                };
                self.bytes.packed += rows * p.row_bytes() as u64;
            }
            Reads::Attention { q, a } => {
                self.bytes.weights += self.tensor(a.sink);
                let (rows, hd) = (ex.dims(q).0, ex.dims(a.kv).1 as u64);
                let window: u64 = (0..rows).map(|i| (a.start + i + 1).min(a.window) as u64).sum();
                let picked = match a.compressed {
                    Some((_, sel)) => ex.read(sel)?.iter().filter(|&&v| v >= 0.0).count() as u64,
                    None => 0,
                };
                self.bytes.kv += (window + picked) * hd * 4;
                let heads = ex.dims(q).1 as u64 / hd.max(1);
                self.bytes.attn_flops += 4 * (window + picked) * hd * heads;
            }
            Reads::Route { bias, bias_vl, image } => {
                let vl = match bias_vl {
                    Some(b) if image.iter().any(|&i| i) => self.tensor(b),
                    _ => 0,
                };
                self.bytes.weights += self.tensor(bias) + vl;
            }
            Reads::Routing { ids } => {
                let picked: BTreeSet<i64> = ex.read(ids)?.iter().filter(|&&v| v >= 0.0).map(|&v| v as i64).collect();
                self.bytes.expert_picks += picked.len();
            }
            Reads::Stack { stack, table } => {
                let (words, cols) = (ex.read(table)?, ex.dims(table).1.max(1));
                let touched: BTreeSet<i64> = words.chunks_exact(cols).map(|e| e[0] as i64).collect();
                for e in touched {
                    self.bytes.experts += self.module(&stack.module(e as usize));
                }
                for e in words.chunks_exact(cols).filter(|e| e[0] >= 0.0) {
                    let rows = if cols >= 3 { e[2] as usize } else { 1 };
                    self.bytes.gemm_flops += self.gemm(&stack.module(e[0] as usize), rows);
                }
            }
        }
        Ok(())
    }
}
