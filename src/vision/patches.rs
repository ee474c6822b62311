//! The canvas as ViT input: rescale by 1/255, normalize with mean 0.5 and std 0.5, cut into patches in raster order, each flattened channel-major.

use super::geometry::span_tokens;
use super::Rgb;
use crate::numerics::round_bf16;

/// ViT patches of one image and the grids they form.
#[derive(Clone, Debug, PartialEq)]
pub struct Patches {
    /// ViT patch rows.
    pub grid_h: u32,
    /// ViT patch columns.
    pub grid_w: u32,
    /// LLM token rows after the aligner's cell x cell merge.
    pub llm_h: u32,
    /// LLM token columns after the aligner's cell x cell merge.
    pub llm_w: u32,
    /// Values per patch: 3 * patch * patch (588 for patch 14).
    pub patch_len: usize,
    /// `grid_h * grid_w` patches of `patch_len` values, each `(c, ph, pw)`.
    pub data: Vec<f32>,
}

impl Patches {
    /// Tokens of the image's span in the prompt.
    pub fn span_tokens(&self) -> u64 {
        span_tokens(self.llm_h.into(), self.llm_w.into())
    }

    /// The values rounded to bf16 (as f32), which is what the reference hands the ViT (`.to(torch.bfloat16)`).
    pub fn bf16(&self) -> Vec<f32> {
        self.data.iter().map(|&x| round_bf16(x)).collect()
    }
}

/// The normalized value of a byte: `(v / 255 - 0.5) / 0.5`, each step rounded to f32 as torch does on f32 tensors.
pub fn normalize(v: u8) -> f32 {
    (f32::from(v) / 255.0 - 0.5) / 0.5
}

/// Cuts a canvas (sides multiples of `patch`) into normalized patches; `cell` is the aligner's merge side.
pub fn patchify(canvas: &Rgb, patch: u32, cell: u32) -> Patches {
    let lut: Vec<f32> = (0..=255u8).map(normalize).collect();
    let (p, w) = (patch as usize, canvas.width as usize);
    let (grid_h, grid_w) = (canvas.height / patch, canvas.width / patch);
    let patch_len = 3 * p * p;
    let mut data = Vec::with_capacity(grid_h as usize * grid_w as usize * patch_len);
    for gy in 0..grid_h as usize {
        for gx in 0..grid_w as usize {
            for c in 0..3 {
                for py in 0..p {
                    let row = (gy * p + py) * w + gx * p;
                    data.extend(canvas.data[row * 3..(row + p) * 3].iter().skip(c).step_by(3).map(|&v| lut[usize::from(v)]));
                }
            }
        }
    }
    Patches { grid_h, grid_w, llm_h: grid_h.div_ceil(cell), llm_w: grid_w.div_ceil(cell), patch_len, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_maps_the_byte_range_onto_minus_one_to_one() {
        assert_eq!(normalize(0), -1.0);
        assert_eq!(normalize(255), 1.0);
        // 127/255 in f32 is 0.498039216..; minus 0.5 and doubled gives -1/255 to f32 precision.
        assert_eq!(normalize(127).to_bits(), ((127f32 / 255.0 - 0.5) * 2.0).to_bits());
        for v in 0..=255u8 {
            assert!((f64::from(normalize(v)) - (f64::from(v) / 127.5 - 1.0)).abs() < 1e-6);
        }
    }

    #[test]
    fn patches_are_raster_ordered_and_channel_major() {
        // A 4x2 canvas with patch 2: two patches side by side; each value names its pixel and channel.
        let (w, h) = (4u32, 2u32);
        let data: Vec<u8> = (0..w * h).flat_map(|i| [i as u8 * 3, i as u8 * 3 + 1, i as u8 * 3 + 2]).collect();
        let canvas = Rgb { width: w, height: h, data };
        let p = patchify(&canvas, 2, 3);
        assert_eq!((p.grid_h, p.grid_w, p.llm_h, p.llm_w, p.patch_len), (1, 2, 1, 1, 12));
        let want = |pixels: [u8; 4]| -> Vec<f32> { (0..3).flat_map(|c| pixels.map(|px| normalize(px * 3 + c))).collect() };
        // Patch 0 holds pixels 0, 1 (row 0) and 4, 5 (row 1); patch 1 holds 2, 3, 6, 7.
        assert_eq!(p.data[..12], want([0, 1, 4, 5])[..]);
        assert_eq!(p.data[12..], want([2, 3, 6, 7])[..]);
        assert_eq!(p.span_tokens(), 4);
    }

    #[test]
    fn bf16_rounding_changes_values_that_need_more_than_8_mantissa_bits() {
        let canvas = Rgb { width: 1, height: 1, data: vec![1, 128, 255] };
        let p = patchify(&canvas, 1, 1);
        let b = p.bf16();
        assert_eq!(b[2], 1.0);
        assert_ne!(b[0], p.data[0]);
        assert!((b[0] - p.data[0]).abs() < 1e-2);
    }
}
