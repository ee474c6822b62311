//! Packed sequence state: a lane of the release's layout holds the model card's bytes per token as allocated on the CPU and the GPU, and a stream's caches allocated for its context never grow inside it.
mod forward_support;

use forward_support::{prompt, tiny};
use lockstep::engine::Engine;
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;
use lockstep::model::{Config, SeqState};

/// Bytes the compressed caches of a fresh release-layout state allocate for `context` positions, on `ex`.
fn release_compressed_bytes<E: Executor>(ex: &mut E, context: usize) -> (usize, usize) {
    let cfg = Config::from_json(include_str!("../src/model/config/configs/release.json")).expect("release config");
    let plan = cfg.layer_plan();
    let st = SeqState::with_context(ex, &cfg, &plan, context).expect("state");
    let sources = st.layers.iter().filter(|l| l.comp.is_some()).count();
    let bytes = st.layers.iter().filter_map(|l| l.comp.as_ref()).map(|c| ex.allocated_bytes(&c.kv) + ex.allocated_bytes(&c.index_keys)).sum();
    (sources, bytes)
}

#[test]
fn a_release_lane_allocates_the_model_cards_890_bytes_a_token_on_the_cpu_and_the_gpu() {
    let t = tiny();
    let context = 1 << 17;
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    for (side, (sources, bytes)) in [("cpu", release_compressed_bytes(&mut CpuExecutor::new(&t.ckpt), context)), ("gpu", release_compressed_bytes(&mut GpuExecutor::new(&gpu, &t.ckpt), context))] {
        assert_eq!(sources, 4, "{side}: three ratio-2 and one ratio-1 KV sources");
        let per_token = bytes as f64 / context as f64;
        assert!((890.0..890.01).contains(&per_token), "{side}: {bytes} bytes for {context} positions = {per_token} a token");
        assert!(per_token <= 1200.0);
    }
}

#[test]
fn a_stream_allocated_for_its_context_keeps_its_buffers_and_its_bits() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let ids = prompt(40);
    let run = |engine: &mut Engine<'_, '_, GpuExecutor<'_, '_>>| {
        let seq = engine.add().expect("sequence");
        let before: Vec<usize> = caches(engine, seq);
        let mut last = engine.run(seq, &ids, LogitRows::Last, &mut Taps::default()).expect("prefill");
        for _ in 0..5 {
            let tok = (0..last.len()).fold(0, |b, i| if last[i] > last[b] { i } else { b }) as u32;
            last = engine.run(seq, &[tok], LogitRows::Last, &mut Taps::default()).expect("decode");
        }
        (seq, before, caches(engine, seq), engine.state_bytes(seq).expect("state"))
    };
    let mut sized = Engine::new(GpuExecutor::new(&gpu, &t.ckpt), &model).with_context(64);
    let (seq, before, after, bytes) = run(&mut sized);
    assert_eq!(before, after, "caches allocated for 64 positions kept their buffers through 45");
    assert!(before.iter().all(|&b| b > 0));
    let mut growing = Engine::new(GpuExecutor::new(&gpu, &t.ckpt), &model);
    let (_, b0, _, grown) = run(&mut growing);
    assert!(b0.iter().zip(&before).all(|(a, b)| a < b), "a stream without a context starts small: {b0:?} vs {before:?}");
    assert!(bytes == grown, "the same tokens give the same state bytes however the caches were allocated");
    let snap = sized.snapshot(seq).expect("snapshot");
    let held = caches(&sized, snap);
    assert!(held.iter().zip(&before).all(|(a, b)| a < b), "a snapshot holds only its rows: {held:?} vs {before:?}");
    let fork = sized.fork(snap).expect("fork");
    assert_eq!(caches(&sized, fork), before, "a stream forked from a snapshot is allocated for the context again");
}

/// Allocated bytes of each compressed cache of `seq`.
fn caches<E: Executor>(engine: &Engine<'_, '_, E>, seq: lockstep::engine::SeqId) -> Vec<usize> {
    let st = engine.state(seq).expect("state");
    st.layers.iter().filter_map(|l| l.comp.as_ref()).flat_map(|c| [engine.ex.allocated_bytes(&c.kv), engine.ex.allocated_bytes(&c.index_keys)]).collect()
}
