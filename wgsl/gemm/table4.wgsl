// Grouped GEMM table and pick bindings after the bf16 operands, then a stack's second buffer: weight rows from W_SPLIT on are rows 0.. of w_hi.
@group(0) @binding(4) var<storage, read> table: array<u32>;
@group(0) @binding(5) var<storage, read> picks: array<f32>;
@group(0) @binding(6) var<storage, read> w_hi: array<vec4<u32>>;

// Whether this workgroup's entry lies in the second buffer (set from the entry before any weight load).
var<private> W_HI: bool = false;

fn w_at(i: u32) -> vec4<u32> {
    if (W_HI) { return w_hi[i]; }
    return w[i];
}
