//! Runs gates 1-4 and the planted controls for every registered kernel on one device (or the CPU oracle).
use super::report::{KernelLine, Summary};
use super::{probe_edges, probe_fusion, Case, Control, Inputs, Kernel, Needs, Outputs, Rng, Variant};
use crate::gpu::{Gpu, GpuError};
use sha2::{Digest, Sha256};
use std::time::Instant;

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct ContractOptions {
    /// Only kernels whose name contains this.
    pub only: Option<String>,
    /// Fewer rows per case (slow devices); forced on by `hash` so every device hashes the same cases.
    pub quick: bool,
    /// Compute one hash over every kernel's outputs on a fixed seed instead of a random one.
    pub hash: bool,
    /// Seed for random inputs; printed so a failure can be replayed.
    pub seed: u64,
}

/// The fixed seed of `--hash`.
pub const HASH_SEED: u64 = 0x10c5_7e90_0000_0001;

fn case_rng(seed: u64, kernel: &str, index: usize) -> Rng {
    let mut h = seed ^ 0x51_7cc1_b727_220a_95;
    for b in kernel.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    Rng::new(h ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Gate 1: worst error over bound (0 when exact, infinite for a NaN or a miss against a zero bound).
pub(crate) fn margin(values: &[f64], reference: &[f64], bound: &[f64]) -> f64 {
    if values.len() != reference.len() {
        return f64::INFINITY;
    }
    let mut worst = 0.0f64;
    for ((&v, &r), &b) in values.iter().zip(reference).zip(bound) {
        let err = if v == r { 0.0 } else { (v - r).abs() };
        let m = if err == 0.0 {
            0.0
        } else if b > 0.0 {
            err / b
        } else {
            f64::INFINITY
        };
        if m.is_nan() || v.is_nan() {
            return f64::INFINITY;
        }
        worst = worst.max(m);
    }
    worst
}

fn rows_of(out: &Outputs, words: &[usize], lo: usize, hi: usize) -> Outputs {
    out.iter().zip(words).map(|(o, &w)| o[lo * w..hi * w].to_vec()).collect()
}

/// The row subsets gate 3 runs: single rows and batches at several offsets.
fn subsets(rows: usize) -> Vec<(usize, usize)> {
    let mut s = vec![(0, 1), (rows - 1, rows), (rows / 2, rows / 2 + 1)];
    for len in [2usize, 3, 5, 8] {
        for lo in [0, 1, rows.saturating_sub(len)] {
            if len < rows && lo + len <= rows {
                s.push((lo, lo + len));
            }
        }
    }
    s.sort_unstable();
    s.dedup();
    s
}

struct CaseRun {
    case: Case,
    inputs: Inputs,
    oracle: Outputs,
    reference: Vec<f64>,
    bound: Vec<f64>,
}

fn prepare(k: &dyn Kernel, case: Case, seed: u64, index: usize) -> CaseRun {
    let mut rng = case_rng(seed, k.name(), index);
    let inputs = k.inputs(&case, &mut rng);
    let oracle = k.oracle(&case, &inputs);
    let reference = k.reference(&case, &inputs);
    let bound = k.bound(&case, &inputs, &reference);
    CaseRun { case, inputs, oracle, reference, bound }
}

/// Gate results of one variant on one case: (gate1 margin, gate 2 ok, gate 3 ok, outputs).
fn gates_123(gpu: &Gpu, k: &dyn Kernel, variant: &Variant, c: &CaseRun, control: u32) -> Result<(f64, bool, bool, Outputs), GpuError> {
    let out = k.run(gpu, variant, &c.case, &c.inputs, control)?;
    let m = margin(&k.values(&c.case, &out), &c.reference, &c.bound);
    let g2 = out == c.oracle && k.other_mode(gpu, variant, &c.case, &c.inputs, control, &out)?;
    let g3 = gate3(gpu, k, variant, c, control, &out)?;
    Ok((m, g2, g3, out))
}

/// Whether a planted control fails a gate on one case, stopping at the first gate it fails.
fn caught(gpu: &Gpu, k: &dyn Kernel, variant: &Variant, c: &CaseRun, control: u32) -> Result<bool, GpuError> {
    let out = k.run(gpu, variant, &c.case, &c.inputs, control)?;
    if margin(&k.values(&c.case, &out), &c.reference, &c.bound) > 1.0 || out != c.oracle || !k.other_mode(gpu, variant, &c.case, &c.inputs, control, &out)? {
        gpu.clear_bind_groups();
        return Ok(true);
    }
    Ok(!gate3(gpu, k, variant, c, control, &out)?)
}

/// Gate 3: a second run, then row subsets at several offsets, give the same bits as `out`.
fn gate3(gpu: &Gpu, k: &dyn Kernel, variant: &Variant, c: &CaseRun, control: u32, out: &Outputs) -> Result<bool, GpuError> {
    let mut g3 = k.run(gpu, variant, &c.case, &c.inputs, control)? == *out;
    if g3 && k.row_invariant() && c.case.rows > 1 {
        let words = k.out_row_words(&c.case);
        for (lo, hi) in subsets(c.case.rows) {
            let mut sub = c.case.clone();
            sub.rows = hi - lo;
            if !k.supports(variant, &sub) {
                continue;
            }
            if k.run(gpu, variant, &sub, &c.inputs.rows(lo, hi), control)? != rows_of(out, &words, lo, hi) {
                g3 = false;
                break;
            }
        }
    }
    // Each run binds fresh buffers: kept bind groups would hold them past the case.
    gpu.clear_bind_groups();
    Ok(g3)
}

/// `f` over `items` in order; concurrently on the MSL harness, whose kernels each compile and run on the host's cores.
fn each<T: Sync, R: Send>(gpu: &Gpu, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if !gpu.is_emulated() {
        return items.iter().map(&f).collect();
    }
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = items.iter().map(|x| s.spawn(move || f(x))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// Runs the contract on `gpu` (or on the CPU oracle when `gpu` is None) and returns the summary.
pub fn run_contract(gpu: Option<&Gpu>, kernels: &[&dyn Kernel], opts: &ContractOptions) -> Result<Summary, GpuError> {
    let seed = if opts.hash { HASH_SEED } else { opts.seed };
    let quick = opts.quick || opts.hash;
    let fusion = match gpu {
        Some(g) => Some(probe_fusion(g)?),
        None => None,
    };
    let mut summary = Summary::new(gpu, seed, fusion.as_ref());
    let edges = match gpu {
        Some(g) => Some(probe_edges(g)?),
        None => None,
    };
    summary.edges = edges.as_ref().map_or_else(|| "n/a".to_string(), |e| e.to_string());
    let preserves = edges.as_ref().is_some_and(|e| e.subnormals() == "preserved");
    let mut hasher = Sha256::new();
    for &k in kernels {
        if let Some(p) = &opts.only {
            if !k.name().contains(p.as_str()) {
                continue;
            }
        }
        let t0 = Instant::now();
        let runs: Vec<CaseRun> = std::thread::scope(|s| {
            let handles: Vec<_> = k.cases(quick).into_iter().enumerate().map(|(i, c)| s.spawn(move || prepare(k, c, seed, i))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        });
        let Some(gpu) = gpu else {
            let mut line = KernelLine::new(k.name(), "oracle");
            for c in &runs {
                line.cases += 1;
                line.margin = line.margin.max(margin(&k.values(&c.case, &c.oracle), &c.reference, &c.bound));
                for o in &c.oracle {
                    hasher.update(bytemuck::cast_slice::<u32, u8>(o));
                }
            }
            line.pass = line.margin <= 1.0;
            line.gate_ms = t0.elapsed().as_secs_f64() * 1e3;
            summary.push(line);
            continue;
        };
        let mut reference_outputs: Vec<Option<Outputs>> = vec![None; runs.len()];
        for (vi, variant) in k.variants().iter().enumerate() {
            if !gpu.runs(variant.lang()) {
                println!("n/a  {:<22} {:<7} {:?} runs on Metal and metal-emu only", k.name(), variant.name, variant.lang());
                summary.not_run.push(format!("{}/{}", k.name(), variant.name));
                continue;
            }
            let mut line = KernelLine::new(k.name(), variant.name);
            line.limit_problems = summary.check_limits(gpu, k.footprint(variant));
            let t = Instant::now();
            let gated = each(gpu, &runs, |c| k.supports(variant, &c.case).then(|| gates_123(gpu, k, variant, c, 0)));
            for (ci, (c, g)) in runs.iter().zip(gated).enumerate() {
                let Some(g) = g else { continue };
                let (m, g2, g3, out) = g?;
                line.cases += 1;
                line.margin = line.margin.max(m);
                line.fail_gate(1, m > 1.0, &c.case.label);
                line.fail_gate(2, !g2, &c.case.label);
                line.fail_gate(3, !g3, &c.case.label);
                if vi == 0 {
                    for o in &out {
                        hasher.update(bytemuck::cast_slice::<u32, u8>(o));
                    }
                    reference_outputs[ci] = Some(out);
                } else if let Some(r) = &reference_outputs[ci] {
                    line.fail_gate(4, *r != out, &c.case.label);
                }
            }
            line.gate_ms = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let control_runs: Vec<&CaseRun> = runs.iter().filter(|c| k.supports(variant, &c.case) && !c.case.edge).take(2).collect();
            let edge_runs: Vec<&CaseRun> = runs.iter().filter(|c| k.supports(variant, &c.case) && c.case.edge).collect();
            let controls = k.controls();
            let verdicts = each(gpu, controls, |ctl: &Control| -> Result<Option<bool>, GpuError> {
                let applies = match ctl.needs {
                    Needs::Any => true,
                    Needs::Fusion => fusion.as_ref().is_some_and(|f| f.plain_fuses),
                    Needs::Subnormals => preserves,
                };
                if !applies {
                    return Ok(None);
                }
                for c in if ctl.needs == Needs::Subnormals { &edge_runs } else { &control_runs } {
                    if caught(gpu, k, variant, c, ctl.id)? {
                        return Ok(Some(true));
                    }
                }
                Ok(Some(false))
            });
            for (ctl, verdict) in controls.iter().zip(verdicts) {
                let Some(red) = verdict? else {
                    line.controls_na += 1;
                    continue;
                };
                if red {
                    line.controls_red += 1;
                } else {
                    line.missed.push(ctl.name);
                }
            }
            line.control_ms = t.elapsed().as_secs_f64() * 1e3;
            line.pass = line.failures.is_empty();
            summary.push(line);
        }
    }
    summary.hash = opts.hash.then(|| format!("{:x}", hasher.finalize()));
    Ok(summary)
}
