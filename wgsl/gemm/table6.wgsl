// Grouped GEMM table binding after the scaled operands.
@group(0) @binding(6) var<storage, read> table: array<u32>;
