//! Contract output: one line per kernel variant, then the SUMMARY line.
use super::{FusionProbe, Footprint};
use crate::gpu::Gpu;
use std::fmt;

/// The portability baseline: the minimum over Apple M1 Metal, Vulkan 1.3 desktop and lavapipe.
pub const BASELINE: Footprint = Footprint { workgroup_size: 256, workgroup_bytes: 16384, bindings: 8 };

/// Results of one kernel variant.
#[derive(Clone, Debug)]
pub struct KernelLine {
    pub kernel: &'static str,
    pub variant: &'static str,
    pub cases: usize,
    pub margin: f64,
    pub failures: Vec<String>,
    pub controls_red: usize,
    pub controls_na: usize,
    pub missed: Vec<&'static str>,
    pub limit_problems: Vec<String>,
    pub pass: bool,
    pub gate_ms: f64,
    pub control_ms: f64,
}

impl KernelLine {
    pub(crate) fn new(kernel: &'static str, variant: &'static str) -> KernelLine {
        KernelLine {
            kernel,
            variant,
            cases: 0,
            margin: 0.0,
            failures: Vec::new(),
            controls_red: 0,
            controls_na: 0,
            missed: Vec::new(),
            limit_problems: Vec::new(),
            pass: false,
            gate_ms: 0.0,
            control_ms: 0.0,
        }
    }

    pub(crate) fn fail_gate(&mut self, gate: u32, failed: bool, case: &str) {
        if failed {
            self.failures.push(format!("gate {gate} on {case}"));
        }
    }
}

impl fmt::Display for KernelLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = if self.pass && self.missed.is_empty() && self.limit_problems.is_empty() { "ok  " } else { "FAIL" };
        write!(
            f,
            "{status} {:<22} {:<7} cases={:<3} margin={:.3} controls={} red, {} n/a",
            self.kernel, self.variant, self.cases, self.margin, self.controls_red, self.controls_na
        )?;
        if !self.failures.is_empty() {
            write!(f, " | failed: {}", self.failures.join(", "))?;
        }
        if !self.missed.is_empty() {
            write!(f, " | MISSED controls: {}", self.missed.join(", "))?;
        }
        if !self.limit_problems.is_empty() {
            write!(f, " | limits: {}", self.limit_problems.join(", "))?;
        }
        Ok(())
    }
}

/// All lines of one contract run.
#[derive(Clone, Debug)]
pub struct Summary {
    pub backend: String,
    pub device: String,
    pub seed: u64,
    pub fusion: String,
    /// The edge probe's line (`EdgeProbe`), or `n/a` on the CPU oracle.
    pub edges: String,
    pub lines: Vec<KernelLine>,
    /// Variants this device cannot run (MSL off Metal), as `kernel/variant`.
    pub not_run: Vec<String>,
    pub hash: Option<String>,
}

impl Summary {
    pub(crate) fn new(gpu: Option<&Gpu>, seed: u64, fusion: Option<&FusionProbe>) -> Summary {
        let (backend, device) = match gpu {
            Some(g) if g.is_emulated() => ("metal-emu".to_string(), g.info.name.clone()),
            Some(g) => (format!("{:?}", g.info.backend).to_lowercase(), g.info.name.clone()),
            None => ("cpu".to_string(), "CPU oracle".to_string()),
        };
        let fusion = fusion.map_or("n/a".to_string(), |p| p.to_string());
        Summary { backend, device, seed, fusion, edges: "n/a".to_string(), lines: Vec::new(), not_run: Vec::new(), hash: None }
    }

    pub(crate) fn push(&mut self, line: KernelLine) {
        println!("{line}");
        self.lines.push(line);
    }

    /// Checks a footprint against the baseline and the device's own limits.
    pub(crate) fn check_limits(&self, gpu: &Gpu, fp: Footprint) -> Vec<String> {
        let l = &gpu.limits;
        let mut p = Vec::new();
        if fp.workgroup_size > BASELINE.workgroup_size.min(l.max_compute_invocations_per_workgroup) {
            p.push(format!("workgroup size {}", fp.workgroup_size));
        }
        if fp.workgroup_bytes > BASELINE.workgroup_bytes.min(l.max_compute_workgroup_storage_size) {
            p.push(format!("workgroup memory {} B", fp.workgroup_bytes));
        }
        if fp.bindings > BASELINE.bindings.min(l.max_storage_buffers_per_shader_stage) {
            p.push(format!("{} storage bindings", fp.bindings));
        }
        p
    }

    /// Kernels counted once (by name).
    pub fn kernel_count(&self) -> usize {
        let mut names: Vec<&str> = self.lines.iter().map(|l| l.kernel).collect();
        names.dedup();
        names.len()
    }

    /// Whether everything passed: no failed gate, no missed control, no limit problem.
    pub fn ok(&self) -> bool {
        self.lines.iter().all(|l| l.pass && l.missed.is_empty() && l.limit_problems.is_empty())
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lines.len();
        let pass = self.lines.iter().filter(|l| l.pass).count();
        let red: usize = self.lines.iter().map(|l| l.controls_red).sum();
        let na: usize = self.lines.iter().map(|l| l.controls_na).sum();
        let missed: usize = self.lines.iter().map(|l| l.missed.len()).sum();
        let limits: usize = self.lines.iter().map(|l| l.limit_problems.len()).sum();
        let gate_ms: f64 = self.lines.iter().map(|l| l.gate_ms).sum();
        let control_ms: f64 = self.lines.iter().map(|l| l.control_ms).sum();
        write!(
            f,
            "SUMMARY backend={} device={:?} kernels={} variants={}: {} pass {}, {} fail; controls={}: {} red as planted, {} missed, {} n/a; limit problems={}; {} MSL variants not run here (Metal and metal-emu run them); fusion: {}; edges: {}; seed={:#x}; gates {:.0} ms, controls {:.0} ms",
            self.backend,
            self.device,
            self.kernel_count(),
            n,
            pass,
            if self.backend == "cpu" { "gate 1 (the oracle against the f64 reference)" } else { "gates 1-4" },
            n - pass,
            red + missed + na,
            red,
            missed,
            na,
            limits,
            self.not_run.len(),
            self.fusion,
            self.edges,
            self.seed,
            gate_ms,
            control_ms
        )
    }
}
