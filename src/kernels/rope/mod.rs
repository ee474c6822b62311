//! RoPE oracle (spec 2.5): interleaved pairs in the last rd dims of each head, rotated by host f32 cos/sin; elementwise, no reduction order.
pub mod contract;

use crate::kernels::dispatch::{bad_shape, grid64, key};
use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::numerics::edge::{add, flush, sub};
use crate::numerics::math::mul_rn;
use crate::numerics::round_bf16;

pub(crate) const ROPE: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "rope", variant: "ref", source: include_str!("../../../wgsl/rope/rope.wgsl") };
pub(crate) const ROPE_HALVES: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "rope_halves", variant: "ref", source: include_str!("../../../wgsl/rope/rope.wgsl") };
pub(crate) const ROPE_INVERSE: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "rope_inverse", variant: "ref", source: include_str!("../../../wgsl/rope/rope.wgsl") };

/// How the rotated dims pair up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairs {
    /// Dims 2i and 2i+1 (the backbone's interleaved RoPE).
    Interleaved,
    /// Dims i and i + rd/2 (the vision tower's split-half RoPE).
    Halves,
}

/// Records RoPE of x [rows, heads*head_dim] by cs [rows, rd] (cos rd/2 then sin rd/2, row i for row i) into y [rows, heads*head_dim] (bf16 values).
#[allow(clippy::too_many_arguments)]
pub fn record_rope(rec: &mut Recorder, x: &Buf, cs: &Buf, y: &Buf, rows: usize, heads: usize, head_dim: usize, rd: usize, inverse: bool, pairs: Pairs, control: u32) -> Result<(), GpuError> {
    if !rd.is_multiple_of(2) || rd > head_dim || heads == 0 {
        return Err(bad_shape("rope", format!("{heads} heads of {head_dim} with {rd} rope dims")));
    }
    let g = grid64(rows * heads * head_dim);
    let params = [rows as u32, heads as u32, head_dim as u32, rd as u32, u32::from(inverse), g[0]];
    let (shader, extra) = match (pairs, inverse) {
        (Pairs::Halves, _) => (ROPE_HALVES, vec![("HALVES", 1.0)]),
        (Pairs::Interleaved, true) => (ROPE_INVERSE, vec![]),
        (Pairs::Interleaved, false) => (ROPE, vec![]),
    };
    rec.dispatch(&key(shader, control, &extra), &params, &[Arg::Whole(x), Arg::Whole(cs), Arg::Whole(y)], g)
}

/// The cos/sin row of absolute position `pos`: `[cos_0 .. cos_{rd/2-1}, sin_0 .. sin_{rd/2-1}]`, each computed in f64 and rounded once.
pub fn table_row(pos: usize, inv_freq: &[f64]) -> Vec<f32> {
    let angles: Vec<f64> = inv_freq.iter().map(|&f| pos as f64 * f).collect();
    angles.iter().map(|a| flush(a.cos() as f32)).chain(angles.iter().map(|a| flush(a.sin() as f32))).collect()
}

/// Rotates one row of `heads` vectors of `head_dim`: pair i of the last `cs.len()` dims becomes `(a c - b s, a s + b c)` with unfused products and flushed sums (`s` negated when `inverse`); output rounded to bf16.
pub fn rotate(x: &[f32], cs: &[f32], heads: usize, head_dim: usize, inverse: bool, pairs: Pairs) -> Vec<f32> {
    let half = cs.len() / 2;
    let rd = 2 * half;
    let mut y: Vec<f32> = x.to_vec();
    for h in 0..heads {
        let base = h * head_dim + head_dim - rd;
        for i in 0..half {
            let (ia, ib) = match pairs {
                Pairs::Interleaved => (base + 2 * i, base + 2 * i + 1),
                Pairs::Halves => (base + i, base + half + i),
            };
            let (a, b) = (x[ia], x[ib]);
            let c = cs[i];
            let s = if inverse { -cs[half + i] } else { cs[half + i] };
            y[ia] = sub(mul_rn(a, c), mul_rn(b, s));
            y[ib] = add(mul_rn(a, s), mul_rn(b, c));
        }
    }
    y.iter_mut().for_each(|v| *v = round_bf16(*v));
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_rotation_undoes_the_rotation_to_within_bf16_rounding() {
        let inv = [1.0, 0.1, 0.01, 0.001];
        let cs = table_row(1234, &inv);
        let x: Vec<f32> = (0..32).map(|i| round_bf16(((i * 7 % 11) as f32 - 5.0) * 0.37)).collect();
        let y = rotate(&x, &cs, 2, 16, false, Pairs::Interleaved);
        assert_ne!(y, x);
        assert_eq!(&y[..8], &x[..8], "non-rope dims stay");
        let z = rotate(&y, &cs, 2, 16, true, Pairs::Interleaved);
        assert!(x.iter().zip(&z).all(|(a, b)| (a - b).abs() <= 0.02 * a.abs().max(1.0)), "{z:?}");
    }
}
