//! Shared schedule of the batch tests: four sequences over several rounds (prompt chunks and decode tokens mixed), run alone or batched in any order.
#![allow(dead_code)]
use crate::forward_support::prompt;
use lockstep::model::SeqState;
use lockstep::exec::Executor;
use lockstep::model::forward::{forward, forward_batch, LogitRows, Model, SeqInput};
use lockstep::model::taps::Taps;
use std::collections::BTreeMap;

/// Sequences in the schedule.
pub const SEQS: usize = 4;

/// One sequence's call in a round.
#[derive(Clone, Debug)]
pub struct Call {
    pub seq: usize,
    pub tokens: Vec<u32>,
    pub rows: LogitRows,
}

/// Logits bits and state bytes of each (round, sequence) call.
pub type Outcome = BTreeMap<(usize, usize), (Vec<u32>, Vec<u8>)>;

fn call(seq: usize, tokens: &[u32], rows: LogitRows) -> Call {
    Call { seq, tokens: tokens.to_vec(), rows }
}

/// Rounds: B takes a 40-token prompt, C 5 then 7 (crossing ratio-2 groups from an odd position) then 9, D 12, A 23 then 10; each then decodes.
pub fn schedule() -> Vec<Vec<Call>> {
    let p = prompt(80);
    let (a, b, c, d) = (&p[0..33], &p[10..50], &p[20..41], &p[30..42]);
    let tok = |i: usize| &p[50 + i..51 + i];
    use LogitRows::{All, Last};
    vec![
        vec![call(1, b, All), call(3, d, Last), call(2, &c[..5], All)],
        vec![call(0, &a[..23], All), call(1, tok(0), Last), call(2, &c[5..12], All), call(3, tok(1), Last)],
        vec![call(3, tok(2), Last), call(2, &c[12..], Last), call(0, &a[23..], All), call(1, tok(3), Last)],
        vec![call(1, tok(4), Last), call(3, tok(5), Last), call(0, tok(6), Last), call(2, tok(7), Last)],
        vec![call(2, tok(8), Last), call(0, tok(9), Last)],
    ]
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn fresh<E: Executor>(ex: &mut E, model: &Model) -> Vec<SeqState<E::Tensor>> {
    (0..SEQS).map(|_| SeqState::new(ex, &model.cfg, &model.plan).expect("state")).collect()
}

/// Each sequence run by itself, one single-sequence forward per call.
pub fn alone<E: Executor>(ex: &mut E, model: &Model, rounds: &[Vec<Call>]) -> Outcome {
    let mut states = fresh(ex, model);
    let mut out = Outcome::new();
    for (r, round) in rounds.iter().enumerate() {
        for c in round {
            let logits = forward(ex, model, &mut states[c.seq], &c.tokens, c.rows, &mut Taps::default()).expect("forward");
            let l = bits(&ex.read(&logits).expect("read"));
            out.insert((r, c.seq), (l, states[c.seq].to_bytes(ex).expect("state")));
        }
    }
    out
}

/// One batched forward per round, the round's calls in the order `order(round)` gives (indices into the round).
pub fn batched<E: Executor>(ex: &mut E, model: &Model, rounds: &[Vec<Call>], order: impl Fn(usize, usize) -> Vec<usize>) -> Outcome {
    let mut states = fresh(ex, model);
    let mut out = Outcome::new();
    for (r, round) in rounds.iter().enumerate() {
        let calls: Vec<&Call> = order(r, round.len()).into_iter().map(|i| &round[i]).collect();
        let mut slots: Vec<Option<&mut SeqState<E::Tensor>>> = states.iter_mut().map(Some).collect();
        let mut inputs: Vec<SeqInput<'_, E::Tensor>> =
            calls.iter().map(|c| SeqInput { state: slots[c.seq].take().expect("a sequence once per round"), tokens: &c.tokens, rows: c.rows, images: &[] }).collect();
        let logits = forward_batch(ex, model, &mut inputs, &mut Taps::default()).expect("forward_batch");
        drop(inputs);
        assert_eq!(logits.len(), calls.len(), "round {r}: one logits tensor per sequence");
        for (c, l) in calls.iter().zip(&logits) {
            let l = bits(&ex.read(l).expect("read"));
            out.insert((r, c.seq), (l, states[c.seq].to_bytes(ex).expect("state")));
        }
    }
    out
}

/// Asserts two outcomes agree bit for bit, naming the first (round, sequence) that differs.
pub fn same(what: &str, want: &Outcome, got: &Outcome) {
    assert_eq!(want.keys().collect::<Vec<_>>(), got.keys().collect::<Vec<_>>(), "{what}: calls");
    for (k, (l, s)) in want {
        let (gl, gs) = &got[k];
        assert_eq!(l.len(), gl.len(), "{what}: round {} seq {}: logits count", k.0, k.1);
        assert!(l == gl, "{what}: round {} seq {}: logits differ", k.0, k.1);
        assert!(s == gs, "{what}: round {} seq {}: state bytes differ", k.0, k.1);
    }
}

/// Batch orders: as listed, reversed, and rotated by the round number.
pub fn orders() -> Vec<(&'static str, fn(usize, usize) -> Vec<usize>)> {
    vec![
        ("listed", |_, n| (0..n).collect()),
        ("reversed", |_, n| (0..n).rev().collect()),
        ("rotated", |r, n| (0..n).map(|i| (i + r + 1) % n).collect()),
    ]
}
