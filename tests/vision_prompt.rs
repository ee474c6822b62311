//! Image spans in a prompt on the tiny model: the same logits bits and greedy tokens with the span prefilled in one chunk, in chunks that cut it, alone or in a round with three text streams, on the CPU and the GPU; a different image of the same size changes the reply's logits.
mod forward_support;

use forward_support::{patches, prompt, tiny};
use lockstep::engine::{Engine, ImageId, SeqId, Span, Work};
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::vision::{span_len, ImagePatches};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;


fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
}

/// A prompt's pieces: text before, the image span, text after; `cuts` are the chunk ends in positions.
struct Prompt {
    before: Vec<u32>,
    image: ImageId,
    span: usize,
    after: Vec<u32>,
}

/// The spans of positions `lo..hi` of the prompt.
fn spans(p: &Prompt, lo: usize, hi: usize) -> Vec<Span<'_>> {
    let (a, b) = (p.before.len(), p.before.len() + p.span);
    let mut out = Vec::new();
    if lo < a {
        out.push(Span::Tokens(&p.before[lo..hi.min(a)]));
    }
    if hi > a && lo < b {
        let (from, to) = (lo.max(a) - a, hi.min(b) - a);
        out.push(Span::Image { image: p.image, from, len: to - from });
    }
    if hi > b {
        out.push(Span::Tokens(&p.after[lo.max(b) - b..hi - b]));
    }
    out
}

/// Prefills the prompt in chunks ending at `cuts` (each round also carrying `others`' text chunks), then decodes 4 greedy tokens; returns the last prefill row's logits bits and the tokens.
fn run<E: Executor>(e: &mut Engine<'_, '_, E>, p: &Prompt, cuts: &[usize], others: usize) -> (Vec<u32>, Vec<u32>) {
    let seq = e.add().expect("seq");
    let side: Vec<SeqId> = (0..others).map(|_| e.add().expect("seq")).collect();
    let text = prompt(40);
    let mut lo = 0;
    let mut last = Vec::new();
    for (c, &hi) in cuts.iter().enumerate() {
        let mine = spans(p, lo, hi);
        let theirs: Vec<[Span<'_>; 1]> = side.iter().enumerate().map(|(k, _)| [Span::Tokens(&text[c * 3 + k..c * 3 + k + 2])]).collect();
        let mut work = vec![Work { seq, input: &mine, rows: LogitRows::Last }];
        work.extend(side.iter().zip(&theirs).map(|(&s, t)| Work { seq: s, input: &t[..], rows: LogitRows::Last }));
        let out = e.round(&work, &mut Taps::default()).expect("round");
        last = e.ex.read(&out[0]).expect("read");
        lo = hi;
    }
    let bits: Vec<u32> = last.iter().map(|v| v.to_bits()).collect();
    let mut tokens = vec![argmax(&last)];
    for _ in 0..3 {
        let l = e.run(seq, &[*tokens.last().expect("a token")], LogitRows::Last, &mut Taps::default()).expect("decode");
        tokens.push(argmax(&l));
    }
    (bits, tokens)
}

#[test]
fn an_image_prompt_gives_the_same_bits_in_any_chunking_and_batch_on_the_cpu_and_the_gpu() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let vc = model.cfg.vision.clone().expect("tower");
    let (gh, gw) = (8usize, 8usize);
    let (lh, lw) = (gh.div_ceil(vc.downsample_ratio), gw.div_ceil(vc.downsample_ratio));
    let data = patches(gh * gw * 3 * vc.patch_size * vc.patch_size, 5);
    let other = patches(data.len(), 6);
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut c = Engine::new(CpuExecutor::new(&t.ckpt), &model);
    let mut g = Engine::new(GpuExecutor::new(&gpu, &t.ckpt), &model);
    let img = ImagePatches { grid_h: gh, grid_w: gw, data: &data };
    let (ic, ig) = (c.add_image(&img, lh, lw, &mut Taps::default()).expect("image"), g.add_image(&img, lh, lw, &mut Taps::default()).expect("image"));
    let span = span_len(lh, lw);
    assert_eq!(c.image_len(ic).expect("len"), span);
    let ids = prompt(12);
    let (before, after) = (ids[..5].to_vec(), ids[5..].to_vec());
    let pc = Prompt { before: before.clone(), image: ic, span, after: after.clone() };
    let pg = Prompt { before: before.clone(), image: ig, span, after: after.clone() };
    let n = 5 + span + after.len();
    let whole = run(&mut c, &pc, &[n], 0);
    for (name, cuts, others) in [("chunks cutting the span", vec![9, 13, n], 0), ("span start and end cut", vec![5, 6, 5 + span - 1, n], 0), ("with three text streams", vec![8, n], 3)] {
        assert_eq!(run(&mut c, &pc, &cuts, others), whole, "cpu, {name}");
        assert_eq!(run(&mut g, &pg, &cuts, others), whole, "gpu, {name}");
    }
    assert_eq!(run(&mut g, &pg, &[n], 0), whole, "gpu, one chunk");
    let io = c.add_image(&ImagePatches { grid_h: gh, grid_w: gw, data: &other }, lh, lw, &mut Taps::default()).expect("image");
    let po = Prompt { before, image: io, span, after };
    assert_ne!(run(&mut c, &po, &[n], 0).0, whole.0, "a different image gave the same logits");
    let bad = [Span::Image { image: ic, from: span - 2, len: 3 }];
    let s = c.add().expect("seq");
    let err = c.round(&[Work { seq: s, input: &bad, rows: LogitRows::Last }], &mut Taps::default()).err().expect("an error");
    assert!(err.to_string().contains("span rows"), "{err}");
}
