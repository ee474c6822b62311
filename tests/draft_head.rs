//! The DSpark draft head on the tiny model: the CPU oracle and the GPU give the same bits in every draft tap, token and confidence, at every position; a draft reads the state without changing it; rings are fed on every position and a stream without them drafts only once they cover the window.
mod forward_support;

use forward_support::{prompt, same_taps, tiny};
use lockstep::engine::{Engine, SeqId};
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;

/// Greedy pick: the largest logit, the lower index on ties.
fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
}

/// What one stream's drafts looked like at each decode step: (taps of the feeding call and the draft, tokens, confidence bits).
type Trace = Vec<(Taps<f32>, Vec<u32>, Vec<u32>)>;

/// Prefills 29 tokens in chunks of 13 and 16, then drafts after every greedy decode step, with taps on.
fn trace<E: Executor>(engine: &mut Engine<'_, '_, E>, seq: SeqId, steps: usize) -> Trace {
    let ids = prompt(29);
    engine.run(seq, &ids[..13], LogitRows::Last, &mut Taps::default()).expect("prefill");
    let mut taps = Taps::on();
    let mut l = engine.run(seq, &ids[13..], LogitRows::Last, &mut taps).expect("prefill");
    let mut out = Vec::new();
    for _ in 0..steps {
        let y = argmax(&l);
        let before = engine.state_bytes(seq).expect("state");
        let d = engine.draft(&[(seq, y)], &mut taps).expect("draft").remove(0);
        assert!(engine.state_bytes(seq).expect("state") == before, "a draft changed the state");
        assert_eq!(d.tokens.len(), engine.model.cfg.dspark_block_size);
        out.push((std::mem::replace(&mut taps, Taps::on()), d.tokens, d.confidence.iter().map(|c| c.to_bits()).collect()));
        l = engine.run(seq, &[y], LogitRows::Last, &mut taps).expect("decode");
    }
    out
}

#[test]
fn draft_head_bits_are_equal_on_the_cpu_and_the_gpu_and_drafting_leaves_the_state_alone() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut c = Engine::new(CpuExecutor::new(&t.ckpt), &model).with_drafts(true);
    let mut g = Engine::new(GpuExecutor::new(&gpu, &t.ckpt), &model).with_drafts(true);
    let (sc, sg) = (c.add().expect("seq"), g.add().expect("seq"));
    let (tc, tg) = (trace(&mut c, sc, 6), trace(&mut g, sg, 6));
    let mut compared = 0;
    for (step, ((a, ta, ca), (b, tb, cb))) in tc.iter().zip(&tg).enumerate() {
        assert_eq!(ta, tb, "step {step}: drafted tokens");
        assert_eq!(ca, cb, "step {step}: confidence bits");
        same_taps(step, a, b);
        compared += a.list.iter().filter(|x| x.name.starts_with('S') || x.name.starts_with("D.")).count();
    }
    let stages = model.cfg.num_nextn_predict_layers;
    assert!(compared >= 6 * (11 * stages + 8), "{compared} draft taps compared");
    assert!(c.state_bytes(sc).expect("state") == g.state_bytes(sg).expect("state"), "state bytes (rings included) differ");
}

#[test]
fn a_stream_resumed_without_rings_drafts_once_they_cover_the_window() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let mut plain = Engine::new(CpuExecutor::new(&t.ckpt), &model);
    let s = plain.add().expect("seq");
    let ids = prompt(20);
    plain.run(s, &ids, LogitRows::Last, &mut Taps::default()).expect("prefill");
    assert!(!plain.can_draft(s), "an engine without drafts cannot draft");
    let bytes = plain.state_bytes(s).expect("state");
    let mut drafting = Engine::new(CpuExecutor::new(&t.ckpt), &model).with_drafts(true);
    let r = drafting.restore(&bytes).expect("restore");
    let window = model.cfg.sliding_window;
    for i in 0..window {
        assert!(!drafting.can_draft(r), "drafting after {i} fed positions of a {window}-slot window");
        assert!(drafting.draft(&[(r, 5)], &mut Taps::default()).is_err(), "a draft over unfed ring slots must be refused");
        drafting.run(r, &[ids[i]], LogitRows::Last, &mut Taps::default()).expect("decode");
    }
    assert!(drafting.can_draft(r), "the rings cover the window after {window} positions");
    drafting.draft(&[(r, 5)], &mut Taps::default()).expect("draft");
    let fresh = drafting.add().expect("seq");
    drafting.run(fresh, &ids[..3], LogitRows::Last, &mut Taps::default()).expect("prefill");
    assert!(drafting.can_draft(fresh), "a stream fed from position 0 drafts at once");
}
