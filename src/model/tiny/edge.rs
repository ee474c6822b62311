//! The edge-values variant of a random checkpoint: the same draws rescaled by powers of two so the residual stream lives just above 2^-126 (products in collapse, expand and the mix product fall subnormal), with norm weights, mix scales and post biases compensating so the logits keep the random model's magnitude, and the engram's wkv zero.

/// The residual stream is the random model's scaled by 2^-STREAM_EXP: the embedding's std of 0.05 lands near 2^-120, so a share of the products of stream values with mix coefficients below 1 is subnormal.
pub const STREAM_EXP: i32 = 116;
/// Backbone and final norm weights take 2^NORM_EXP: the mean square underflows, so a norm multiplies by rsqrt(eps = 1e-20) = 2^33.2, and this gain gives its outputs the random model's magnitude.
pub const NORM_EXP: i32 = STREAM_EXP - 31;
/// The mix weights `hc_*_fn` take 2^FN_EXP, which leaves a fair share of the mix product's terms subnormal.
pub const FN_EXP: i32 = 4;
/// The mix scales `hc_*_scale` take 2^SCALE_EXP, so the scaled mixes have the random model's magnitude (its stream rms is about 2^-4.3).
pub const SCALE_EXP: i32 = STREAM_EXP - 29 - FN_EXP;

/// Which values a generated checkpoint holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Values {
    /// The random init of spec 1.6.
    #[default]
    Random,
    /// The same draws rescaled to drive activations into subnormal range (see the module doc).
    Edge,
}

/// Exact power of two 2^e for -126 <= e <= 127.
fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// Whether `name` is a backbone layer tensor whose last part is `last`.
fn backbone(name: &str, last: &str) -> bool {
    name.starts_with("layers.") && name.rsplit('.').next() == Some(last)
}

/// Rescales the draws of tensor `name` in place for [`Values::Edge`]; subnormal results become zeros of their sign, so the stored values are canonical.
pub(super) fn adjust(name: &str, values: &mut [f32]) {
    let stem = name.strip_suffix(".weight").unwrap_or(name);
    let scale = |values: &mut [f32], e: i32| values.iter_mut().for_each(|v| *v *= pow2(e));
    if name == "embed.weight" {
        scale(values, -STREAM_EXP);
    } else if name == "norm.weight" || (name.starts_with("layers.") && (stem.ends_with(".attn_norm") || stem.ends_with(".ffn_norm"))) {
        scale(values, NORM_EXP);
    } else if backbone(name, "hc_attn_fn") || backbone(name, "hc_ffn_fn") {
        scale(values, FN_EXP);
    } else if backbone(name, "hc_attn_scale") || backbone(name, "hc_ffn_scale") {
        scale(values, SCALE_EXP);
    } else if backbone(name, "hc_attn_base") || backbone(name, "hc_ffn_base") {
        // 2 sigmoid(z - (E + 1) ln 2) is about 2^-E e^z, so layer outputs join the stream at its scale
        let hc = ((values.len() + 1) as f64).sqrt() as usize - 1;
        let shift = (f64::from(STREAM_EXP + 1) * std::f64::consts::LN_2) as f32;
        values[hc..2 * hc].iter_mut().for_each(|v| *v -= shift);
    } else if name.starts_with("layers.") && name.ends_with(".engram.wkv.weight") {
        // the engram adds its value to the stream unscaled, which would lift the stream out of the edge range
        values.fill(0.0);
    }
    for v in values.iter_mut() {
        if v.is_subnormal() {
            *v = 0.0f32.copysign(*v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_rescaling_is_by_powers_of_two_flushes_subnormals_and_shifts_only_the_post_biases() {
        let mut e = vec![0.05f32, -0.05, 1e-4, -3e-4, 0.0];
        adjust("embed.weight", &mut e);
        assert_eq!(e[0], 0.05 * pow2(-STREAM_EXP));
        assert_eq!(e[1].to_bits(), (-0.05f32 * pow2(-STREAM_EXP)).to_bits());
        assert!((1e-4f32 * pow2(-STREAM_EXP)).is_subnormal());
        assert_eq!((e[2].to_bits(), e[3].to_bits(), e[4].to_bits()), (0, 0x8000_0000, 0), "subnormal products become zeros of their sign");
        let mut n = vec![1.0f32, 0.97];
        adjust("layers.3.attn_norm.weight", &mut n);
        assert_eq!(n, [pow2(NORM_EXP), 0.97 * pow2(NORM_EXP)]);
        let mut kv = vec![1.0f32; 3];
        adjust("layers.2.attn.kv_norm.weight", &mut kv);
        assert_eq!(kv, [1.0; 3], "inner norms act on normal-sized activations and keep their weights");
        let mut base: Vec<f32> = (0..24).map(|i| i as f32 * 0.01).collect();
        let was = base.clone();
        adjust("layers.0.hc_ffn_base", &mut base);
        let shifted: Vec<usize> = (0..24).filter(|&i| base[i] != was[i]).collect();
        assert_eq!(shifted, [4, 5, 6, 7], "post biases only (hc 4)");
        assert!((base[4] - was[4] + 81.09).abs() < 0.01, "2 sigmoid(z - 117 ln 2) is about 2^-116 e^z");
        let mut wkv = vec![0.3f32; 4];
        adjust("layers.1.engram.wkv.weight", &mut wkv);
        assert_eq!(wkv, [0.0; 4]);
    }
}
