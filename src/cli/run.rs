//! `lockstep run` (load, encode, prefill, decode on the CPU oracle or a GPU, stream text, print the token hash, dump taps) and `lockstep make-tiny`.
use crate::engine::{GenerateOptions, Generation, Placed, Sampler, Sampling, Session};
use crate::exec::observe::{NanGuard, Observed};
use crate::exec::{CpuExecutor, Executor, GpuExecutor};
use crate::model::forward::Model;
use crate::gpu::{DeviceChoice, Gpu};
use crate::model::taps::Taps;
use crate::model::config::TINY_CONFIG_JSON;
use crate::model::{load, write_checkpoint_values, Checkpoint, Config, LoadMode, ValueCheck, Values};
use crate::weights::Tables;
use crate::text::{encode_chat, find_tokenizer_json, ChatOptions, ContentBlock, Detokenizer, Message, Role, TokenMap, Tokenizer};
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of `lockstep run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Model directory (config.json and safetensors).
    #[arg(long)]
    pub model: PathBuf,
    /// Prompt text.
    #[arg(long)]
    pub prompt: String,
    /// Encode the prompt as one user message in the V4.1 chat format (thinking off).
    #[arg(long)]
    pub chat: bool,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 64)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Nucleus mass for sampling.
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Seed of the per-position draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Executor: `cpu` (the oracle), a GPU adapter (index, name substring, backend name, `gpu` for the default), or `metal-emu` (the MSL harness).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Prompt tokens per prefill call.
    #[arg(long, default_value_t = 128)]
    pub prefill_chunk: usize,
    /// Write every forward call's stage taps under this directory.
    #[arg(long)]
    pub taps: Option<PathBuf>,
    /// How the engram tables' values are checked at load (every other tensor is checked as it is first read).
    #[arg(long, value_enum, default_value_t = VerifyWeights::Sampled)]
    pub verify_weights: VerifyWeights,
    /// An image file (PNG, JPEG, WebP, GIF) whose span replaces the prompt's first `<｜deepseek_image｜>` (else, with `--chat`, comes before the text of the user message; else follows BOS).
    #[arg(long)]
    pub image: Option<PathBuf>,
}

/// `--verify-weights`: the engram tables sampled (each row is still checked when a lookup reads it) or scanned whole at load.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyWeights {
    /// One row in 1024 of each large table.
    Sampled,
    /// Every byte.
    Full,
}

impl VerifyWeights {
    /// The load's value check.
    pub fn check(self) -> ValueCheck {
        ValueCheck::OnUse(match self {
            VerifyWeights::Sampled => Tables::Sampled,
            VerifyWeights::Full => Tables::Full,
        })
    }
}

/// One line on what the loader read: bytes scanned against the payload, the sampled share, and the time when given.
pub(crate) fn weights_line(ck: &Checkpoint, seconds: Option<f64>) -> String {
    let took = seconds.map_or(String::new(), |s| format!(" in {s:.2} s"));
    let tables = match ck.bytes_sampled() {
        0 => "engram tables scanned whole".to_string(),
        n => format!("engram tables sampled: {n} bytes"),
    };
    format!("weights: read {} of {} payload bytes once{took}, each tensor checked as it was read ({tables})", ck.bytes_read(), ck.payload_bytes())
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// Prompt token ids.
    pub prompt: Vec<u32>,
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// sha256 over the generated ids as little-endian u32, hex.
    pub token_sha256: String,
}

/// Hex sha256 over ids as little-endian u32.
pub fn token_sha256(ids: &[u32]) -> String {
    let mut h = Sha256::new();
    ids.iter().for_each(|i| h.update(i.to_le_bytes()));
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// tokenizer.json in the model dir, else `LOCKSTEP_TOKENIZER`, else the fetched cache.
pub(crate) fn tokenizer_path(model: &Path) -> Option<PathBuf> {
    let local = model.join("tokenizer.json");
    if local.is_file() {
        return Some(local);
    }
    find_tokenizer_json(Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// The engram token map the config expects: built from the tokenizer, or the synthetic map for a compressed vocabulary of 64.
pub(crate) fn token_map(cfg: &Config, tok: &Tokenizer) -> Result<TokenMap> {
    if cfg.engram_layer_ids.is_empty() {
        return Ok(TokenMap::synthetic(cfg.vocab_size, 1));
    }
    let map = TokenMap::build(tok).context("building the engram token map")?;
    if map.classes == cfg.engram_compressed_vocab_size {
        Ok(map)
    } else if cfg.engram_compressed_vocab_size == 64 {
        Ok(TokenMap::synthetic(cfg.vocab_size, 64))
    } else {
        bail!("the tokenizer gives {} engram classes, the config expects {}", map.classes, cfg.engram_compressed_vocab_size)
    }
}

/// Header line of a tap file: `lockstep-tap NAME ROWS COLS`, then ROWS*COLS little-endian f32 values.
pub const TAP_MAGIC: &str = "lockstep-tap";

/// Writes one call's taps as `call{n}/{name}.tap` (header line, then f32 LE data) plus `call{n}/index.json` (the order).
pub fn write_taps(dir: &Path, call: usize, taps: &Taps<f32>) -> Result<()> {
    let d = dir.join(format!("call{call:04}"));
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    let mut index = Vec::new();
    for t in &taps.list {
        let mut bytes = format!("{TAP_MAGIC} {} {} {}\n", t.name, t.rows, t.cols).into_bytes();
        bytes.extend(t.data.iter().flat_map(|v| v.to_le_bytes()));
        let path = d.join(format!("{}.tap", t.name));
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        index.push(serde_json::json!({ "name": t.name, "rows": t.rows, "cols": t.cols }));
    }
    let path = d.join("index.json");
    std::fs::write(&path, serde_json::to_string_pretty(&index)?).with_context(|| format!("writing {}", path.display()))
}

/// Reads a tap file written by [`write_taps`]: (name, rows, cols, values).
pub fn read_tap(path: &Path) -> Result<(String, usize, usize, Vec<f32>)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let nl = bytes.iter().position(|&b| b == b'\n').with_context(|| format!("{}: no header line", path.display()))?;
    let head = String::from_utf8_lossy(&bytes[..nl]).to_string();
    let f: Vec<&str> = head.split(' ').collect();
    let (rows, cols) = match f.as_slice() {
        [m, _, r, c] if *m == TAP_MAGIC => (r.parse::<usize>().ok(), c.parse::<usize>().ok()),
        _ => (None, None),
    };
    let (Some(rows), Some(cols)) = (rows, cols) else { bail!("{}: bad tap header `{head}`", path.display()) };
    let data = &bytes[nl + 1..];
    if data.len() != rows * cols * 4 {
        bail!("{}: {} data bytes for [{rows}, {cols}]", path.display(), data.len());
    }
    Ok((f[1].to_string(), rows, cols, data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()))
}

/// What `run` and `diff` load: config, checkpoint, tokenizer, the prompt's ids and the engram token map.
pub(crate) struct Loaded {
    /// The config.
    pub cfg: Config,
    /// The mapped checkpoint.
    pub ckpt: Checkpoint,
    /// The tokenizer.
    pub tok: Tokenizer,
    /// Prompt token ids.
    pub prompt: Vec<u32>,
    /// Engram token map.
    pub map: TokenMap,
}

/// Loads the model directory and encodes `prompt` (BOS then the text, or one chat user message, led by an image placeholder when `image`).
pub(crate) fn load_model(dir: &Path, prompt: &str, chat: bool, image: bool, verify: VerifyWeights) -> Result<Loaded> {
    if !dir.is_dir() {
        bail!("model directory {} does not exist", dir.display());
    }
    if prompt.is_empty() {
        bail!("the prompt is empty");
    }
    let (cfg, ckpt) = load(dir, LoadMode::Mapped, verify.check()).with_context(|| format!("loading {}", dir.display()))?;
    let tok_path = tokenizer_path(dir).context("no tokenizer.json: put one in the model directory, set LOCKSTEP_TOKENIZER, or run scripts/fetch_tokenizer.sh")?;
    let tok = Tokenizer::from_file(&tok_path).with_context(|| format!("loading {}", tok_path.display()))?;
    let ids = if chat {
        let mut user = Message::text(Role::User, prompt.to_string());
        if image {
            user.content.insert(0, ContentBlock::Image("--image".into()));
        }
        let text = encode_chat(&[user], &ChatOptions { thinking: false, ..ChatOptions::default() })?;
        tok.encode_rendered(&text)?
    } else {
        let mut ids = vec![cfg.bos_token_id as u32];
        ids.extend(tok.encode(prompt)?);
        ids
    };
    if ids.len() >= cfg.max_position_embeddings {
        bail!("the prompt has {} tokens, the model takes at most {}", ids.len(), cfg.max_position_embeddings);
    }
    let map = token_map(&cfg, &tok)?;
    Ok(Loaded { cfg, ckpt, tok, prompt: ids, map })
}

/// Opens the GPU adapter `device` names; `None` for `cpu`.
pub(crate) fn open_device(device: &str) -> Result<Option<Gpu>> {
    match DeviceChoice::parse(device) {
        DeviceChoice::Cpu => Ok(None),
        choice => Ok(Some(Gpu::open(&choice).with_context(|| format!("opening device `{device}`"))?)),
    }
}

/// A GPU executor, refused with the list of missing kernels while the forward's kernels are not all registered.
pub(crate) fn gpu_executor<'g, 'c>(gpu: &'g Gpu, ckpt: &'c Checkpoint, device: &str) -> Result<GpuExecutor<'g, 'c>> {
    let ex = GpuExecutor::new(gpu, ckpt);
    let missing = ex.missing_kernels();
    if !missing.is_empty() {
        bail!("device `{device}`: GPU executor not built yet: kernels not registered: {}", missing.join(", "));
    }
    Ok(ex)
}

/// Runs `lockstep run`, streaming text and the final `token_sha256=` line to `out`.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<RunReport> {
    let sampling = Sampling::Random { temperature: args.temperature, top_p: args.top_p, seed: args.seed };
    let sampler = Sampler::new(sampling)?;
    let gpu = open_device(&args.device)?;
    let mut l = load_model(&args.model, &args.prompt, args.chat, args.image.is_some(), args.verify_weights)?;
    let placed = args.image.as_deref().map(|p| super::image::place_image(&l.cfg, &mut l.prompt, p)).transpose()?;
    let room = l.cfg.max_position_embeddings.saturating_sub(l.prompt.len());
    let eos = l.cfg.eos_token_id as u32;
    let model = Model::new(l.cfg.clone(), &l.ckpt, l.map.clone())?;
    let opts = GenerateOptions { chunk: args.prefill_chunk, max_tokens: args.max_tokens.min(room), taps: args.taps.is_some() };
    let drive = Drive { prompt: &l.prompt, image: placed.as_ref(), opts: &opts, sampler: &sampler, tok: &l.tok, eos, taps: args.taps.as_deref() };
    let gen = match &gpu {
        None => drive.run(Session::new(Observed { inner: CpuExecutor::new(&l.ckpt), obs: NanGuard }, &model)?, out)?,
        Some(g) => drive.run(Session::new(gpu_executor(g, &l.ckpt, &args.device)?, &model)?, out)?,
    };
    let canonical = l.ckpt.canonical();
    if !canonical.is_empty() {
        eprintln!("{canonical}");
    }
    eprintln!("{}", weights_line(&l.ckpt, None));
    let hash = token_sha256(&gen.tokens);
    writeln!(out, "token_sha256={hash}")?;
    Ok(RunReport { prompt: l.prompt, tokens: gen.tokens, token_sha256: hash })
}

/// One generation's settings, independent of the executor.
struct Drive<'a> {
    prompt: &'a [u32],
    image: Option<&'a super::image::PromptImage>,
    opts: &'a GenerateOptions,
    sampler: &'a Sampler,
    tok: &'a Tokenizer,
    eos: u32,
    taps: Option<&'a Path>,
}

impl Drive<'_> {
    /// Generates on `session`, streaming text to `out` and writing taps when asked.
    fn run<E: Executor>(&self, mut session: Session<'_, '_, E>, out: &mut dyn Write) -> Result<Generation> {
        let tok = self.tok;
        let mut detok = Detokenizer::new(true);
        let mut calls = 0usize;
        let mut tap_error = None;
        let mut on_call = |taps: Taps<f32>| {
            if let (Some(dir), None) = (self.taps, &tap_error) {
                tap_error = write_taps(dir, calls, &taps).err();
            }
            calls += 1;
        };
        let special = tok.special().clone();
        let eos = self.eos;
        let stop = |t: u32| t == eos || special.is_stop(t);
        let on_token = |t: u32| {
            let text = detok.push(tok, t).map_err(|e| e.to_string())?;
            out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(|e| e.to_string())
        };
        let mut placed = Vec::new();
        if let Some(p) = self.image {
            let mut taps = if self.opts.taps { Taps::on() } else { Taps::default() };
            let id = session.engine.add_image(&super::image::tower_input(&p.image), p.image.patches.llm_h as usize, p.image.patches.llm_w as usize, &mut taps)?;
            on_call(taps);
            placed.push(Placed { image: id, at: p.at, len: p.len });
        }
        let gen = session.generate(self.prompt, &placed, self.opts, self.sampler, stop, on_call, on_token)?;
        if let Some(e) = tap_error {
            return Err(e);
        }
        let tail = detok.finish(tok)?;
        writeln!(out, "{tail}")?;
        Ok(gen)
    }
}

/// Runs `lockstep make-tiny`: writes the checkpoint (random or edge values), then copies the fetched tokenizer files into `dir` (a warning on `warn` when there are none).
pub fn make_tiny_dir(dir: &Path, seed: u64, config: Option<&Path>, values: Values, warn: &mut dyn Write) -> Result<()> {
    let json = match config {
        Some(c) => std::fs::read_to_string(c).with_context(|| format!("reading {}", c.display()))?,
        None => TINY_CONFIG_JSON.to_string(),
    };
    let summary = write_checkpoint_values(dir, seed, &json, values).with_context(|| format!("writing the tiny checkpoint into {}", dir.display()))?;
    match find_tokenizer_json(Path::new(env!("CARGO_MANIFEST_DIR"))) {
        Some(tj) => {
            std::fs::copy(&tj, dir.join("tokenizer.json")).with_context(|| format!("copying {}", tj.display()))?;
            let tc = tj.with_file_name("tokenizer_config.json");
            if tc.is_file() {
                std::fs::copy(&tc, dir.join("tokenizer_config.json")).with_context(|| format!("copying {}", tc.display()))?;
            }
        }
        None => writeln!(warn, "warning: no tokenizer found (run scripts/fetch_tokenizer.sh); {} has no tokenizer.json", dir.display())?,
    }
    writeln!(warn, "wrote {} tensors ({} bytes) in {} files to {}", summary.tensors, summary.bytes, summary.files.len(), dir.display())?;
    Ok(())
}
