//! Accuracy of the f32 CPU oracle against the float64 reference, stage by stage with teacher forcing: each reference stage runs on the oracle's recorded inputs, the backbone's and the DSpark draft head's (ring feeding on every call, a draft after every decode step).
use lockstep::engine::Engine;
use lockstep::exec::CpuExecutor;
use lockstep::model::forward::vision::{encode_image, ImagePatches};
use lockstep::model::forward::{LogitRows, Model as OracleModel};
use lockstep::model::reference::{quant::bf16, Forcing, Model};
use lockstep::model::taps::{Tap, Taps};
use lockstep::model::{load, make_tiny, LoadMode, ValueCheck};
use lockstep::text::TokenMap;
use std::collections::BTreeMap;

/// f32 unit roundoff.
const U: f64 = 1.0 / 16_777_216.0;

/// gamma(n) = n u / (1 - n u) (docs/ops.md).
fn gamma(n: usize) -> f64 {
    n as f64 * U / (1.0 - n as f64 * U)
}

/// Rounded additions on the longest path of a canonical sum of `k` terms (docs/ops.md depth).
fn depth(k: usize) -> usize {
    32 + 8 + k.div_ceil(256) + 1
}

/// One bf16 ulp at |x|.
fn ulp_bf16(x: f64) -> f64 {
    let e = if x == 0.0 { -126 } else { (x.abs().log2().floor() as i32).max(-126) };
    2f64.powi(e - 7)
}

/// How a stage is compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// bf16 output, no quantization inside the stage: every element within the bound.
    Bf16,
    /// bf16 output with act_quant or QAT inside: elements beyond the bound are quantization flips, counted.
    Bf16Quant,
    /// QAT output: equal unless an input lies on a quantization boundary (counted as flips).
    Qat,
    /// Index lists: rows equal as sets or counted as selection flips.
    Select,
}

/// Tallies of one stage class.
#[derive(Default)]
struct Tally {
    elems: usize,
    flips: usize,
    beyond: usize,
    worst: f64,
}

/// Whether `l` names a backbone layer (`L3`), a draft stage (`S1`) or a vision block (`V0`).
fn numbered(l: &str) -> bool {
    (l.starts_with('L') || l.starts_with('S') || l.starts_with('V')) && l.len() > 1 && l[1..].parse::<usize>().is_ok()
}

fn class(name: &str) -> (String, Kind) {
    let stage = name.split_once('.').map_or(name, |(l, rest)| if numbered(l) { rest } else { name });
    let kind = match stage {
        "attn.kv" | "attn.comp" | "attn.index_keys" | "ring_kv" => Kind::Qat,
        "attn.topk" | "ffn.gate_idx" | "D.tokens" => Kind::Select,
        "engram" | "attn.q" | "attn.out" | "ffn.out" | "D.main_x" => Kind::Bf16Quant,
        _ => Kind::Bf16,
    };
    let first = name.split('.').next().unwrap_or("");
    let prefix = match name.chars().next() {
        Some('S') if numbered(first) => "draft ",
        Some('V') | Some('A') if numbered(first) || first == "V" || first == "A" => "vision ",
        _ => "",
    };
    (format!("{prefix}{stage}"), kind)
}

fn to_f64(t: &Taps<f32>) -> Taps<f64> {
    Taps { enabled: true, list: t.list.iter().map(|x| Tap { name: x.name.clone(), rows: x.rows, cols: x.cols, data: x.data.iter().map(|&v| f64::from(v)).collect() }).collect() }
}

/// The tiny checkpoint (seed 5) in a temporary directory, loaded, with its synthetic engram map.
fn tiny_checkpoint(tag: &str) -> (std::path::PathBuf, lockstep::model::Config, lockstep::weights::Checkpoint, TokenMap) {
    let dir = std::env::temp_dir().join(format!("lockstep-reference-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    make_tiny(&dir, 5, None).unwrap();
    let (cfg, ck) = load(&dir, LoadMode::Copied, ValueCheck::Off).unwrap();
    let map = TokenMap::synthetic(cfg.vocab_size, cfg.engram_compressed_vocab_size as u32);
    (dir, cfg, ck, map)
}

#[test]
fn oracle_stages_are_within_rounding_of_the_float64_reference_under_teacher_forcing() {
    let (dir, cfg, ck, map) = tiny_checkpoint("accuracy");
    let reference = Model::with_token_map(&cfg, &ck, map.clone()).unwrap();
    let oracle = OracleModel::new(cfg.clone(), &ck, map).unwrap();
    let mut engine = Engine::new(CpuExecutor::new(&ck), &oracle).with_drafts(true);
    let seq = engine.add().unwrap();
    let mut st = reference.new_drafting_state();
    let mut s = 0x853c_49e6_748f_ea9bu64;
    let prompt: Vec<u32> = (0..64).map(|_| {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 33) % 129_000) as u32
    }).collect();
    let mut tallies: BTreeMap<String, (Kind, Tally)> = BTreeMap::new();
    let mut calls: Vec<Vec<u32>> = vec![prompt];
    let v = cfg.vocab_size;
    for step in 0..17 {
        let ids = calls[step].clone();
        let mut otaps = Taps::on();
        let rows = if step == 0 { LogitRows::All } else { LogitRows::Last };
        let logits = engine.run(seq, &ids, rows, &mut otaps).unwrap();
        let last = &logits[logits.len() - v..];
        let next = (0..v).fold(0, |b, i| if last[i] > last[b] { i } else { b }) as u32;
        calls.push(vec![next]);
        let mut forcing = Forcing { oracle: to_f64(&otaps), ..Forcing::default() };
        let mut rtaps = Taps::on();
        reference.forward_forced(&mut st, &ids, None, &mut rtaps, &mut forcing).unwrap();
        tally_call(&reference, &rtaps, &forcing, &mut tallies);
        let mut dtaps = Taps::on();
        engine.draft(&[(seq, next)], &mut dtaps).unwrap();
        let mut forcing = Forcing { oracle: to_f64(&dtaps), ..Forcing::default() };
        let mut rtaps = Taps::on();
        reference.draft_forced(&st, next, &mut rtaps, &mut forcing).unwrap();
        assert!(forcing.missing.is_empty(), "draft stages the oracle lacks: {:?}", forcing.missing);
        tally_call(&reference, &rtaps, &forcing, &mut tallies);
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{:<18} {:>9} {:>8} {:>8} {:>12}", "stage", "elements", "flips", "beyond", "worst margin");
    let mut failures = Vec::new();
    for (stage, (kind, t)) in &tallies {
        println!("{stage:<18} {:>9} {:>8} {:>8} {:>12.3}", t.elems, t.flips, t.beyond, t.worst);
        let frac = |n: usize| n as f64 / t.elems.max(1) as f64;
        let ok = match kind {
            Kind::Bf16 => t.beyond == 0,
            Kind::Bf16Quant => frac(t.beyond) <= 0.02,
            Kind::Qat => frac(t.flips) <= 0.02,
            Kind::Select => frac(t.flips) <= 0.10,
        };
        if !ok {
            failures.push(format!("{stage}: {} flips, {} beyond the bound of {} elements", t.flips, t.beyond, t.elems));
        }
    }
    assert!(tallies.len() >= 15 + 20, "too few stages compared: {:?}", tallies.keys().collect::<Vec<_>>());
    assert!(tallies.contains_key("draft ring_kv") && tallies.contains_key("D.confidence") && tallies.contains_key("draft attn.o"), "draft stages missing: {:?}", tallies.keys().collect::<Vec<_>>());
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn tower_stages_are_within_rounding_of_the_float64_reference_under_teacher_forcing() {
    let (dir, cfg, ck, map) = tiny_checkpoint("vision");
    let reference = Model::with_token_map(&cfg, &ck, map.clone()).unwrap();
    let oracle = OracleModel::new(cfg.clone(), &ck, map).unwrap();
    let tower = reference.vision.as_ref().expect("the tiny model has a tower");
    let patch = 3 * tower.cfg.patch_size * tower.cfg.patch_size;
    let mut tallies: BTreeMap<String, (Kind, Tally)> = BTreeMap::new();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut ex = CpuExecutor::new(&ck);
    for (gh, gw) in [(8usize, 8usize), (5, 7), (3, 11)] {
        let data: Vec<f32> = (0..gh * gw * patch).map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % 256) as f32 / 127.5 - 1.0
        }).collect();
        let mut otaps = Taps::on();
        encode_image(&mut ex, &oracle, &ImagePatches { grid_h: gh, grid_w: gw, data: &data }, &mut otaps).unwrap();
        let mut forcing = Forcing { oracle: to_f64(&otaps), ..Forcing::default() };
        let mut rtaps = Taps::on();
        tower.encode_forced(&data, gh, gw, &mut rtaps, Some(&mut forcing)).unwrap();
        assert!(forcing.missing.is_empty(), "tower stages the oracle lacks: {:?}", forcing.missing);
        tally_call(&reference, &rtaps, &forcing, &mut tallies);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut failures = Vec::new();
    for (stage, (kind, t)) in &tallies {
        println!("{stage:<18} {:>9} {:>8} {:>8} {:>12.3}", t.elems, t.flips, t.beyond, t.worst);
        if *kind == Kind::Bf16 && t.beyond > 0 {
            failures.push(format!("{stage}: {} beyond the bound of {} elements", t.beyond, t.elems));
        }
    }
    assert!(tallies.len() >= 12, "too few tower stages compared: {:?}", tallies.keys().collect::<Vec<_>>());
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Compares every tap of one call with the oracle's.
fn tally_call(reference: &Model, rtaps: &Taps<f64>, forcing: &Forcing, tallies: &mut BTreeMap<String, (Kind, Tally)>) {
    for r in &rtaps.list {
        let Some(o) = forcing.oracle.get(&r.name) else { continue };
        assert_eq!((o.rows, o.cols), (r.rows, r.cols), "{}: shape", r.name);
        let raw = forcing.raw.get(&r.name).map(|t| t.data.as_slice());
        let (stage, kind) = class(&r.name);
        let t = &mut tallies.entry(stage.clone()).or_insert((kind, Tally::default())).1;
        compare(reference, &forcing.oracle, &r.name, &stage, kind, &r.data, raw, &o.data, o.cols, t);
    }
}

/// The rows of tap `name` that line up with the last `rows` rows of a `rows`-row tap.
fn tail_rows<'a>(oracle: &'a Taps<f64>, name: &str, rows: usize) -> Option<(&'a [f64], usize)> {
    let t = oracle.get(name)?;
    (t.rows >= rows).then(|| (&t.data[(t.rows - rows) * t.cols..], t.cols))
}

/// Compares one tap: flips (oracle differs from the reference's rounded or quantized value; none for f32 outputs), beyond-bound counts, worst margin.
#[allow(clippy::too_many_arguments)]
fn compare(m: &Model, oracle: &Taps<f64>, name: &str, stage: &str, kind: Kind, reff: &[f64], raw: Option<&[f64]>, o: &[f64], cols: usize, t: &mut Tally) {
    let cfg = &m.cfg;
    match kind {
        Kind::Select => {
            for (a, b) in reff.chunks(cols.max(1)).zip(o.chunks(cols.max(1))) {
                let set = |r: &[f64]| { let mut v: Vec<i64> = r.iter().map(|&x| x as i64).collect(); v.sort_unstable(); v };
                t.elems += 1;
                t.flips += usize::from(set(a) != set(b));
            }
        }
        Kind::Qat => {
            t.elems += reff.len();
            t.flips += reff.iter().zip(o).filter(|(a, b)| a != b).count();
        }
        _ if stage == "logits" || stage == "ffn.gate_w" || stage == "draft ffn.gate_w" || stage == "D.head" => {
            let first = name.split('.').next().unwrap_or("");
            let index = first[1..].parse::<usize>().ok().filter(|_| numbered(first));
            let ds = m.dspark.as_ref();
            let (xname, lin) = match (stage, index) {
                ("ffn.gate_w", Some(l)) => (format!("L{l}.ffn.x"), &m.layers[l].ffn.gate),
                ("draft ffn.gate_w", Some(k)) => (format!("S{k}.ffn.x"), &ds.expect("draft head").stages[k].ffn.gate),
                ("D.head", _) => ("D.x_norm".to_string(), &m.head),
                _ => ("final.x".to_string(), &m.head),
            };
            let gate = stage.ends_with("gate_w");
            let Some(x) = oracle.get(&xname) else { return };
            let d = cfg.hidden_size;
            for (i, (rr, oo)) in reff.chunks(cols).zip(o.chunks(cols)).enumerate() {
                let xi = &x.data[x.data.len() - (reff.len() / cols - i) * d..][..d];
                let mags = lin.abs_terms(xi);
                let zmax = if gate { mags.iter().fold(0.0f64, |a, &b| a.max(b)) } else { 0.0 };
                for (j, (&a, &b)) in rr.iter().zip(oo).enumerate() {
                    let bound = if gate { a.abs() * (gamma(depth(d)) * zmax + 16.0 * U) } else { gamma(depth(d)) * mags[j] + U * a.abs() };
                    tally(t, (a - b).abs(), bound, false);
                }
            }
        }
        _ if stage == "D.logits" || stage == "D.confidence" => {
            let ds = m.dspark.as_ref().expect("draft head");
            let rows = reff.len() / cols;
            let (Some((xn, d)), Some((e, r)), Some((xc, _))) = (tail_rows(oracle, "D.x_norm", rows), tail_rows(oracle, "D.markov_e", rows), tail_rows(oracle, "D.x", rows)) else { return };
            for (i, (rr, oo)) in reff.chunks(cols).zip(o.chunks(cols)).enumerate() {
                let ei = &e[i * r..(i + 1) * r];
                let mags: Vec<f64> = if stage == "D.logits" {
                    let (h, b) = (m.head.abs_terms(&xn[i * d..(i + 1) * d]), ds.markov_head.abs_terms(ei));
                    h.iter().zip(&b).map(|(h, b)| gamma(depth(d)) * h + gamma(depth(r)) * b).collect()
                } else {
                    let joined: Vec<f64> = xc[i * d..(i + 1) * d].iter().chain(ei).copied().collect();
                    ds.confidence.abs_terms(&joined).iter().map(|a| gamma(depth(d + r)) * a).collect()
                };
                for ((&a, &b), mag) in rr.iter().zip(oo).zip(&mags) {
                    tally(t, (a - b).abs(), mag + 2.0 * U * a.abs(), false);
                }
            }
        }
        _ => {
            let raw = raw.unwrap_or(reff);
            let slack = if kind == Kind::Bf16 { 2.0 } else { 1.0 };
            for (rr, (oo, ff)) in raw.chunks(cols).zip(o.chunks(cols).zip(reff.chunks(cols))) {
                let rowmax = rr.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
                for ((&r, &b), &f) in rr.iter().zip(oo).zip(ff) {
                    let bound = slack * ulp_bf16(r) + 2.0 * gamma(depth(256)) * rowmax;
                    tally(t, (r - b).abs(), bound, bf16(f) != b);
                }
            }
        }
    }
}

fn tally(t: &mut Tally, err: f64, bound: f64, flip: bool) {
    t.elems += 1;
    t.flips += usize::from(flip);
    if err > bound {
        t.beyond += 1;
    } else if bound > 0.0 {
        t.worst = t.worst.max(err / bound);
    }
}
