//! Pillow's bicubic `ImagingResample` for 8-bit RGB, byte for byte: f64 filter weights, 22-bit fixed-point taps, a horizontal pass then a vertical pass.
//!
//! Ported from Pillow's `src/libImaging/Resample.c` (`precompute_coeffs`, `normalize_coeffs_8bpc`,
//! `ImagingResampleHorizontal_8bpc`, `ImagingResampleVertical_8bpc`, `ImagingResampleInner`). After the
//! weights everything is integer arithmetic, so every machine gives the same bytes.

use super::{Rgb, RgbRef};

/// Fractional bits of a fixed-point tap: 8 bits of result and 2 of headroom in an i32.
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Support of the bicubic kernel in source pixels at scale 1.
const BICUBIC_SUPPORT: f64 = 2.0;

/// Pillow's bicubic convolution kernel with a = -0.5.
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = if x < 0.0 { -x } else { x };
    if x < 1.0 {
        return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    }
    if x < 2.0 {
        return (((x - 5.0) * x + 8.0) * x - 4.0) * A;
    }
    0.0
}

/// Per output pixel, the first source pixel and the fixed-point taps over the following `taps.len()` pixels.
struct Coeffs {
    /// Taps per output pixel, zero-padded to the widest window.
    ksize: usize,
    /// (first source index, window length) per output pixel.
    bounds: Vec<(usize, usize)>,
    /// `ksize` taps per output pixel.
    taps: Vec<i32>,
}

/// `precompute_coeffs` over the box `[in0, in1)` then `normalize_coeffs_8bpc`.
fn coeffs(in_size: u32, in0: f32, in1: f32, out_size: u32) -> Coeffs {
    let scale = f64::from(in1 - in0) / f64::from(out_size);
    let filterscale = if scale < 1.0 { 1.0 } else { scale };
    let support = BICUBIC_SUPPORT * filterscale;
    let ksize = support.ceil() as usize * 2 + 1;
    let inv_filterscale = 1.0 / filterscale;
    let mut bounds = Vec::with_capacity(out_size as usize);
    let mut taps = vec![0i32; out_size as usize * ksize];
    let mut k = vec![0f64; ksize];
    for xx in 0..out_size as usize {
        let center = f64::from(in0) + (xx as f64 + 0.5) * scale;
        // C's (int) truncates toward zero; the clamps follow.
        let xmin = ((center - support + 0.5) as i64).max(0);
        let xmax = ((center + support + 0.5) as i64).min(i64::from(in_size)) - xmin;
        let n = (xmax.max(0) as usize).min(ksize);
        let mut ww = 0.0;
        for (x, kx) in k.iter_mut().enumerate().take(n) {
            let w = bicubic(((x as i64 + xmin) as f64 - center + 0.5) * inv_filterscale);
            *kx = w;
            ww += w;
        }
        if ww != 0.0 {
            for kx in k.iter_mut().take(n) {
                *kx /= ww;
            }
        }
        for kx in k.iter_mut().skip(n) {
            *kx = 0.0;
        }
        let one = f64::from(1u32 << PRECISION_BITS);
        for (t, &kx) in taps[xx * ksize..(xx + 1) * ksize].iter_mut().zip(&k) {
            *t = if kx < 0.0 { (-0.5 + kx * one) as i32 } else { (0.5 + kx * one) as i32 };
        }
        bounds.push((xmin as usize, n));
    }
    Coeffs { ksize, bounds, taps }
}

/// Pillow's `clip8`: the accumulator's integer part clamped to 0..=255.
#[inline]
fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Horizontal pass over source rows `row0..row0 + rows` into an `out_w`-wide image.
fn horizontal(src: RgbRef<'_>, row0: usize, rows: usize, c: &Coeffs) -> Rgb {
    let out_w = c.bounds.len();
    let in_stride = src.width as usize * 3;
    let mut data = vec![0u8; out_w * rows * 3];
    for yy in 0..rows {
        let line = &src.data[(yy + row0) * in_stride..(yy + row0 + 1) * in_stride];
        let out = &mut data[yy * out_w * 3..(yy + 1) * out_w * 3];
        for (xx, &(xmin, n)) in c.bounds.iter().enumerate() {
            let k = &c.taps[xx * c.ksize..xx * c.ksize + n];
            let mut ss = [1i32 << (PRECISION_BITS - 1); 3];
            for (x, &kx) in k.iter().enumerate() {
                let p = &line[(x + xmin) * 3..(x + xmin) * 3 + 3];
                for ch in 0..3 {
                    ss[ch] = ss[ch].wrapping_add(i32::from(p[ch]).wrapping_mul(kx));
                }
            }
            out[xx * 3..xx * 3 + 3].copy_from_slice(&[clip8(ss[0]), clip8(ss[1]), clip8(ss[2])]);
        }
    }
    Rgb { width: out_w as u32, height: rows as u32, data }
}

/// Vertical pass: each output row from the source rows its bounds name (already shifted to `src`).
fn vertical(src: RgbRef<'_>, c: &Coeffs) -> Rgb {
    let stride = src.width as usize * 3;
    let out_h = c.bounds.len();
    let mut data = vec![0u8; stride * out_h];
    let mut ss = vec![0i32; stride];
    for (yy, &(ymin, n)) in c.bounds.iter().enumerate() {
        let k = &c.taps[yy * c.ksize..yy * c.ksize + n];
        ss.fill(1i32 << (PRECISION_BITS - 1));
        for (y, &ky) in k.iter().enumerate() {
            let line = &src.data[(y + ymin) * stride..(y + ymin + 1) * stride];
            // Summing row by row adds each output pixel's terms in Pillow's order (y ascending).
            for (s, &p) in ss.iter_mut().zip(line) {
                *s = s.wrapping_add(i32::from(p).wrapping_mul(ky));
            }
        }
        for (o, &s) in data[yy * stride..(yy + 1) * stride].iter_mut().zip(&ss) {
            *o = clip8(s);
        }
    }
    Rgb { width: src.width, height: out_h as u32, data }
}

/// `Image.resize((out_w, out_h), Image.BICUBIC)` of an RGB image, as Pillow computes it.
pub fn resize_bicubic(src: RgbRef<'_>, out_w: u32, out_h: u32) -> Rgb {
    let copy = || Rgb { width: src.width, height: src.height, data: src.data.to_vec() };
    if (out_w, out_h) == (src.width, src.height) {
        return copy();
    }
    if out_w == 0 || out_h == 0 || src.width == 0 || src.height == 0 {
        // Pillow refuses these; callers check first, so this only keeps the function total.
        return Rgb { width: out_w, height: out_h, data: vec![0; out_w as usize * out_h as usize * 3] };
    }
    let need_horizontal = out_w != src.width;
    let need_vertical = out_h != src.height;
    // Pillow passes the box (0, 0, w, h) as C floats.
    let mut vert = coeffs(src.height, 0.0, src.height as f32, out_h);
    let first = vert.bounds[0].0;
    let last = vert.bounds.last().map_or(0, |&(s, n)| s + n);
    let mut out = None;
    if need_horizontal {
        let horiz = coeffs(src.width, 0.0, src.width as f32, out_w);
        for b in &mut vert.bounds {
            b.0 -= first;
        }
        out = Some(horizontal(src, first, last - first, &horiz));
    }
    if need_vertical {
        let input = out.as_ref().map_or(src, Rgb::view);
        out = Some(vertical(input, &vert));
    }
    out.unwrap_or_else(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(w: u32, h: u32, seed: u64) -> Rgb {
        let mut s = seed;
        let data = (0..w as usize * h as usize * 3)
            .map(|_| {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (s >> 56) as u8
            })
            .collect();
        Rgb { width: w, height: h, data }
    }

    #[test]
    fn the_kernel_is_one_at_zero_and_zero_at_the_integers() {
        assert_eq!(bicubic(0.0), 1.0);
        assert_eq!(bicubic(1.0), 0.0);
        assert_eq!(bicubic(-1.0), 0.0);
        assert_eq!(bicubic(2.0), 0.0);
        assert_eq!(bicubic(0.5), 0.5625);
        assert_eq!(bicubic(1.5), -0.0625);
    }

    #[test]
    fn the_taps_of_each_output_pixel_sum_to_one_in_fixed_point() {
        for (inn, out) in [(100u32, 37u32), (37, 100), (4000, 1134), (5, 714), (3, 3)] {
            let c = coeffs(inn, 0.0, inn as f32, out);
            for xx in 0..out as usize {
                let sum: i64 = c.taps[xx * c.ksize..(xx + 1) * c.ksize].iter().map(|&t| i64::from(t)).sum();
                assert!((sum - (1 << PRECISION_BITS)).abs() <= c.ksize as i64, "{inn}->{out} pixel {xx}: {sum}");
                let (s, n) = c.bounds[xx];
                assert!(s + n <= inn as usize && n > 0);
            }
        }
    }

    #[test]
    fn a_constant_image_stays_constant_at_any_scale() {
        let img = Rgb { width: 37, height: 23, data: vec![200; 37 * 23 * 3] };
        for (w, h) in [(10, 7), (100, 61), (37, 5), (3, 23)] {
            let out = resize_bicubic(img.view(), w, h);
            assert!(out.data.iter().all(|&v| v == 200), "{w}x{h}");
        }
    }

    #[test]
    fn one_axis_resizes_run_a_single_pass() {
        let img = noise(31, 17, 7);
        // Only the width changes: rows resample independently, so each output row is the resize of its input row alone.
        let out = resize_bicubic(img.view(), 13, 17);
        for y in 0..17usize {
            let row = Rgb { width: 31, height: 1, data: img.data[y * 93..(y + 1) * 93].to_vec() };
            assert_eq!(resize_bicubic(row.view(), 13, 1).data, out.data[y * 39..(y + 1) * 39], "row {y}");
        }
    }

    #[test]
    fn the_same_size_is_a_copy() {
        let img = noise(9, 4, 3);
        assert_eq!(resize_bicubic(img.view(), 9, 4), img);
    }
}
