//! The Executor trait: the ops the forward is written in; each executor owns its tensors and runs every op row-independently.
pub mod cpu;
pub mod gpu;
pub mod observe;
pub mod shapes;

pub use crate::kernels::engram::EngramGate;
pub use crate::kernels::hc::HcParams;
pub use crate::kernels::moe::{RouteParams, ScoreFunc};
pub use crate::kernels::qat::Qat;
pub use cpu::{CpuExecutor, CpuTensor};
pub use gpu::{GpuExecutor, GpuTensor, KernelTime};

/// Why an op could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// A weight is missing from the checkpoint.
    #[error("weight `{0}` is not in the checkpoint")]
    MissingWeight(String),
    /// A weight has a dtype or shape the op cannot use.
    #[error("weight `{name}`: {problem}")]
    BadWeight { name: String, problem: String },
    /// Operand shapes do not fit the op.
    #[error("{op}: {problem}")]
    Shape { op: &'static str, problem: String },
    /// The executor is not available.
    #[error("{0}")]
    Unavailable(String),
    /// An op produced a NaN: an engine error (numerics N7), never a value passed on.
    #[error("op `{op}` produced a NaN at element {index} (an engine error: a NaN is never passed on as a value)")]
    NaN { op: &'static str, index: usize },
    /// The GPU device failed (allocation, pipeline, submission or readback).
    #[error("device: {0}")]
    Device(#[from] crate::gpu::GpuError),
}

/// Rounding of an op's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Out {
    /// Rounded to bf16 (where the reference holds a bf16 tensor).
    Bf16,
    /// Kept in f32 (the reference's fp32 islands).
    F32,
}

/// The tensors of one mHC site: `hc_{site}_fn`, `hc_{site}_base`, `hc_{site}_scale`.
#[derive(Clone, Debug)]
pub struct HcSite {
    /// `[mix, hc*d]` F32 tensor name.
    pub hc_fn: String,
    /// `[mix]` F32 tensor name.
    pub base: String,
    /// `[3]` F32 tensor name.
    pub scale: String,
}

/// What one call's sparse attention reads besides q.
pub struct AttnInputs<'t, T> {
    /// This call's window KV rows `[S, hd]`, row i at absolute position `start + i`.
    pub kv: &'t T,
    /// The window ring before this call `[window, hd]`, slot = position mod window.
    pub ring: &'t T,
    /// The compressed KV cache `[N, hd]` and this call's selected rows `[S, k]` (ascending, -1 for none).
    pub compressed: Option<(&'t T, &'t T)>,
    /// `attn_sink` tensor name `[heads]`.
    pub sink: &'t str,
    /// Absolute position of row 0; rows are consecutive positions.
    pub start: usize,
    /// Window length (`sliding_window`).
    pub window: usize,
    /// `head_dim^-1/2` rounded once from f64.
    pub scale: f32,
    /// A draft block: every row attends to the ring's positions from `start - window` and to all of `kv`'s rows (no selection).
    pub block: bool,
}

/// A stack of same-shaped matrices `{prefix}.{i}.{matrix}`, i from 0 (one layer's routed experts, one of w1/w2/w3).
#[derive(Clone, Copy, Debug)]
pub struct Stack<'a> {
    /// Module prefix, e.g. `layers.3.ffn.experts`.
    pub prefix: &'a str,
    /// Matrix name within each entry, e.g. `w1`.
    pub matrix: &'a str,
}

impl Stack<'_> {
    /// The module of entry `i`.
    pub fn module(&self, i: usize) -> String {
        format!("{}.{i}.{}", self.prefix, self.matrix)
    }
}

/// The routed rows of one call packed by expert (experts ascending, each expert's rows ascending), as executor tensors.
pub struct Routes<T> {
    /// Source row of each packed row `[P, 1]`: gather_rows' index into x.
    pub rows: T,
    /// `row * k + pick` of each packed row `[P, 1]`: gather_rows' index into the route weights viewed `[S*k, 1]`.
    pub picks: T,
    /// Packed row of each (row, pick) `[S, k]`: moe_join's slots.
    pub slots: T,
    /// `(expert, first packed row, packed rows)` of each expert used `[G, 3]`, or the expert of each packed row `[P, 1]`: the grouped GEMM's table.
    pub table: T,
    /// Whether packed row p is pick p % k of row p / k (`rows` and `picks` then add nothing: the grouped GEMMs take x's own rows and the weights as they are).
    pub by_row: bool,
}

/// The ops of the forward: primitives, no model (the forward composes them under the checkpoint's names). Weight arguments are checkpoint names: `linear`, `linear_block`, `rmsnorm` and `embed` take the module name (the executor adds `.weight` / `.scale`), every other op the exact tensor name. Every op is row-independent: a row's output bits do not depend on the other rows of the call.
pub trait Executor {
    /// A tensor of f32 values `[rows, cols]` owned by the executor.
    type Tensor;

    /// Uploads host values `[rows, cols]`.
    fn upload(&mut self, rows: usize, cols: usize, data: &[f32]) -> Result<Self::Tensor, ExecError>;
    /// A zero tensor `[rows, cols]`.
    fn zeros(&mut self, rows: usize, cols: usize) -> Result<Self::Tensor, ExecError>;
    /// A tensor `[rows, cols]` whose values are unspecified (NaN where the executor can poison); every element must be written before it is read.
    fn scratch(&mut self, rows: usize, cols: usize) -> Result<Self::Tensor, ExecError>;
    /// A copy of `x` that shares no storage with it (writes to either leave the other unchanged).
    fn copy(&mut self, x: &Self::Tensor) -> Result<Self::Tensor, ExecError>;
    /// `copy` of a cache with room for `rows` rows (at least its own) before it grows.
    fn copy_with_room(&mut self, x: &Self::Tensor, rows: usize) -> Result<Self::Tensor, ExecError>;
    /// Uploads a row index list as `[len, 1]` (values exact as f32).
    fn upload_index(&mut self, idx: &[u32]) -> Result<Self::Tensor, ExecError>;
    /// `upload_index` of a list that depends only on shapes, which the executor may keep and hand out again (never written).
    fn const_index(&mut self, idx: &[u32]) -> Result<Self::Tensor, ExecError> {
        self.upload_index(idx)
    }
    /// The same values viewed as `[rows, cols]` (the element count must match).
    fn reshape(&mut self, x: &Self::Tensor, rows: usize, cols: usize) -> Result<Self::Tensor, ExecError>;
    /// Reads a tensor back, row-major.
    fn read(&mut self, t: &Self::Tensor) -> Result<Vec<f32>, ExecError>;
    /// `(rows, cols)` of a tensor.
    fn dims(&self, t: &Self::Tensor) -> (usize, usize);

    /// Rows `idx` (`[n, 1]`, from `upload_index` or `Routes`) of `x` into `[n, cols]`.
    fn gather_rows(&mut self, x: &Self::Tensor, idx: &Self::Tensor) -> Result<Self::Tensor, ExecError>;
    /// Rows `start..start + len` of `x`.
    fn slice_rows(&mut self, x: &Self::Tensor, start: usize, len: usize) -> Result<Self::Tensor, ExecError>;
    /// Each row `[d]` repeated `hc` times into `[hc*d]` (the stream expansion).
    fn hc_repeat(&mut self, x: &Self::Tensor, hc: usize) -> Result<Self::Tensor, ExecError>;
    /// Rows of the BF16 table `module` for `ids`.
    fn embed(&mut self, module: &str, ids: &[u32]) -> Result<Self::Tensor, ExecError>;
    /// `y = x W^T` by the weight's format: BF16 on bf16-valued x; fp8 and fp4 on act_quant(x) (e4m3 per 32), as the reference's Linear.
    fn linear(&mut self, x: &Self::Tensor, module: &str, out: Out) -> Result<Self::Tensor, ExecError>;
    /// `y[:, col..col + hi - lo] = x W[lo..hi]^T` in f32 for rows `lo..hi` of `module.weight`: act_quant(x) first when `quantize` (as `linear`), else x's values with scale 1 on the dequantized weight (exact in bf16).
    fn linear_block(&mut self, x: &Self::Tensor, module: &str, rows: (usize, usize), quantize: bool, y: &mut Self::Tensor, col: usize) -> Result<(), ExecError>;
    /// Block-diagonal `x W^T` of x `[S, groups * dg]`: group g's columns times weight rows `[g * rank, (g + 1) * rank)` into output columns `g * rank..`, x's values with scales 1 on the dequantized weight (exact in bf16); bf16 out.
    fn block_linear(&mut self, x: &Self::Tensor, module: &str, groups: usize, rank: usize) -> Result<Self::Tensor, ExecError> {
        block_linear_by_groups(self, x, module, groups, rank)
    }
    /// `x W_e^T` of packed rows grouped by `table` (`Routes::table`): entry (e, first, n) multiplies rows `first..first+n` by `stack`'s matrix e; a one-column table of r times x's rows names output row i's matrix, applied to x row i / r.
    fn grouped_linear(&mut self, x: &Self::Tensor, stack: &Stack<'_>, table: &Self::Tensor, out: Out) -> Result<Self::Tensor, ExecError>;
    /// RMSNorm of each row with `module.weight`.
    fn rmsnorm(&mut self, x: &Self::Tensor, module: &str, eps: f32, out: Out) -> Result<Self::Tensor, ExecError>;
    /// `x * s` elementwise.
    fn scale(&mut self, x: &Self::Tensor, s: f32, out: Out) -> Result<Self::Tensor, ExecError>;
    /// `a + b` elementwise.
    fn add(&mut self, a: &Self::Tensor, b: &Self::Tensor, out: Out) -> Result<Self::Tensor, ExecError>;
    /// Clamped SwiGLU `silu(min(g, limit)) * clamp(u, +-limit)`, times the row's weight `[S, 1]` when given, bf16 out.
    fn swiglu(&mut self, g: &Self::Tensor, u: &Self::Tensor, weights: Option<&Self::Tensor>, limit: f32) -> Result<Self::Tensor, ExecError>;
    /// `swiglu(linear(x, gate), linear(x, up))` with bf16 at each, no row weights (a shared expert's first half).
    fn gated_linear(&mut self, x: &Self::Tensor, gate: &str, up: &str, limit: f32) -> Result<Self::Tensor, ExecError> {
        gated_linear_apart(self, x, gate, up, limit)
    }
    /// `rmsnorm(linear(x, a[0]), a[1])` and `rmsnorm(linear(x, b[0]), b[1])`, bf16 at each (an attention's q and kv inputs).
    fn normed_linears(&mut self, x: &Self::Tensor, a: [&str; 2], b: [&str; 2], eps: f32) -> Result<(Self::Tensor, Self::Tensor), ExecError> {
        normed_linears_apart(self, x, a, b, eps)
    }
    /// Each value rounded to bf16.
    fn round_bf16(&mut self, x: &Self::Tensor) -> Result<Self::Tensor, ExecError>;

    /// mHC mixes of each row of streams `h` `[S, hc*d]`: `[S, mix]` = pre, post, comb.
    fn hc_mixes(&mut self, h: &Self::Tensor, site: &HcSite, p: &HcParams) -> Result<Self::Tensor, ExecError>;
    /// Collapse `[S, hc*d]` by the pre columns of `mix` to `[S, d]`, bf16 out.
    fn hc_collapse(&mut self, h: &Self::Tensor, mix: &Self::Tensor, hc: usize) -> Result<Self::Tensor, ExecError>;
    /// Expand a sublayer output `[S, d]` into the streams with the post and comb columns of `mix`, bf16 out.
    fn hc_expand(&mut self, out: &Self::Tensor, h: &Self::Tensor, mix: &Self::Tensor, hc: usize) -> Result<Self::Tensor, ExecError>;
    /// Engram gate and add: streams `h`, `kv` = wkv output, tensors `q_weight` and `k_weight`; rows not `live` pass through.
    fn engram_gate(&mut self, h: &Self::Tensor, kv: &Self::Tensor, q_weight: &str, k_weight: &str, p: &EngramGate, live: &[bool]) -> Result<Self::Tensor, ExecError>;

    /// RoPE on the last `cs.cols` dims of each of `heads` vectors per row, row i by `cs` row i (cos then sin); bf16 out.
    fn rope(&mut self, x: &Self::Tensor, cs: &Self::Tensor, heads: usize, inverse: bool) -> Result<Self::Tensor, ExecError>;
    /// Quantize-dequantize round trip of each block.
    fn qat(&mut self, x: &Self::Tensor, kind: Qat) -> Result<Self::Tensor, ExecError>;

    /// Ratio-r gated pooling: the `pending` buffered rows of `partial` (`[r-1, 2*hd]`: k then g), then this call's `k`, `g` rows; returns the complete groups' latents `[G, hd]` (bf16) and leaves the remainder in `partial` (rest zero).
    fn compress_pool(&mut self, k: &Self::Tensor, g: &Self::Tensor, partial: &mut Self::Tensor, pending: usize, ratio: usize) -> Result<Self::Tensor, ExecError>;
    /// `compress_pool(linear(x, m[0]), linear(x, m[1]), ...)` with f32 linears (a compressor's wkv and wgate).
    fn pooled_linears(&mut self, x: &Self::Tensor, m: [&str; 2], partial: &mut Self::Tensor, pending: usize, ratio: usize) -> Result<Self::Tensor, ExecError> {
        pooled_linears_apart(self, x, m, partial, pending, ratio)
    }
    /// Appends rows to a growing cache (packing them into a packed cache, whose values they must be exact in).
    fn append_rows(&mut self, cache: &mut Self::Tensor, rows: &Self::Tensor) -> Result<(), ExecError>;
    /// An empty cache of rows of `cols` values exact in `kind`'s format, kept packed (`kernels::state`: 288 bytes a 512-value fp4 row, 68 a 128-value index key), with room for `capacity` rows; `append_rows` packs into it and `read` unpacks.
    fn packed_cache(&mut self, kind: Qat, cols: usize, capacity: usize) -> Result<Self::Tensor, ExecError>;
    /// A packed cache's rows as values: every row (`sel` None), or the rows `sel` `[S, k]` names (-1 for none) as `[S*k, cols]`, with the selection renumbered to those rows (`[S, k]`, -1 kept).
    fn unpack_rows(&mut self, cache: &Self::Tensor, sel: Option<&Self::Tensor>) -> Result<(Self::Tensor, Option<Self::Tensor>), ExecError>;
    /// Bytes the tensor's storage holds, its room for more rows included.
    fn allocated_bytes(&self, t: &Self::Tensor) -> usize;
    /// How a packed cache's rows are packed (None for values).
    fn packing(&self, t: &Self::Tensor) -> Option<crate::kernels::state::Packing>;
    /// Keeps the first `rows` rows of a cache (the rest are forgotten; appends continue after them).
    fn truncate_rows(&mut self, cache: &mut Self::Tensor, rows: usize) -> Result<(), ExecError>;
    /// Writes this call's rows (positions `start..`) into their ring slots (position mod ring rows).
    fn ring_write(&mut self, ring: &mut Self::Tensor, rows: &Self::Tensor, start: usize) -> Result<(), ExecError>;

    /// Indexer scores `[S, N]` of q `[S, heads*dim]` with weights `w` `[S, heads]` against `keys` `[N, dim]`; key t visible to row i iff t < visible[i].
    fn index_scores(&mut self, q: &Self::Tensor, w: &Self::Tensor, keys: &Self::Tensor, visible: &[usize]) -> Result<Self::Tensor, ExecError>;
    /// Level-one candidate mask `[S, N]` (1 kept, 0 not).
    fn candidate_mask(&mut self, scores: &Self::Tensor, visible: &[usize], blocks: usize, block: usize) -> Result<Self::Tensor, ExecError>;
    /// Scores outside `mask` set to -inf.
    fn mask_scores(&mut self, scores: &Self::Tensor, mask: &Self::Tensor) -> Result<Self::Tensor, ExecError>;
    /// Top-k of each row `[S, k]` over its first visible[i] scores, -inf picks kept: indices ascending as f32, -1 for none.
    fn index_topk(&mut self, scores: &Self::Tensor, visible: &[usize], k: usize) -> Result<Self::Tensor, ExecError>;
    /// Sparse attention with sink of q `[S, heads*hd]` over each row's window then selected compressed rows (a block: the ring then all block rows); bf16 out.
    fn sparse_attention(&mut self, q: &Self::Tensor, a: &AttnInputs<'_, Self::Tensor>) -> Result<Self::Tensor, ExecError>;

    /// Router of gate logits `[S, E]` with the F32 selection bias `bias`, or `bias_vl` on rows marked `image`: (expert ids `[S, k]` as f32, weights `[S, k]`).
    fn moe_route(&mut self, logits: &Self::Tensor, bias: &str, bias_vl: Option<&str>, image: &[bool], p: &RouteParams) -> Result<(Self::Tensor, Self::Tensor), ExecError>;
    /// The packing of moe_route's `ids` `[S, k]` by expert; every id must be below `experts`.
    fn route(&mut self, ids: &Self::Tensor, experts: usize) -> Result<Routes<Self::Tensor>, ExecError>;
    /// Each row's routed outputs (packed rows of `routed` by `slots`) added to +0.0 by ascending expert id (`ids`), then `shared`; bf16 out.
    fn moe_join(&mut self, routed: &Self::Tensor, slots: &Self::Tensor, ids: &Self::Tensor, shared: &Self::Tensor) -> Result<Self::Tensor, ExecError>;

    /// Split-half RoPE (dims i and i + rd/2 of each head) of x `[S, heads*hd]` by host rows `cs` `[S, rd]`; bf16 out.
    fn rope_halves(&mut self, x: &Self::Tensor, cs: &Self::Tensor, heads: usize) -> Result<Self::Tensor, ExecError>;
    /// `x + module.bias` on every row, then the output rounding.
    fn bias_add(&mut self, x: &Self::Tensor, module: &str, out: Out) -> Result<Self::Tensor, ExecError>;
    /// The erf GELU of every element, then the output rounding.
    fn gelu(&mut self, x: &Self::Tensor, out: Out) -> Result<Self::Tensor, ExecError>;
    /// The aligner's unfold of a `[grid_h*grid_w, C]` patch grid into `[cells, C*cell^2]`, channel-major within a cell, zero past the grid.
    fn unfold_cells(&mut self, x: &Self::Tensor, grid_h: usize, grid_w: usize, cell: usize) -> Result<Self::Tensor, ExecError>;
    /// Bidirectional attention of q `[N, heads*hd]` over k, v `[M, heads*hd]` (every key, no sink, scale hd^-1/2); bf16 out.
    fn vit_attention(&mut self, q: &Self::Tensor, k: &Self::Tensor, v: &Self::Tensor, heads: usize) -> Result<Self::Tensor, ExecError>;
}

/// `gated_linear` as two linears and a swiglu (the CPU's way, and the GPU's where one grouped GEMM does not fit).
pub fn gated_linear_apart<E: Executor + ?Sized>(ex: &mut E, x: &E::Tensor, gate: &str, up: &str, limit: f32) -> Result<E::Tensor, ExecError> {
    let g = ex.linear(x, gate, Out::Bf16)?;
    let u = ex.linear(x, up, Out::Bf16)?;
    ex.swiglu(&g, &u, None, limit)
}

/// `normed_linears` as two linears and two rmsnorms (the CPU's way, and the GPU's where one GEMV does not fit).
pub fn normed_linears_apart<E: Executor + ?Sized>(ex: &mut E, x: &E::Tensor, a: [&str; 2], b: [&str; 2], eps: f32) -> Result<(E::Tensor, E::Tensor), ExecError> {
    let ya = ex.linear(x, a[0], Out::Bf16)?;
    let ya = ex.rmsnorm(&ya, a[1], eps, Out::Bf16)?;
    let yb = ex.linear(x, b[0], Out::Bf16)?;
    Ok((ya, ex.rmsnorm(&yb, b[1], eps, Out::Bf16)?))
}

/// `pooled_linears` as two linears and a compress_pool (the CPU's way, and the GPU's where one GEMV does not fit).
pub fn pooled_linears_apart<E: Executor + ?Sized>(ex: &mut E, x: &E::Tensor, m: [&str; 2], partial: &mut E::Tensor, pending: usize, ratio: usize) -> Result<E::Tensor, ExecError> {
    let k = ex.linear(x, m[0], Out::F32)?;
    let g = ex.linear(x, m[1], Out::F32)?;
    ex.compress_pool(&k, &g, partial, pending, ratio)
}

/// `block_linear` group by group: the group's columns gathered (rows of x viewed `[S * groups, dg]`), one `linear_block` per group, then the rounding.
pub fn block_linear_by_groups<E: Executor + ?Sized>(ex: &mut E, x: &E::Tensor, module: &str, groups: usize, rank: usize) -> Result<E::Tensor, ExecError> {
    let (s, cols) = ex.dims(x);
    if groups == 0 || !cols.is_multiple_of(groups) {
        return Err(ExecError::Shape { op: "block_linear", problem: format!("{cols} inputs do not split into {groups} groups") });
    }
    let flat = ex.reshape(x, s * groups, cols / groups)?;
    let mut y = ex.scratch(s, groups * rank)?;
    for g in 0..groups {
        let idx: Vec<u32> = (0..s).map(|i| (i * groups + g) as u32).collect();
        let idx = ex.upload_index(&idx)?;
        let og = ex.gather_rows(&flat, &idx)?;
        ex.linear_block(&og, module, (g * rank, (g + 1) * rank), false, &mut y, g * rank)?;
    }
    ex.round_bf16(&y)
}

/// `route` without reading the ids: every (row, pick) its own packed row in pick order, the table an expert per packed row (`ids` viewed `[S*k, 1]`), so the grouped GEMMs read the picks where they are.
pub(crate) fn route_by_row<E: Executor>(ex: &mut E, ids: &E::Tensor) -> Result<Routes<E::Tensor>, ExecError> {
    let (s, k) = ex.dims(ids);
    let rows: Vec<u32> = (0..s * k).map(|p| (p / k.max(1)) as u32).collect();
    let order: Vec<u32> = (0..(s * k) as u32).collect();
    let picks = ex.const_index(&order)?;
    Ok(Routes { rows: ex.const_index(&rows)?, slots: ex.reshape(&picks, s, k)?, picks, table: ex.reshape(ids, s * k, 1)?, by_row: true })
}

/// `route` from the ids read to the host and packed there (`kernels::moe::pack_routes`), the index tensors uploaded: both executors' way until routing runs on the device.
pub(crate) fn route_on_host<E: Executor>(ex: &mut E, ids: &E::Tensor, experts: usize) -> Result<Routes<E::Tensor>, ExecError> {
    let (s, k) = ex.dims(ids);
    let host = ex.read(ids)?;
    shapes::route(&host, experts)?;
    let pack = crate::kernels::moe::pack_routes(&host, k);
    let table: Vec<u32> = pack.experts.iter().flat_map(|&(e, first, rows)| [e, first as u32, rows as u32]).collect();
    let slots = ex.upload_index(&pack.slot_map)?;
    let table_t = ex.upload_index(&table)?;
    Ok(Routes {
        rows: ex.upload_index(&pack.rows)?,
        picks: ex.upload_index(&pack.picks)?,
        slots: ex.reshape(&slots, s, k)?,
        table: ex.reshape(&table_t, pack.experts.len(), 3)?,
        by_row: false,
    })
}
