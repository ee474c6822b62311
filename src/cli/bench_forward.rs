//! `lockstep bench forward`: prefill and decode throughput of a checkpoint on the GPU executor, and decode's achieved bandwidth against the device's stream-read ceiling.
use crate::cli::bench_kernels::ceilings;
use crate::cli::bench_counted::{Counted, StepBytes};
use crate::engine::{SeqId, Session, Span, Work};
use crate::exec::{Executor, GpuExecutor, Stack};
use crate::model::forward::{LogitRows, Model, EXPERT_MATRICES};
use crate::gpu::{DeviceChoice, Gpu};
use crate::model::taps::Taps;
use crate::model::{load, Config, LoadMode, ValueCheck};
use crate::text::{TokenMap, Tokenizer};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `lockstep bench forward`.
#[derive(clap::Args, Debug, Clone)]
pub struct ForwardArgs {
    /// Model directory (config.json and safetensors).
    #[arg(long)]
    pub model: PathBuf,
    /// GPU adapter: index, name substring or backend name (default: LOCKSTEP_DEVICE, else the first GPU).
    #[arg(long)]
    pub device: Option<String>,
    /// Timed repetitions per measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Prefill lengths, each one sequence in one chunk.
    #[arg(long, value_delimiter = ',', default_value = "512,2048")]
    pub prefill: Vec<usize>,
    /// Tokens prefilled into each sequence before the decode measurements: every measurement at the first, then decode rows=1 at each other, with the bytes the indexer and attention read.
    #[arg(long, value_delimiter = ',', default_value = "512")]
    pub context: Vec<usize>,
    /// Sequences of the multi-row decode measurement (one decode row each, all in one forward).
    #[arg(long, default_value_t = 4)]
    pub rows: usize,
    /// Also time every dispatch of one prefill, one decode step and one multi-row decode round, and print each kernel's share.
    #[arg(long)]
    pub profile: bool,
    /// With `--profile`, also print the decode step's dispatches one by one, in order, with their workgroups.
    #[arg(long)]
    pub trace: bool,
    /// Feed the DSpark rings on every call (as a drafting server does) and also time verify windows of this many drafts and the draft pass, at 1 and `--rows` sequences.
    #[arg(long)]
    pub drafts: Option<usize>,
}

/// Host wall seconds and device seconds of one measured call.
#[derive(Clone, Copy, Debug, Default)]
struct Timing {
    wall: f64,
    device: f64,
}

/// Medians of wall and device seconds, each over its own samples.
fn medians(ts: &[Timing]) -> Timing {
    Timing { wall: median(ts.iter().map(|t| t.wall).collect()), device: median(ts.iter().map(|t| t.device).collect()) }
}

/// One session over the GPU executor, wrapped to count bytes.
type Bench<'m, 'c, 'g> = Session<'m, 'c, Counted<'c, GpuExecutor<'g, 'c>>>;

/// Median of samples (the upper one of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `n` deterministic token ids below `vocab`, different per `seq`.
fn tokens(n: usize, vocab: usize, seq: u64) -> Vec<u32> {
    let mut s = 0x2545_f491_4f6c_dd1d_u64 ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 33) % vocab.max(1) as u64) as u32
        })
        .collect()
}

/// Index of the largest logit (the first on ties).
fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in logits.iter().enumerate() {
        if v.total_cmp(&logits[best]).is_gt() {
            best = i;
        }
    }
    best as u32
}

/// The engram token map without a tokenizer where the config allows one (no engram, or the synthetic map of 64 classes).
pub(crate) fn bench_token_map(cfg: &Config, dir: &Path) -> Result<TokenMap> {
    if cfg.engram_layer_ids.is_empty() {
        return Ok(TokenMap::synthetic(cfg.vocab_size, 1));
    }
    if cfg.engram_compressed_vocab_size == 64 {
        return Ok(TokenMap::synthetic(cfg.vocab_size, 64));
    }
    let path = crate::cli::run::tokenizer_path(dir).context("the config's engram map needs tokenizer.json in the model directory (or LOCKSTEP_TOKENIZER)")?;
    let tok = Tokenizer::from_file(&path).with_context(|| format!("loading {}", path.display()))?;
    crate::cli::run::token_map(cfg, &tok)
}

/// Times `f`: host wall seconds, and the device seconds of the command buffers it submitted.
fn timed<T>(s: &mut Bench, f: impl FnOnce(&mut Bench) -> Result<T>) -> Result<(Timing, T)> {
    let (t0, d0) = (Instant::now(), s.ex.inner.device_seconds());
    let v = f(s)?;
    Ok((Timing { wall: t0.elapsed().as_secs_f64(), device: s.ex.inner.device_seconds() - d0 }, v))
}

/// Timing of one forward call of `ids` through the logits readback, and the logits.
fn timed_call(s: &mut Bench, ids: &[u32]) -> Result<(Timing, Vec<f32>)> {
    timed(s, |s| Ok(s.run(ids, LogitRows::Last, &mut Taps::default())?))
}

/// "median W ms wall, D ms device" for a timing.
fn ms(t: Timing) -> String {
    format!("median {:.3} ms wall, {:.3} ms device", t.wall * 1e3, t.device * 1e3)
}

/// Replaces the session's sequence with a fresh one.
fn fresh(s: &mut Bench) -> Result<()> {
    s.restart()?;
    Ok(())
}

/// Uploads every layer's routed experts, so no timed call pays for a first upload; returns the experts uploaded.
fn preload_experts(s: &mut Bench, model: &Model) -> Result<usize> {
    let mut n = 0;
    for plan in model.plan.iter().take(model.cfg.num_hidden_layers).filter(|p| p.n_routed_experts > 0) {
        let prefix = format!("{}.ffn.experts", plan.prefix());
        let mut count = 0;
        for matrix in EXPERT_MATRICES {
            count = s.ex.inner.preload_stack(&Stack { prefix: &prefix, matrix })?;
        }
        n += count;
    }
    Ok(n)
}

/// Runs `lockstep bench forward`, one line per measurement on `out`.
pub fn run(args: &ForwardArgs, out: &mut dyn Write) -> Result<()> {
    let reps = args.reps.max(1);
    let gpu = match DeviceChoice::from_flag_or_env(args.device.as_deref()) {
        DeviceChoice::Cpu => bail!("bench forward needs a GPU adapter, not the CPU oracle"),
        choice => Gpu::open(&choice).context("opening the device")?,
    };
    let (cfg, ckpt) = load(&args.model, LoadMode::Mapped, ValueCheck::Off).with_context(|| format!("loading {}", args.model.display()))?;
    let map = bench_token_map(&cfg, &args.model)?;
    let context = args.context.first().copied().unwrap_or(512);
    let need = args.prefill.iter().copied().max().unwrap_or(0).max(args.context.iter().copied().max().unwrap_or(context) + 2 * reps + 8);
    if need > cfg.max_position_embeddings {
        bail!("the benchmark needs {need} positions, the model takes {}", cfg.max_position_embeddings);
    }
    if args.prefill.contains(&0) {
        bail!("--prefill lengths must be > 0");
    }
    let model = Model::new(cfg.clone(), &ckpt, map)?;
    let label = args.device.clone().unwrap_or_else(|| "default".into());
    let ex = Counted::new(crate::cli::run::gpu_executor(&gpu, &ckpt, &label)?, &ckpt);
    let mut s = Session::with_drafts(ex, &model, args.drafts.is_some())?;
    s.engine.set_context(need);
    let gb = |b: u64| b as f64 / 1e9;
    writeln!(
        out,
        "bench forward model={} {} layers={} hidden={} heads={}x{} experts={}x{} top-k={} vocab={} checkpoint={:.2} GB reps={reps} timing=host wall time per forward call through its logits readback",
        args.model.display(),
        gpu.describe(),
        cfg.num_hidden_layers,
        cfg.hidden_size,
        cfg.num_attention_heads,
        cfg.head_dim,
        cfg.n_routed_experts,
        cfg.moe_intermediate_size,
        cfg.num_experts_per_tok,
        cfg.vocab_size,
        gb(ckpt.names().filter_map(|n| ckpt.get(n)).map(|t| t.bytes.len() as u64).sum()),
    )?;
    let (read, copy, c2b) = ceilings(&gpu, reps.max(3))?;
    let fma = crate::cli::bench_kernels::fma_ceiling(&gpu, reps.max(3))?;
    writeln!(out, "ceiling stream-read kernel: {read:.1} GB/s; copy kernel: {copy:.1} GB/s (read + written); copy_buffer_to_buffer: {c2b:.1} GB/s; fp32 FMA kernel: {fma:.0} GFLOP/s")?;
    let t0 = Instant::now();
    let experts = preload_experts(&mut s, &model)?;
    fresh(&mut s)?;
    timed_call(&mut s, &tokens(1, cfg.vocab_size, 99))?;
    writeln!(out, "load experts={experts} plus every other weight by one 1-token forward: {:.2} s", t0.elapsed().as_secs_f64())?;
    for &p in &args.prefill {
        let ids = tokens(p, cfg.vocab_size, p as u64);
        let mut times = Vec::new();
        for i in 0..=reps {
            fresh(&mut s)?;
            let (t, _) = timed_call(&mut s, &ids)?;
            if i > 0 {
                times.push(t);
            }
        }
        let t = medians(&times);
        writeln!(out, "prefill tokens={p} chunk={p} seqs=1 reps={reps}: {}, {:.1} tok/s", ms(t), p as f64 / t.wall)?;
        let work = counted_prefill(&mut s, &ids)?;
        let flops = (work.gemm_flops + work.attn_flops) as f64;
        let (on_wall, on_device) = (flops / t.wall / 1e9, flops / t.device.max(1e-12) / 1e9);
        writeln!(
            out,
            "prefill tokens={p} work: {:.3} GFLOP, of which {:.3} in GEMMs and {:.3} in attention (a multiply-add counts two); {on_wall:.3} GFLOP/s over the wall time, {:.2}% of the FMA kernel's {fma:.0}; over the device time {on_device:.3} GFLOP/s ({:.2}%)",
            flops / 1e9,
            work.gemm_flops as f64 / 1e9,
            work.attn_flops as f64 / 1e9,
            100.0 * on_wall / fma,
            100.0 * on_device / fma
        )?;
    }
    let (t1, bytes, host) = decode_one(&mut s, &model, context, reps)?;
    writeln!(out, "decode rows=1 context={context} seqs=1 reps={reps}: {}, {:.2} tok/s", ms(t1), 1.0 / t1.wall)?;
    let phases: Vec<String> = host.iter().filter(|(n, _)| !matches!(*n, "dispatches" | "submits" | "waits")).map(|(n, v)| format!("{n} {v:.3} ms")).collect();
    let counts: Vec<String> = host.iter().filter(|(n, _)| matches!(*n, "dispatches" | "submits" | "waits")).map(|(n, v)| format!("{v:.1} {n}")).collect();
    writeln!(out, "decode rows=1 host time per step by phase (mean): {}; the rest of the wall time is the forward's own host work", phases.join(", "))?;
    let phase = |name: &str| host.iter().find(|(n, _)| *n == name).map_or(0.0, |p| p.1);
    let busy = t1.wall * 1e3 - phase("wait") - phase("read");
    writeln!(out, "decode rows=1 per step (mean): {} for {} layers; host work {busy:.3} ms (wall less wait and read), device {:.3} ms", counts.join(", "), cfg.num_hidden_layers, t1.device * 1e3)?;
    let rows = args.rows.max(1);
    let (tr, bytes_r, rows_profile) = decode_rows(&mut s, &model, context, reps, rows, args.profile && rows > 1)?;
    writeln!(out, "decode rows={rows} context={context} seqs={rows} reps={reps}: one forward of {rows} sequences' decode rows, {}, {:.2} tok/s", ms(tr), rows as f64 / tr.wall)?;
    if let Some(w) = args.drafts {
        for n in [1, rows] {
            let (tv, td) = windows(&mut s, &model, context, reps, n, w)?;
            writeln!(out, "verify window rows={} per sequence context={context} seqs={n} reps={reps}: {} ({:.2}x the {n}-sequence 1-row round); draft pass of {} positions: {} ({:.2}x)", w + 1, ms(tv), tv.wall / if n == 1 { t1.wall } else { tr.wall }, model.cfg.dspark_block_size, ms(td), td.wall / if n == 1 { t1.wall } else { tr.wall })?;
        }
    }
    writeln!(out, "{}", bandwidth_line(&format!("rows=1 context={context}"), &bytes, t1, copy, read))?;
    if rows > 1 {
        let one = rates(&bytes, t1);
        writeln!(out, "{}; rows=1's shares of copy: {:.1}% over its wall time, {:.1}% over its device time", bandwidth_line(&format!("rows={rows} context={context}"), &bytes_r, tr, copy, read), 100.0 * one.0 / copy, 100.0 * one.1 / copy)?;
    }
    for &c in &args.context {
        let (t, b) = if c == context { (t1, bytes) } else { let (t, b, _) = decode_one(&mut s, &model, c, reps)?; (t, b) };
        writeln!(out, "decode scaling rows=1 context={c} reps={reps}: {}, {:.2} tok/s; {:.3} MB/step read by the indexer (index keys) and {:.3} MB by attention (window and selected rows), unpacked from {:.3} MB of packed state, of {:.1} MB", ms(t), 1.0 / t.wall, b.index as f64 / 1e6, b.kv as f64 / 1e6, b.packed as f64 / 1e6, b.total() as f64 / 1e6)?;
    }
    state_line(&s, need, out)?;
    if args.profile {
        profile(&mut s, &model, context, args, out)?;
        rows_profile.iter().try_for_each(|l| writeln!(out, "{l}"))?;
    }
    Ok(())
}

/// Prints the persistent state the sequence's compressed caches hold as allocated for `positions`, per compressed row, and per token at the release's KV sources (three of ratio 2, one of ratio 1).
fn state_line(s: &Bench, positions: usize, out: &mut dyn Write) -> Result<()> {
    let st = s.engine.state(s.seq)?;
    let (mut bytes, mut rows) = (0usize, 0usize);
    let mut parts = Vec::new();
    for (l, c) in st.layers.iter().enumerate().filter_map(|(l, x)| x.comp.as_ref().map(|c| (l, c))) {
        let b = s.engine.ex.allocated_bytes(&c.kv) + s.engine.ex.allocated_bytes(&c.index_keys);
        let r = positions / c.ratio.max(1);
        parts.push(format!("layer {l} ratio {}: {b} bytes for {r} rows", c.ratio));
        (bytes, rows) = (bytes + b, rows + r);
    }
    if rows == 0 {
        return Ok(());
    }
    let per_row = bytes as f64 / rows as f64;
    writeln!(
        out,
        "state compressed rows and index keys as allocated for {positions} positions: {bytes} bytes ({}), {per_row:.1} bytes per compressed row; at the release's KV sources (three ratio-2, one ratio-1) {:.1} bytes per token",
        parts.join(", "),
        per_row * (3.0 / 2.0 + 1.0)
    )?;
    Ok(())
}

/// Prints each kernel's dispatches and device time for one prefill of the first length and one decode step after the context.
fn profile(s: &mut Bench, model: &Model, context: usize, args: &ForwardArgs, out: &mut dyn Write) -> Result<()> {
    let p = args.prefill.first().copied().unwrap_or(512);
    let ids = tokens(p, model.cfg.vocab_size, p as u64);
    let tok = prefill_context(s, model, context, 1)?;
    for (what, ids) in [(format!("decode rows=1 context={context}"), vec![tok]), (format!("prefill tokens={p}"), ids)] {
        if ids.len() > 1 {
            fresh(s)?;
        }
        let trace = args.trace && ids.len() == 1;
        let lines = profiled(s, &what, trace, |s| Ok(timed_call(s, &ids)?.0))?;
        lines.iter().try_for_each(|l| writeln!(out, "{l}"))?;
    }
    Ok(())
}

/// Runs `f` with every dispatch in its own timed pass and returns the kernels' lines, slowest first, and the dispatches in order when `trace`.
fn profiled(s: &mut Bench, what: &str, trace: bool, f: impl FnOnce(&mut Bench) -> Result<Timing>) -> Result<Vec<String>> {
    s.ex.inner.start_profile();
    let t = f(s)?;
    let prof = s.ex.inner.take_profile()?;
    let total: f64 = prof.values().map(|k| k.seconds).sum();
    let mut rows: Vec<_> = prof.into_iter().collect();
    rows.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds));
    let mut lines = vec![format!("profile {what}: {:.3} ms device in {} dispatches, each in its own timed pass ({:.3} ms wall)", total * 1e3, rows.iter().map(|r| r.1.dispatches).sum::<usize>(), t.wall * 1e3)];
    lines.extend(rows.iter().map(|(k, v)| format!("  {k:<30} {:>5} dispatches {:>9.3} ms {:>5.1}%", v.dispatches, v.seconds * 1e3, 100.0 * v.seconds / total.max(1e-12))));
    let steps = s.ex.inner.take_trace();
    if trace {
        lines.extend(steps.iter().enumerate().map(|(i, (label, g, secs))| format!("  trace {i:>4} {label:<30} {:>6}x{}x{} {:>9.1} us", g[0], g[1], g[2], secs * 1e6)));
    }
    Ok(lines)
}

/// Prefills `context` tokens into a fresh sequence of seed `seq` and frees the prefill's scratch buffers; returns the greedy next token.
fn prefill_context(s: &mut Bench, model: &Model, context: usize, seq: u64) -> Result<u32> {
    fresh(s)?;
    let mut last = Vec::new();
    for part in tokens(context.max(1), model.cfg.vocab_size, seq).chunks(2048) {
        last = timed_call(s, part)?.1;
    }
    s.ex.inner.release_scratch()?;
    Ok(argmax(&last))
}

/// Median timing of one decode step of one sequence after `context` tokens, the bytes one more (counted) step read, and the mean host milliseconds per step by phase.
fn decode_one(s: &mut Bench, model: &Model, context: usize, reps: usize) -> Result<(Timing, StepBytes, Vec<(&'static str, f64)>)> {
    let mut tok = prefill_context(s, model, context, 1)?;
    let mut times = Vec::new();
    let mut host0 = [0.0; 5];
    let mut counts0 = [0; 3];
    for i in 0..reps + 2 {
        if i == 2 {
            host0 = s.ex.inner.gpu().host.snapshot().map(|(_, v)| v);
            counts0 = step_counts(s);
        }
        let (t, logits) = timed_call(s, &[tok])?;
        tok = argmax(&logits);
        if i >= 2 {
            times.push(t);
        }
    }
    let counts = step_counts(s);
    let host = s.ex.inner.gpu().host.snapshot().map(|(n, v)| (n, v / reps as f64));
    let mut host: Vec<(&str, f64)> = host.iter().zip(host0).map(|(&(n, v), v0)| (n, v - v0 / reps as f64)).collect();
    host.extend(["dispatches", "submits", "waits"].into_iter().zip(counts.iter().zip(counts0)).map(|(n, (&c, c0))| (n, (c - c0) as f64 / reps as f64)));
    let (_, bytes) = counted(s, |s| timed_call(s, &[tok]))?;
    Ok((medians(&times), bytes, host))
}

/// The bytes and FLOPs of one counted prefill of `ids` from a fresh state.
fn counted_prefill(s: &mut Bench, ids: &[u32]) -> Result<StepBytes> {
    fresh(s)?;
    Ok(counted(s, |s| timed_call(s, ids))?.1)
}

/// `f`'s result and the bytes and FLOPs the ops it ran read (counting reads routing ids back, so no timed call counts).
fn counted<T>(s: &mut Bench, f: impl FnOnce(&mut Bench) -> Result<T>) -> Result<(T, StepBytes)> {
    s.ex.obs.counting = true;
    s.ex.obs.bytes = StepBytes::default();
    let v = f(s);
    s.ex.obs.counting = false;
    Ok((v?, s.ex.obs.bytes))
}

/// Dispatches, submits and host waits of the executor so far.
fn step_counts(s: &Bench) -> [usize; 3] {
    let ex = &s.ex.inner;
    [ex.dispatches(), ex.submits(), ex.waits()]
}

/// GB/s of what a step read over its wall time and over its device time.
fn rates(bytes: &StepBytes, t: Timing) -> (f64, f64) {
    let gb = bytes.total() as f64 / 1e9;
    (gb / t.wall, gb / t.device.max(1e-12))
}

/// "decode bandwidth WHAT: ..." for one decode step: what it read by kind, and that over its wall and device time as shares of the ceilings.
fn bandwidth_line(what: &str, bytes: &StepBytes, t: Timing, copy: f64, read: f64) -> String {
    let (achieved, on_device) = rates(bytes, t);
    format!(
        "decode bandwidth {what}: {:.1} MB/step (non-expert weights {:.1} MB, routed experts {:.1} MB for {} expert picks from the routing ids, KV state {:.2} MB, index keys {:.2} MB, packed state unpacked for them {:.2} MB) in {:.3} ms wall = {achieved:.2} GB/s: {:.1}% of the copy kernel's {copy:.1} GB/s, {:.1}% of the stream-read kernel's {read:.1} GB/s; over the {:.3} ms of device time {on_device:.2} GB/s ({:.1}% of copy)",
        bytes.total() as f64 / 1e6,
        bytes.weights as f64 / 1e6,
        bytes.experts as f64 / 1e6,
        bytes.expert_picks,
        bytes.kv as f64 / 1e6,
        bytes.index as f64 / 1e6,
        bytes.packed as f64 / 1e6,
        t.wall * 1e3,
        100.0 * achieved / copy,
        100.0 * achieved / read,
        t.device * 1e3,
        100.0 * on_device / copy
    )
}

/// Median timing of one forward that decodes one row of each of `rows` sequences, the bytes one more (counted) such forward read, and with `profile` the kernels' lines of one more.
fn decode_rows(s: &mut Bench, model: &Model, context: usize, reps: usize, rows: usize, profile: bool) -> Result<(Timing, StepBytes, Vec<String>)> {
    let mut seqs = Vec::new();
    for r in 0..rows {
        let tok = prefill_context(s, model, context, 10 + r as u64)?;
        let id = s.engine.fork(s.seq)?;
        seqs.push((id, [tok]));
    }
    let round = |s: &mut Bench, seqs: &[(SeqId, [u32; 1])]| -> Result<Vec<Vec<f32>>> {
        let inputs: Vec<[Span<'_>; 1]> = seqs.iter().map(|(_, tok)| [Span::Tokens(&tok[..])]).collect();
        let work: Vec<Work<'_>> = seqs.iter().zip(&inputs).map(|((id, _), input)| Work { seq: *id, input, rows: LogitRows::Last }).collect();
        let logits = s.engine.round(&work, &mut Taps::default())?;
        logits.iter().map(|l| s.ex.read(l)).collect::<Result<Vec<_>, _>>().map_err(Into::into)
    };
    let mut times = Vec::new();
    for i in 0..reps + 1 {
        let (t, logits) = timed(s, |s| round(s, &seqs))?;
        if i >= 1 {
            times.push(t);
        }
        seqs.iter_mut().zip(&logits).for_each(|((_, tok), l)| tok[0] = argmax(l));
    }
    let (_, bytes) = counted(s, |s| round(s, &seqs))?;
    let lines = if profile { profiled(s, &format!("decode rows={rows} context={context}"), false, |s| Ok(timed(s, |s| round(s, &seqs))?.0))? } else { Vec::new() };
    for (id, _) in seqs {
        s.engine.remove(id)?;
    }
    Ok((medians(&times), bytes, lines))
}

/// Median timings of a verify round (each of `n` sequences feeds its next token and `w` drafts, all rows' logits read, then the window rewound to its first row) and of one draft pass over the `n` sequences.
fn windows(s: &mut Bench, model: &Model, context: usize, reps: usize, n: usize, w: usize) -> Result<(Timing, Timing)> {
    let mut seqs = Vec::new();
    for r in 0..n {
        let tok = prefill_context(s, model, context, 30 + r as u64)?;
        seqs.push((s.engine.fork(s.seq)?, tok));
    }
    let (mut verify, mut draft) = (Vec::new(), Vec::new());
    for i in 0..reps + 1 {
        let (tv, next) = timed(s, |s| {
            let mut marks = Vec::new();
            for (id, _) in &seqs {
                marks.push(s.engine.mark(*id, w + 1)?);
            }
            let windows: Vec<Vec<u32>> = seqs.iter().map(|&(_, t)| std::iter::once(t).chain(tokens(w, model.cfg.vocab_size, t as u64)).collect()).collect();
            let inputs: Vec<[Span<'_>; 1]> = windows.iter().map(|t| [Span::Tokens(&t[..])]).collect();
            let work: Vec<Work<'_>> = seqs.iter().zip(&inputs).map(|((id, _), input)| Work { seq: *id, input, rows: LogitRows::All }).collect();
            let logits = s.engine.round(&work, &mut Taps::default())?;
            let vals = logits.iter().map(|l| s.ex.read(l)).collect::<Result<Vec<_>, _>>()?;
            for ((id, _), m) in seqs.iter().zip(marks) {
                s.engine.rewind(*id, m, 1)?;
            }
            Ok(vals.iter().map(|v| argmax(&v[..model.cfg.vocab_size])).collect::<Vec<u32>>())
        })?;
        seqs.iter_mut().zip(next).for_each(|((_, t), n)| *t = n);
        let asks: Vec<(SeqId, u32)> = seqs.iter().map(|&(id, t)| (id, t)).collect();
        let (td, _) = timed(s, |s| Ok(s.engine.draft(&asks, &mut Taps::default())?))?;
        if i >= 1 {
            verify.push(tv);
            draft.push(td);
        }
    }
    for (id, _) in seqs {
        s.engine.remove(id)?;
    }
    Ok((medians(&verify), medians(&draft)))
}
