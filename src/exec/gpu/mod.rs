//! The GPU executor: tensors are device buffers, every op records registered kernels into one recorder, submitted only when a value must reach the host.
use crate::exec::{shapes, AttnInputs, EngramGate, ExecError, Executor, HcParams, HcSite, Out, Qat, RouteParams, Routes, Stack};
use pool::Pool;
mod blocks;
pub(crate) mod experts;
mod layer_ops;
pub(crate) mod ops;
mod pool;
mod vision_ops;
pub(crate) mod rows;

use layer_ops as gm;
use ops as go;
use rows as gr;
use crate::gpu::{Buf, Gpu, Recorder, Submitted};
use crate::kernels::state::Packing;
use crate::weights::Checkpoint;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Rows whose routing stays on the device (a grouped GEMM entry per pick); more rows are packed by expert on the host.
const DEVICE_ROUTE_ROWS: usize = crate::kernels::gemm::GEMV_MAX_ROWS;

/// The longest index list `const_words` keeps, and how many lists it keeps before starting over.
const CONST_WORDS: usize = 4096;
const CONST_LISTS: usize = 256;

/// Pending dispatches that make the executor submit without waiting, once earlier submits keep the device busy.
const PIPELINE_DISPATCHES: usize = 64;

/// Pending dispatches of the first submit after a wait (each later one twice the last, up to `PIPELINE_DISPATCHES`), so the device starts early.
const FIRST_DISPATCHES: usize = 8;

/// A device tensor of f32 values `[rows, cols]`; the buffer may hold more rows (growing caches).
#[derive(Clone, Debug)]
pub struct GpuTensor {
    /// The storage buffer, row-major from offset 0.
    pub buf: Buf,
    /// Rows in use.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// For an index tensor: its values, which the buffer holds as u32 words.
    pub index: Option<Arc<Vec<u32>>>,
    /// How the rows are packed, for a packed cache (the buffer holds `row_words` words a row).
    pub pack: Option<Packing>,
}

impl GpuTensor {
    /// A tensor of f32 values in `buf`.
    pub fn new(buf: Buf, rows: usize, cols: usize) -> GpuTensor {
        GpuTensor { buf, rows, cols, index: None, pack: None }
    }

    /// Words a row takes in the buffer.
    pub fn row_words(&self) -> usize {
        self.pack.map_or(self.cols, |p| p.row_words())
    }

    /// Rows the buffer has room for.
    pub fn capacity(&self) -> usize {
        ((self.buf.bytes / 4) as usize).checked_div(self.row_words()).unwrap_or(usize::MAX)
    }
}

/// One weight as uploaded: stored bytes for GEMMs and tables, f32 values for everything else.
pub(crate) enum Weight {
    /// F32 values of a BF16 or F32 tensor.
    Values { buf: Buf, len: usize },
    /// GEMM weight `[n, k]` in row parts that each bind below the limit.
    Gemm(go::GemmWeight),
    /// A BF16 table as stored.
    Table { buf: Buf },
    /// Every routed expert's `[n, k]` weight of one matrix, stacked by expert id.
    Experts(crate::exec::gpu::experts::ExpertStack),
    /// Two GEMM weights of one input as one, the first's rows before the second's, and the first's row count; None where they do not join.
    Cat(Option<(go::GemmWeight, usize)>),
}

/// The GPU executor over one opened device and one checkpoint.
pub struct GpuExecutor<'g, 'c> {
    pub(crate) gpu: &'g Gpu,
    pub(crate) ckpt: &'c Checkpoint,
    pub(crate) rec: Recorder<'g>,
    registered: HashSet<&'static str>,
    pub(crate) weights: HashMap<String, Arc<Weight>>,
    pub(crate) limit: u64,
    submits: usize,
    waits: usize,
    dispatches: usize,
    device_seconds: f64,
    profile: Option<BTreeMap<String, KernelTime>>,
    /// While profiling, every dispatch in order: its label, workgroups and device seconds.
    trace: Vec<(String, [u32; 3], f64)>,
    pool: Pool,
    /// Command buffers submitted without waiting, whose device times are read at the next wait.
    in_flight: Vec<Submitted<'g>>,
    /// The last `QUANT_KEPT` act_quants, newest last: input, dims and (values, scales); linears of one activation share them until a state tensor is written in place.
    pub(crate) quant: Vec<(Buf, (usize, usize), Buf, Buf)>,
    /// Buffers of 1.0f32 by length, kept for the executor's life (row weights and act scales of 1).
    ones: HashMap<usize, Buf>,
    /// Small index lists that depend only on shapes, uploaded once (routing rows and picks, pick tables).
    consts: HashMap<Vec<u32>, Buf>,
}

/// Device time of one kernel over the dispatches a profile saw.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelTime {
    /// Dispatches of the kernel.
    pub dispatches: usize,
    /// Their summed device seconds.
    pub seconds: f64,
}

impl<'g, 'c> GpuExecutor<'g, 'c> {
    /// An executor on `gpu` reading weights from `ckpt`; only registered kernels whose reference variant is WGSL will run.
    pub fn new(gpu: &'g Gpu, ckpt: &'c Checkpoint) -> GpuExecutor<'g, 'c> {
        let wgsl = |k: &&dyn crate::contract::Kernel| k.variants().first().is_some_and(|v| v.lang() == crate::gpu::Lang::Wgsl);
        let registered = crate::kernels::registry().into_iter().filter(wgsl).map(|k| k.name()).collect();
        GpuExecutor { gpu, ckpt, rec: Recorder::new(gpu), registered, weights: HashMap::new(), limit: gpu.max_binding(), submits: 0, waits: 0, dispatches: 0, device_seconds: 0.0, profile: None, trace: Vec::new(), pool: Pool::new(cfg!(debug_assertions)), quant: Vec::new(), in_flight: Vec::new(), ones: HashMap::new(), consts: HashMap::new() }
    }

    /// The same executor running only the registered kernels also named in `allowed`.
    pub fn only_kernels(mut self, allowed: &[&str]) -> Self {
        self.registered.retain(|k| allowed.contains(k));
        self
    }

    /// The same executor splitting weights and tables at `bytes` per binding (below the device's limit), so small models exercise the split paths.
    pub fn split_at(mut self, bytes: u64) -> Self {
        self.limit = bytes.clamp(256, self.gpu.max_binding());
        self.weights.clear();
        self
    }

    /// The device this executor runs on.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// Command buffers submitted so far (after 8, 16, 32, then every 64 dispatches, and before each read of a value).
    pub fn submits(&self) -> usize {
        self.submits
    }

    /// Times the host waited for the device so far (each read of a value waits once).
    pub fn waits(&self) -> usize {
        self.waits
    }

    /// Dispatches submitted so far.
    pub fn dispatches(&self) -> usize {
        self.dispatches
    }

    /// Uploads every matrix of `stack` stacked for the grouped GEMMs (so no timed call pays for it); returns the matrix count.
    pub fn preload_stack(&mut self, stack: &Stack<'_>) -> Result<usize, ExecError> {
        experts::preload(self, stack)
    }

    /// Submits pending work and frees every scratch buffer no tensor holds (and the kept bind groups that bind them).
    pub fn release_scratch(&mut self) -> Result<(), ExecError> {
        self.flush()?;
        self.pool.release_free();
        self.gpu.clear_bind_groups();
        Ok(())
    }

    /// Device seconds of the submitted command buffers (0 without timestamp queries).
    pub fn device_seconds(&self) -> f64 {
        self.device_seconds
    }

    /// Starts timing every dispatch on its own (each in its own pass, so totals run above unprofiled ones).
    pub fn start_profile(&mut self) {
        self.profile = Some(BTreeMap::new());
        self.trace.clear();
    }

    /// Stops profiling; returns each kernel variant's (or stage's) dispatches and device seconds since `start_profile`.
    pub fn take_profile(&mut self) -> Result<BTreeMap<String, KernelTime>, ExecError> {
        self.flush()?;
        Ok(self.profile.take().unwrap_or_default())
    }

    /// The dispatches the last profile timed, in order: label, workgroups, device seconds.
    pub fn take_trace(&mut self) -> Vec<(String, [u32; 3], f64)> {
        std::mem::take(&mut self.trace)
    }

    /// The forward's kernels that are not registered (the forward cannot run while any is missing).
    pub fn missing_kernels(&self) -> Vec<&'static str> {
        crate::kernels::registry::forward_kernels().into_iter().filter(|k| !self.registered.contains(k)).collect()
    }

    /// Fails unless kernel `name` is registered with the contract (an unregistered kernel never runs).
    pub(crate) fn need(&self, op: &str, name: &str) -> Result<(), ExecError> {
        if self.registered.contains(name) {
            Ok(())
        } else {
            Err(ExecError::Unavailable(format!("{op}: kernel `{name}` not registered yet")))
        }
    }

    /// Submits what was recorded without waiting once enough are pending, so the device runs while the host records the rest.
    fn submit_early(&mut self) -> Result<(), ExecError> {
        let due = (FIRST_DISPATCHES << self.in_flight.len().min(8)).min(PIPELINE_DISPATCHES);
        if self.profile.is_some() || self.rec.len() < due {
            return Ok(());
        }
        let rec = std::mem::replace(&mut self.rec, Recorder::new(self.gpu));
        self.dispatches += rec.len();
        self.in_flight.push(rec.submit_async()?);
        self.submits += 1;
        Ok(())
    }

    /// Submits everything recorded so far and waits for it.
    pub(crate) fn flush(&mut self) -> Result<(), ExecError> {
        if self.rec.is_empty() && self.in_flight.is_empty() {
            return Ok(());
        }
        let rec = std::mem::replace(&mut self.rec, Recorder::new(self.gpu));
        self.dispatches += rec.len();
        if let Some(profile) = self.profile.as_mut() {
            if !rec.is_empty() {
                self.submits += 1;
                let mut labels: HashMap<(&str, &str, *const u8), String> = HashMap::new();
                for ([kernel, variant, source], groups, t) in rec.submit_profiled()? {
                    let label = labels.entry((kernel, variant, source.as_ptr())).or_insert_with(|| crate::kernels::registry::stage_label(kernel, variant, source)).clone();
                    let k = profile.entry(label.clone()).or_default();
                    k.dispatches += 1;
                    k.seconds += t;
                    self.device_seconds += t;
                    self.trace.push((label, groups, t));
                }
            }
        } else if !rec.is_empty() {
            self.in_flight.push(rec.submit_async()?);
            self.submits += 1;
        }
        if !self.in_flight.is_empty() {
            self.gpu.wait()?;
            for done in std::mem::take(&mut self.in_flight) {
                self.device_seconds += done.device_seconds()?.unwrap_or(0.0);
            }
        }
        self.waits += 1;
        if self.pool.flushed() {
            self.gpu.clear_bind_groups();
        }
        Ok(())
    }

    /// A fresh zero tensor `[rows, cols]` with room for `cap` rows (wgpu zero-initialises new buffers).
    pub(crate) fn alloc(&self, rows: usize, cols: usize, cap: usize) -> Result<GpuTensor, ExecError> {
        let buf = self.gpu.alloc((cap.max(rows) * cols * 4) as u64)?;
        Ok(GpuTensor::new(buf, rows, cols))
    }

    /// A tensor of `rows` x `cols` with unspecified contents, from the pool (the next dispatch writes every element).
    pub(crate) fn out(&mut self, rows: usize, cols: usize) -> Result<GpuTensor, ExecError> {
        Ok(GpuTensor::new(self.scratch((rows * cols * 4) as u64)?, rows, cols))
    }

    /// `out`, or a zero tensor with `spare` zero rows after its rows when `spare` > 0.
    pub(crate) fn out_spare(&mut self, rows: usize, cols: usize, spare: usize) -> Result<GpuTensor, ExecError> {
        if spare == 0 {
            self.out(rows, cols)
        } else {
            self.alloc(rows, cols, rows + spare)
        }
    }

    /// A pooled buffer of at least `bytes` with unspecified contents.
    pub(crate) fn scratch(&mut self, bytes: u64) -> Result<Buf, ExecError> {
        self.submit_early()?;
        Ok(self.pool.take(self.gpu, bytes)?)
    }

    /// A pooled buffer holding plain values.
    pub(crate) fn upload_pod<T: bytemuck::Pod>(&mut self, data: &[T]) -> Result<Buf, ExecError> {
        Ok(self.pool.upload(self.gpu, bytemuck::cast_slice(data))?)
    }

    /// A buffer of at least `len` values 1.0, uploaded once per length.
    pub(crate) fn ones(&mut self, len: usize) -> Result<Buf, ExecError> {
        let len = len.max(1);
        if let Some(b) = self.ones.get(&len) {
            return Ok(b.clone());
        }
        let b = self.gpu.upload_pod(&vec![1.0f32; len])?;
        self.ones.insert(len, b.clone());
        Ok(b)
    }

    /// A buffer holding `words`, uploaded once per distinct list and kept (lists past `CONST_WORDS` are pooled uploads).
    pub(crate) fn const_words(&mut self, words: &[u32]) -> Result<Buf, ExecError> {
        if words.len() > CONST_WORDS {
            return self.upload_pod(words);
        }
        if let Some(b) = self.consts.get(words) {
            return Ok(b.clone());
        }
        if self.consts.len() >= CONST_LISTS {
            self.consts.clear();
        }
        let b = self.gpu.upload_pod(words)?;
        self.consts.insert(words.to_vec(), b.clone());
        Ok(b)
    }

    /// A tensor holding host values.
    pub(crate) fn put(&mut self, rows: usize, cols: usize, data: &[f32]) -> Result<GpuTensor, ExecError> {
        shapes::upload(data.len(), rows, cols)?;
        Ok(GpuTensor::new(self.upload_pod(data)?, rows, cols))
    }

    /// Reads a tensor's values (submits pending work first; an index tensor's come from its host copy).
    pub(crate) fn values_of(&mut self, t: &GpuTensor) -> Result<Vec<f32>, ExecError> {
        if let Some(idx) = &t.index {
            return Ok(idx.iter().map(|&i| i as f32).collect());
        }
        self.flush()?;
        let bytes = self.gpu.read(&t.buf)?;
        let n = t.rows * t.cols;
        let mut v: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[..(n * 4).min(bytes.len())]);
        v.truncate(n);
        Ok(v)
    }
}

impl Executor for GpuExecutor<'_, '_> {
    type Tensor = GpuTensor;

    fn upload(&mut self, rows: usize, cols: usize, data: &[f32]) -> Result<GpuTensor, ExecError> {
        self.put(rows, cols, data)
    }

    fn zeros(&mut self, rows: usize, cols: usize) -> Result<GpuTensor, ExecError> {
        self.alloc(rows, cols, rows)
    }

    fn scratch(&mut self, rows: usize, cols: usize) -> Result<GpuTensor, ExecError> {
        self.out(rows, cols)
    }

    fn copy(&mut self, x: &GpuTensor) -> Result<GpuTensor, ExecError> {
        let room = if x.cols == 0 { x.rows } else { x.capacity() };
        gr::copy_tensor(self, x, room)
    }

    fn copy_with_room(&mut self, x: &GpuTensor, rows: usize) -> Result<GpuTensor, ExecError> {
        gr::copy_tensor(self, x, rows)
    }

    fn upload_index(&mut self, idx: &[u32]) -> Result<GpuTensor, ExecError> {
        Ok(GpuTensor { buf: self.upload_pod(idx)?, rows: idx.len(), cols: 1, index: Some(Arc::new(idx.to_vec())), pack: None })
    }

    fn const_index(&mut self, idx: &[u32]) -> Result<GpuTensor, ExecError> {
        Ok(GpuTensor { buf: self.const_words(idx)?, rows: idx.len(), cols: 1, index: Some(Arc::new(idx.to_vec())), pack: None })
    }

    fn reshape(&mut self, x: &GpuTensor, rows: usize, cols: usize) -> Result<GpuTensor, ExecError> {
        shapes::reshape((x.rows, x.cols), rows, cols)?;
        gr::unpacked(x, "reshape")?;
        Ok(GpuTensor { buf: x.buf.clone(), rows, cols, index: x.index.clone(), pack: None })
    }

    fn gather_rows(&mut self, x: &GpuTensor, idx: &GpuTensor) -> Result<GpuTensor, ExecError> {
        gr::gather_rows(self, x, idx)
    }

    fn read(&mut self, t: &GpuTensor) -> Result<Vec<f32>, ExecError> {
        if t.pack.is_some() {
            let (y, _) = self.unpack_rows(t, None)?;
            return self.values_of(&y);
        }
        self.values_of(t)
    }

    fn dims(&self, t: &GpuTensor) -> (usize, usize) {
        (t.rows, t.cols)
    }

    fn slice_rows(&mut self, x: &GpuTensor, start: usize, len: usize) -> Result<GpuTensor, ExecError> {
        gr::slice_rows(self, x, start, len)
    }

    fn hc_repeat(&mut self, x: &GpuTensor, hc: usize) -> Result<GpuTensor, ExecError> {
        gr::hc_repeat(self, x, hc)
    }

    fn embed(&mut self, module: &str, ids: &[u32]) -> Result<GpuTensor, ExecError> {
        gr::embed(self, module, ids)
    }

    fn linear(&mut self, x: &GpuTensor, module: &str, out: Out) -> Result<GpuTensor, ExecError> {
        go::linear(self, x, module, out)
    }

    fn linear_block(&mut self, x: &GpuTensor, module: &str, rows: (usize, usize), quantize: bool, y: &mut GpuTensor, col: usize) -> Result<(), ExecError> {
        self.quant.retain(|(xb, ..)| xb.buffer != y.buf.buffer);
        go::linear_block(self, x, module, rows, quantize, y, col)
    }

    fn block_linear(&mut self, x: &GpuTensor, module: &str, groups: usize, rank: usize) -> Result<GpuTensor, ExecError> {
        blocks::block_linear(self, x, module, groups, rank)
    }

    fn grouped_linear(&mut self, x: &GpuTensor, stack: &Stack<'_>, table: &GpuTensor, out: Out) -> Result<GpuTensor, ExecError> {
        experts::grouped_linear(self, x, stack, table, out)
    }

    fn rmsnorm(&mut self, x: &GpuTensor, module: &str, eps: f32, out: Out) -> Result<GpuTensor, ExecError> {
        go::rmsnorm(self, x, module, eps, out)
    }

    fn scale(&mut self, x: &GpuTensor, s: f32, out: Out) -> Result<GpuTensor, ExecError> {
        go::scale(self, x, s, out)
    }

    fn add(&mut self, a: &GpuTensor, b: &GpuTensor, out: Out) -> Result<GpuTensor, ExecError> {
        go::add(self, a, b, out)
    }

    fn swiglu(&mut self, g: &GpuTensor, u: &GpuTensor, weights: Option<&GpuTensor>, limit: f32) -> Result<GpuTensor, ExecError> {
        go::swiglu(self, g, u, weights, limit)
    }

    fn gated_linear(&mut self, x: &GpuTensor, gate: &str, up: &str, limit: f32) -> Result<GpuTensor, ExecError> {
        match experts::gated_linear(self, x, gate, up, limit)? {
            Some(a) => Ok(a),
            None => crate::exec::gated_linear_apart(self, x, gate, up, limit),
        }
    }

    fn normed_linears(&mut self, x: &GpuTensor, a: [&str; 2], b: [&str; 2], eps: f32) -> Result<(GpuTensor, GpuTensor), ExecError> {
        match go::normed_linears(self, x, a, b, eps)? {
            Some(p) => Ok(p),
            None => crate::exec::normed_linears_apart(self, x, a, b, eps),
        }
    }

    fn round_bf16(&mut self, x: &GpuTensor) -> Result<GpuTensor, ExecError> {
        go::round_out(self, x.clone(), Out::Bf16, 0)
    }

    fn hc_mixes(&mut self, h: &GpuTensor, site: &HcSite, p: &HcParams) -> Result<GpuTensor, ExecError> {
        gm::hc_mixes(self, h, site, p)
    }

    fn hc_collapse(&mut self, h: &GpuTensor, mix: &GpuTensor, hc: usize) -> Result<GpuTensor, ExecError> {
        gm::hc_collapse(self, h, mix, hc)
    }

    fn hc_expand(&mut self, out: &GpuTensor, h: &GpuTensor, mix: &GpuTensor, hc: usize) -> Result<GpuTensor, ExecError> {
        gm::hc_expand(self, out, h, mix, hc)
    }

    fn engram_gate(&mut self, h: &GpuTensor, kv: &GpuTensor, q_weight: &str, k_weight: &str, p: &EngramGate, live: &[bool]) -> Result<GpuTensor, ExecError> {
        gm::engram_gate(self, h, kv, (q_weight, k_weight), p, live)
    }

    fn rope(&mut self, x: &GpuTensor, cs: &GpuTensor, heads: usize, inverse: bool) -> Result<GpuTensor, ExecError> {
        gm::rope(self, x, cs, heads, inverse, crate::kernels::rope::Pairs::Interleaved)
    }

    fn qat(&mut self, x: &GpuTensor, kind: Qat) -> Result<GpuTensor, ExecError> {
        gm::qat(self, x, kind)
    }

    fn compress_pool(&mut self, k: &GpuTensor, g: &GpuTensor, partial: &mut GpuTensor, pending: usize, ratio: usize) -> Result<GpuTensor, ExecError> {
        self.quant.clear();
        gm::compress_pool(self, k, g, partial, pending, ratio)
    }

    fn pooled_linears(&mut self, x: &GpuTensor, m: [&str; 2], partial: &mut GpuTensor, pending: usize, ratio: usize) -> Result<GpuTensor, ExecError> {
        match gm::pooled_linears(self, x, m, partial, pending, ratio)? {
            Some(p) => {
                self.quant.clear();
                Ok(p)
            }
            None => crate::exec::pooled_linears_apart(self, x, m, partial, pending, ratio),
        }
    }

    fn append_rows(&mut self, cache: &mut GpuTensor, rows: &GpuTensor) -> Result<(), ExecError> {
        self.quant.clear();
        gr::append_rows(self, cache, rows)
    }

    fn packed_cache(&mut self, kind: Qat, cols: usize, capacity: usize) -> Result<GpuTensor, ExecError> {
        let p = shapes::packing(kind, cols)?;
        let mut t = self.alloc(0, p.row_words(), capacity.max(1))?;
        (t.cols, t.pack) = (cols, Some(p));
        Ok(t)
    }

    fn unpack_rows(&mut self, cache: &GpuTensor, sel: Option<&GpuTensor>) -> Result<(GpuTensor, Option<GpuTensor>), ExecError> {
        gr::unpack_rows(self, cache, sel)
    }

    fn packing(&self, t: &GpuTensor) -> Option<Packing> {
        t.pack
    }

    fn allocated_bytes(&self, t: &GpuTensor) -> usize {
        t.buf.bytes as usize
    }

    fn truncate_rows(&mut self, cache: &mut GpuTensor, rows: usize) -> Result<(), ExecError> {
        shapes::truncate_rows(cache.rows, rows)?;
        cache.rows = rows;
        Ok(())
    }

    fn ring_write(&mut self, ring: &mut GpuTensor, rows: &GpuTensor, start: usize) -> Result<(), ExecError> {
        self.quant.clear();
        gr::ring_write(self, ring, rows, start)
    }

    fn index_scores(&mut self, q: &GpuTensor, w: &GpuTensor, keys: &GpuTensor, visible: &[usize]) -> Result<GpuTensor, ExecError> {
        gm::index_scores(self, q, w, keys, visible)
    }

    fn candidate_mask(&mut self, scores: &GpuTensor, visible: &[usize], blocks: usize, block: usize) -> Result<GpuTensor, ExecError> {
        gm::candidate_mask(self, scores, visible, blocks, block)
    }

    fn mask_scores(&mut self, scores: &GpuTensor, mask: &GpuTensor) -> Result<GpuTensor, ExecError> {
        gm::mask_scores(self, scores, mask)
    }

    fn index_topk(&mut self, scores: &GpuTensor, visible: &[usize], k: usize) -> Result<GpuTensor, ExecError> {
        gm::index_topk(self, scores, visible, k)
    }

    fn sparse_attention(&mut self, q: &GpuTensor, a: &AttnInputs<'_, GpuTensor>) -> Result<GpuTensor, ExecError> {
        gm::sparse_attention(self, q, a)
    }

    fn moe_route(&mut self, logits: &GpuTensor, bias: &str, bias_vl: Option<&str>, image: &[bool], p: &RouteParams) -> Result<(GpuTensor, GpuTensor), ExecError> {
        gm::moe_route(self, logits, (bias, bias_vl), image, p)
    }

    fn route(&mut self, ids: &GpuTensor, experts: usize) -> Result<Routes<GpuTensor>, ExecError> {
        if ids.rows <= DEVICE_ROUTE_ROWS && ids.index.is_none() {
            return crate::exec::route_by_row(self, ids);
        }
        crate::exec::route_on_host(self, ids, experts)
    }

    fn moe_join(&mut self, routed: &GpuTensor, slots: &GpuTensor, ids: &GpuTensor, shared: &GpuTensor) -> Result<GpuTensor, ExecError> {
        experts::moe_join(self, routed, slots, ids, shared)
    }

    fn rope_halves(&mut self, x: &GpuTensor, cs: &GpuTensor, heads: usize) -> Result<GpuTensor, ExecError> {
        gm::rope(self, x, cs, heads, false, crate::kernels::rope::Pairs::Halves)
    }

    fn bias_add(&mut self, x: &GpuTensor, module: &str, out: Out) -> Result<GpuTensor, ExecError> {
        vision_ops::bias_add(self, x, module, out)
    }

    fn gelu(&mut self, x: &GpuTensor, out: Out) -> Result<GpuTensor, ExecError> {
        vision_ops::gelu(self, x, out)
    }

    fn unfold_cells(&mut self, x: &GpuTensor, grid_h: usize, grid_w: usize, cell: usize) -> Result<GpuTensor, ExecError> {
        vision_ops::unfold_cells(self, x, grid_h, grid_w, cell)
    }

    fn vit_attention(&mut self, q: &GpuTensor, k: &GpuTensor, v: &GpuTensor, heads: usize) -> Result<GpuTensor, ExecError> {
        vision_ops::vit_attention(self, q, k, v, heads)
    }
}
