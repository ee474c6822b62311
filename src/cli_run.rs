//! `lockstep run` (load, encode, prefill, decode, stream text, print the token hash) and `lockstep make-tiny`.
use crate::engine::{GenerateOptions, Sampler, Sampling, Session};
use crate::exec::CpuExecutor;
use crate::forward::Model;
use crate::model::taps::Taps;
use crate::model::{load, make_tiny, make_tiny_from_file, Config, LoadMode, ValueCheck};
use crate::text::{encode_chat, find_tokenizer_json, ChatOptions, Detokenizer, Message, Role, TokenMap, Tokenizer};
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
    /// Executor: `cpu`.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Prompt tokens per prefill call.
    #[arg(long, default_value_t = 128)]
    pub prefill_chunk: usize,
    /// Write every forward call's stage taps under this directory.
    #[arg(long)]
    pub taps: Option<PathBuf>,
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
fn tokenizer_path(model: &Path) -> Option<PathBuf> {
    let local = model.join("tokenizer.json");
    if local.is_file() {
        return Some(local);
    }
    find_tokenizer_json(Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// The engram token map the config expects: built from the tokenizer, or the synthetic map for a compressed vocabulary of 64.
fn token_map(cfg: &Config, tok: &Tokenizer) -> Result<TokenMap> {
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

/// Writes one call's taps as `call{n}/{name}.f32` (little-endian f32) plus `call{n}/index.json`.
fn write_taps(dir: &Path, call: usize, taps: &Taps<f32>) -> Result<()> {
    let d = dir.join(format!("call{call:04}"));
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    let mut index = Vec::new();
    for t in &taps.list {
        let bytes: Vec<u8> = t.data.iter().flat_map(|v| v.to_le_bytes()).collect();
        let path = d.join(format!("{}.f32", t.name));
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        index.push(serde_json::json!({ "name": t.name, "rows": t.rows, "cols": t.cols }));
    }
    let path = d.join("index.json");
    std::fs::write(&path, serde_json::to_string_pretty(&index)?).with_context(|| format!("writing {}", path.display()))
}

/// Runs `lockstep run`, streaming text and the final `token_sha256=` line to `out`.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<RunReport> {
    if args.device != "cpu" {
        bail!("device `{}`: GPU executor not built yet (use --device cpu)", args.device);
    }
    if !args.model.is_dir() {
        bail!("model directory {} does not exist", args.model.display());
    }
    if args.prompt.is_empty() {
        bail!("the prompt is empty");
    }
    let sampling = Sampling::Random { temperature: args.temperature, top_p: args.top_p, seed: args.seed };
    let sampler = Sampler::new(sampling)?;
    let (cfg, ckpt) = load(&args.model, LoadMode::Mapped, ValueCheck::default()).with_context(|| format!("loading {}", args.model.display()))?;
    let tok_path = tokenizer_path(&args.model).context("no tokenizer.json: put one in the model directory, set LOCKSTEP_TOKENIZER, or run scripts/fetch_tokenizer.sh")?;
    let tok = Tokenizer::from_file(&tok_path).with_context(|| format!("loading {}", tok_path.display()))?;
    let prompt = if args.chat {
        let text = encode_chat(&[Message::text(Role::User, args.prompt.clone())], &ChatOptions { thinking: false, ..ChatOptions::default() })?;
        tok.encode(&text)?
    } else {
        let mut ids = vec![cfg.bos_token_id as u32];
        ids.extend(tok.encode(&args.prompt)?);
        ids
    };
    let room = cfg.max_position_embeddings.saturating_sub(prompt.len());
    if room == 0 {
        bail!("the prompt has {} tokens, the model takes at most {}", prompt.len(), cfg.max_position_embeddings);
    }
    let map = token_map(&cfg, &tok)?;
    let eos = cfg.eos_token_id as u32;
    let model = Model::new(cfg, &ckpt, map)?;
    let mut session = Session::new(CpuExecutor::new(&ckpt), &model)?;
    let mut detok = Detokenizer::new(true);
    let mut calls = 0usize;
    let mut tap_error = None;
    let taps_dir = args.taps.clone();
    let on_call = |taps: Taps<f32>| {
        if let (Some(dir), None) = (&taps_dir, &tap_error) {
            tap_error = write_taps(dir, calls, &taps).err();
        }
        calls += 1;
    };
    let special = tok.special().clone();
    let stop = |t: u32| t == eos || special.is_stop(t);
    let on_token = |t: u32| {
        let text = detok.push(&tok, t).map_err(|e| e.to_string())?;
        out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(|e| e.to_string())
    };
    let opts = GenerateOptions { chunk: args.prefill_chunk, max_tokens: args.max_tokens.min(room), taps: taps_dir.is_some() };
    let gen = session.generate(&prompt, &opts, &sampler, stop, on_call, on_token)?;
    if let Some(e) = tap_error {
        return Err(e);
    }
    let tail = detok.finish(&tok)?;
    let hash = token_sha256(&gen.tokens);
    writeln!(out, "{tail}")?;
    writeln!(out, "token_sha256={hash}")?;
    Ok(RunReport { prompt, tokens: gen.tokens, token_sha256: hash })
}

/// Runs `lockstep make-tiny`: writes the checkpoint, then copies the fetched tokenizer files into `dir` (a warning on `warn` when there are none).
pub fn make_tiny_dir(dir: &Path, seed: u64, config: Option<&Path>, warn: &mut dyn Write) -> Result<()> {
    let summary = match config {
        Some(c) => make_tiny_from_file(dir, seed, c),
        None => make_tiny(dir, seed, None),
    }
    .with_context(|| format!("writing the tiny checkpoint into {}", dir.display()))?;
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
