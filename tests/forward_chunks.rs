//! Chunk invariance of the forward on the tiny model: whole-prompt prefill, chunks of 1, 7, 13 and 64, then decode give identical logits and state bytes.
mod forward_support;

use forward_support::{prompt, tiny};
use lockstep::engine::Session;
use lockstep::exec::CpuExecutor;
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;

/// Prompt length: past index_topk visible groups and the candidate pool, crossing ratio-2 groups at odd offsets.
const PROMPT: usize = 70;
/// Decode steps after the prompt.
const DECODE: usize = 16;

/// Logits bits of every prompt row, state bytes after the prompt, then per decode step logits bits, and the final state bytes.
struct Trace {
    prompt_logits: Vec<u32>,
    prompt_state: Vec<u8>,
    decode_logits: Vec<u32>,
    final_state: Vec<u8>,
    decoded: Vec<u32>,
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Prefills in chunks of `chunk` (logits for every row), then decodes `DECODE` tokens one at a time: greedy, or forced to `forced`.
fn trace(model: &Model, chunk: usize, forced: Option<&[u32]>) -> Trace {
    let t = tiny();
    let mut s = Session::new(CpuExecutor::new(&t.ckpt), model).expect("session");
    let ids = prompt(PROMPT);
    let mut prompt_logits = Vec::new();
    for part in ids.chunks(chunk) {
        prompt_logits.extend(bits(&s.run(part, LogitRows::All, &mut Taps::default()).expect("prefill")));
    }
    let prompt_state = s.state_bytes().expect("state");
    let v = t.cfg.vocab_size;
    let mut last: Vec<f32> = prompt_logits[prompt_logits.len() - v..].iter().map(|&b| f32::from_bits(b)).collect();
    let (mut decode_logits, mut decoded) = (Vec::new(), Vec::new());
    for step in 0..DECODE {
        let next = match forced {
            Some(f) => f[step],
            None => (0..v).fold(0, |b, i| if last[i] > last[b] { i } else { b }) as u32,
        };
        decoded.push(next);
        last = s.run(&[next], LogitRows::Last, &mut Taps::default()).expect("decode");
        decode_logits.extend(bits(&last));
    }
    let final_state = s.state_bytes().expect("state");
    Trace { prompt_logits, prompt_state, decode_logits, final_state, decoded }
}

#[test]
fn prefill_in_any_chunking_then_decode_gives_identical_logits_and_state_bytes() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let whole = trace(&model, PROMPT, None);
    assert!(whole.prompt_logits.iter().all(|&b| f32::from_bits(b).is_finite()), "non-finite logits");
    let distinct: std::collections::BTreeSet<u32> = whole.decoded.iter().copied().collect();
    assert!(distinct.len() > 1, "decode stuck on one token: {:?}", whole.decoded);
    for chunk in [1, 7, 13, 64] {
        let c = trace(&model, chunk, Some(&whole.decoded));
        assert!(c.prompt_logits == whole.prompt_logits, "chunk {chunk}: prompt logits differ");
        assert!(c.prompt_state == whole.prompt_state, "chunk {chunk}: state after the prompt differs");
        assert!(c.decode_logits == whole.decode_logits, "chunk {chunk}: decode logits differ");
        assert!(c.final_state == whole.final_state, "chunk {chunk}: final state differs");
    }
}

#[test]
fn bad_calls_are_errors_that_leave_the_state_untouched() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let mut s = Session::new(CpuExecutor::new(&t.ckpt), &model).expect("session");
    s.run(&prompt(5), LogitRows::Last, &mut Taps::default()).expect("prefill");
    let before = s.state_bytes().expect("state");
    let v = t.cfg.vocab_size as u32;
    assert!(s.run(&[], LogitRows::Last, &mut Taps::default()).is_err(), "empty call");
    assert!(s.run(&[3, v], LogitRows::Last, &mut Taps::default()).is_err(), "id outside the vocabulary");
    let long = vec![3u32; t.cfg.max_position_embeddings];
    assert!(s.run(&long, LogitRows::Last, &mut Taps::default()).is_err(), "positions past the limit");
    assert!(s.state_bytes().expect("state") == before, "a rejected call changed the state");
    assert!(s.run(&[3], LogitRows::Last, &mut Taps::default()).is_ok(), "the sequence continues");
}
