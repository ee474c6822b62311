//! The GPU executor's forward on the tiny model equals the CPU oracle bit for bit (every tap, every logit, the state bytes), and is chunk-invariant on its own.
mod forward_support;

use forward_support::{prompt, same_taps, tiny};
use lockstep::engine::Session;
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::taps::Taps;
use std::sync::OnceLock;

/// Prompt length: past index_topk visible groups and the candidate pool, crossing ratio-2 groups at odd offsets.
const PROMPT: usize = 40;
/// Decode steps after the prompt.
const DECODE: usize = 8;

/// The default adapter (lavapipe in CI), opened once per test binary.
fn gpu() -> &'static Gpu {
    static G: OnceLock<Gpu> = OnceLock::new();
    G.get_or_init(|| Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe: mesa-vulkan-drivers)"))
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Greedy pick: the largest logit, the lower index on ties.
fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
}

#[test]
fn gpu_forward_equals_the_cpu_oracle_in_every_tap_logit_and_state_byte() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let mut c = Session::new(CpuExecutor::new(&t.ckpt), &model).expect("cpu session");
    let mut g = Session::new(GpuExecutor::new(gpu(), &t.ckpt), &model).expect("gpu session");
    let ids = prompt(PROMPT);
    let mut calls: Vec<Vec<u32>> = vec![ids[..23].to_vec(), ids[23..24].to_vec(), ids[24..].to_vec()];
    let (mut taps, mut logits) = (0, 0);
    let mut i = 0;
    while i < calls.len() {
        let (mut tc, mut tg) = (Taps::on(), Taps::on());
        let lc = c.run(&calls[i], LogitRows::All, &mut tc).expect("cpu call");
        let lg = g.run(&calls[i], LogitRows::All, &mut tg).expect("gpu call");
        taps += same_taps(i, &tc, &tg);
        assert!(bits(&lc) == bits(&lg), "call {i}: logits differ");
        logits += lc.len();
        if i == 2 {
            let (sc, sg) = (c.state_bytes().expect("cpu state"), g.state_bytes().expect("gpu state"));
            assert!(sc == sg, "state bytes after the prompt differ");
        }
        if calls.len() < 3 + DECODE && i + 1 == calls.len() {
            calls.push(vec![argmax(&lc[lc.len() - t.cfg.vocab_size..])]);
        }
        i += 1;
    }
    let (sc, sg) = (c.state_bytes().expect("cpu state"), g.state_bytes().expect("gpu state"));
    assert!(sc == sg, "final state bytes differ");
    assert!(taps > 30 * calls.len() && logits == (PROMPT + DECODE) * t.cfg.vocab_size, "{taps} taps, {logits} logits");
}

/// Prompt logits of every row, state after the prompt, decode logits and final state of one chunking on the GPU.
fn gpu_trace(model: &Model, chunk: usize, forced: &[u32]) -> (Vec<u32>, Vec<u8>, Vec<u32>, Vec<u8>) {
    let t = tiny();
    let mut s = Session::new(GpuExecutor::new(gpu(), &t.ckpt), model).expect("session");
    let mut prompt_logits = Vec::new();
    for part in prompt(PROMPT).chunks(chunk) {
        prompt_logits.extend(bits(&s.run(part, LogitRows::All, &mut Taps::default()).expect("prefill")));
    }
    let prompt_state = s.state_bytes().expect("state");
    let mut decode = Vec::new();
    for &tok in forced {
        decode.extend(bits(&s.run(&[tok], LogitRows::Last, &mut Taps::default()).expect("decode")));
    }
    let end_state = s.state_bytes().expect("state");
    (prompt_logits, prompt_state, decode, end_state)
}

#[test]
fn gpu_prefill_whole_equals_chunks_of_1_7_13_64_then_decode() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let forced: Vec<u32> = prompt(PROMPT + DECODE)[PROMPT..].to_vec();
    let whole = gpu_trace(&model, PROMPT, &forced);
    assert!(whole.0.iter().all(|&b| f32::from_bits(b).is_finite()), "non-finite logits");
    let mut ex = GpuExecutor::new(gpu(), &t.ckpt);
    let zeros = ex.zeros(2, 3).expect("zeros");
    assert_eq!(ex.read(&zeros).expect("read"), vec![0.0; 6]);
    for chunk in [1, 7, 13, 64] {
        let c = gpu_trace(&model, chunk, &forced);
        assert!(c.0 == whole.0, "chunk {chunk}: prompt logits differ");
        assert!(c.1 == whole.1, "chunk {chunk}: state after the prompt differs");
        assert!(c.2 == whole.2, "chunk {chunk}: decode logits differ");
        assert!(c.3 == whole.3, "chunk {chunk}: final state differs");
    }
}

#[test]
fn a_gpu_forward_of_up_to_8_rows_waits_once_for_its_logits_and_a_longer_one_also_for_each_layers_expert_ids() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let mut s = Session::new(GpuExecutor::new(gpu(), &t.ckpt), &model).expect("session");
    s.run(&prompt(5), LogitRows::Last, &mut Taps::default()).expect("warm-up");
    for (span, most) in [(5..9, 1), (9..10, 1), (10..30, t.cfg.num_hidden_layers + 1)] {
        let (before, submitted, dispatched) = (s.ex.waits(), s.ex.submits(), s.ex.dispatches());
        s.run(&prompt(30)[span.clone()], LogitRows::Last, &mut Taps::default()).expect("call");
        let per_call = s.ex.waits() - before;
        assert!(per_call <= most, "{per_call} waits for one forward of {} rows and {} layers", span.len(), t.cfg.num_hidden_layers);
        assert!(s.ex.submits() - submitted >= per_call, "every wait follows a submit");
        assert!(s.ex.dispatches() - dispatched > 20 * t.cfg.num_hidden_layers, "every op runs on the device");
    }
}

#[test]
fn bad_gpu_calls_are_errors_that_leave_the_device_state_untouched() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let mut s = Session::new(GpuExecutor::new(gpu(), &t.ckpt), &model).expect("session");
    s.run(&prompt(5), LogitRows::Last, &mut Taps::default()).expect("prefill");
    let before = s.state_bytes().expect("state");
    let v = t.cfg.vocab_size as u32;
    assert!(s.run(&[], LogitRows::Last, &mut Taps::default()).is_err(), "empty call");
    assert!(s.run(&[3, v], LogitRows::Last, &mut Taps::default()).is_err(), "id outside the vocabulary");
    assert!(s.state_bytes().expect("state") == before, "a rejected call changed the state");
    let bad = s.ex.upload(2, 3, &[0.0; 6]).expect("upload");
    let other = s.ex.upload(3, 2, &[0.0; 6]).expect("upload");
    assert!(s.ex.add(&bad, &other, lockstep::exec::Out::F32).is_err(), "mismatched dims");
    assert!(s.run(&[3], LogitRows::Last, &mut Taps::default()).is_ok(), "the sequence continues");
}
