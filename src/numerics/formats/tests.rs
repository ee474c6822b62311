//! Exhaustive and tie-class tests of the format conversions against an independent f64 grid search.
use super::*;

/// Nearest grid code by f64 distance, ties to the even code, saturating at the grid's top.
fn nearest_code(x: f64, grid: &[(u32, f64)]) -> u32 {
    let a = x.abs();
    let top = grid.last().unwrap();
    if a >= top.1 {
        return top.0;
    }
    let mut best = grid[0];
    for &(c, v) in grid {
        let (db, dv) = ((a - best.1).abs(), (a - v).abs());
        if dv < db || (dv == db && c % 2 == 0) {
            best = (c, v);
        }
    }
    best.0
}

fn grid(codes: impl Iterator<Item = u32>, dec: impl Fn(u32) -> f32) -> Vec<(u32, f64)> {
    codes.map(|c| (c, f64::from(dec(c)))).collect()
}

/// Every representable point, every midpoint, and one f32 ulp either side of each.
fn tie_class_inputs(g: &[(u32, f64)]) -> Vec<f32> {
    let mut xs = vec![0.0f32, -0.0, f32::INFINITY, f32::MAX, 1e-40, f32::MIN_POSITIVE];
    for w in g.windows(2) {
        for v in [w[0].1, (w[0].1 + w[1].1) / 2.0, w[1].1] {
            let f = v as f32;
            for y in [f, f32::from_bits(f.to_bits().wrapping_add(1)), f32::from_bits(f.to_bits().saturating_sub(1))] {
                xs.push(y);
                xs.push(-y);
            }
        }
    }
    xs.push(g.last().unwrap().1 as f32 * 1.5);
    xs
}

#[test]
fn e4m3_encode_is_nearest_even_and_saturating_on_every_tie_class() {
    let g = grid(0..0x7f, |c| e4m3_to_f32(c as u8));
    for x in tie_class_inputs(&g) {
        let want = nearest_code(f64::from(x), &g) as u8 | if x.is_sign_negative() { 0x80 } else { 0 };
        assert_eq!(e4m3_from_f32(x), want, "x={x:e} bits={:#x}", x.to_bits());
    }
}

#[test]
fn e2m1_encode_is_nearest_even_on_every_tie_class() {
    let g = grid(0..8, |c| e2m1_to_f32(c as u8));
    for x in tie_class_inputs(&g) {
        let want = nearest_code(f64::from(x), &g) as u8 | if x.is_sign_negative() { 8 } else { 0 };
        assert_eq!(e2m1_from_f32(x), want, "x={x}");
    }
    for (x, c) in [(0.25f32, 0u8), (0.75, 2), (1.25, 2), (1.75, 4), (2.5, 4), (3.5, 6), (5.0, 6), (7.0, 7)] {
        assert_eq!(e2m1_from_f32(x), c, "spec tie {x}");
    }
}

#[test]
fn every_e4m3_e2m1_e8m0_code_decodes_to_its_formula_value() {
    for c in 0..=255u8 {
        let e = (c >> 3) & 15;
        let m = f64::from(c & 7);
        let v = if e == 0 { m * 2f64.powi(-9) } else { (1.0 + m / 8.0) * 2f64.powi(i32::from(e) - 7) };
        let v = if c & 0x80 != 0 { -v } else { v };
        let got = e4m3_to_f32(c);
        if c & 0x7f == 0x7f {
            assert!(got.is_nan());
        } else {
            assert_eq!(f64::from(got), v, "code {c:#x}");
            assert_eq!(e4m3_from_f32(got), c, "round trip {c:#x}");
        }
    }
    let mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    for c in 0..16u8 {
        let v = mags[usize::from(c & 7)] * if c & 8 != 0 { -1.0 } else { 1.0 };
        assert_eq!(f64::from(e2m1_to_f32(c)), v, "code {c}");
    }
    for b in 0..=254u8 {
        assert_eq!(f64::from(e8m0_to_f32(b)), 2f64.powi(i32::from(b) - 127));
    }
    assert!(e8m0_to_f32(255).is_nan());
}

#[test]
fn bf16_encode_is_nearest_even_for_every_bf16_tie_class() {
    for h in 0..=0xffffu32 {
        let base = h << 16;
        if ((base >> 23) & 0xff) == 0xff {
            continue;
        }
        for off in [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff] {
            let x = f32::from_bits(base | off);
            let lo = f64::from(f32::from_bits(base));
            let hi_bits = base + 0x1_0000;
            let want = if ((hi_bits >> 23) & 0xff) == 0xff && (hi_bits & 0x7f_ffff) != 0 {
                continue;
            } else {
                let hi = if (hi_bits & 0x7fff_ffff) == 0x7f80_0000 { 2f64.powi(128).copysign(lo) } else { f64::from(f32::from_bits(hi_bits)) };
                let (dl, dh) = ((f64::from(x) - lo).abs(), (hi - f64::from(x)).abs());
                if dl < dh || (dl == dh && h % 2 == 0) { h } else { h + 1 }
            };
            assert_eq!(u32::from(bf16_from_f32(x)), want & 0xffff, "x bits {:#x}", x.to_bits());
        }
        assert_eq!(bf16_to_f32(h as u16).to_bits(), base);
    }
    assert!(bf16_to_f32(bf16_from_f32(f32::NAN)).is_nan());
}

#[test]
fn act_scale_exp_equals_the_official_division_then_bit_ceil() {
    let official = |amax: f32| ceil_log2_bits(amax.max(1e-4) / 448.0);
    let mut s = 0x9e37_79b9u32;
    for k in -40..60 {
        let b = (448.0f64 * 2f64.powi(k)) as f32;
        for x in [b, f32::from_bits(b.to_bits() + 1), f32::from_bits(b.to_bits() - 1), b * 1.0001, b * 0.5 * 1.0001] {
            assert_eq!(act_scale_exp(x), official(x), "amax {x:e}");
        }
    }
    for _ in 0..1_000_000 {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        let x = f32::from_bits(s & 0x7f7f_ffff);
        assert_eq!(act_scale_exp(x), official(x), "amax {x:e}");
    }
    assert_eq!(act_scale_exp(0.0), -22);
}
