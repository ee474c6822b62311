//! `lockstep inspect`: what a checkpoint (or a config alone) is before anyone loads it: its shape, its layers' roles, its tensors by dtype, what stays resident on the GPU and on the host, the state a lane carries, and what the load would change to make its values canonical.
use crate::model::{expected_tensors, tensors_to_hold, vision_missing, Checkpoint, Config, LayerMode, LayerPlan, LoadMode, TensorSpec, ValueCheck};
use crate::exec::Qat;
use crate::kernels::state::Packing;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// Options of `lockstep inspect`.
#[derive(clap::Args, Debug, Clone)]
pub struct InspectArgs {
    /// Checkpoint directory (config.json and safetensors).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// A config.json alone, without weights: the tensors it implies.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Positions per lane for the state figures.
    #[arg(long, default_value_t = 1_048_576)]
    pub context: usize,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Read headers only: skip the value scan (NaN/inf, and what the load would make canonical).
    #[arg(long)]
    pub no_values: bool,
}

/// Whether a tensor stays on the host (the engram tables are read per step from the mapped file, never uploaded).
fn on_host(name: &str) -> bool {
    name.contains(".engram.embed.")
}

/// Bytes of sequence state one lane keeps over the backbone, and over the DSpark stages' rings when `drafts` (and the model drafts): (fixed, per token), as [`layer_state`] sums them.
pub(crate) fn state_per_lane(cfg: &Config, drafts: bool) -> (u64, f64) {
    let plan = cfg.layer_plan();
    let layers = if drafts && cfg.has_drafts() { plan.len() } else { cfg.num_hidden_layers.min(plan.len()) };
    plan[..layers].iter().map(|p| layer_state(cfg, p)).fold((0u64, 0.0f64), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// Bytes of sequence state a layer keeps per lane: (fixed: window ring and the partial group, f32; per token: compressed rows and index keys, packed).
fn layer_state(cfg: &Config, p: &LayerPlan) -> (u64, f64) {
    let f = 4u64;
    let window = (cfg.sliding_window * cfg.head_dim) as u64 * f;
    if p.mode != LayerMode::Full || p.dspark_stage.is_some() {
        return (window, 0.0);
    }
    let partial = if p.ratio > 1 { ((p.ratio - 1) * 2 * cfg.head_dim) as u64 * f } else { 0 };
    let packed = |kind, cols| Packing::new(kind, cols).map_or(cols * 4, |pk| pk.row_bytes());
    let per_token = (packed(Qat::Fp4Rows, cfg.head_dim) + packed(Qat::Fp4Index, cfg.index_head_dim)) as f64 / p.ratio.max(1) as f64;
    (window + partial, per_token)
}

/// The layer roles as runs: `0-1 window`, `2 full r2 (kv, index, candidates)`, ...
fn roles(plan: &[LayerPlan]) -> Vec<String> {
    let role = |p: &LayerPlan| {
        let mut r = format!("{:?}", p.mode).to_lowercase();
        if p.ratio > 0 {
            r.push_str(&format!(" r{}", p.ratio));
        }
        let mut tags = Vec::new();
        if p.candidate_source {
            tags.push("candidates");
        }
        if p.engram.is_some() {
            tags.push("engram");
        }
        if p.dspark_target.is_some() {
            tags.push("drafts' feature");
        }
        if let Some(s) = p.dspark_stage {
            r = format!("draft stage {s}: {r}");
        }
        if !tags.is_empty() {
            r.push_str(&format!(" ({})", tags.join(", ")));
        }
        r
    };
    let mut out: Vec<(usize, usize, String)> = Vec::new();
    for (i, p) in plan.iter().enumerate() {
        let r = role(p);
        match out.last_mut() {
            Some(last) if last.2 == r && last.1 + 1 == i => last.1 = i,
            _ => out.push((i, i, r)),
        }
    }
    out.into_iter().map(|(a, b, r)| if a == b { format!("{a} {r}") } else { format!("{a}-{b} {r}") }).collect()
}

/// Count and bytes of `specs` by dtype.
fn by_dtype<'a>(specs: impl Iterator<Item = &'a TensorSpec>) -> BTreeMap<String, (usize, u64)> {
    let mut m: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for s in specs {
        let e = m.entry(s.dtype.to_string()).or_default();
        e.0 += 1;
        e.1 += s.byte_len();
    }
    m
}

/// The value scan of every tensor up to 4 GiB as JSON: finite or the error, and what it made canonical.
fn values_json(ck: &mut Checkpoint) -> Value {
    match ck.check_values(ValueCheck::UpTo(4 << 30)) {
        Ok(c) => {
            let changed: Vec<Value> = c.tensors.iter().map(|(n, x)| json!({ "name": n, "flushed": x.flushed, "blocks_zeroed": x.blocks_zeroed })).collect();
            let line = if c.is_empty() { "finite, canonical as stored".to_string() } else { format!("finite; {c}") };
            json!({ "summary": line, "tensors_changed": c.tensors.len(), "values_flushed": c.flushed(), "blocks_zeroed": c.blocks_zeroed(), "changed": changed })
        }
        Err(e) => json!({ "summary": e.to_string() }),
    }
}

/// The inspection as one JSON value.
fn inspect(args: &InspectArgs) -> Result<Value> {
    let (cfg, source, ckpt) = match (&args.model, &args.config) {
        (Some(dir), None) => {
            let cfg = Config::from_dir(dir).with_context(|| format!("reading the config in {}", dir.display()))?;
            let ck = Checkpoint::open(dir, LoadMode::Mapped).with_context(|| format!("opening the checkpoint in {}", dir.display()))?;
            (cfg, dir.display().to_string(), Some(ck))
        }
        (None, Some(file)) => (Config::from_file(file).with_context(|| format!("reading {}", file.display()))?, file.display().to_string(), None),
        _ => bail!("give one of --model DIR or --config FILE"),
    };
    let specs = expected_tensors(&cfg);
    let plan = cfg.layer_plan();
    let payload: u64 = specs.iter().map(TensorSpec::byte_len).sum();
    let host: u64 = specs.iter().filter(|s| on_host(&s.name)).map(TensorSpec::byte_len).sum();
    let (fixed, per_token) = state_per_lane(&cfg, true);
    let dtypes: Value = by_dtype(specs.iter()).into_iter().map(|(d, (n, b))| (d, json!({ "tensors": n, "bytes": b }))).collect::<serde_json::Map<_, _>>().into();
    let vision = match (&cfg.vision, &ckpt) {
        (None, _) => json!("none"),
        (Some(_), None) => json!("a vision tower in the config"),
        (Some(_), Some(ck)) => json!(vision_missing(&cfg, ck).map_or_else(|| "a vision tower in the checkpoint (serve --vision takes images)".to_string(), |why| format!("none: {why}"))),
    };
    let checkpoint = ckpt.map(|mut ck| {
        let stored: u64 = ck.names().filter_map(|n| ck.get(n)).map(|v| v.bytes.len() as u64).sum();
        let layout = match ck.check_layout(&tensors_to_hold(&cfg, &ck)) {
            Ok(()) => "matches the config's table".to_string(),
            Err(e) => e.to_string(),
        };
        let values = if args.no_values { Value::Null } else { values_json(&mut ck) };
        json!({ "tensors": ck.len(), "bytes": stored, "layout": layout, "values": values })
    });
    Ok(json!({
        "source": source,
        "config": {
            "layers": cfg.num_hidden_layers, "hidden_size": cfg.hidden_size, "heads": cfg.num_attention_heads, "head_dim": cfg.head_dim,
            "routed_experts": cfg.n_routed_experts, "experts_per_token": cfg.num_experts_per_tok, "moe_intermediate_size": cfg.moe_intermediate_size,
            "vocab_size": cfg.vocab_size, "sliding_window": cfg.sliding_window, "index_topk": cfg.index_topk, "hc_mult": cfg.hc_mult,
            "max_position_embeddings": cfg.max_position_embeddings,
        },
        "layers": roles(&plan),
        "expected": { "tensors": specs.len(), "bytes": payload, "by_dtype": dtypes },
        "resident_bytes": payload - host,
        "host_bytes": host,
        "state": {
            "per_token_bytes": per_token,
            "per_lane_fixed_bytes": fixed,
            "context": args.context,
            "per_lane_bytes": fixed as f64 + per_token * args.context as f64,
            "layout": "compressed rows and index keys packed (e2m1 codes and scales), windows and partial groups f32",
        },
        "drafts": if cfg.has_drafts() { json!(format!("{} DSpark stages, blocks of {} from layers {:?}", cfg.num_nextn_predict_layers, cfg.dspark_block_size, cfg.dspark_target_layer_ids)) } else { json!("none") },
        "vision": vision,
        "checkpoint": checkpoint,
    }))
}

/// Runs `lockstep inspect`, text (or JSON with `--json`) on `out`.
pub fn run(args: &InspectArgs, out: &mut dyn Write) -> Result<()> {
    let v = inspect(args)?;
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    let gb = |b: f64| b / 1e9;
    let c = &v["config"];
    writeln!(out, "inspect {}", v["source"].as_str().unwrap_or(""))?;
    writeln!(out, "config: {} layers, hidden {}, {} heads x {}, {} routed experts (top-{}, width {}), vocab {}, window {}, index top-{}, {} streams, {} positions",
        c["layers"], c["hidden_size"], c["heads"], c["head_dim"], c["routed_experts"], c["experts_per_token"], c["moe_intermediate_size"], c["vocab_size"], c["sliding_window"], c["index_topk"], c["hc_mult"], c["max_position_embeddings"])?;
    writeln!(out, "layers: {}", v["layers"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; ")).unwrap_or_default())?;
    let e = &v["expected"];
    writeln!(out, "tensors the config implies: {} holding {} payload bytes ({:.2} GB)", e["tensors"], e["bytes"], gb(e["bytes"].as_f64().unwrap_or(0.0)))?;
    if let Some(m) = e["by_dtype"].as_object() {
        for (d, x) in m {
            writeln!(out, "  {d:<8} {:>7} tensors {:>16} bytes", x["tensors"], x["bytes"])?;
        }
    }
    writeln!(out, "resident on the GPU executor: {} bytes ({:.2} GB); on the host (engram tables, rows read per step): {} bytes ({:.2} GB)",
        v["resident_bytes"], gb(v["resident_bytes"].as_f64().unwrap_or(0.0)), v["host_bytes"], gb(v["host_bytes"].as_f64().unwrap_or(0.0)))?;
    let s = &v["state"];
    writeln!(out, "state per lane ({}): {:.1} bytes per token (compressed rows and index keys), {} bytes fixed (window and DSpark rings, partial groups); {:.2} GB at {} positions",
        s["layout"].as_str().unwrap_or(""), s["per_token_bytes"].as_f64().unwrap_or(0.0), s["per_lane_fixed_bytes"], gb(s["per_lane_bytes"].as_f64().unwrap_or(0.0)), s["context"])?;
    writeln!(out, "drafts: {}; vision: {}", v["drafts"].as_str().unwrap_or(""), v["vision"].as_str().unwrap_or(""))?;
    if let Some(ck) = v["checkpoint"].as_object() {
        writeln!(out, "checkpoint: {} tensors, {} bytes; {}", ck["tensors"], ck["bytes"], ck["layout"].as_str().unwrap_or(""))?;
        if let Some(v) = ck["values"]["summary"].as_str() {
            writeln!(out, "values: {v}")?;
        }
    }
    Ok(())
}
