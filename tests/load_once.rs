//! Loading reads each byte once: every tensor is checked in the pass that first reads it (the CPU's use, the GPU's upload), never in a scan before it; engram rows are checked as lookups read them; the values served equal an eager full scan's.
use lockstep::engine::Session;
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;
use lockstep::model::{load, make_tiny, Checkpoint, Config};
use lockstep::text::TokenMap;
use lockstep::weights::safetensors::{read_file, write_file, StoredTensor as Stored};
use lockstep::weights::{is_engram_table, LoadMode, Tables, ValueCheck};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const ON_USE: ValueCheck = ValueCheck::OnUse(Tables::Sampled);

/// A fresh copy of a tiny checkpoint (seed 1) under the temp dir.
fn tiny_copy(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-load-once-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    make_tiny(&dir, 1, None).expect("make_tiny");
    dir
}

/// Rewrites every shard of `dir` after `edit` changes its tensors.
fn rewrite(dir: &Path, mut edit: impl FnMut(&mut Stored)) {
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "safetensors") {
            continue;
        }
        let mut t = read_file(&path).expect("shard");
        t.iter_mut().for_each(&mut edit);
        write_file(&path, &t).expect("rewrite");
    }
}

fn gpu() -> &'static Gpu {
    static G: OnceLock<Gpu> = OnceLock::new();
    G.get_or_init(|| Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe: mesa-vulkan-drivers)"))
}

/// A prompt of 24 fixed ids.
fn prompt() -> Vec<u32> {
    (0..24u32).map(|i| (i * 7919 + 13) % 129_000).collect()
}

/// Logits of the last position of one prefill call on `ex`.
fn forward<E: Executor>(ex: E, cfg: &Config, ck: &Checkpoint) -> Result<Vec<u32>, String> {
    let model = Model::new(cfg.clone(), ck, TokenMap::synthetic(cfg.vocab_size, cfg.engram_compressed_vocab_size as u32)).map_err(|e| e.to_string())?;
    let mut s = Session::new(ex, &model).map_err(|e| e.to_string())?;
    let l = s.run(&prompt(), LogitRows::Last, &mut Taps::default()).map_err(|e| e.to_string())?;
    Ok(l.iter().map(|v| v.to_bits()).collect())
}

/// Stored bytes of the engram tables and their scales.
fn table_bytes(ck: &Checkpoint) -> u64 {
    ck.names().filter(|n| is_engram_table(n)).map(|n| ck.get(n).expect("present").bytes.len() as u64).sum()
}

#[test]
fn each_tensor_is_checked_once_in_the_pass_that_reads_it_on_the_cpu_and_the_gpu() {
    let dir = tiny_copy("once");
    let (cfg, eager) = load(&dir, LoadMode::Mapped, ValueCheck::All).expect("eager load");
    let want = forward(CpuExecutor::new(&eager), &cfg, &eager).expect("eager forward");
    for device in ["cpu", "gpu"] {
        let (_, ck) = load(&dir, LoadMode::Mapped, ON_USE).expect("load");
        assert_eq!(ck.bytes_read(), table_bytes(&ck), "{device}: the load scans only the engram tables (small ones whole)");
        assert_eq!(ck.bytes_sampled(), 0, "tiny tables are below the sampling size");
        let run = |ck: &Checkpoint| if device == "cpu" { forward(CpuExecutor::new(ck), &cfg, ck) } else { forward(GpuExecutor::new(gpu(), ck), &cfg, ck) };
        assert_eq!(run(&ck).expect("first forward"), want, "{device}: logits differ from the eagerly checked load");
        let first = ck.bytes_read();
        assert!(first > table_bytes(&ck) && first <= ck.payload_bytes(), "{device}: {first} bytes read of {}", ck.payload_bytes());
        assert_eq!(run(&ck).expect("second forward"), want, "{device}: second forward");
        assert_eq!(ck.bytes_read(), first, "{device}: a second forward read weights again");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_non_finite_weight_is_refused_on_first_use_naming_the_tensor_and_element() {
    let dir = tiny_copy("nan");
    rewrite(&dir, |t| {
        if t.0 == "norm.weight" {
            t.3[6..8].copy_from_slice(&0x7fc0u16.to_le_bytes());
        }
    });
    let (cfg, ck) = load(&dir, LoadMode::Mapped, ON_USE).expect("nothing scans norm.weight at load");
    for e in [forward(CpuExecutor::new(&ck), &cfg, &ck), forward(GpuExecutor::new(gpu(), &ck), &cfg, &ck)] {
        let e = e.expect_err("the forward must refuse the NaN");
        assert!(e.contains("norm.weight") && e.contains("element 3"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn values_made_canonical_on_first_use_equal_the_eager_scans() {
    let dir = tiny_copy("canonical");
    rewrite(&dir, |t| match t.0.as_str() {
        "norm.weight" => {
            t.3[6..8].copy_from_slice(&0x8005u16.to_le_bytes());
            t.3[20..22].copy_from_slice(&0x0040u16.to_le_bytes());
        }
        "layers.2.attn.wkv.scale" => t.3[1] = 0,
        _ => {}
    });
    let (cfg, eager) = load(&dir, LoadMode::Mapped, ValueCheck::All).expect("eager");
    let want = forward(CpuExecutor::new(&eager), &cfg, &eager).expect("eager forward");
    let (_, lazy) = load(&dir, LoadMode::Mapped, ValueCheck::Off).expect("no scan at load");
    assert_eq!(forward(CpuExecutor::new(&lazy), &cfg, &lazy).expect("cpu"), want, "cpu: rows and weights checked on use");
    assert_eq!(forward(GpuExecutor::new(gpu(), &lazy), &cfg, &lazy).expect("gpu"), want, "gpu: weights checked on upload");
    let c = lazy.canonical();
    assert_eq!((c.tensors.len(), c.flushed(), c.blocks_zeroed()), (2, 2, 1), "{c}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_engram_row_holding_a_nan_code_is_refused_when_a_lookup_reads_it() {
    let dir = tiny_copy("engram");
    rewrite(&dir, |t| {
        if t.0 == "layers.1.engram.embed.weight" {
            let cols = t.2[1];
            t.3.iter_mut().step_by(cols).for_each(|c| *c = 0x7f);
        }
    });
    let (cfg, ck) = load(&dir, LoadMode::Mapped, ValueCheck::Off).expect("no scan at load");
    let e = forward(CpuExecutor::new(&ck), &cfg, &ck).expect_err("the lookup must refuse the row");
    assert!(e.contains("layers.1.engram.embed.weight") && e.contains("non-finite code at column 0"), "{e}");
    let e = load(&dir, LoadMode::Mapped, ON_USE).err().expect("a table under the sampling size is scanned whole at load").to_string();
    assert!(e.contains("layers.1.engram.embed.weight"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
