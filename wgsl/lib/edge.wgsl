// Edge arithmetic (rule N7): the canonical flushes and zero signs, by bit manipulation; identical to src/numerics/edge.rs.

// 1 only in the contract's keep-subnormals control (every flush below then keeps its input); set by ls_init.
var<private> LS_KEEP: u32;

// The CONTROL value of the keep-subnormals control, the same in every kernel.
const LS_CONTROL_KEEP: u32 = 90u;

// A kernel's first call: the runtime zero of mul_rn and the keep-subnormals control.
fn ls_init(zero: u32, control: u32) {
    LS_ZERO = zero;
    LS_KEEP = select(0u, 1u, control == LS_CONTROL_KEEP);
}

// A subnormal or zero sum becomes +0 (compilers that assume no signed zeros fold 0.0 + x to x); everything else is kept.
fn ls_fl(x: f32) -> f32 {
    return select(x, 0.0, (bitcast<u32>(x) & 0x7f800000u) == 0u && LS_KEEP == 0u);
}

// A rounded product at or below 2^-126 in magnitude becomes the zero of its sign.
fn ls_flp(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    return bitcast<f32>(select(b, b & 0x80000000u, (b & 0x7fffffffu) <= 0x00800000u && LS_KEEP == 0u));
}

// A term of a sum below 2^-103 becomes +0, so every partial sum stays a multiple of 2^-126.
fn ls_term(x: f32) -> f32 {
    return select(x, 0.0, (bitcast<u32>(x) & 0x7fffffffu) < 0x0c000000u && LS_KEEP == 0u);
}

fn ls_term4(x: vec4<f32>) -> vec4<f32> {
    return select(x, vec4<f32>(0.0), (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) < vec4<u32>(0x0c000000u) & vec4<bool>(LS_KEEP == 0u));
}

// The product a * b as a term of a sum (kept from contraction like mul_rn): below 2^-103 it is +0.
fn ls_mul_term(a: f32, b: f32) -> f32 { return ls_term(bitcast<f32>(bitcast<u32>(a * b) ^ LS_ZERO)); }
fn ls_mul_term4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return ls_term4(bitcast<vec4<f32>>(bitcast<vec4<u32>>(a * b) ^ vec4<u32>(LS_ZERO))); }

// a + b and a - b, flushed.
fn ls_add(a: f32, b: f32) -> f32 { return ls_fl(a + b); }
fn ls_sub(a: f32, b: f32) -> f32 { return ls_fl(a - b); }

// A zero of either sign becomes +0 (the result of a max or min over values that may be zeros of both signs).
fn ls_pz(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    return bitcast<f32>(select(b, 0u, (b & 0x7fffffffu) == 0u));
}

// max(x, 0) with +0 for every zero and negative input.
fn ls_relu(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    return bitcast<f32>(select(b, 0u, (b & 0x80000000u) != 0u));
}
