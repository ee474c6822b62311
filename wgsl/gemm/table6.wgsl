// Grouped GEMM table and pick bindings after the scaled operands.
@group(0) @binding(6) var<storage, read> table: array<u32>;
@group(0) @binding(7) var<storage, read> picks: array<f32>;
