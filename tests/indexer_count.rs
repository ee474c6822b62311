//! The official indexer count: where the candidate mask leaves fewer finite scores than `index_topk`, the oracle, the GPU kernel and the f64 reference still pick `min(index_topk, visible)` visible rows, -inf ones by lower index.
use lockstep::engine::Session;
use lockstep::exec::{CpuExecutor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::config::TINY_CONFIG_JSON;
use lockstep::model::forward::{LogitRows, Model as OracleModel};
use lockstep::model::reference::{Forcing, Model};
use lockstep::model::taps::{Tap, Taps};
use lockstep::model::{load, make_tiny, LoadMode, ValueCheck};
use lockstep::text::TokenMap;

/// The reindex layer of the tiny config (ratio 1, level two over layer 5's candidates).
const REINDEX: usize = 7;
/// Prompt length, then decode steps.
const PROMPT: usize = 40;
const DECODE: usize = 4;

fn to_f64(t: &Taps<f32>) -> Taps<f64> {
    Taps { enabled: true, list: t.list.iter().map(|x| Tap { name: x.name.clone(), rows: x.rows, cols: x.cols, data: x.data.iter().map(|&v| f64::from(v)).collect() }).collect() }
}

/// Picks of each row of a top-k tap, sorted, -1 padding dropped.
fn picks<T: Copy + Into<f64>>(data: &[T], k: usize) -> Vec<Vec<i64>> {
    data.chunks(k).map(|r| r.iter().map(|&v| v.into() as i64).filter(|&v| v >= 0).collect()).collect()
}

#[test]
fn fewer_finite_candidates_than_topk_still_give_topk_visible_picks_on_every_executor() {
    let text = TINY_CONFIG_JSON.replace("\"candidate_topk_blocks\": 3", "\"candidate_topk_blocks\": 1");
    assert_ne!(text, TINY_CONFIG_JSON, "the tiny config's candidate_topk_blocks moved");
    let dir = std::env::temp_dir().join(format!("lockstep-indexer-count-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    make_tiny(&dir, 5, Some(&text)).unwrap();
    let (cfg, ck) = load(&dir, LoadMode::Copied, ValueCheck::Off).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let (k, block) = (cfg.index_topk, cfg.candidate_block_size);
    assert!(k > block, "one candidate block must hold fewer rows than index_topk");
    let map = TokenMap::synthetic(cfg.vocab_size, cfg.engram_compressed_vocab_size as u32);
    let reference = Model::with_token_map(&cfg, &ck, map.clone()).unwrap();
    let oracle = OracleModel::new(cfg.clone(), &ck, map).unwrap();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe: mesa-vulkan-drivers)");
    let mut cpu = Session::new(CpuExecutor::new(&ck), &oracle).unwrap();
    let mut dev = Session::new(GpuExecutor::new(&gpu, &ck), &oracle).unwrap();
    let mut st = reference.new_state();
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let prompt: Vec<u32> = (0..PROMPT).map(|_| {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 33) % 129_000) as u32
    }).collect();
    let mut calls = vec![prompt];
    let (mut pos, mut beyond_candidates, mut flips, mut rows) = (0usize, 0usize, 0usize, 0usize);
    let name = format!("L{REINDEX}.attn.topk");
    for step in 0..=DECODE {
        let ids = calls[step].clone();
        let (mut tc, mut tg) = (Taps::on(), Taps::on());
        let lc = cpu.run(&ids, LogitRows::Last, &mut tc).unwrap();
        let lg = dev.run(&ids, LogitRows::Last, &mut tg).unwrap();
        assert!(lc.iter().zip(&lg).all(|(a, b)| a.to_bits() == b.to_bits()), "call {step}: logits differ between the CPU and the GPU");
        let oc = tc.get(&name).expect("the reindex layer's picks");
        assert_eq!(oc.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), tg.get(&name).unwrap().data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "call {step}: GPU picks differ");
        let mut forcing = Forcing { oracle: to_f64(&tc), ..Forcing::default() };
        let mut rt = Taps::on();
        reference.forward_forced(&mut st, &ids, None, &mut rt, &mut forcing).unwrap();
        let rp = picks(&rt.get(&name).expect("reference picks").data, k);
        for (i, (o, r)) in picks(&oc.data, k).iter().zip(&rp).enumerate() {
            let visible = pos + i + 1;
            assert_eq!(o.len(), k.min(visible), "call {step} row {i}: oracle picks {o:?} of {visible} visible rows");
            assert_eq!(r.len(), k.min(visible), "call {step} row {i}: reference picks {r:?} of {visible} visible rows");
            assert!(o.iter().all(|&t| (t as usize) < visible), "call {step} row {i}: a pick past the visible rows");
            beyond_candidates += usize::from(o.len() > block);
            flips += usize::from(o != r);
            rows += 1;
        }
        pos += ids.len();
        let v = cfg.vocab_size;
        let last = &lc[lc.len() - v..];
        calls.push(vec![(0..v).fold(0, |b, i| if last[i] > last[b] { i } else { b }) as u32]);
    }
    println!("{rows} rows: {beyond_candidates} picked past the candidate blocks, {flips} differ from the reference");
    assert!(beyond_candidates > rows / 2, "too few rows picked past the candidate blocks: {beyond_candidates} of {rows}");
    assert_eq!(flips, 0, "the reference's picks differ on {flips} of {rows} rows");
}
