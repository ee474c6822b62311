//! Accuracy against f64 references, edge values, subnormal-free products, exact two_prod and unfused mul_rn.
use super::*;
use std::cell::Cell;

thread_local! {
    static SUBNORMAL_PRODUCTS: Cell<u64> = const { Cell::new(0) };
}

/// Counts products with a subnormal operand or result (devices differ in flushing them).
pub(super) fn watch(a: f32, b: f32) {
    let sub = |v: f32| v != 0.0 && v.abs() < f32::MIN_POSITIVE;
    if sub(a) || sub(b) || sub(a * b) {
        SUBNORMAL_PRODUCTS.with(|c| c.set(c.get() + 1));
    }
}

fn take_subnormal_count() -> u64 {
    SUBNORMAL_PRODUCTS.with(|c| c.replace(0))
}

/// xorshift64* stream.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn bits(&mut self) -> f32 {
        f32::from_bits((self.next() >> 32) as u32)
    }
    pub(crate) fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (lo as f64 + u * (hi as f64 - lo as f64)) as f32
    }
}

/// Position in the ordered set {0} + normal f32s, so 0 and the smallest normal are 1 apart.
fn ord(x: f32) -> i64 {
    if x.abs() < f32::MIN_POSITIVE {
        return 0;
    }
    let m = i64::from(x.to_bits() & 0x7fff_ffff) - 0x0080_0000 + 1;
    if x < 0.0 {
        -m
    } else {
        m
    }
}

/// The f64 result rounded to f32, with results below the smallest normal taken as zero.
fn expected(r: f64) -> f32 {
    if r.abs() < f64::from(f32::MIN_POSITIVE) {
        0.0
    } else {
        r as f32
    }
}

/// Subnormal inputs count as zero.
fn flush(x: f32) -> f32 {
    if x.abs() < f32::MIN_POSITIVE {
        0.0
    } else {
        x
    }
}

fn ulps(got: f32, want: f32) -> i64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() { 0 } else { i64::MAX };
    }
    (ord(got) - ord(want)).abs()
}

fn next_up(x: f32, k: i32) -> f32 {
    let mut v = x;
    for _ in 0..k.abs() {
        let b = v.to_bits();
        let up = (k > 0) == (v >= 0.0);
        v = if v == 0.0 {
            f32::from_bits(if k > 0 { 1 } else { 0x8000_0001 })
        } else {
            f32::from_bits(if up { b + 1 } else { b - 1 })
        };
    }
    v
}

/// Edge values with their two neighbours each way and their negations.
fn around(points: &[f32]) -> Vec<f32> {
    let mut v = Vec::new();
    for &p in points {
        for k in -2..=2 {
            let q = next_up(p, k);
            v.push(q);
            v.push(-q);
        }
    }
    v
}

/// Common edges: zeros, tiny values, thresholds of the small-argument branches, +-1, the largest finite.
fn common_edges() -> Vec<f32> {
    let mut pts = vec![0.0, f32::MIN_POSITIVE, 1e-30, 1.0, 2.0, 0.5, f32::MAX, 1e30, 1e-10];
    for e in [-126, -100, -64, -60, -40, -30, -26, -25, -24, -12, 10, 20, 63, 64, 100, 126, 127] {
        pts.push(2f32.powi(e));
    }
    around(&pts)
}

/// Inputs: half uniform bit patterns, half uniform values on [lo, hi], then the edges; only those `keep` accepts.
fn inputs(seed: u64, lo: f32, hi: f32, edges: Vec<f32>, keep: impl Fn(f32) -> bool) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut v = Vec::with_capacity(1 << 20);
    while v.len() < 1 << 19 {
        let x = rng.bits();
        if x.is_finite() && keep(x) {
            v.push(x);
        }
    }
    while v.len() < 1 << 20 {
        let x = rng.uniform(lo, hi);
        if keep(x) {
            v.push(x);
        }
    }
    v.extend(edges.into_iter().filter(|&x| x.is_finite() && keep(x)));
    v
}

/// Max ulp of `f` against `reference` over `xs`; also asserts no subnormal output and no subnormal product.
fn max_ulp<T: Copy + std::fmt::Debug>(name: &str, xs: &[T], f: impl Fn(T) -> f32, reference: impl Fn(T) -> f64) -> i64 {
    take_subnormal_count();
    let (mut worst, mut at, mut subs, mut sub_at) = (0i64, None, 0u64, None);
    for &x in xs {
        let got = f(x);
        let s = take_subnormal_count();
        if s > 0 {
            (subs, sub_at) = (subs + s, Some(x));
        }
        assert!(!(got != 0.0 && got.abs() < f32::MIN_POSITIVE), "{name}({x:?}) = {got:e} is subnormal");
        let d = ulps(got, expected(reference(x)));
        if d > worst {
            (worst, at) = (d, Some(x));
        }
    }
    eprintln!("{name}: max {worst} ulp (at {at:?}) over {} inputs", xs.len());
    assert_eq!(subs, 0, "{name}: {subs} products had a subnormal operand or result, last at {sub_at:?}");
    if let Some(x) = at.filter(|_| worst > 2) {
        panic!("{name}: {worst} ulp at {x:?}: got {:e}, want {:e}", f(x), expected(reference(x)));
    }
    worst
}

/// max_ulp for a one-argument function whose f64 reference sees subnormal inputs as zero.
fn unary(name: &str, xs: &[f32], f: fn(f32) -> f32, reference: impl Fn(f64) -> f64) -> i64 {
    max_ulp(name, xs, f, |x| reference(f64::from(flush(x))))
}

fn sigmoid64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// erf in f64 from the all-positive series 2/sqrt(pi) e^(-x^2) sum 2^n x^(2n+1) / (2n+1)!!.
fn erf64(x: f64) -> f64 {
    let a = x.abs();
    if a > 6.0 {
        return 1f64.copysign(x);
    }
    let a2 = a * a;
    let (mut term, mut sum, mut n) = (a, a, 0.0);
    while term > sum * 1e-18 {
        n += 1.0;
        term *= 2.0 * a2 / (2.0 * n + 1.0);
        sum += term;
    }
    (std::f64::consts::FRAC_2_SQRT_PI * (-a2).exp() * sum).copysign(x)
}

#[test]
fn erf_reference_matches_mpmath_values() {
    let known = [
        (1e-3, 0.0011283787909692365),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (2.0, 0.9953222650189527),
        (3.5, 0.9999992569016276),
        (3.9, 0.9999999652077514),
        (-0.7, -0.6778011938374184),
    ];
    for (x, want) in known {
        let got = erf64(x);
        assert!(((got - want) / want).abs() < 1e-15, "erf64({x}) = {got}, mpmath {want}");
    }
}

/// Points 2^k * c for every exponent k in range, with neighbours: reduction-interval boundaries.
fn scaled(c: f32, k_lo: i32, k_hi: i32) -> Vec<f32> {
    around(&(k_lo..=k_hi).map(|k| c * 2f32.powi(k)).filter(|v| v.is_normal()).collect::<Vec<_>>())
}

#[test]
fn exp2_within_2_ulp_of_f64() {
    let mut e = common_edges();
    e.extend(around(&[-126.0, -125.5, 127.5, 128.0, 130.0, -130.0, 0.5, 1.5]));
    e.extend(around(&(-127..=128).map(|k| k as f32 + 0.5).collect::<Vec<_>>()));
    let xs = inputs(1, -130.0, 130.0, e, |_| true);
    unary("exp2", &xs, exp2, f64::exp2);
}

#[test]
fn exp_within_2_ulp_of_f64() {
    let mut e = common_edges();
    e.extend(around(&[EXP_X_MIN, f32::from_bits(0x42b17218), 88.0, -87.0, 100.0, -104.0, 104.0]));
    e.extend(around(&(-127..=128).map(|k| (k as f32 + 0.5) * std::f32::consts::LN_2).collect::<Vec<_>>()));
    let xs = inputs(2, -90.0, 90.0, e, |_| true);
    unary("exp", &xs, exp, f64::exp);
}

#[test]
fn log_and_log2_within_2_ulp_of_f64() {
    let mut e = common_edges();
    e.extend(scaled(std::f32::consts::SQRT_2, -126, 127));
    e.extend(scaled(1.0, -126, 127));
    let xs = inputs(3, 0.0, 4.0, e, |x| x >= f32::MIN_POSITIVE);
    unary("log", &xs, log, f64::ln);
    unary("log2", &xs, log2, f64::log2);
    let near_one = inputs(4, 0.9, 1.1, vec![], |x| x >= f32::MIN_POSITIVE);
    unary("log near 1", &near_one, log, f64::ln);
    unary("log2 near 1", &near_one, log2, f64::log2);
}

#[test]
fn log1p_within_2_ulp_of_f64() {
    let mut e = common_edges();
    e.extend(around(&[-1.0, -0.5, 0.41421357, -0.29289323, 1e-5, 3e-8]));
    e.extend(scaled(std::f32::consts::SQRT_2, -30, 127).into_iter().map(|v| v - 1.0));
    let xs = inputs(5, -1.0, 4.0, e, |x| x > -1.0);
    unary("log1p", &xs, log1p, f64::ln_1p);
    let small = inputs(6, -1e-3, 1e-3, vec![], |x| x > -1.0);
    unary("log1p small", &small, log1p, f64::ln_1p);
}

#[test]
fn rsqrt_sqrt_recip_within_2_ulp_of_f64() {
    let mut e = common_edges();
    e.extend(scaled(1.0, -126, 127));
    e.extend(scaled(2.0 - f32::EPSILON, -126, 126));
    let xs = inputs(7, 0.25, 8.0, e, |x| x >= f32::MIN_POSITIVE);
    unary("rsqrt", &xs, rsqrt, |x| 1.0 / x.sqrt());
    unary("sqrt", &xs, sqrt, f64::sqrt);
    let xs = inputs(
        8,
        -8.0,
        8.0,
        {
            let mut e = common_edges();
            e.extend(scaled(1.0, -126, 127));
            e
        },
        |x| x.abs() >= f32::MIN_POSITIVE,
    );
    unary("recip", &xs, recip, |x| 1.0 / x);
}

#[test]
fn div_within_2_ulp_of_f64() {
    let mut rng = Rng(9);
    let draw = |k: usize, r: &mut Rng| if k.is_multiple_of(2) { r.bits() } else { r.uniform(-4.0, 4.0) };
    let mut pairs = Vec::with_capacity(1 << 20);
    while pairs.len() < 1 << 20 {
        let i = pairs.len();
        let (a, b) = (draw(i, &mut rng), draw(i / 2, &mut rng));
        if a.is_normal() && b.is_normal() {
            pairs.push((a, b));
        }
    }
    for a in common_edges() {
        for b in [1.0f32, -3.0, 2.0 - f32::EPSILON, f32::MAX, f32::MIN_POSITIVE, 0.7] {
            if a.is_normal() {
                pairs.push((a, b));
                pairs.push((b, a));
            }
        }
    }
    max_ulp("div", &pairs, |(a, b)| div(a, b), |(a, b)| f64::from(flush(a)) / f64::from(flush(b)));
}

#[test]
fn sigmoid_silu_softplus_within_2_ulp_of_f64() {
    let mut e = common_edges();
    e.extend(around(&[EXP_X_MIN, 87.33654, 17.0, 20.0, 32.0, 92.0, 103.9, 104.0, 0.3465736]));
    e.extend(around(&(-151..=151).map(|k| (k as f32 + 0.5) * std::f32::consts::LN_2).collect::<Vec<_>>()));
    let xs = inputs(10, -30.0, 30.0, e.clone(), |_| true);
    let wide = inputs(11, -110.0, 110.0, e, |_| true);
    for set in [&xs, &wide] {
        unary("sigmoid", set, sigmoid, sigmoid64);
        unary("silu", set, silu, |x| x * sigmoid64(x));
        unary("softplus", set, softplus, |x| x.max(0.0) + (-x.abs()).exp().ln_1p());
    }
}

#[test]
fn erf_within_2_ulp_of_f64() {
    let mut e = common_edges();
    e.extend(around(&[1.0, 2.0, 3.0, 3.92, 3.919206, 0.5, 0.8]));
    let xs = inputs(12, -4.5, 4.5, e, |_| true);
    unary("erf", &xs, erf, erf64);
}

#[test]
fn specials_follow_the_documented_edges() {
    let inf = f32::INFINITY;
    let cases: [(&str, f32, f32); 30] = [
        ("exp2(-inf)", exp2(-inf), 0.0),
        ("exp2(inf)", exp2(inf), inf),
        ("exp2(-126.5)", exp2(-126.5), 0.0),
        ("exp(-inf)", exp(-inf), 0.0),
        ("exp(inf)", exp(inf), inf),
        ("exp(89)", exp(89.0), inf),
        ("log(0)", log(0.0), -inf),
        ("log(-1)", log(-1.0), -inf),
        ("log(inf)", log(inf), inf),
        ("log2(1e-40)", log2(1e-40), -inf),
        ("log2(inf)", log2(inf), inf),
        ("log1p(-1)", log1p(-1.0), -inf),
        ("log1p(inf)", log1p(inf), inf),
        ("log1p(1e-40)", log1p(1e-40), 0.0),
        ("rsqrt(0)", rsqrt(0.0), inf),
        ("rsqrt(inf)", rsqrt(inf), 0.0),
        ("sqrt(0)", sqrt(0.0), 0.0),
        ("sqrt(inf)", sqrt(inf), inf),
        ("recip(0)", recip(0.0), inf),
        ("recip(-0)", recip(-0.0), -inf),
        ("recip(-inf)", recip(-inf), -0.0),
        ("div(1,0)", div(1.0, 0.0), inf),
        ("div(0,3)", div(0.0, 3.0), 0.0),
        ("sigmoid(-inf)", sigmoid(-inf), 0.0),
        ("silu(inf)", silu(inf), inf),
        ("softplus(-inf)", softplus(-inf), 0.0),
        ("erf(-inf)", erf(-inf), -1.0),
        ("erf(1e-40)", erf(1e-40), 0.0),
        ("sqrt(-1e-40)", sqrt(-1e-40), 0.0),
        ("rsqrt(-0)", rsqrt(-0.0), inf),
    ];
    for (name, got, want) in cases {
        assert_eq!(got.to_bits(), want.to_bits(), "{name} = {got:e}, want {want:e}");
    }
    assert!(sqrt(-1.0).is_nan() && rsqrt(-4.0).is_nan());
}

#[test]
fn two_prod_is_exact_on_random_pairs() {
    let mut rng = Rng(13);
    for _ in 0..1 << 18 {
        let (a, b) = (rng.uniform(-4.0, 4.0), rng.uniform(-4.0, 4.0));
        let p = parts::two_prod(a, b);
        assert_eq!(f64::from(p.hi) + f64::from(p.lo), f64::from(a) * f64::from(b), "{a:e} * {b:e}");
    }
}

#[test]
fn mul_rn_then_add_is_unfused() {
    let mut rng = Rng(14);
    let mut fused_differs = 0;
    for _ in 0..1 << 16 {
        let (a, b) = (rng.uniform(1.0, 2.0), rng.uniform(1.0, 2.0));
        let c = -(f64::from(a) * f64::from(b)) as f32;
        let unfused = f64::from(a) * f64::from(b);
        let want = ((unfused as f32) as f64 + f64::from(c)) as f32;
        assert_eq!((mul_rn(a, b) + c).to_bits(), want.to_bits());
        fused_differs += usize::from(a.mul_add(b, c).to_bits() != want.to_bits());
    }
    let (a, b, c) = (1.0 + f32::EPSILON, 1.0 + f32::EPSILON, -(1.0 + 2.0 * f32::EPSILON));
    assert_eq!(mul_rn(a, b) + c, 0.0);
    assert_ne!(a.mul_add(b, c), 0.0);
    assert!(fused_differs > 1 << 15, "inputs do not discriminate fused from unfused: {fused_differs}");
}
