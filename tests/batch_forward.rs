//! Batch invariance of the forward on the CPU oracle: sequences sharing a round get the logits bits and state bytes they get alone, in any batch order; taps cover the round's rows in batch order.
mod batch_support;
mod forward_support;

use batch_support::{alone, batched, orders, same, schedule, SEQS};
use forward_support::{prompt, tiny};
use lockstep::model::SeqState;
use lockstep::exec::{CpuExecutor, CpuTensor};
use lockstep::model::forward::{forward, forward_batch, LogitRows, Model, SeqInput};
use lockstep::model::taps::Taps;

#[test]
fn four_sequences_in_one_round_get_their_alone_bits_in_any_batch_order() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let rounds = schedule();
    let want = alone(&mut CpuExecutor::new(&t.ckpt), &model, &rounds);
    assert!(want.values().all(|(l, _)| l.iter().all(|&b| f32::from_bits(b).is_finite())), "non-finite logits");
    let distinct: std::collections::BTreeSet<&Vec<u32>> = want.values().map(|(l, _)| l).collect();
    assert_eq!(distinct.len(), want.len(), "two calls gave the same logits");
    for (name, order) in orders() {
        let got = batched(&mut CpuExecutor::new(&t.ckpt), &model, &rounds, order);
        same(name, &want, &got);
    }
}

/// States of every sequence after round 0 of the schedule, each run alone.
fn after_round_0(ex: &mut CpuExecutor, model: &Model) -> Vec<SeqState<CpuTensor>> {
    let mut states: Vec<_> = (0..SEQS).map(|_| SeqState::new(ex, &model.cfg, &model.plan).expect("state")).collect();
    for c in &schedule()[0] {
        forward(ex, model, &mut states[c.seq], &c.tokens, c.rows, &mut Taps::default()).expect("forward");
    }
    states
}

#[test]
fn batched_taps_are_each_sequences_alone_taps_concatenated_in_batch_order() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let round = schedule().swap_remove(1);
    let mut ex = CpuExecutor::new(&t.ckpt);
    let mut solo = after_round_0(&mut ex, &model);
    let mut per_seq = Vec::new();
    for c in &round {
        let mut taps = Taps::on();
        forward(&mut ex, &model, &mut solo[c.seq], &c.tokens, c.rows, &mut taps).expect("forward");
        per_seq.push(taps);
    }
    let mut states = after_round_0(&mut ex, &model);
    let mut slots: Vec<Option<&mut SeqState<CpuTensor>>> = states.iter_mut().map(Some).collect();
    let mut inputs: Vec<_> = round.iter().map(|c| SeqInput { state: slots[c.seq].take().expect("once"), tokens: &c.tokens, rows: c.rows, images: &[] }).collect();
    let mut taps = Taps::on();
    forward_batch(&mut ex, &model, &mut inputs, &mut taps).expect("forward_batch");
    let rows: usize = round.iter().map(|c| c.tokens.len()).sum();
    assert_eq!(taps.get("embed").map(|x| x.rows), Some(rows), "row-wise taps cover every row of the round");
    for tap in &taps.list {
        let parts: Vec<_> = per_seq.iter().filter_map(|s| s.get(&tap.name)).collect();
        assert!(!parts.is_empty(), "tap {} is not recorded alone", tap.name);
        let data: Vec<u32> = parts.iter().flat_map(|p| p.data.iter().map(|v| v.to_bits())).collect();
        assert_eq!(parts.iter().map(|p| p.rows).sum::<usize>(), tap.rows, "tap {}: rows", tap.name);
        assert!(data == tap.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "tap {}: values differ", tap.name);
    }
    for s in &per_seq {
        assert!(s.list.iter().all(|x| taps.get(&x.name).is_some()), "an alone tap is missing from the round");
    }
}

#[test]
fn a_bad_sequence_fails_the_round_and_leaves_every_state_untouched() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let mut ex = CpuExecutor::new(&t.ckpt);
    let mut a = SeqState::new(&mut ex, &model.cfg, &model.plan).expect("state");
    let mut b = SeqState::new(&mut ex, &model.cfg, &model.plan).expect("state");
    forward(&mut ex, &model, &mut a, &prompt(9), LogitRows::Last, &mut Taps::default()).expect("prefill");
    let before = (a.to_bytes(&mut ex).expect("state"), b.to_bytes(&mut ex).expect("state"));
    let (good, v) = (prompt(4), t.cfg.vocab_size as u32);
    for bad in [vec![], vec![3, v]] {
        let mut round = [SeqInput { state: &mut a, tokens: &good, rows: LogitRows::All, images: &[] }, SeqInput { state: &mut b, tokens: &bad, rows: LogitRows::Last, images: &[] }];
        assert!(forward_batch(&mut ex, &model, &mut round, &mut Taps::default()).is_err(), "bad sequence {bad:?} accepted");
        assert!((a.to_bytes(&mut ex).expect("state"), b.to_bytes(&mut ex).expect("state")) == before, "a rejected round changed a state");
    }
    assert!(forward_batch(&mut ex, &model, &mut [], &mut Taps::default()).is_err(), "an empty round");
    let mut round = [SeqInput { state: &mut a, tokens: &good, rows: LogitRows::All, images: &[] }, SeqInput { state: &mut b, tokens: &good, rows: LogitRows::Last, images: &[] }];
    let logits = forward_batch(&mut ex, &model, &mut round, &mut Taps::default()).expect("the round runs");
    assert_eq!(logits.iter().map(|l| l.rows).collect::<Vec<_>>(), vec![4, 1], "logit rows per sequence");
}
