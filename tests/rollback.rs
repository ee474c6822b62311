//! Verify windows and their rollback: drafts checked against the target's own tokens (greedy, and drawn at T=1 with the stream's seed at each position), accepted in full, in part or not at all; a window is rewound to its accepted length (window rings, compressed rows, index keys, the partial group, engram history and the DSpark rings), so the drafted stream's tokens and state bytes equal the undrafted stream's at every position.
mod forward_support;

use forward_support::{prompt, tiny};
use lockstep::engine::{Engine, Sampler, Sampling, Span, Work};
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;
use std::collections::BTreeMap;

/// Prompt length (odd, so ratio-2 groups are left half full) and tokens generated.
const PROMPT: usize = 21;
const TOKENS: usize = 40;
/// Draft lengths and where a draft is made wrong, cycled; 7 drafts make a window as long as the tiny model's 8-slot ring.
const PLANS: [(usize, Option<usize>); 8] = [(4, None), (4, Some(2)), (3, Some(0)), (7, Some(6)), (2, None), (5, Some(4)), (7, None), (4, Some(1))];

/// Greedy pick: the largest logit, the lower index on ties.
fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
}

/// The token a stream takes from one row's logits when it sits at `position`: greedy, or drawn with the stream's seed at that position.
type Pick<'a> = &'a dyn Fn(&[f32], usize) -> u32;

fn drafted_equals_undrafted<E: Executor>(ex: E, model: &Model, pick: Pick<'_>, what: &str) {
    let vocab = model.cfg.vocab_size;
    let mut engine = Engine::new(ex, model).with_drafts(true);
    let (a, b) = (engine.add().expect("a"), engine.add().expect("b"));
    let ids = prompt(PROMPT);
    let mut states = BTreeMap::new();
    let mut truth = vec![pick(&engine.run(a, &ids, LogitRows::Last, &mut Taps::default()).expect("prefill"), PROMPT)];
    states.insert(engine.pos(a).expect("pos"), engine.state_bytes(a).expect("state"));
    while truth.len() < TOKENS + 1 {
        let l = engine.run(a, &truth[truth.len() - 1..], LogitRows::Last, &mut Taps::default()).expect("decode");
        truth.push(pick(&l, PROMPT + truth.len()));
        states.insert(engine.pos(a).expect("pos"), engine.state_bytes(a).expect("state"));
    }
    let first = pick(&engine.run(b, &ids, LogitRows::Last, &mut Taps::default()).expect("prefill"), PROMPT);
    let mut produced = vec![first];
    let (mut full, mut partial, mut rejected) = (0, 0, 0);
    for plan in PLANS.iter().cycle() {
        if produced.len() >= TOKENS {
            break;
        }
        let i = produced.len() - 1;
        let k = plan.0.min(TOKENS - 1 - i);
        let mut drafts = truth[i + 1..i + 1 + k].to_vec();
        if let Some(c) = plan.1.filter(|&c| c < k) {
            drafts[c] = (drafts[c] + 1) % vocab as u32;
        }
        let pos = engine.pos(b).expect("pos");
        let mark = engine.mark(b, k + 1).expect("mark");
        let window: Vec<u32> = std::iter::once(produced[i]).chain(drafts.iter().copied()).collect();
        let input = [Span::Tokens(&window)];
        let logits = engine.round(&[Work { seq: b, input: &input, rows: LogitRows::All }], &mut Taps::default()).expect("verify");
        let rows = engine.ex.read(&logits[0]).expect("read");
        let mut j = 0;
        while j < k && pick(&rows[j * vocab..(j + 1) * vocab], pos + j + 1) == drafts[j] {
            j += 1;
        }
        let target = pick(&rows[j * vocab..(j + 1) * vocab], pos + j + 1);
        engine.rewind(b, mark, j + 1).expect("rewind");
        match j {
            0 => rejected += 1,
            j if j == k => full += 1,
            _ => partial += 1,
        }
        produced.extend_from_slice(&drafts[..j]);
        produced.push(target);
        let now = engine.pos(b).expect("pos");
        assert_eq!(produced[..], truth[..produced.len()], "{what}: drafted tokens differ from the undrafted ones");
        assert!(engine.state_bytes(b).expect("state") == states[&now], "{what}: at position {now} the drafted stream's state differs");
    }
    println!("{what}: {full} windows accepted in full, {partial} in part, {rejected} rejected at the first draft");
    assert!(full > 0 && partial > 0 && rejected > 0, "{what}: {full} full, {partial} partial, {rejected} rejected");
}

#[test]
fn drafted_windows_rolled_back_give_the_undrafted_tokens_and_state_bytes_greedy_and_sampled_on_the_cpu_and_the_gpu() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let sampler = Sampler::new(Sampling::Random { temperature: 1.0, top_p: 0.9, seed: 5 }).expect("sampler");
    let sampled = |l: &[f32], position: usize| sampler.sample(l, position).expect("sample");
    let greedy = |l: &[f32], _: usize| argmax(l);
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    for (pick, how) in [(&greedy as Pick<'_>, "greedy"), (&sampled, "T=1")] {
        drafted_equals_undrafted(CpuExecutor::new(&t.ckpt), &model, pick, &format!("cpu {how}"));
        drafted_equals_undrafted(GpuExecutor::new(&gpu, &t.ckpt), &model, pick, &format!("gpu {how}"));
    }
}
