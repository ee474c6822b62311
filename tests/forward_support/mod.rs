//! Shared set-up of the forward tests: a tiny checkpoint (random or edge values) in a temp dir, its engram token map, a prompt of real token ids.
#![allow(dead_code)]
use lockstep::model::taps::Taps;
use lockstep::model::{load, write_checkpoint_values, Checkpoint, Config, LoadMode, ValueCheck, Values};
use lockstep::text::{find_tokenizer_json, TokenMap, Tokenizer};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A tiny model checkpoint and what the forward needs beside it.
pub struct Tiny {
    pub cfg: Config,
    pub ckpt: Checkpoint,
    pub map: TokenMap,
    pub tok: Option<Tokenizer>,
}

/// The tiny config of spec 1.6, with the synthetic compressed vocabulary of 64 when there is no tokenizer.
fn config_json(has_tokenizer: bool) -> String {
    let base = lockstep::model::config::TINY_CONFIG_JSON.to_string();
    if has_tokenizer {
        base
    } else {
        base.replace("\"engram_compressed_vocab_size\": 99092", "\"engram_compressed_vocab_size\": 64")
    }
}

/// The real tokenizer, fetched with scripts/fetch_tokenizer.sh when neither the env var nor the cache has it; `None` if that fails.
pub fn tokenizer() -> Option<Tokenizer> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = find_tokenizer_json(root).or_else(|| {
        let out = std::process::Command::new("bash").arg(root.join("scripts/fetch_tokenizer.sh")).output().ok()?;
        out.status.success().then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })?;
    Tokenizer::from_file(&path).ok()
}

/// The tiny model of this test binary, generated once into a unique temp dir that is removed once mapped.
pub fn tiny() -> &'static Tiny {
    static T: OnceLock<Tiny> = OnceLock::new();
    T.get_or_init(|| build(Values::Random, ValueCheck::Off))
}

/// The edge-values tiny model (same seed), loaded with the full value scan, generated once like [`tiny`].
pub fn edge_tiny() -> &'static Tiny {
    static T: OnceLock<Tiny> = OnceLock::new();
    T.get_or_init(|| build(Values::Edge, ValueCheck::All))
}

/// Generates and loads a tiny model of seed 11 with `values`, scanning `check`.
fn build(values: Values, check: ValueCheck) -> Tiny {
    let tok = tokenizer();
    let dir = std::env::temp_dir().join(format!("lockstep-forward-{values:?}-{}-{}", std::process::id(), std::thread::current().name().unwrap_or("t").replace("::", "-")));
    let _ = std::fs::remove_dir_all(&dir);
    write_checkpoint_values(&dir, 11, &config_json(tok.is_some()), values).expect("make_tiny");
    let (cfg, ckpt) = load(&dir, LoadMode::Mapped, check).expect("load tiny");
    // the mapping outlives the unlinked files, so nothing is left behind in the temp dir
    let _ = std::fs::remove_dir_all(&dir);
    let map = match &tok {
        Some(t) => TokenMap::build(t).expect("token map"),
        None => TokenMap::synthetic(cfg.vocab_size, 64),
    };
    Tiny { cfg, ckpt, map, tok }
}

/// Image patch values in [-1, 1] as the preprocessing makes them (k / 127.5 - 1), from a seeded generator.
pub fn patches(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % 256) as f32 / 127.5 - 1.0
        })
        .collect()
}

/// `n` prompt ids: BOS then encoded English text (or a fixed id pattern without a tokenizer).
pub fn prompt(n: usize) -> Vec<u32> {
    prompt_with(tiny().tok.as_ref(), n)
}

/// [`prompt`] encoded with `tok`.
pub fn prompt_with(tok: Option<&Tokenizer>, n: usize) -> Vec<u32> {
    let text = "The quick brown fox jumps over the lazy dog while the five boxing wizards jump quickly; \
                meanwhile a sphinx of black quartz judges my vow, and pack my box with five dozen liquor jugs. \
                Deterministic inference gives the same bits on every device, in every chunking, at every batch size. \
                Every row of a round is computed as if it were alone, so a stream never depends on its neighbours.";
    let mut ids = vec![0u32];
    match tok {
        Some(t) => ids.extend(t.encode(text).expect("encode")),
        None => ids.extend((1..n as u32).map(|i| (i * 7919) % 128000 + 3)),
    }
    assert!(ids.len() >= n, "prompt has {} ids", ids.len());
    ids.truncate(n);
    ids
}

/// Asserts two calls' taps agree in names, dims and bits (a on the CPU, b on the GPU); returns the taps compared.
pub fn same_taps(call: usize, a: &Taps<f32>, b: &Taps<f32>) -> usize {
    let names = |t: &Taps<f32>| t.list.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "call {call}: tap names");
    for (x, y) in a.list.iter().zip(&b.list) {
        assert_eq!((x.rows, x.cols), (y.rows, y.cols), "call {call} {}: dims", x.name);
        if let Some(i) = (0..x.data.len()).find(|&i| x.data[i].to_bits() != y.data[i].to_bits()) {
            panic!("call {call} tap {}: value {i} is {:e} on the CPU, {:e} on the GPU", x.name, x.data[i], y.data[i]);
        }
    }
    a.list.len()
}
