//! Software transcendentals (rule N5), identical in Rust and wgsl/lib/math.wgsl.

/// The IEEE product rounded on its own (Rust never contracts).
#[inline(always)]
pub fn mul_rn(a: f32, b: f32) -> f32 {
    a * b
}
