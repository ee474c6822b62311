// Grouped GEMM table and pick bindings after the bf16 operands.
@group(0) @binding(4) var<storage, read> table: array<u32>;
@group(0) @binding(5) var<storage, read> picks: array<f32>;
