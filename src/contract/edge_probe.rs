//! Device probe of edge arithmetic: are subnormal inputs and results flushed, how a result just below 2^-126 rounds, which zero `max` returns for zeros of both signs, whether `x != x` sees a NaN, and NaN x 0's bits.
use crate::gpu::{Arg, Gpu, GpuError, PipelineKey, Recorder, Shader};
use std::fmt;

pub const EDGE_SHADER: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "probe_edges", variant: "wgsl", source: include_str!("../../wgsl/contract/edge_probe.wgsl") };

/// The probe's inputs (see the shader's first comment).
fn inputs() -> [f32; 10] {
    let p = |e: i32| f32::from_bits(((127 + e) as u32) << 23);
    [f32::from_bits(1 << 19), 1.0, p(-70), p(-60), p(100), 0.0, -0.0, f32::NAN, p(-63), f32::from_bits(0x1fff_ffff)]
}

/// What IEEE arithmetic without flushing gives for the probe's first seven results (the CPU's).
fn ieee() -> [u32; 7] {
    let v = inputs();
    [(v[0] * v[1]).to_bits(), (v[2] * v[3]).to_bits(), (-(v[2] * v[3])).to_bits(), (v[2] * v[3] * v[4]).to_bits(), (v[0] + v[0]).to_bits(), v[2].mul_add(v[3], v[5]).to_bits(), v[0].mul_add(v[4], v[5]).to_bits()]
}

/// The words the probe wrote, and how they classify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeProbe {
    /// The raw result words.
    pub words: Vec<u32>,
}

impl EdgeProbe {
    /// `preserved` when the subnormal cases give IEEE's bits, `flushed` when each gives a zero, `mixed` otherwise.
    pub fn subnormals(&self) -> &'static str {
        let want = ieee();
        let got = &self.words[..7];
        if got == want {
            "preserved"
        } else if got.iter().zip(want).all(|(&g, w)| g == w || g & 0x7fff_ffff == 0) {
            "flushed"
        } else {
            "mixed"
        }
    }

    /// How `(2^-126 - 2^-150)` (a product just below the smallest normal) came out: `rounded` up to 2^-126 as IEEE does, or `flushed` to zero.
    pub fn near_normal(&self) -> &'static str {
        match self.words[7] {
            0x0080_0000 => "rounded",
            w if w & 0x7fff_ffff == 0 => "flushed",
            _ => "other",
        }
    }
}

impl fmt::Display for EdgeProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let zero = |w: u32| if w == 0 { "+0" } else if w == 0x8000_0000 { "-0" } else { "?" };
        write!(
            f,
            "subnormals {}, below 2^-126 {}, max(+0,-0)={} max(-0,+0)={}, NaN!=NaN {}, NaN*0={:#010x}",
            self.subnormals(),
            self.near_normal(),
            zero(self.words[8]),
            zero(self.words[9]),
            if self.words[10] == 1 { "true" } else { "false" },
            self.words[11]
        )
    }
}

/// Runs the probe on `gpu`.
pub fn probe_edges(gpu: &Gpu) -> Result<EdgeProbe, GpuError> {
    let v = inputs();
    let input = gpu.upload_pod(&v)?;
    let out = gpu.alloc(12 * 4)?;
    gpu.fill_u32(&out, super::POISON);
    let mut rec = Recorder::new(gpu);
    rec.dispatch(&PipelineKey::new(EDGE_SHADER, &[]), &[7], &[Arg::Whole(&input), Arg::Whole(&out)], [1, 1, 1])?;
    rec.submit()?;
    Ok(EdgeProbe { words: gpu.read_u32(&out)?[..12].to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_classifies_ieee_results_as_preserved_and_zeros_as_flushed() {
        let mut w = ieee().to_vec();
        w.extend([0x0080_0000, 0, 0x8000_0000, 1, 0x7fc0_0000]);
        let p = EdgeProbe { words: w.clone() };
        assert_eq!((p.subnormals(), p.near_normal()), ("preserved", "rounded"));
        assert!(ieee()[..5].iter().all(|&b| b != 0), "the subnormal cases are non-zero under IEEE");
        let mut f = w.clone();
        f[..8].iter_mut().for_each(|x| *x &= 0x8000_0000);
        let p = EdgeProbe { words: f };
        assert_eq!((p.subnormals(), p.near_normal()), ("flushed", "flushed"));
        assert_eq!(p.to_string(), "subnormals flushed, below 2^-126 flushed, max(+0,-0)=+0 max(-0,+0)=-0, NaN!=NaN true, NaN*0=0x7fc00000");
    }
}
