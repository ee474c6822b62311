//! The kernel contract (design/kernel-contract.md): registrations, gates 1-4, planted controls, limits, SUMMARY.
mod edge_probe;
mod gates;
mod probe;
mod report;
mod rng;

pub use gates::{run_contract, ContractOptions};
pub use edge_probe::{probe_edges, EdgeProbe, EDGE_SHADER};
pub use probe::{fusion_inputs, probe_fusion, FusionProbe, PROBE_SHADER};
pub use report::Summary;

pub use rng::Rng;

use crate::gpu::{Gpu, GpuError, Lang, Shader};

/// One shape a kernel is run at.
#[derive(Clone, Debug)]
pub struct Case {
    pub label: String,
    pub rows: usize,
    pub n: usize,
    pub k: usize,
    /// Inputs are edge values rather than random ones.
    pub edge: bool,
}

impl Case {
    /// A random-input case of `rows` rows and dimensions `n`, `k`.
    pub fn new(label: &str, rows: usize, n: usize, k: usize) -> Case {
        Case { label: label.to_string(), rows, n, k, edge: false }
    }

    /// The same case with edge inputs.
    pub fn edge(mut self) -> Case {
        self.edge = true;
        self.label.push_str("/edge");
        self
    }
}

/// One input tensor: its bytes, and its row stride in bytes when it is split by rows.
#[derive(Clone, Debug)]
pub struct Data {
    pub bytes: Vec<u8>,
    pub row_bytes: Option<usize>,
}

impl Data {
    /// Per-row data of f32 values.
    pub fn rows_f32(v: &[f32], per_row: usize) -> Data {
        Data { bytes: bytemuck::cast_slice(v).to_vec(), row_bytes: Some(per_row * 4) }
    }

    /// Data shared by every row (weights).
    pub fn shared(bytes: Vec<u8>) -> Data {
        Data { bytes, row_bytes: None }
    }

    /// The values as f32 (the bytes must hold whole words).
    pub fn f32s(&self) -> Vec<f32> {
        bytemuck::pod_collect_to_vec(&self.bytes)
    }
}

/// The inputs of one case.
#[derive(Clone, Debug)]
pub struct Inputs {
    pub data: Vec<Data>,
}

impl Inputs {
    /// Rows `lo..hi` of every per-row input; shared inputs unchanged.
    pub fn rows(&self, lo: usize, hi: usize) -> Inputs {
        let data = self
            .data
            .iter()
            .map(|d| match d.row_bytes {
                Some(rb) => Data { bytes: d.bytes[lo * rb..hi * rb].to_vec(), row_bytes: Some(rb) },
                None => d.clone(),
            })
            .collect();
        Inputs { data }
    }
}

/// Outputs as 32-bit words, one vector per output tensor.
pub type Outputs = Vec<Vec<u32>>;

/// The device behaviour a control is aimed at; elsewhere it is `n/a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Every device must catch it.
    Any,
    /// A device that contracts unguarded products.
    Fusion,
    /// A device that keeps subnormals (run over the edge cases, which drive values below 2^-126).
    Subnormals,
}

/// A planted defect selected by the override constant `CONTROL`.
#[derive(Clone, Copy, Debug)]
pub struct Control {
    pub id: u32,
    pub name: &'static str,
    pub needs: Needs,
}

impl Control {
    /// A control every device must catch.
    pub const fn new(id: u32, name: &'static str) -> Control {
        Control { id, name, needs: Needs::Any }
    }

    /// A control only a fusing device can catch.
    pub const fn fusion(id: u32, name: &'static str) -> Control {
        Control { id, name, needs: Needs::Fusion }
    }
}

/// The control every kernel with a canonical flush carries: `CONTROL == 90` (LS_CONTROL_KEEP in wgsl/lib/edge.wgsl) turns every flush and term drop into the identity.
pub const KEEP_SUBNORMALS: Control = Control { id: 90, name: "keep subnormals", needs: Needs::Subnormals };

/// Workgroup resources a variant uses, checked against the portability baseline and the device.
#[derive(Clone, Copy, Debug)]
pub struct Footprint {
    pub workgroup_size: u32,
    pub workgroup_bytes: u32,
    pub bindings: u32,
}

/// One implementation of a kernel: its name in reports and the shaders it dispatches, each tagged by language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub name: &'static str,
    pub shaders: &'static [Shader],
}

impl Variant {
    /// A variant named `name` dispatching `shaders`.
    pub const fn new(name: &'static str, shaders: &'static [Shader]) -> Variant {
        Variant { name, shaders }
    }

    /// The language of its sources (WGSL for the reference variants).
    pub fn lang(&self) -> Lang {
        self.shaders.first().map_or(Lang::Wgsl, |s| s.lang)
    }
}

/// A registered kernel: the op, its oracle, its f64 reference, its bound, its shapes, its variants and controls.
pub trait Kernel: Sync {
    /// Registered name, e.g. `gemm_e4m3`.
    fn name(&self) -> &'static str;
    /// Variants; the first is the WGSL reference the others must equal.
    fn variants(&self) -> &'static [Variant];
    /// Whether `variant` handles `case` (fast paths may cover a range of rows only).
    fn supports(&self, _variant: &Variant, _case: &Case) -> bool {
        true
    }
    /// Whether the forward dispatches this kernel (the numerics library's probes and the sampler's ops are proven but not dispatched).
    fn in_forward(&self) -> bool {
        true
    }
    /// Shapes: the model's real ones, the tiny model's, awkward ones; fewer rows when `quick`.
    fn cases(&self, quick: bool) -> Vec<Case>;
    /// Random (or edge) inputs for a case.
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs;
    /// Output words per row, per output tensor (for slicing rows in gate 3).
    fn out_row_words(&self, case: &Case) -> Vec<usize>;
    /// The CPU oracle: the bits every implementation must produce.
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs;
    /// The f64 reference values, in the order `values` decodes outputs.
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64>;
    /// Per-element error bound for gate 1.
    fn bound(&self, case: &Case, inputs: &Inputs, reference: &[f64]) -> Vec<f64>;
    /// Output words decoded to the values gate 1 compares with the reference.
    fn values(&self, case: &Case, outputs: &Outputs) -> Vec<f64>;
    /// Runs `variant` on the device with control `control` (0 = none), outputs poisoned before the dispatch.
    fn run(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError>;
    /// Whether the kernel's other output mode agrees with `out`, the outputs `run` gave under `control` (gate 2 of the mode; true when there is none).
    fn other_mode(&self, _gpu: &Gpu, _variant: &Variant, _case: &Case, _inputs: &Inputs, _control: u32, _out: &Outputs) -> Result<bool, GpuError> {
        Ok(true)
    }
    /// The planted controls.
    fn controls(&self) -> &'static [Control];
    /// Workgroup resources of a variant.
    fn footprint(&self, variant: &Variant) -> Footprint;
    /// Whether rows are independent (gate 3 splits them); false for ops that reduce over rows.
    fn row_invariant(&self) -> bool {
        true
    }
}

/// The word every output is filled with before a dispatch: a NaN as f32, out of range as an index.
pub const POISON: u32 = 0x7fc0_dead;
