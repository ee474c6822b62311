//! One engine, one executor, many sequences: rounds of mixed prefill chunks and decode rows give each sequence its alone bits, and a forked sequence continues independently of its source.
mod batch_support;
mod forward_support;

use batch_support::{alone, same, schedule, Call, Outcome, SEQS};
use forward_support::{prompt, tiny};
use lockstep::engine::{Engine, EngineError, Span, Work};
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The schedule's rounds through one engine: each round one `Engine::round` over its calls, each call's input split into two spans.
fn through_engine<E: Executor>(ex: E, model: &Model, rounds: &[Vec<Call>]) -> Outcome {
    let mut engine = Engine::new(ex, model);
    let ids: Vec<_> = (0..SEQS).map(|_| engine.add().expect("sequence")).collect();
    let mut out = Outcome::new();
    for (r, round) in rounds.iter().enumerate() {
        let spans: Vec<[Span<'_>; 2]> = round.iter().map(|c| {
            let cut = c.tokens.len() / 2;
            [Span::Tokens(&c.tokens[..cut]), Span::Tokens(&c.tokens[cut..])]
        }).collect();
        let work: Vec<Work<'_>> = round.iter().zip(&spans).map(|(c, s)| Work { seq: ids[c.seq], input: s, rows: c.rows }).collect();
        let logits = engine.round(&work, &mut Taps::default()).expect("round");
        assert_eq!(logits.len(), round.len(), "round {r}: one logits tensor per work item");
        for (c, l) in round.iter().zip(&logits) {
            let l = bits(&engine.ex.read(l).expect("read"));
            out.insert((r, c.seq), (l, engine.state_bytes(ids[c.seq]).expect("state")));
        }
    }
    out
}

#[test]
fn four_sequences_through_one_engine_get_their_alone_bits_on_the_cpu_and_the_gpu() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let rounds = schedule();
    let want = alone(&mut CpuExecutor::new(&t.ckpt), &model, &rounds);
    same("cpu engine", &want, &through_engine(CpuExecutor::new(&t.ckpt), &model, &rounds));
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    same("gpu engine", &want, &through_engine(GpuExecutor::new(&gpu, &t.ckpt), &model, &rounds));
}

/// A fork mid-prompt, then the source and the fork fed different tokens, each compared with a fresh sequence fed its whole history.
fn fork_continues_independently<E: Executor>(ex: E, model: &Model, what: &str) {
    let p = prompt(60);
    let (head, x, y) = (&p[..13], &p[13..30], &p[40..55]);
    let mut e = Engine::new(ex, model);
    let src = e.add().expect("source");
    e.run(src, head, LogitRows::Last, &mut Taps::default()).expect("prompt head");
    let fork = e.fork(src).expect("fork");
    assert_eq!(e.state_bytes(fork).expect("state"), e.state_bytes(src).expect("state"), "{what}: a fork starts equal to its source");
    let lx = e.run(src, x, LogitRows::All, &mut Taps::default()).expect("source continues");
    let ly = e.run(fork, y, LogitRows::All, &mut Taps::default()).expect("fork continues");
    for (id, tail, logits, name) in [(src, x, &lx, "source"), (fork, y, &ly, "fork")] {
        let fresh = e.add().expect("fresh");
        e.run(fresh, head, LogitRows::Last, &mut Taps::default()).expect("fresh head");
        let want = e.run(fresh, tail, LogitRows::All, &mut Taps::default()).expect("fresh tail");
        assert!(bits(&want) == bits(logits), "{what}: the {name}'s logits equal a fresh sequence's");
        assert!(e.state_bytes(fresh).expect("state") == e.state_bytes(id).expect("state"), "{what}: the {name}'s state bytes equal a fresh sequence's");
        e.remove(fresh).expect("remove");
    }
    assert!(matches!(e.run(fork, x, LogitRows::Last, &mut Taps::default()), Ok(_)), "{what}: the fork keeps running");
    let gone = e.add().expect("extra");
    e.remove(gone).expect("remove");
    assert!(matches!(e.run(gone, x, LogitRows::Last, &mut Taps::default()), Err(EngineError::Unknown(_))), "{what}: a removed sequence is refused");
    let input = [Span::Tokens(&x[..1])];
    let twice = [Work { seq: src, input: &input, rows: LogitRows::Last }, Work { seq: src, input: &input, rows: LogitRows::Last }];
    let before = e.state_bytes(src).expect("state");
    assert!(matches!(e.round(&twice, &mut Taps::default()), Err(EngineError::Twice(_))), "{what}: one sequence twice in a round is refused");
    assert!(e.state_bytes(src).expect("state") == before, "{what}: a refused round leaves the state");
}

#[test]
fn a_forked_sequence_and_its_source_each_equal_a_fresh_sequence_fed_the_same_tokens() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    fork_continues_independently(CpuExecutor::new(&t.ckpt), &model, "cpu");
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    fork_continues_independently(GpuExecutor::new(&gpu, &t.ckpt), &model, "gpu");
}
