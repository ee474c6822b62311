//! Checkpoint acceptance on the tiny model: deterministic generation, full read-back in both load modes, canonical values at load, and clear errors for broken checkpoints.
use lockstep::weights::{Checkpoint, LoadMode, ValueCheck, INDEX_FILE, SINGLE_FILE};
use lockstep::model::config::{Config, TINY_CONFIG_JSON};
use lockstep::model::quantize::{dequantize_fp4, dequantize_fp8_blocks, dequantize_fp8_rows};
use lockstep::weights::safetensors::{read_file, write_file, Dtype, StoredTensor as Stored};
use lockstep::model::{expected_tensors, load, make_tiny, write_checkpoint_values, Quant, Values};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

/// Prefix of every directory these tests create.
const PREFIX: &str = "lockstep-model-";

/// A fresh, empty directory unique to this process and call.
fn tmp(tag: &str) -> TempDir {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("{PREFIX}{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

/// Removes directories left by earlier runs whose process is gone (where /proc tells).
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    if !Path::new("/proc/self").exists() {
        return;
    }
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix(PREFIX).and_then(|rest| rest.rsplit('-').nth(1)).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The tiny checkpoint with seed 1, generated once per test binary.
fn base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        remove_stale_dirs();
        let dir = tmp("base");
        make_tiny(&dir, 1, None).expect("make_tiny");
        let path = dir.0.clone();
        std::mem::forget(dir);
        path
    })
}

/// A private copy of the base checkpoint to break.
fn copy_of_base(tag: &str) -> TempDir {
    let dir = tmp(tag);
    for e in std::fs::read_dir(base()).expect("base dir") {
        let p = e.expect("entry").path();
        std::fs::copy(&p, dir.join(p.file_name().expect("name"))).expect("copy");
    }
    dir
}

/// Name of shard `i` (1-based) of the tiny checkpoint.
fn shard(i: usize) -> String {
    format!("model-{i:05}-of-00003.safetensors")
}

/// Every tensor of a shard file.
fn read_shard(path: &Path) -> Vec<Stored> {
    read_file(path).expect("shard")
}

/// Rewrites shard `i` of `dir` after `edit` changes its tensors.
fn rewrite_shard(dir: &Path, i: usize, edit: impl FnOnce(&mut Vec<Stored>)) {
    let path = dir.join(shard(i));
    let mut t = read_shard(&path);
    edit(&mut t);
    write_file(&path, &t).expect("rewrite");
}

/// The error of opening and validating `dir` as a string (it must fail).
fn load_error(dir: &Path) -> String {
    match load(dir, LoadMode::Mapped, ValueCheck::All) {
        Ok(_) => panic!("broken checkpoint in {} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

/// sha256 of every regular file in `dir`, by file name.
fn digests(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let p = e.expect("entry").path();
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, Sha256::digest(std::fs::read(&p).expect("read")).to_vec())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn make_tiny_is_byte_identical_for_one_seed_and_differs_for_another() {
    let (a, b, c) = (tmp("seed7a"), tmp("seed7b"), tmp("seed8"));
    let sa = make_tiny(&a, 7, None).expect("a");
    make_tiny(&b, 7, None).expect("b");
    make_tiny(&c, 8, None).expect("c");
    assert_eq!(sa.files.len(), 5, "config, index and 3 shards");
    let (da, db, dc) = (digests(&a), digests(&b), digests(&c));
    assert_eq!(da.len(), 5);
    assert_eq!(da, db);
    for (x, y) in da.iter().zip(&dc).filter(|(x, _)| x.0.ends_with(".safetensors")) {
        assert_ne!(x.1, y.1, "{} does not depend on the seed", x.0);
    }
    assert_eq!(std::fs::read_to_string(a.join("config.json")).expect("config"), TINY_CONFIG_JSON);
}

#[test]
fn loader_reads_back_every_tensor_of_the_expected_table() {
    let (cfg, ck) = load(base(), LoadMode::Mapped, ValueCheck::All).expect("tiny loads");
    assert_eq!(cfg, Config::tiny());
    let table = expected_tensors(&cfg);
    assert_eq!(ck.len(), table.len());
    for s in &table {
        let v = ck.tensor(&s.name).expect("present");
        assert_eq!((v.dtype, v.shape, v.bytes.len() as u64), (s.dtype, s.shape.as_slice(), s.byte_len()), "{}", s.name);
    }
    let shards: Vec<String> = (1..=3).map(shard).collect();
    assert!(shards.iter().all(|s| base().join(s).exists()) && base().join(INDEX_FILE).exists());
}

#[test]
fn e8m0_scales_stored_as_u8_load_with_the_same_bytes() {
    let dir = copy_of_base("u8-scales");
    let mut renamed = 0;
    for i in 1..=3 {
        let path = dir.join(shard(i));
        let bytes = std::fs::read(&path).expect("shard");
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).expect("header json");
        for (_, t) in header.as_object_mut().unwrap().iter_mut() {
            if t.get("dtype").and_then(|d| d.as_str()) == Some("F8_E8M0") {
                t["dtype"] = "U8".into();
                renamed += 1;
            }
        }
        let mut text = header.to_string().into_bytes();
        text.resize(text.len().div_ceil(8) * 8, b' ');
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend(&text);
        out.extend(&bytes[8 + n..]);
        std::fs::write(&path, out).expect("rewrite");
    }
    assert!(renamed > 0, "the tiny checkpoint has e8m0 scales");
    let (_, a) = load(base(), LoadMode::Mapped, ValueCheck::All).expect("F8_E8M0 scales load");
    let (_, b) = load(&dir, LoadMode::Mapped, ValueCheck::All).expect("U8 scales load");
    assert_eq!(a.names().collect::<Vec<_>>(), b.names().collect::<Vec<_>>());
    for n in a.names() {
        let (x, y) = (a.tensor(n).unwrap(), b.tensor(n).unwrap());
        assert!(x.bytes == y.bytes && x.shape == y.shape && x.dtype == y.dtype, "{n}");
    }
}

#[test]
fn mapped_and_copied_loads_give_the_same_bytes_for_every_tensor() {
    let m = Checkpoint::open(base(), LoadMode::Mapped).expect("mapped");
    let c = Checkpoint::open(base(), LoadMode::Copied).expect("copied");
    assert_eq!((m.mode(), c.mode()), (LoadMode::Mapped, LoadMode::Copied));
    assert_eq!(m.names().collect::<Vec<_>>(), c.names().collect::<Vec<_>>());
    for n in m.names() {
        let (a, b) = (m.tensor(n).expect("m"), c.tensor(n).expect("c"));
        assert!(a.bytes == b.bytes && a.shape == b.shape && a.dtype == b.dtype, "{n}");
    }
}

#[test]
fn generated_weights_follow_the_init_guidance_after_quantization() {
    let cfg = Config::tiny();
    let ck = Checkpoint::open(base(), LoadMode::Mapped).expect("open");
    let stats = |v: &[f32]| {
        let m = v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
        (m, (v.iter().map(|&x| (f64::from(x) - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt())
    };
    for s in expected_tensors(&cfg).iter().filter(|s| s.quant != Quant::Scale) {
        let w = ck.tensor(&s.name).expect("weight");
        let values = match s.quant {
            Quant::Plain => w.to_f32().expect("float"),
            q => {
                let sc = ck.tensor(&s.scale_name().expect("scale")).expect("scale").bytes;
                let l = s.logical_shape();
                match q {
                    Quant::Fp8Block => dequantize_fp8_blocks(w.bytes, sc, l[0], l[1]),
                    Quant::Fp8Rows => dequantize_fp8_rows(w.bytes, sc, l[0], l[1]),
                    _ => dequantize_fp4(w.bytes, sc, l[0], l[1]),
                }
            }
        };
        let (mean, std) = stats(&values);
        let name = &s.name;
        if name.ends_with("norm.weight") || name.ends_with("_weight") || name.contains(".norm1.") {
            assert!((mean - 1.0).abs() < 0.05 && std < 0.1, "{name}: mean {mean} std {std}");
        } else if name.ends_with("_scale") {
            assert!((mean - 0.5).abs() < 0.05, "{name}: mean {mean}");
        } else if values.len() >= 1024 {
            assert!(mean.abs() < 0.01 && std > 0.005 && std < 0.08, "{name}: mean {mean} std {std}");
        }
    }
}

#[test]
fn missing_tensor_is_named_whether_or_not_the_index_still_lists_it() {
    let gone = "layers.3.attn.kv_norm.weight";
    let dir = copy_of_base("missing-index");
    rewrite_shard(&dir, 1, |t| t.retain(|x| x.0 != gone));
    let e = load_error(&dir);
    assert!(e.contains(gone) && e.contains(INDEX_FILE), "{e}");
    let index = dir.join(INDEX_FILE);
    let text = std::fs::read_to_string(&index).expect("index");
    let kept: Vec<&str> = text.lines().filter(|l| !l.contains(gone)).collect();
    std::fs::write(&index, kept.join("\n")).expect("write index");
    let e = load_error(&dir);
    assert!(e.contains("missing tensor") && e.contains(gone), "{e}");
}

#[test]
fn wrong_shape_and_wrong_dtype_are_named() {
    let dir = copy_of_base("shape");
    rewrite_shard(&dir, 1, |t| {
        let x = t.iter_mut().find(|x| x.0 == "layers.0.attn_norm.weight").expect("present");
        x.2 = vec![32];
        x.3.truncate(64);
    });
    let e = load_error(&dir);
    assert!(e.contains("layers.0.attn_norm.weight") && e.contains("[32]") && e.contains("[64]"), "{e}");
    let dir = copy_of_base("dtype");
    rewrite_shard(&dir, 1, |t| {
        let x = t.iter_mut().find(|x| x.0 == "layers.0.attn.attn_sink").expect("present");
        x.1 = Dtype::BF16;
        x.3.truncate(8);
    });
    let e = load_error(&dir);
    assert!(e.contains("layers.0.attn.attn_sink") && e.contains("BF16") && e.contains("F32"), "{e}");
}

#[test]
fn truncated_shard_and_header_are_errors_naming_the_file() {
    let dir = copy_of_base("truncated");
    let path = dir.join(shard(2));
    let len = std::fs::metadata(&path).expect("meta").len();
    std::fs::OpenOptions::new().write(true).open(&path).expect("open").set_len(len - 1000).expect("truncate");
    let e = load_error(&dir);
    assert!(e.contains(&shard(2)) && e.contains("truncated") && e.contains("vision.patch_embed.proj.weight"), "{e}");
    for mode in [LoadMode::Mapped, LoadMode::Copied] {
        let e = Checkpoint::open(&dir, mode).err().expect("truncated shard opens").to_string();
        assert!(e.contains(&shard(2)), "{e}");
    }
    std::fs::OpenOptions::new().write(true).open(&path).expect("open").set_len(5).expect("truncate");
    let e = load_error(&dir);
    assert!(e.contains(&shard(2)) && e.contains("header"), "{e}");
}

#[test]
fn malformed_header_json_names_the_file() {
    let dir = copy_of_base("malformed");
    let path = dir.join(shard(1));
    let mut bytes = std::fs::read(&path).expect("shard");
    bytes[8] = b'[';
    std::fs::write(&path, bytes).expect("write");
    let e = load_error(&dir);
    assert!(e.contains(&shard(1)) && e.contains("malformed"), "{e}");
}

#[test]
fn non_finite_weight_and_unexpected_tensor_are_named() {
    let dir = copy_of_base("nan");
    rewrite_shard(&dir, 2, |t| {
        let x = t.iter_mut().find(|x| x.0 == "norm.weight").expect("present");
        x.3[6..8].copy_from_slice(&0x7fc0u16.to_le_bytes());
    });
    let e = load_error(&dir);
    assert!(e.contains("norm.weight") && e.contains("element 3"), "{e}");
    assert!(load(&dir, LoadMode::Mapped, ValueCheck::Off).is_ok(), "the scan is what caught it");
    let dir = copy_of_base("e8m0");
    rewrite_shard(&dir, 1, |t| t.iter_mut().find(|x| x.0 == "layers.2.attn.wkv.scale").expect("present").3[0] = 0xff);
    let e = load_error(&dir);
    assert!(e.contains("layers.2.attn.wkv.scale"), "{e}");
    let dir = copy_of_base("extra");
    rewrite_shard(&dir, 2, |t| t.push(("layers.0.ffn.extra.weight".into(), Dtype::BF16, vec![2], vec![0; 4])));
    let e = load_error(&dir);
    assert!(e.contains("layers.0.ffn.extra.weight") && e.contains("unexpected"), "{e}");
}

#[test]
fn bad_config_in_the_checkpoint_dir_is_named() {
    let dir = copy_of_base("badconfig");
    std::fs::write(dir.join("config.json"), TINY_CONFIG_JSON.replace("\"hidden_size\": 64", "\"hidden_size\": 65")).expect("write");
    let e = load_error(&dir);
    assert!(e.contains("hidden_size"), "{e}");
}

#[test]
fn single_file_checkpoint_with_hf_spellings_loads() {
    let dir = tmp("hf");
    std::fs::copy(base().join("config.json"), dir.join("config.json")).expect("config");
    let mut all: Vec<Stored> = Vec::new();
    for i in 1..=3 {
        all.extend(read_shard(&base().join(shard(i))));
    }
    for t in &mut all {
        let n = t.0.replace(".scale", ".weight_scale_inv");
        t.0 = match n.split_once('.') {
            Some(("layers" | "embed" | "norm", _)) => format!("model.{n}"),
            Some(("head", rest)) => format!("lm_head.{rest}"),
            _ => n,
        };
    }
    write_file(&dir.join(SINGLE_FILE), &all).expect("write");
    let (_, hf) = load(&dir, LoadMode::Copied, ValueCheck::All).expect("HF spellings load");
    let orig = Checkpoint::open(base(), LoadMode::Mapped).expect("base");
    for n in orig.names() {
        assert_eq!(hf.tensor(n).expect("alias").bytes, orig.tensor(n).expect("orig").bytes, "{n}");
    }
    assert!(hf.get("lm_head.weight").is_some() && hf.get("model.layers.0.attn.wq_a.weight_scale_inv").is_some());
}

#[test]
fn subnormal_values_and_tiny_scale_blocks_are_made_canonical_at_load_and_counted() {
    let (_, clean) = load(base(), LoadMode::Mapped, ValueCheck::All).expect("tiny loads");
    assert!(clean.canonical().is_empty(), "the generator writes canonical values: {}", clean.canonical());
    let dir = copy_of_base("subnormal");
    rewrite_shard(&dir, 2, |t| {
        let x = t.iter_mut().find(|x| x.0 == "norm.weight").expect("present");
        x.3[6..8].copy_from_slice(&0x8005u16.to_le_bytes());
        x.3[20..22].copy_from_slice(&0x0040u16.to_le_bytes());
    });
    rewrite_shard(&dir, 1, |t| t.iter_mut().find(|x| x.0 == "layers.2.attn.wkv.scale").expect("present").3[1] = 0);
    let (_, ck) = load(&dir, LoadMode::Mapped, ValueCheck::All).expect("canonicalized, not refused");
    let c = ck.canonical();
    assert_eq!((c.tensors.len(), c.flushed(), c.blocks_zeroed()), (2, 2, 1), "{c}");
    let norm = ck.tensor("norm.weight").expect("norm").bytes;
    assert_eq!((&norm[6..8], &norm[20..22]), (&[0x00, 0x80][..], &[0x00, 0x00][..]), "zeros of the values' signs");
    let stored = &read_shard(&dir.join(shard(2))).into_iter().find(|x| x.0 == "norm.weight").expect("stored").3;
    assert!(norm[..6] == stored[..6] && norm[8..20] == stored[8..20] && norm[22..] == stored[22..], "the other values are as stored");
    let wkv = ck.tensor("layers.2.attn.wkv.weight").expect("wkv");
    let cols = wkv.shape[1];
    let base_wkv = clean.tensor("layers.2.attn.wkv.weight").expect("wkv").bytes;
    for (i, (&got, &was)) in wkv.bytes.iter().zip(base_wkv).enumerate() {
        let in_block = i / cols < 32 && (32..64).contains(&(i % cols));
        assert_eq!(got, if in_block { 0 } else { was }, "byte {i}");
    }
    assert!(ck.is_patched("norm.weight") && ck.is_patched("layers.2.attn.wkv.weight") && !ck.is_patched("layers.2.attn.wkv.scale"));
}

#[test]
fn edge_values_are_the_random_draws_rescaled_by_powers_of_two_and_written_canonical() {
    use lockstep::model::tiny::edge::{NORM_EXP, STREAM_EXP};
    let dir = tmp("edge");
    write_checkpoint_values(&dir, 1, TINY_CONFIG_JSON, Values::Edge).expect("edge values");
    let (_, edge) = load(&dir, LoadMode::Mapped, ValueCheck::All).expect("edge loads");
    assert!(edge.canonical().is_empty(), "nothing to make canonical: {}", edge.canonical());
    let (_, random) = load(base(), LoadMode::Mapped, ValueCheck::Off).expect("base");
    let values = |ck: &Checkpoint, n: &str| ck.tensor(n).expect(n).to_f32().expect("plain");
    let (e, r) = (values(&edge, "embed.weight"), values(&random, "embed.weight"));
    let mut flushed = 0;
    for (x, y) in e.iter().zip(&r) {
        let want = y * 2f32.powi(-STREAM_EXP);
        if *x == 0.0 && *y != 0.0 {
            assert!(want.abs() <= f32::MIN_POSITIVE && x.is_sign_negative() == y.is_sign_negative(), "{y:e} flushed");
            flushed += 1;
        } else {
            assert_eq!(x.to_bits(), want.to_bits(), "{y:e}");
        }
    }
    assert!(flushed > 0 && flushed * 20 < e.len(), "{flushed} of {} embedding values flushed", e.len());
    let (e, r) = (values(&edge, "layers.3.ffn_norm.weight"), values(&random, "layers.3.ffn_norm.weight"));
    assert!(e.iter().zip(&r).all(|(x, y)| *x == y * 2f32.powi(NORM_EXP)), "norm weights gain 2^{NORM_EXP}");
    let (e, r) = (values(&edge, "layers.0.hc_attn_base"), values(&random, "layers.0.hc_attn_base"));
    assert!(e[..4] == r[..4] && e[8..] == r[8..] && e[4..8].iter().zip(&r[4..8]).all(|(x, y)| y - x > 80.0), "only the post biases move");
    let same = |n: &str| edge.tensor(n).expect(n).bytes == random.tensor(n).expect(n).bytes;
    assert!(same("layers.0.attn.wq_a.weight") && same("layers.2.attn.kv_norm.weight") && same("head.weight"), "other tensors keep the random draws");
    assert!(edge.tensor("layers.1.engram.wkv.weight").expect("wkv").bytes.iter().all(|&c| c == 0), "the engram adds nothing");
}
