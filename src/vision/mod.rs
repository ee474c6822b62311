//! Image preprocessing for the vision tower, byte-exact with the reference's Pillow pipeline: decode, plan the box, fit with bicubic resize, pad with gray, normalize, patchify.
//!
//! The reference (`inference/image_processor.py`) does `Image.open(..).convert("RGB")`, plans the box
//! (`plan_image_grid`), then `ImageOps.pad(image, box, color=(127, 127, 127))`, then
//! `((x / 255 - 0.5) / 0.5).to(torch.bfloat16)` and the patch reshape. Each step has its file here.
pub mod contain;
pub mod decode;
pub mod error;
pub mod geometry;
pub mod gif_frame;
pub mod patches;
pub mod resize;

use sha2::{Digest, Sha256};

pub use decode::{check_pixels, decode, Format};
pub use error::VisionError;
pub use geometry::{plan, Plan};
pub use patches::Patches;

/// Gray the reference pads the canvas with, per channel.
pub const PAD_FILL: u8 = 127;

/// Pillow's `Image.MAX_IMAGE_PIXELS`: above it Pillow warns of a decompression bomb.
pub const PILLOW_MAX_IMAGE_PIXELS: u64 = 89_478_485;

/// An 8-bit RGB image, rows top to bottom, 3 bytes per pixel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rgb {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 3` bytes.
    pub data: Vec<u8>,
}

/// The plan's knobs and the decoder's pixel limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Images with fewer pixels are scaled up to about this many (`min_pixels`).
    pub min_pixels: u64,
    /// Most tokens an image span may take (`max_image_tokens`).
    pub max_image_tokens: u64,
    /// ViT patch side in pixels (`patch_size`).
    pub patch: u32,
    /// Aligner merge side in patches (`downsample_ratio`).
    pub cell: u32,
    /// Most pixels a decoded image may have; a larger header is refused before decoding.
    pub max_pixels: u64,
    /// Widest width/height the plan keeps (`max_wh_ratio`); wider images are squeezed into the box.
    pub max_wh_ratio: Option<u32>,
}

impl Settings {
    /// The release's `vision_config` with Pillow's pixel limit.
    pub fn release() -> Self {
        Settings { min_pixels: 544 * 544, max_image_tokens: 1024, patch: 14, cell: 3, max_pixels: PILLOW_MAX_IMAGE_PIXELS, max_wh_ratio: None }
    }

    /// Checks the ranges the plan's f64 steps are exact on.
    pub fn check(&self) -> Result<(), VisionError> {
        let bad = |m: String| Err(VisionError::Settings(m));
        if self.patch == 0 || self.cell == 0 {
            return bad(format!("patch {} and cell {} must be at least 1", self.patch, self.cell));
        }
        if !(4..=1 << 24).contains(&self.max_image_tokens) {
            return bad(format!("max_image_tokens {} must be in 4..=2^24", self.max_image_tokens));
        }
        if self.min_pixels > 1 << 48 {
            return bad(format!("min_pixels {} must be at most 2^48", self.min_pixels));
        }
        if self.max_pixels == 0 {
            return bad("max_pixels must be at least 1".into());
        }
        if self.max_wh_ratio == Some(0) {
            return bad("max_wh_ratio must be positive or absent".into());
        }
        Ok(())
    }
}

/// A borrowed RGB image.
#[derive(Clone, Copy, Debug)]
pub struct RgbRef<'a> {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 3` bytes.
    pub data: &'a [u8],
}

impl Rgb {
    /// The image as a borrowed view.
    pub fn view(&self) -> RgbRef<'_> {
        RgbRef { width: self.width, height: self.height, data: &self.data }
    }
}

/// One preprocessed image: its plan, its canvas and its patches.
#[derive(Clone, Debug)]
pub struct Image {
    /// Decoded width in pixels.
    pub width: u32,
    /// Decoded height in pixels.
    pub height: u32,
    /// The box and grids.
    pub plan: Plan,
    /// The fitted, padded canvas (`plan.box_w` x `plan.box_h`) the patches are cut from.
    pub canvas: Rgb,
    /// ViT input.
    pub patches: Patches,
    hash: [u8; 32],
}

impl Image {
    /// sha256 of the decoded pixels: width and height as u32 little-endian, then the RGB bytes; the prompt cache keys images by it.
    pub fn pixel_hash(&self) -> [u8; 32] {
        self.hash
    }

    /// Tokens of the image's span in the prompt.
    pub fn span_tokens(&self) -> u64 {
        self.plan.tokens
    }
}

/// sha256 over (width, height, RGB bytes).
pub fn pixel_hash(image: RgbRef<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(image.width.to_le_bytes());
    h.update(image.height.to_le_bytes());
    h.update(image.data);
    h.finalize().into()
}

/// The canvas of an RGB image: the plan's box, filled as the reference fills it.
pub fn canvas(image: RgbRef<'_>, s: &Settings) -> Result<(Plan, Rgb), VisionError> {
    let plan = geometry::plan(image.width, image.height, s)?;
    let squeeze = s.max_wh_ratio.is_some_and(|r| u64::from(image.width) >= u64::from(r) * u64::from(image.height));
    let canvas = if squeeze {
        // The reference squeezes very wide images into the box with a plain bicubic resize.
        resize::resize_bicubic(image, plan.box_w, plan.box_h)
    } else {
        contain::pad(image, plan.box_w, plan.box_h, PAD_FILL)?
    };
    Ok((plan, canvas))
}

/// Decodes image bytes and preprocesses them.
pub fn preprocess(bytes: &[u8], s: &Settings) -> Result<Image, VisionError> {
    s.check()?;
    let rgb = decode::decode(bytes, s.max_pixels)?;
    preprocess_rgb(rgb.width, rgb.height, &rgb.data, s)
}

/// Preprocesses decoded RGB pixels (`width * height * 3` bytes, rows top to bottom).
pub fn preprocess_rgb(width: u32, height: u32, rgb: &[u8], s: &Settings) -> Result<Image, VisionError> {
    s.check()?;
    let expected = u64::from(width) * u64::from(height) * 3;
    if rgb.len() as u64 != expected {
        return Err(VisionError::BufferSize { width, height, expected, got: rgb.len() });
    }
    if width == 0 || height == 0 {
        return Err(VisionError::ZeroSize { width: width.into(), height: height.into() });
    }
    let pixels = u64::from(width) * u64::from(height);
    if pixels > s.max_pixels {
        return Err(VisionError::TooManyPixels { width: width.into(), height: height.into(), pixels, limit: s.max_pixels });
    }
    let image = RgbRef { width, height, data: rgb };
    let (plan, canvas) = canvas(image, s)?;
    let patches = patches::patchify(&canvas, s.patch, s.cell);
    Ok(Image { width, height, plan, canvas, patches, hash: pixel_hash(image) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    }

    #[test]
    fn preprocess_rgb_of_the_spec_example_gives_its_grids_and_patch_count() {
        let data = noise(1024 * 701 * 3, 1);
        let img = preprocess_rgb(1024, 701, &data, &Settings::release()).expect("preprocess");
        assert_eq!((img.canvas.width, img.canvas.height), (1036, 714));
        assert_eq!((img.patches.grid_h, img.patches.grid_w, img.patches.llm_h, img.patches.llm_w), (51, 74, 17, 25));
        assert_eq!(img.patches.data.len(), 51 * 74 * 588);
        assert_eq!(img.span_tokens(), 444);
        assert_eq!(img.patches.span_tokens(), 444);
    }

    #[test]
    fn the_pixel_hash_changes_with_one_byte_and_with_the_shape() {
        let s = Settings::release();
        let data = noise(6 * 4 * 3, 2);
        let a = preprocess_rgb(6, 4, &data, &s).expect("a").pixel_hash();
        let mut flipped = data.clone();
        flipped[37] ^= 1;
        let b = preprocess_rgb(6, 4, &flipped, &s).expect("b").pixel_hash();
        let c = preprocess_rgb(4, 6, &data, &s).expect("c").pixel_hash();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, preprocess_rgb(6, 4, &data, &s).expect("again").pixel_hash());
    }

    #[test]
    fn wrong_buffers_and_zero_sides_are_errors() {
        let s = Settings::release();
        assert!(matches!(preprocess_rgb(3, 3, &[0; 26], &s), Err(VisionError::BufferSize { .. })));
        assert!(matches!(preprocess_rgb(0, 3, &[], &s), Err(VisionError::ZeroSize { .. })));
        let mut small = s;
        small.max_pixels = 8;
        assert!(matches!(preprocess_rgb(3, 3, &[0; 27], &small), Err(VisionError::TooManyPixels { pixels: 9, .. })));
    }

    #[test]
    fn a_very_wide_image_is_squeezed_when_the_aspect_cap_is_set() {
        let mut s = Settings::release();
        s.max_wh_ratio = Some(4);
        let data = noise(400 * 50 * 3, 3);
        let img = preprocess_rgb(400, 50, &data, &s).expect("squeeze");
        // No gray border: the squeezed image covers the canvas.
        let (w, h) = (img.canvas.width as usize, img.canvas.height as usize);
        let first_row_gray = img.canvas.data[..w * 3].iter().all(|&v| v == PAD_FILL);
        let last_row_gray = img.canvas.data[(h - 1) * w * 3..].iter().all(|&v| v == PAD_FILL);
        assert!(!first_row_gray && !last_row_gray);
    }
}
