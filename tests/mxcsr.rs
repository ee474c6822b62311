//! The CPU oracle's bits do not depend on the host's subnormal modes: on the edge-values tiny checkpoint, prefill and greedy decode with MXCSR flush-to-zero and denormals-are-zero set give the logits, tokens and state bytes they give with both clear.
#![cfg(target_arch = "x86_64")]
mod forward_support;

use forward_support::{edge_tiny, prompt_with, Tiny};
use lockstep::engine::Session;
use lockstep::exec::CpuExecutor;
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;
use std::hint::black_box;

/// MXCSR flush-to-zero: subnormal results become zero.
const FTZ: u32 = 1 << 15;
/// MXCSR denormals-are-zero: subnormal inputs read as zero.
const DAZ: u32 = 1 << 6;
/// Prompt length: past the window, index top-k and candidate pool of the tiny config.
const PROMPT: usize = 48;
/// Greedy decode steps after the prompt.
const DECODE: usize = 12;

/// This thread's MXCSR.
#[inline(never)]
fn read_mxcsr() -> u32 {
    let mut v = 0u32;
    // SAFETY: stmxcsr stores the 4-byte register into `v`, which is live and aligned.
    unsafe { core::arch::asm!("stmxcsr [{}]", in(reg) &mut v as *mut u32, options(nostack, preserves_flags)) };
    black_box(v)
}

/// Loads `v` into this thread's MXCSR.
#[inline(never)]
fn write_mxcsr(v: u32) {
    let v = black_box(v);
    // SAFETY: ldmxcsr reads 4 bytes from `v`; only the SSE control and status bits of this thread change.
    unsafe { core::arch::asm!("ldmxcsr [{}]", in(reg) &v as *const u32, options(nostack, readonly)) };
}

/// FTZ and DAZ set or cleared for this guard's life; the old MXCSR comes back on drop, panics included.
struct Modes {
    old: u32,
}

impl Modes {
    /// Sets both modes when `flush`, clears both otherwise.
    fn new(flush: bool) -> Modes {
        let old = read_mxcsr();
        write_mxcsr(if flush { old | FTZ | DAZ } else { old & !(FTZ | DAZ) });
        Modes { old }
    }
}

impl Drop for Modes {
    fn drop(&mut self) {
        write_mxcsr(self.old);
    }
}

/// Half the smallest normal (subnormal unless FTZ) and the smallest subnormal times 2^100 (2^-49 unless DAZ), computed now.
#[inline(never)]
fn probe() -> (f32, f32) {
    (black_box(f32::MIN_POSITIVE) * black_box(0.5), black_box(f32::from_bits(1)) * black_box(2f32.powi(100)))
}

/// What one run produced: every prompt row's logits bits, then each decode step's, the greedy tokens, and the state bytes at the end.
#[derive(PartialEq)]
struct Trace {
    logits: Vec<u32>,
    tokens: Vec<u32>,
    state: Vec<u8>,
}

/// Prefills the prompt in one call (logits for every row), then decodes greedily (ties to the lower id) on this thread.
#[inline(never)]
fn trace(t: &Tiny, model: &Model, ids: &[u32]) -> Trace {
    let mut s = Session::new(CpuExecutor::new(&t.ckpt), model).expect("session");
    let mut last = s.run(black_box(ids), LogitRows::All, &mut Taps::default()).expect("prefill");
    let mut logits: Vec<u32> = last.iter().map(|x| x.to_bits()).collect();
    let v = t.cfg.vocab_size;
    let mut tokens = Vec::new();
    for _ in 0..DECODE {
        let row = &last[last.len() - v..];
        let next = (0..v).fold(0, |b, i| if row[i] > row[b] { i } else { b }) as u32;
        tokens.push(next);
        last = s.run(&[black_box(next)], LogitRows::Last, &mut Taps::default()).expect("decode");
        logits.extend(last.iter().map(|x| x.to_bits()));
    }
    let state = s.state_bytes().expect("state");
    black_box(Trace { logits, tokens, state })
}

/// The traces with the modes clear and set, each checked to have taken effect.
fn both_modes(t: &Tiny) -> (Trace, Trace) {
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let ids = prompt_with(t.tok.as_ref(), PROMPT);
    let before = read_mxcsr();
    let keep = {
        let _m = Modes::new(false);
        let (ftz, daz) = probe();
        assert!(ftz > 0.0 && daz > 0.0, "with the modes clear subnormals are kept ({ftz:e}, {daz:e})");
        trace(t, &model, &ids)
    };
    let flush = {
        let _m = Modes::new(true);
        let (ftz, daz) = probe();
        assert!(ftz == 0.0 && daz == 0.0, "with FTZ and DAZ set subnormals are flushed ({ftz:e}, {daz:e})");
        trace(t, &model, &ids)
    };
    assert_eq!(read_mxcsr() & (FTZ | DAZ), before & (FTZ | DAZ), "the guard restored the thread's modes");
    assert!(keep.logits.iter().all(|&b| f32::from_bits(b).is_finite()), "finite logits");
    let distinct: std::collections::BTreeSet<u32> = keep.tokens.iter().copied().collect();
    assert!(distinct.len() > 2, "greedy decoding gives varied tokens: {:?}", keep.tokens);
    (keep, flush)
}

/// Asserts the two traces are bit-identical, saying how many logits, tokens and state bytes differ.
fn assert_same(what: &str, keep: &Trace, flush: &Trace) {
    let differ = keep.logits.iter().zip(&flush.logits).filter(|(a, b)| a != b).count();
    let state_differ = keep.state.iter().zip(&flush.state).filter(|(a, b)| a != b).count();
    assert!(
        keep == flush,
        "{what}: {differ} of {} logits differ, tokens {:?} (kept) vs {:?} (flushed), {state_differ} of {} state bytes differ",
        keep.logits.len(),
        keep.tokens,
        flush.tokens,
        keep.state.len()
    );
}

#[test]
fn the_edge_values_forward_gives_the_same_bits_with_flush_to_zero_and_denormals_are_zero_set_and_clear() {
    let t = edge_tiny();
    assert!(t.ckpt.canonical().is_empty(), "the edge checkpoint is written canonical: {}", t.ckpt.canonical());
    let (keep, flush) = both_modes(t);
    assert_same("edge values", &keep, &flush);
}

#[test]
fn the_random_forward_gives_the_same_bits_with_the_modes_set_and_clear() {
    let (keep, flush) = both_modes(forward_support::tiny());
    assert_same("random values", &keep, &flush);
}
