//! `lockstep serve`: load the model on one device, start the lane host on its own thread, and answer HTTP until SIGTERM drains it.
use super::run::{gpu_executor, open_device, token_map, tokenizer_path, weights_line, VerifyWeights};
use crate::api::fetch::Fetcher;
use crate::api::images::{Vision, VisionLimits};
use crate::api::listen::Limits;
use crate::api::state::{AppState, Identity, ModelInfo};
use crate::engine::Engine;
use crate::exec::observe::{NanGuard, Observed};
use crate::exec::{CpuExecutor, Executor};
use crate::gpu::Gpu;
use crate::model::forward::Model;
use crate::model::taps::Taps;
use crate::model::forward::LogitRows;
use crate::model::{load, vision_missing, Checkpoint, Config, LoadMode};
use crate::serve::{Command, Host, HostConfig, Status};
use crate::serve::snapshot::SnapshotDir;
use crate::text::Tokenizer;
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of `lockstep serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Model directory (config.json and safetensors).
    #[arg(long)]
    pub model: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one, printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// How the engram tables' values are checked at load (every other tensor is checked as it is first read).
    #[arg(long, value_enum, default_value_t = VerifyWeights::Sampled)]
    pub verify_weights: VerifyWeights,
    /// Executor: `cpu` (the oracle) or a GPU adapter (index, name substring, backend name, `gpu`).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Lanes: streams decoding at once.
    #[arg(long, default_value_t = 4)]
    pub parallel: usize,
    /// Positions per lane (default: the model's).
    #[arg(long)]
    pub context: Option<usize>,
    /// Prompt-cache budget in GiB (0 = off).
    #[arg(long, default_value_t = 1.0)]
    pub prompt_cache_gib: f64,
    /// Also keep prompt-cache snapshots on disk here, read back after a restart.
    #[arg(long)]
    pub snapshot_dir: Option<PathBuf>,
    /// Disk budget of the snapshots in GiB.
    #[arg(long, default_value_t = 4.0)]
    pub snapshot_gib: f64,
    /// Reply budget of a request that sets none.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Key every request must carry.
    #[arg(long, conflicts_with = "api_key_file")]
    pub api_key: Option<String>,
    /// File holding the key.
    #[arg(long)]
    pub api_key_file: Option<PathBuf>,
    /// Most requests waiting for a lane (more get 429).
    #[arg(long, default_value_t = 64)]
    pub max_queue: usize,
    /// Seconds a request may wait for a lane.
    #[arg(long, default_value_t = 600.0)]
    pub queue_timeout: f64,
    /// Most rows one round computes, so a long prompt cannot starve decoders.
    #[arg(long, default_value_t = 256)]
    pub round_tokens: usize,
    /// Seconds SIGTERM lets running streams finish.
    #[arg(long, default_value_t = 30.0)]
    pub drain_seconds: f64,
    /// The model id requests name (default: the model directory's name).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Never draft: every stream runs one token a round.
    #[arg(long)]
    pub no_drafts: bool,
    /// Draft every round, past the depth rule (to measure drafting where it does not pay).
    #[arg(long, conflicts_with = "no_drafts")]
    pub always_draft: bool,
    /// Take image input (OpenAI `image_url` data URLs, Anthropic base64 `image` blocks); refused at start when the checkpoint has no vision tower.
    #[arg(long)]
    pub vision: bool,
    /// Most images in one request.
    #[arg(long, default_value_t = 4)]
    pub max_images: usize,
    /// Most bytes of one encoded image.
    #[arg(long, default_value_t = 10 << 20)]
    pub max_image_bytes: usize,
    /// Most pixels of one decoded image (checked from the header, before decoding).
    #[arg(long, default_value_t = crate::vision::PILLOW_MAX_IMAGE_PIXELS)]
    pub max_image_pixels: u64,
    /// Most image-span tokens in one request, all its images together.
    #[arg(long, default_value_t = 8192)]
    pub max_image_tokens: usize,
    /// Serve no page at `/` (the dashboard and chat); `/status` stays.
    #[arg(long)]
    pub no_ui: bool,
    /// Seconds a stream's client may leave its reply unread before the stream is cancelled.
    #[arg(long, default_value_t = 60.0)]
    pub stall_seconds: f64,
    /// Most bytes of a stream's reply waiting for its client; past it the stream is cancelled.
    #[arg(long, default_value_t = 4 << 20)]
    pub max_unsent_bytes: usize,
    /// Kernel send buffer of each connection in KiB (0: the system's), so a client that stops reading holds back its stream soon.
    #[arg(long, default_value_t = 256)]
    pub send_buffer_kib: usize,
    /// Most connections open at once; further ones wait in the listen queue until one closes.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Seconds a connection may go without sending a whole request head (from its opening or its previous reply's end) before it is closed, and a request body without a byte (408).
    #[arg(long, default_value_t = 60.0)]
    pub idle_timeout: f64,
    /// Seconds a request may hold a lane; past it the request is cancelled with a 504 (an error event when streaming).
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout: f64,
    /// Fetch `image_url` and Anthropic `url` images over http and https, from public addresses only (needs --vision).
    #[arg(long, requires = "vision")]
    pub fetch_image_urls: bool,
    /// Seconds one image URL may take to fetch, its redirects included.
    #[arg(long, default_value_t = 10.0)]
    pub image_fetch_timeout: f64,
}

/// A listener on `host:port` whose connections inherit a kernel send buffer of `send_buffer` bytes.
async fn bind(host: &str, port: u16, send_buffer: usize) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        let sock = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        sock.set_reuseaddr(true)?;
        if send_buffer > 0 {
            sock.set_send_buffer_size(u32::try_from(send_buffer).unwrap_or(u32::MAX))?;
        }
        match sock.bind(addr) {
            Ok(()) => return sock.listen(1024),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the host name resolved to no address")))
}

/// Image input for `serve --vision`: refused with what the checkpoint in `dir` lacks for images.
fn vision_input(args: &ServeArgs, cfg: &Config) -> Result<Option<Vision>> {
    if !args.vision {
        return Ok(None);
    }
    let ck = Checkpoint::open(&args.model, LoadMode::Mapped).map_err(|e| anyhow::anyhow!("opening {}: {e}", args.model.display()))?;
    if let Some(why) = vision_missing(cfg, &ck) {
        bail!("--vision: {why}, so it cannot take images; serve it without --vision for text");
    }
    if args.max_images == 0 || args.max_image_bytes == 0 || args.max_image_pixels == 0 || args.max_image_tokens == 0 {
        bail!("--max-images, --max-image-bytes, --max-image-pixels and --max-image-tokens must be at least 1");
    }
    let settings = crate::vision::Settings { max_pixels: args.max_image_pixels, ..super::image::settings(cfg)? };
    settings.check().map_err(|e| anyhow::anyhow!("--vision: {e}"))?;
    let limits = VisionLimits { settings, max_images: args.max_images, max_image_bytes: args.max_image_bytes, max_image_tokens: args.max_image_tokens, image_token: cfg.image_token_id as u32 };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let fetch = match args.fetch_image_urls {
        false => None,
        true if args.image_fetch_timeout <= 0.0 => bail!("--image-fetch-timeout must be above 0"),
        true => Some(Fetcher::new(args.max_image_bytes, Duration::from_secs_f64(args.image_fetch_timeout)).map_err(anyhow::Error::msg)?),
    };
    if let Ok(spec) = std::env::var("LOCKSTEP_FETCH_ALLOW") {
        let allowed = crate::testing::allow_fetch(&spec).map_err(|e| anyhow::anyhow!("LOCKSTEP_FETCH_ALLOW: {e}"))?;
        eprintln!("image URLs may be fetched from these test addresses: {allowed:?}");
    }
    Ok(Some(Vision::new(limits, cores).with_fetch(fetch)))
}

/// sha256 over the checkpoint's config, index and every safetensors header, in file-name order.
pub fn fingerprint(dir: &Path) -> Result<[u8; 32]> {
    let mut h = Sha256::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?.flatten().map(|e| e.path()).collect();
    files.sort();
    for p in files {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        if name == "config.json" || name.ends_with(".index.json") {
            h.update(name.as_bytes());
            h.update(std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?);
        } else if name.ends_with(".safetensors") {
            use std::io::Read;
            let mut f = std::fs::File::open(&p).with_context(|| format!("opening {}", p.display()))?;
            let mut len = [0u8; 8];
            f.read_exact(&mut len).with_context(|| format!("{}: no header", p.display()))?;
            let n = u64::from_le_bytes(len).min(100 << 20);
            let mut head = vec![0u8; n as usize];
            f.read_exact(&mut head).with_context(|| format!("{}: truncated header", p.display()))?;
            h.update(name.as_bytes());
            h.update(len);
            h.update(&head);
        }
    }
    Ok(h.finalize().into())
}

/// Where `lockstep contract --hash` records a device's hash.
pub fn contract_record(device_key: &str) -> PathBuf {
    let root = std::env::var_os("LOCKSTEP_CACHE_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache"));
    let mut h = Sha256::new();
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.update(device_key.as_bytes());
    let hex: String = h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect();
    root.join("contract").join(format!("{hex}.hash"))
}

/// Records a device's contract hash where `lockstep serve` reads it; returns the file.
pub fn record_contract_hash(gpu: Option<&Gpu>, hash: &str) -> std::io::Result<PathBuf> {
    let record = contract_record(&device_key(gpu));
    if let Some(dir) = record.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&record, format!("{hash}\n"))?;
    Ok(record)
}

/// The key of a device's contract record: its name and driver, or `cpu`.
pub fn device_key(gpu: Option<&Gpu>) -> String {
    gpu.map_or_else(|| "cpu".to_string(), |g| format!("{} | {} | {}", g.info.name, g.info.driver, g.info.driver_info))
}

/// Bytes of sequence state one lane takes at `context` positions: window rings and partial groups, plus compressed rows and index keys.
pub fn lane_bytes(cfg: &Config, context: usize, drafts: bool) -> u64 {
    let (fixed, per_token) = super::inspect::state_per_lane(cfg, drafts);
    fixed + (per_token * context as f64).ceil() as u64
}

/// Allocates `bytes` on the device (in buffers no larger than one binding) and frees them: refused with the figures when the memory is not there.
fn probe(gpu: Option<&Gpu>, bytes: u64) -> Result<(), String> {
    match gpu {
        None => {
            let mut v: Vec<u8> = Vec::new();
            v.try_reserve_exact(bytes as usize).map_err(|e| format!("{bytes} bytes of host memory: {e}"))
        }
        Some(g) => {
            let scope = g.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let chunk = g.max_binding().max(1 << 20);
            let mut held = Vec::new();
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk);
                held.push(g.alloc(n).map_err(|e| e.to_string())?);
                left -= n;
            }
            let err = pollster::block_on(scope.pop());
            drop(held);
            err.map_or(Ok(()), |e| Err(format!("{bytes} bytes on {}: {e}", g.describe())))
        }
    }
}

/// Runs `lockstep serve` until SIGTERM (exit 0 after the drain) or a lost device (an error).
pub fn serve(args: &ServeArgs) -> Result<()> {
    if args.parallel == 0 || args.round_tokens == 0 || args.max_connections == 0 {
        bail!("--parallel, --round-tokens and --max-connections must be at least 1");
    }
    if args.idle_timeout <= 0.0 || args.request_timeout <= 0.0 {
        bail!("--idle-timeout and --request-timeout must be above 0");
    }
    if let Ok(spec) = std::env::var("LOCKSTEP_FAULTS") {
        if !crate::testing::COMPILED {
            bail!("LOCKSTEP_FAULTS is set, but this build has no fault switches: build with `--features testing`, or unset it");
        }
        let armed = crate::testing::arm_spec(&spec).map_err(|e| anyhow::anyhow!("LOCKSTEP_FAULTS: {e}"))?;
        eprintln!("faults armed for testing: {}", armed.join(", "));
    }
    let cfg = Config::from_dir(&args.model).with_context(|| format!("reading the config of {}", args.model.display()))?;
    let vision = vision_input(args, &cfg)?;
    let context = args.context.unwrap_or(cfg.max_position_embeddings);
    if context < 2 || context > cfg.max_position_embeddings.max(1 << 20) {
        bail!("--context {context} must be in 2..={}", cfg.max_position_embeddings.max(1 << 20));
    }
    let api_key = match (&args.api_key, &args.api_key_file) {
        (Some(k), _) => Some(k.clone()),
        (None, Some(f)) => Some(std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?.trim().to_string()),
        _ => None,
    };
    if api_key.as_deref() == Some("") {
        bail!("the API key is empty");
    }
    let tok_path = tokenizer_path(&args.model).context("no tokenizer.json: put one in the model directory, set LOCKSTEP_TOKENIZER, or run scripts/fetch_tokenizer.sh")?;
    let tok = Arc::new(Tokenizer::from_file(&tok_path).with_context(|| format!("loading {}", tok_path.display()))?);
    let mut stop_ids = vec![cfg.eos_token_id as u32];
    stop_ids.extend([tok.special().user, tok.special().assistant].into_iter().flatten().filter(|&t| t != cfg.eos_token_id as u32));
    let id = args.served_model_name.clone().unwrap_or_else(|| args.model.file_name().and_then(|n| n.to_str()).unwrap_or("lockstep").to_string());
    let info = ModelInfo { id, context, max_tokens: args.max_tokens.max(1), bos: cfg.bos_token_id as u32, stop_ids, vocab: cfg.vocab_size };
    let fp = fingerprint(&args.model)?;
    let status = Arc::new(Mutex::new(Status::default()));
    let (tx, rx) = mpsc::channel::<Command>();
    let state = AppState::new(tx.clone(), tok.clone(), status.clone(), info, api_key, args.max_queue, args.parallel).with_vision(vision).with_ui(!args.no_ui);
    let state = Arc::new(state.with_timeouts(Duration::from_secs_f64(args.request_timeout), Duration::from_secs_f64(args.idle_timeout)));
    let snapshots = match &args.snapshot_dir {
        Some(d) => Some(SnapshotDir::open(d, (args.snapshot_gib * (1u64 << 30) as f64) as u64, fp).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let host_cfg = HostConfig {
        parallel: args.parallel,
        context,
        round_tokens: args.round_tokens,
        queue_timeout: Some(Duration::from_secs_f64(args.queue_timeout.max(0.001))),
        cache_bytes: (args.prompt_cache_gib.max(0.0) * (1u64 << 30) as f64) as usize,
        snapshots,
        draft_block: if args.no_drafts { 0 } else { cfg.dspark_block_size },
        always_draft: args.always_draft,
        stall: Duration::from_secs_f64(args.stall_seconds.max(0.001)),
        max_unsent: args.max_unsent_bytes,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let listener = rt.block_on(bind(&args.host, args.port, args.send_buffer_kib << 10)).with_context(|| format!("binding {}:{}", args.host, args.port))?;
    let addr = listener.local_addr()?;
    eprintln!("listening on http://{addr} (loading {} on {})", args.model.display(), args.device);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<Result<(), String>>();
    let engine_state = state.clone();
    let (a, lanes) = (args.clone(), args.parallel);
    let fp_hex: String = fp.iter().map(|b| format!("{b:02x}")).collect();
    let host_thread_handle = std::thread::Builder::new()
        .name("lane-host".into())
        .spawn(move || {
            let r = host_thread(&a, host_cfg, lanes, context, tok, engine_state, fp_hex, rx, addr).map_err(|e| format!("{e:#}"));
            let _ = done_tx.send(r);
        })
        .context("starting the lane host")?;
    let app = crate::api::router(state.clone());
    let drain = Duration::from_secs_f64(args.drain_seconds.max(0.0));
    let limits = Limits { max_connections: args.max_connections, idle: Duration::from_secs_f64(args.idle_timeout) };
    rt.block_on(async move {
        tokio::spawn(crate::api::page::sample(state.clone()));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let stop = async move {
            let _ = stop_rx.await;
        };
        let server = tokio::spawn(crate::api::listen::serve(listener, app, limits, stop, Duration::from_secs(5)));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let outcome = tokio::select! {
            r = done_rx => r.unwrap_or_else(|_| Err("the lane host stopped".into())),
            _ = term.recv() => Ok(()),
            _ = tokio::signal::ctrl_c() => Ok(()),
        };
        if let Err(e) = outcome {
            // the engine ended on its own: the device is lost or the load failed
            let _ = stop_tx.send(());
            bail!("{e}");
        }
        eprintln!("draining: new requests get 503; running streams have {} s", drain.as_secs_f64());
        state.draining.store(true, Ordering::Relaxed);
        let _ = tx.send(Command::Drain(Instant::now() + drain));
        // the host returns once every stream has finished or been cancelled
        while !state.status.lock().unwrap_or_else(|p| p.into_inner()).lanes.is_empty() || state.queued.load(Ordering::Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = stop_tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        Ok(())
    })?;
    // the device is released on the host's thread before the process exits
    let _ = host_thread_handle.join();
    eprintln!("drained; exiting");
    Ok(())
}

/// The lane host's thread: opens the device, loads the model, checks the lanes' and cache's memory, then serves.
#[allow(clippy::too_many_arguments)]
fn host_thread(args: &ServeArgs, cfg_host: HostConfig, lanes: usize, context: usize, tok: Arc<Tokenizer>, state: Arc<AppState>, fp: String, rx: mpsc::Receiver<Command>, addr: std::net::SocketAddr) -> Result<()> {
    let gpu = open_device(&args.device)?;
    let t0 = Instant::now();
    let (cfg, ckpt) = load(&args.model, LoadMode::Mapped, args.verify_weights.check()).with_context(|| format!("loading {}", args.model.display()))?;
    let per_lane = lane_bytes(&cfg, context, cfg_host.draft_block > 0);
    let cache = cfg_host.cache_bytes as u64;
    let total = per_lane * lanes as u64 + cache;
    eprintln!("lanes: {lanes} x {per_lane} bytes at {context} positions = {} bytes; prompt cache: {cache} bytes; total {total} bytes", per_lane * lanes as u64);
    if let Some(g) = gpu.as_ref() {
        let row = crate::kernels::state::Packing::new(crate::exec::Qat::Fp4Rows, cfg.head_dim).map_or(cfg.head_dim * 4, |p| p.row_bytes()) as u64;
        let widest = context as u64 * row;
        if widest > g.max_binding() {
            bail!("--context {context} needs a compressed KV cache of {widest} bytes (a ratio-1 source, {row} bytes a row) in one binding; this device binds at most {} bytes: lower --context to {} or less", g.max_binding(), g.max_binding() / row);
        }
    }
    probe(gpu.as_ref(), total).map_err(|e| anyhow::anyhow!("cannot hold the lanes ({lanes} x {per_lane} bytes at --context {context}) and the prompt cache ({cache} bytes): {e}"))?;
    let map = token_map(&cfg, &tok)?;
    let model = Model::new(cfg.clone(), &ckpt, map)?;
    let device = gpu.as_ref().map_or_else(|| "cpu (the CPU oracle)".to_string(), |g| g.describe());
    let record = contract_record(&device_key(gpu.as_ref()));
    let contract_hash = std::fs::read_to_string(&record).ok().map(|s| s.trim().to_string()).filter(|s| s.len() == 64);
    if contract_hash.is_none() {
        eprintln!("no contract hash recorded for this device: `lockstep contract --hash --device {}` records one ({})", args.device, record.display());
    }
    *state.identity.lock().unwrap_or_else(|p| p.into_inner()) = Some(Identity { version: env!("CARGO_PKG_VERSION").into(), contract_hash, fingerprint: fp, device });
    let status = state.status.clone();
    let key = if state.api_key.is_some() { " -H 'Authorization: Bearer $KEY'" } else { "" };
    let page = if state.ui { format!("\nor open http://{addr}/ for the dashboard and a chat") } else { String::new() };
    let ready = format!("ready on http://{addr}; try:\n  curl http://{addr}/v1/chat/completions -H 'Content-Type: application/json'{key} -d '{{\"model\": \"{}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}], \"max_tokens\": 32}}'{page}", state.model.id);
    let warm = Warm { ckpt: &ckpt, t0, bos: cfg.bos_token_id as u32 };
    let drafts = cfg_host.draft_block > 0;
    match &gpu {
        None => run_host(Engine::new(Observed { inner: CpuExecutor::new(&ckpt), obs: NanGuard }, &model).with_drafts(drafts).with_context(context), warm, &tok, cfg_host, status, rx, &ready),
        Some(g) => run_host(Engine::new(gpu_executor(g, &ckpt, &args.device)?, &model).with_drafts(drafts).with_context(context), warm, &tok, cfg_host, status, rx, &ready),
    }
}

/// What the warm-up needs: the checkpoint (for its read counts), when the load began, the BOS id.
struct Warm<'c> {
    ckpt: &'c Checkpoint,
    t0: Instant,
    bos: u32,
}

/// Warms the engine (one throwaway forward and draft read, check and upload every weight it keeps), reports the load, then serves.
fn run_host<E: Executor>(mut engine: Engine<'_, '_, E>, warm: Warm<'_>, tok: &Tokenizer, cfg: HostConfig, status: Arc<Mutex<Status>>, rx: mpsc::Receiver<Command>, ready: &str) -> Result<()> {
    let id = engine.add()?;
    engine.run(id, &[warm.bos], LogitRows::Last, &mut Taps::default()).context("warming up: the first forward failed")?;
    let mut pace = crate::serve::pace::Pace::default();
    if engine.can_draft(id) && cfg.draft_block > 0 {
        engine.draft(&[(id, warm.bos)], &mut Taps::default()).context("warming up: the first draft failed")?;
        let window = vec![warm.bos; cfg.draft_block + 1];
        let time = |engine: &mut Engine<'_, '_, E>, ids: &[u32]| -> Result<Duration> {
            let seq = engine.fork(id)?;
            let t0 = Instant::now();
            engine.run(seq, ids, if ids.len() > 1 { LogitRows::All } else { LogitRows::Last }, &mut Taps::default()).context("warming up: timing a round")?;
            let took = t0.elapsed();
            engine.remove(seq)?;
            Ok(took)
        };
        time(&mut engine, &window)?;
        let (plain, drafted) = (time(&mut engine, &window[..1])?, time(&mut engine, &window)?);
        let t0 = Instant::now();
        engine.draft(&[(id, warm.bos)], &mut Taps::default()).context("warming up: timing a draft")?;
        pace = crate::serve::pace::Pace::measured(plain, drafted, t0.elapsed());
        eprintln!("drafts: a plain round {:.2} ms, a verify window of {} rows {:.2} ms, a draft pass {:.2} ms: drafting pays when a round accepts more than {:.2} drafts", plain.as_secs_f64() * 1e3, window.len(), drafted.as_secs_f64() * 1e3, t0.elapsed().as_secs_f64() * 1e3, pace.cost());
    }
    engine.remove(id)?;
    let canonical = warm.ckpt.canonical();
    if !canonical.is_empty() {
        eprintln!("{canonical}");
    }
    eprintln!("{}", weights_line(warm.ckpt, Some(warm.t0.elapsed().as_secs_f64())));
    let host = Host::with_pace(engine, tok, cfg, status, pace);
    eprintln!("{ready}");
    host.run(rx).map_err(|e| anyhow::anyhow!("{e}"))
}
