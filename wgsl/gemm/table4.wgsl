// Grouped GEMM table binding after the bf16 operands.
@group(0) @binding(4) var<storage, read> table: array<u32>;
