//! The float64 reference keeps its state by absolute position: chunked prefill and token-by-token decode give the logits of one-shot prefill.
use lockstep::model::reference::{Model, State};
use lockstep::model::taps::Taps;
use lockstep::model::{load, make_tiny, LoadMode, ValueCheck};
use std::path::PathBuf;

/// A fresh tiny checkpoint in a temp dir unique to this test, removed on drop.
struct Tiny(PathBuf);

impl Drop for Tiny {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tiny_model(tag: &str) -> (Tiny, Model) {
    let dir = std::env::temp_dir().join(format!("lockstep-reference-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    make_tiny(&dir, 7, None).unwrap();
    let (cfg, ck) = load(&dir, LoadMode::Copied, ValueCheck::Off).unwrap();
    let model = Model::new(&cfg, &ck).unwrap();
    (Tiny(dir), model)
}

/// 64 pseudo-random prompt ids with an image span (id 129264) at positions 20..27.
fn prompt() -> (Vec<u32>, Vec<bool>) {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut ids = Vec::new();
    let mut mask = Vec::new();
    for p in 0..64 {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let image = (20..27).contains(&p);
        ids.push(if image { 129_264 } else { ((s >> 33) % 129_000) as u32 });
        mask.push(image);
    }
    (ids, mask)
}

/// Largest row-relative difference: max |a - b| / max |a| per row of width `v`.
fn rel_diff(a: &[f64], b: &[f64], v: usize) -> f64 {
    a.chunks(v).zip(b.chunks(v)).map(|(x, y)| {
        let scale = x.iter().fold(0.0f64, |m, t| m.max(t.abs()));
        x.iter().zip(y).fold(0.0f64, |m, (p, q)| m.max((p - q).abs())) / scale
    }).fold(0.0, f64::max)
}

/// Runs the prompt in chunks of `chunk`, then decodes `decode` one by one; returns all logits.
fn run(model: &Model, ids: &[u32], mask: &[bool], chunk: usize, prompt_len: usize) -> Vec<f64> {
    let mut st: State = model.new_state();
    let mut logits = Vec::new();
    let mut at = 0;
    while at < ids.len() {
        let n = if at < prompt_len { chunk.min(prompt_len - at) } else { 1 };
        let out = model.forward(&mut st, &ids[at..at + n], Some(&mask[at..at + n]), &mut Taps::default()).unwrap();
        assert!(out.iter().all(|v| v.is_finite()), "non-finite logits at {at}");
        logits.extend(out);
        at += n;
    }
    assert_eq!(st.pos, ids.len());
    logits
}

#[test]
fn chunked_prefill_and_decode_give_the_logits_of_one_shot_prefill() {
    let (_dir, model) = tiny_model("chunking");
    let v = model.cfg.vocab_size;
    let (mut ids, mut mask) = prompt();
    let mut st = model.new_state();
    let first = model.forward(&mut st, &ids, Some(&mask), &mut Taps::default()).unwrap();
    let mut next = argmax(&first[63 * v..]);
    for _ in 0..16 {
        ids.push(next);
        mask.push(false);
        let out = model.forward(&mut st, &[next], Some(&[false]), &mut Taps::default()).unwrap();
        next = argmax(&out);
    }
    let mut whole_st = model.new_state();
    let whole = model.forward(&mut whole_st, &ids, Some(&mask), &mut Taps::default()).unwrap();
    let spread = whole.chunks(v).map(|r| r.iter().fold(0.0f64, |m, t| m.max(t.abs()))).fold(0.0, f64::max);
    assert!(spread > 1e-3, "logits are degenerate: max |logit| {spread}");
    for chunk in [1, 7, 13, 64] {
        let got = run(&model, &ids, &mask, chunk, 64);
        let d = rel_diff(&whole, &got, v);
        println!("chunks of {chunk}: max row-relative logit difference {d:e}");
        assert!(d <= 1e-12, "chunks of {chunk}: logits differ by {d:e}");
    }
}

fn argmax(row: &[f64]) -> u32 {
    row.iter().enumerate().fold((0, f64::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as u32
}
