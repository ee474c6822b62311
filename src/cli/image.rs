//! An image file in a CLI prompt (`run --image`, `diff --image`): preprocessed by the model's vision settings, its span placed at the prompt's image token.
use crate::model::forward::vision::ImagePatches;
use crate::model::Config;
use crate::vision::{self, Image, Settings};
use anyhow::{bail, Context, Result};
use std::path::Path;

/// An image placed in a prompt: the preprocessed image and the span's first position and length.
pub(crate) struct PromptImage {
    pub image: Image,
    pub at: usize,
    pub len: usize,
}

/// The vision settings of a model's config (the decoder's limit: Pillow's).
pub(crate) fn settings(cfg: &Config) -> Result<Settings> {
    let vc = cfg.vision.as_ref().filter(|v| v.num_hidden_layers > 0).context("this model has no vision tower, so it takes no --image")?;
    Ok(Settings {
        min_pixels: vc.min_pixels as u64,
        max_image_tokens: vc.max_image_tokens as u64,
        patch: vc.patch_size as u32,
        cell: vc.downsample_ratio as u32,
        max_pixels: vision::PILLOW_MAX_IMAGE_PIXELS,
        max_wh_ratio: vc.max_wh_ratio.map(|r| r.max(1.0) as u32),
    })
}

/// Reads and preprocesses `path`, and expands the prompt's first image token (or, without one, a slot after the first token) into the image's span.
pub(crate) fn place_image(cfg: &Config, prompt: &mut Vec<u32>, path: &Path) -> Result<PromptImage> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let image = vision::preprocess(&bytes, &settings(cfg)?).with_context(|| format!("{}", path.display()))?;
    let token = cfg.image_token_id as u32;
    let len = image.patches.span_tokens() as usize;
    let at = match prompt.iter().position(|&t| t == token) {
        Some(i) => {
            prompt.remove(i);
            i
        }
        None => prompt.len().min(1),
    };
    prompt.splice(at..at, std::iter::repeat_n(token, len));
    if prompt.len() >= cfg.max_position_embeddings {
        bail!("the prompt with its image has {} positions, the model takes at most {}", prompt.len(), cfg.max_position_embeddings);
    }
    Ok(PromptImage { image, at, len })
}

/// The tower's input of a preprocessed image.
pub(crate) fn tower_input(image: &Image) -> ImagePatches<'_> {
    let p = &image.patches;
    ImagePatches { grid_h: p.grid_h as usize, grid_w: p.grid_w as usize, data: &p.data }
}
