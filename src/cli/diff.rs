//! `lockstep diff`: runs two executors on the same tokens with taps on (and, when the model drafts, a draft block after the prompt and every decode step) and names the first stage whose bits differ, with its ulp distance and its error against the f64 reference.
use crate::cli::run::{gpu_executor, load_model, open_device, Loaded};
use crate::cli::image::{place_image, tower_input};
use crate::engine::{chunk_spans, ImageId, Placed, Session, Span, Work};
use crate::vision;
use crate::exec::observe::{Observed, Observer};
use crate::exec::{CpuExecutor, ExecError, Executor};
use crate::model::forward::{LogitRows, Model};
use crate::gpu::Gpu;
use crate::model::reference;
use crate::model::taps::{Tap, Taps};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;

/// Options of `lockstep diff`.
#[derive(clap::Args, Debug, Clone)]
pub struct DiffArgs {
    /// Executor a: `cpu`, a GPU adapter, or `metal-emu` (the MSL harness); its greedy tokens feed both.
    #[arg(long, default_value = "cpu")]
    pub a: String,
    /// Executor b: `cpu`, a GPU adapter, or `metal-emu`.
    #[arg(long)]
    pub b: String,
    /// Model directory (config.json and safetensors).
    #[arg(long)]
    pub model: PathBuf,
    /// Prompt text, or `@FILE` to read it from a file (long contexts).
    #[arg(long)]
    pub prompt: String,
    /// Encode the prompt as one user message in the V4.1 chat format (thinking off).
    #[arg(long)]
    pub chat: bool,
    /// Greedy decode steps after the prompt.
    #[arg(long, default_value_t = 4)]
    pub max_tokens: usize,
    /// Prompt tokens per prefill call.
    #[arg(long, default_value_t = 128)]
    pub prefill_chunk: usize,
    /// An image file (PNG, JPEG, WebP, GIF) whose span replaces the prompt's first `<｜deepseek_image｜>` (or follows the first token); the tower's stages are compared too.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// Test hook: executor b's output of the n-th call of OP (`OP` or `OP:N`, from 0) moves by one ulp of its precision.
    #[arg(long, hide = true)]
    pub perturb_b: Option<String>,
}

/// The first difference found, or the count of equal stages.
#[derive(Clone, Debug, PartialEq)]
pub enum DiffOutcome {
    /// Every tap of every call had the same bits.
    Equal {
        /// Taps compared.
        stages: usize,
        /// Forward calls run.
        calls: usize,
    },
    /// The first tap whose bits differ.
    Differ(StageDiff),
}

/// Where and by how much two executors first differ.
#[derive(Clone, Debug, PartialEq)]
pub struct StageDiff {
    /// Forward call index (prefill calls, then one per decode step).
    pub call: usize,
    /// Tap name.
    pub stage: String,
    /// Values that differ.
    pub count: usize,
    /// Values in the tap.
    pub total: usize,
    /// Largest distance in f32 ulps (distance between the ordered bit patterns).
    pub max_ulp: u64,
    /// Index of the value at the largest distance.
    pub at: usize,
    /// Largest |a - ref| and |b - ref| against the f64 reference on the same tokens, when it ran.
    pub reference: Option<(f64, f64)>,
}

/// f32 bits mapped to an integer line on which adjacent floats are adjacent.
fn ordered(x: f32) -> i64 {
    let b = x.to_bits();
    if b >> 31 == 1 {
        -i64::from(b & 0x7fff_ffff)
    } else {
        i64::from(b)
    }
}

/// Distance in f32 ulps.
pub fn ulp_distance(a: f32, b: f32) -> u64 {
    ordered(a).abs_diff(ordered(b))
}

/// Compares one tap of a and b; `None` when their bits agree.
fn compare(call: usize, a: &Tap<f32>, b: &Tap<f32>) -> Option<StageDiff> {
    if a.name != b.name || (a.rows, a.cols) != (b.rows, b.cols) {
        let max_ulp = u64::MAX;
        return Some(StageDiff { call, stage: format!("{} vs {}", a.name, b.name), count: a.data.len().max(b.data.len()), total: a.data.len(), max_ulp, at: 0, reference: None });
    }
    let mut d = StageDiff { call, stage: a.name.clone(), count: 0, total: a.data.len(), max_ulp: 0, at: 0, reference: None };
    for (i, (x, y)) in a.data.iter().zip(&b.data).enumerate() {
        if x.to_bits() != y.to_bits() {
            d.count += 1;
            let u = ulp_distance(*x, *y);
            if u > d.max_ulp || d.count == 1 {
                d.max_ulp = d.max_ulp.max(u);
                d.at = i;
            }
        }
    }
    (d.count > 0).then_some(d)
}

/// One side of the diff: a session that runs a call and hands back its logits and taps.
trait Side {
    /// Runs `spans` as one forward call with taps on.
    fn call(&mut self, spans: &[Span<'_>]) -> Result<(Vec<f32>, Taps<f32>)>;
    /// Runs an image through the tower with taps on.
    fn add_image(&mut self, image: &vision::Image) -> Result<(ImageId, Taps<f32>)>;
    /// Drafts a block after the sequence's position from `first` with taps on.
    fn draft(&mut self, first: u32) -> Result<Taps<f32>>;
}

impl<E: Executor> Side for Session<'_, '_, E> {
    fn call(&mut self, spans: &[Span<'_>]) -> Result<(Vec<f32>, Taps<f32>)> {
        let mut taps = Taps::on();
        let seq = self.seq;
        let out = self.engine.round(&[Work { seq, input: spans, rows: LogitRows::Last }], &mut taps)?;
        let logits = out.first().map(|t| self.engine.ex.read(t)).transpose()?.unwrap_or_default();
        Ok((logits, taps))
    }

    fn add_image(&mut self, image: &vision::Image) -> Result<(ImageId, Taps<f32>)> {
        let mut taps = Taps::on();
        let p = &image.patches;
        let id = self.engine.add_image(&tower_input(image), p.llm_h as usize, p.llm_w as usize, &mut taps)?;
        Ok((id, taps))
    }

    fn draft(&mut self, first: u32) -> Result<Taps<f32>> {
        let mut taps = Taps::on();
        let seq = self.seq;
        self.engine.draft(&[(seq, first)], &mut taps)?;
        Ok(taps)
    }
}

/// Moves the n-th output of one op by one ulp (bf16 ulp for bf16 values, else f32 ulp); every other output passes through.
pub struct PlantUlp {
    op: String,
    nth: usize,
    seen: usize,
}

/// An executor with one planted difference.
pub type Perturb<E> = Observed<E, PlantUlp>;

impl<E: Executor> Observed<E, PlantUlp> {
    /// Wraps `inner`; `spec` is `OP` or `OP:N`, or `None` for no change.
    pub fn new(inner: E, spec: Option<&str>) -> Result<Perturb<E>> {
        let (op, nth) = match spec {
            None => (String::new(), 0),
            Some(s) => match s.split_once(':') {
                Some((op, n)) => (op.to_string(), n.parse().with_context(|| format!("--perturb-b {s}: N is not a number"))?),
                None => (s.to_string(), 0),
            },
        };
        Ok(Observed { inner, obs: PlantUlp { op, nth, seen: 0 } })
    }
}

impl<E: Executor> Observer<E> for PlantUlp {
    fn after(&mut self, ex: &mut E, op: &'static str, t: E::Tensor) -> Result<E::Tensor, ExecError> {
        if op != self.op {
            return Ok(t);
        }
        self.seen += 1;
        if self.seen != self.nth + 1 {
            return Ok(t);
        }
        let (r, c) = ex.dims(&t);
        let mut v = ex.read(&t)?;
        if let Some(x) = v.first_mut() {
            let step = if crate::numerics::round_bf16(*x) == *x { 1 << 16 } else { 1 };
            *x = f32::from_bits(x.to_bits() ^ step);
        }
        ex.upload(r, c, &v)
    }
}

/// A session on `device` (`cpu` or an opened GPU), wrapped in the perturbation hook.
fn side<'a>(gpu: Option<&'a Gpu>, l: &'a Loaded, model: &'a Model<'a>, device: &str, perturb: Option<&str>) -> Result<Box<dyn Side + 'a>> {
    Ok(match gpu {
        None => Box::new(Session::with_drafts(Perturb::new(CpuExecutor::new(&l.ckpt), perturb)?, model, true)?),
        Some(g) => Box::new(Session::with_drafts(Perturb::new(gpu_executor(g, &l.ckpt, device)?, perturb)?, model, true)?),
    })
}

/// Largest |x - ref| over a tap's values.
fn max_error(x: &[f32], r: &[f64]) -> f64 {
    x.iter().zip(r).map(|(&v, &w)| (f64::from(v) - w).abs()).fold(0.0, f64::max)
}

/// Runs the f64 reference over `calls[..=upto]` (then a draft from `draft` when given) and returns tap `stage` of the last call.
fn reference_tap(l: &Loaded, calls: &[Vec<u32>], upto: usize, draft: Option<u32>, stage: &str) -> Result<Option<Vec<f64>>> {
    let r = reference::Model::with_token_map(&l.cfg, &l.ckpt, l.map.clone())?;
    let mut st = r.new_drafting_state();
    let mut taps = Taps::default();
    for (i, c) in calls.iter().enumerate().take(upto + 1) {
        taps = if i == upto && draft.is_none() { Taps::on() } else { Taps::default() };
        r.forward(&mut st, c, None, &mut taps)?;
    }
    if let Some(first) = draft {
        taps = Taps::on();
        r.draft(&st, first, &mut taps)?;
    }
    Ok(taps.get(stage).map(|t| t.data.clone()))
}

/// The first tap of `ta` whose bits differ from `tb`'s, with the reference error when `reference` (text prompts); the count compared otherwise.
fn first_difference(l: &Loaded, calls: &[Vec<u32>], i: usize, draft: Option<u32>, ta: &Taps<f32>, tb: &Taps<f32>, reference: bool) -> Result<std::result::Result<usize, StageDiff>> {
    if ta.list.len() != tb.list.len() {
        bail!("call {i}: executor a recorded {} taps, b {}", ta.list.len(), tb.list.len());
    }
    for (x, y) in ta.list.iter().zip(&tb.list) {
        if let Some(mut d) = compare(i, x, y) {
            if let Some(Ok(Some(r))) = reference.then(|| reference_tap(l, calls, i, draft, &x.name)) {
                d.reference = (r.len() == x.data.len()).then(|| (max_error(&x.data, &r), max_error(&y.data, &r)));
            }
            return Ok(Err(d));
        }
    }
    Ok(Ok(ta.list.len()))
}

/// Greedy pick: the largest logit, the lower index on ties.
fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
}

/// Runs both executors call by call and returns the first difference (with the reference error) or the count of equal stages.
pub fn diff(args: &DiffArgs) -> Result<DiffOutcome> {
    let (ga, gb) = (open_device(&args.a)?, open_device(&args.b)?);
    let prompt = match args.prompt.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading the prompt from {path}"))?,
        None => args.prompt.clone(),
    };
    let mut l = load_model(&args.model, &prompt, args.chat, args.image.is_some(), super::run::VerifyWeights::Sampled)?;
    let placed = args.image.as_deref().map(|p| place_image(&l.cfg, &mut l.prompt, p)).transpose()?;
    let model = Model::new(l.cfg.clone(), &l.ckpt, l.map.clone())?;
    let mut a = side(ga.as_ref(), &l, &model, &args.a, None)?;
    let mut b = side(gb.as_ref(), &l, &model, &args.b, args.perturb_b.as_deref())?;
    let mut stages = 0;
    let (mut ia, mut ib) = (Vec::new(), Vec::new());
    if let Some(p) = &placed {
        let (xa, ta) = a.add_image(&p.image).with_context(|| format!("executor a ({}), the image", args.a))?;
        let (xb, tb) = b.add_image(&p.image).with_context(|| format!("executor b ({}), the image", args.b))?;
        match first_difference(&l, &[], 0, None, &ta, &tb, false)? {
            Ok(n) => stages += n,
            Err(d) => return Ok(DiffOutcome::Differ(d)),
        }
        (ia, ib) = (vec![Placed { image: xa, at: p.at, len: p.len }], vec![Placed { image: xb, at: p.at, len: p.len }]);
    }
    let room = l.cfg.max_position_embeddings.saturating_sub(l.prompt.len());
    let chunk = args.prefill_chunk.max(1);
    let bounds: Vec<(usize, usize)> = (0..l.prompt.len()).step_by(chunk).map(|lo| (lo, (lo + chunk).min(l.prompt.len()))).collect();
    let mut calls: Vec<Vec<u32>> = bounds.iter().map(|&(lo, hi)| l.prompt[lo..hi].to_vec()).collect();
    let prefill = calls.len();
    let reference = placed.is_none();
    let mut i = 0;
    while i < calls.len() {
        let (sa, sb) = match bounds.get(i) {
            Some(&(lo, hi)) => (chunk_spans(&l.prompt, &ia, lo, hi), chunk_spans(&l.prompt, &ib, lo, hi)),
            None => (vec![Span::Tokens(&calls[i])], vec![Span::Tokens(&calls[i])]),
        };
        let (la, ta) = a.call(&sa).with_context(|| format!("executor a ({}), call {i}", args.a))?;
        let (_, tb) = b.call(&sb).with_context(|| format!("executor b ({}), call {i}", args.b))?;
        match first_difference(&l, &calls, i, None, &ta, &tb, reference)? {
            Ok(n) => stages += n,
            Err(d) => return Ok(DiffOutcome::Differ(d)),
        }
        if i + 1 >= prefill && l.cfg.has_drafts() {
            let first = argmax(&la);
            let da = a.draft(first).with_context(|| format!("executor a ({}), draft after call {i}", args.a))?;
            let db = b.draft(first).with_context(|| format!("executor b ({}), draft after call {i}", args.b))?;
            match first_difference(&l, &calls, i, Some(first), &da, &db, reference)? {
                Ok(n) => stages += n,
                Err(d) => return Ok(DiffOutcome::Differ(d)),
            }
        }
        let decoded = i + 1 - prefill;
        if i + 1 >= prefill && decoded < args.max_tokens.min(room) {
            calls.push(vec![argmax(&la)]);
        }
        i += 1;
    }
    Ok(DiffOutcome::Equal { stages, calls: calls.len() })
}

/// Runs `lockstep diff`, printing the outcome; an error when the executors differ.
pub fn run(args: &DiffArgs, out: &mut dyn Write) -> Result<DiffOutcome> {
    let outcome = diff(args)?;
    match &outcome {
        DiffOutcome::Equal { stages, calls } => writeln!(out, "all {stages} stages equal ({calls} calls, a={} b={})", args.a, args.b)?,
        DiffOutcome::Differ(d) => {
            let bf16 = if d.max_ulp % (1 << 16) == 0 && d.max_ulp < u64::MAX { format!(" ({} bf16 ulp)", d.max_ulp >> 16) } else { String::new() };
            write!(out, "first difference: call {} stage {}: {} of {} values differ, max {} ulp{bf16} at index {}", d.call, d.stage, d.count, d.total, d.max_ulp, d.at)?;
            match d.reference {
                Some((ea, eb)) => writeln!(out, "; f64 reference error: a {ea:.3e}, b {eb:.3e}")?,
                None => writeln!(out, "; no f64 reference tap of that stage")?,
            }
            out.flush()?;
            bail!("{} and {} differ at call {} stage {}", args.a, args.b, d.call, d.stage);
        }
    }
    Ok(outcome)
}
