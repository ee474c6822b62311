//! Images in requests: inline data read from the messages or fetched URLs, checked against the server's limits, preprocessed off the async threads, and expanded into spans of the prompt.
use super::error::{ApiError, Dialect};
use super::fetch::Fetcher;
use crate::serve::JobImage;
use crate::vision::{self, Settings, VisionError};
use axum::http::StatusCode;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// What the server takes in images (`serve --vision`).
#[derive(Clone, Debug)]
pub struct VisionLimits {
    /// The model's preprocessing, with `max_pixels` from `--max-image-pixels`.
    pub settings: Settings,
    /// Most images in one request (`--max-images`).
    pub max_images: usize,
    /// Most bytes of one encoded image (`--max-image-bytes`).
    pub max_image_bytes: usize,
    /// Most image-span tokens in one request, all its images together (`--max-image-tokens`).
    pub max_image_tokens: usize,
    /// The token every span position carries.
    pub image_token: u32,
}

/// Image input of a server: its limits, the slots that bound how many images are preprocessed at once, and the URL fetcher when URLs are taken.
pub struct Vision {
    /// The limits.
    pub limits: VisionLimits,
    slots: Arc<Semaphore>,
    fetch: Option<Fetcher>,
}

impl Vision {
    /// Image input under `limits`, preprocessing at most `at_once` images at a time.
    pub fn new(limits: VisionLimits, at_once: usize) -> Self {
        Vision { limits, slots: Arc::new(Semaphore::new(at_once.max(1))), fetch: None }
    }

    /// Takes image URLs, fetched by `fetch` (`--fetch-image-urls`).
    pub fn with_fetch(mut self, fetch: Option<Fetcher>) -> Self {
        self.fetch = fetch;
        self
    }

    /// The request body limit that lets the largest allowed images through as base64, beside `text` bytes of the rest.
    pub fn body_limit(&self, text: usize) -> usize {
        let per = self.limits.max_image_bytes.div_ceil(3).saturating_mul(4).saturating_add(64);
        text.saturating_add(per.saturating_mul(self.limits.max_images))
    }
}

/// An image as a request gives it, before decoding.
#[derive(Clone, Debug)]
pub struct ImageInput {
    /// The request field it came from.
    pub at: String,
    /// Its data.
    pub source: Source,
}

/// Where an image's bytes are.
#[derive(Clone, Debug)]
pub enum Source {
    /// Base64 in the request, with the media type it was declared as.
    Inline {
        /// The base64 text.
        data: String,
        /// `image/png` and the like, when declared.
        media_type: Option<String>,
    },
    /// A URL to fetch.
    Url(String),
}

impl ImageInput {
    /// An OpenAI `image_url` value: a data URL (`data:image/png;base64,...`) or another URL.
    pub fn from_url(at: String, url: &str) -> Result<ImageInput, ApiError> {
        let Some(rest) = url.strip_prefix("data:") else { return Ok(ImageInput { at, source: Source::Url(url.to_string()) }) };
        let (head, data) = rest.split_once(',').ok_or_else(|| ApiError::field(&at, "a data URL needs a comma before its data"))?;
        let media = head.strip_suffix(";base64").ok_or_else(|| ApiError::field(&at, "a data URL image must be base64 (`data:image/png;base64,...`)"))?;
        let media_type = (!media.is_empty()).then(|| media.to_string());
        Ok(ImageInput { at, source: Source::Inline { data: data.to_string(), media_type } })
    }
}

/// Expands each image placeholder of `ids` (one per input, in order) into its image's span, after checking every limit; the new ids and the job's images.
pub async fn prepare(vision: Option<&Vision>, d: Dialect, ids: Vec<u32>, inputs: Vec<ImageInput>) -> Result<(Vec<u32>, Vec<JobImage>), ApiError> {
    if inputs.is_empty() {
        return Ok((ids, Vec::new()));
    }
    let bad = |at: &str, m: String| ApiError::field(at, m).dialect(d);
    let Some(v) = vision else { return Err(bad(&inputs[0].at, "this server takes no images: it was started without --vision".into())) };
    let l = &v.limits;
    if inputs.len() > l.max_images {
        return Err(bad("messages", format!("the request has {} images; this server takes at most {} per request (--max-images)", inputs.len(), l.max_images)));
    }
    let mut bytes = Vec::with_capacity(inputs.len());
    let mut tokens = 0u64;
    for input in &inputs {
        let b = image_bytes(input, v).await.map_err(|m| bad(&input.at, m))?;
        let (_, w, h) = vision::check_pixels(&b, l.settings.max_pixels).map_err(|e| bad(&input.at, explain(&e)))?;
        tokens += vision::plan(w, h, &l.settings).map_err(|e| bad(&input.at, explain(&e)))?.tokens;
        bytes.push(b);
    }
    let over = |t: u64| format!("the request's images take {t} image tokens; this server takes at most {} per request (--max-image-tokens)", l.max_image_tokens);
    if tokens > l.max_image_tokens as u64 {
        return Err(bad("messages", over(tokens)));
    }
    let _slot = v.slots.clone().acquire_owned().await.map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down").dialect(d))?;
    let settings = l.settings;
    let ready = tokio::task::spawn_blocking(move || bytes.iter().map(|b| vision::preprocess(b, &settings)).collect::<Vec<_>>())
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("preprocessing the images failed: {e}")).dialect(d))?;
    let mut images = Vec::with_capacity(ready.len());
    for (r, input) in ready.into_iter().zip(&inputs) {
        images.push(r.map_err(|e| bad(&input.at, explain(&e)))?);
    }
    let total: u64 = images.iter().map(vision::Image::span_tokens).sum();
    if total > l.max_image_tokens as u64 {
        return Err(bad("messages", over(total)));
    }
    expand(ids, images, l).map_err(|m| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, m).dialect(d))
}

/// An image's bytes: fetched from its URL when the server takes URLs, else decoded from base64; within the byte limit, an image format, its declared media type matching its data.
async fn image_bytes(input: &ImageInput, v: &Vision) -> Result<Vec<u8>, String> {
    match (&input.source, &v.fetch) {
        (Source::Url(_), None) => Err("this server does not fetch image URLs: fetching is off (--fetch-image-urls turns it on); send the image inline as base64 (a `data:image/...;base64,` URL, or an Anthropic `base64` source)".into()),
        (Source::Url(url), Some(f)) => {
            let bytes = f.fetch(url).await?;
            vision::decode::sniff(&bytes).map_err(|e| explain(&e))?;
            Ok(bytes)
        }
        (Source::Inline { data, media_type }, _) => inline_bytes(data, media_type.as_deref(), &v.limits),
    }
}

/// The decoded bytes of an inline image within the byte limit, its declared media type matching its data.
fn inline_bytes(data: &str, media: Option<&str>, l: &VisionLimits) -> Result<Vec<u8>, String> {
    let approx = data.len() / 4 * 3;
    if approx > l.max_image_bytes + 3 {
        return Err(format!("the image is about {approx} bytes; this server takes at most {} bytes per image (--max-image-bytes)", l.max_image_bytes));
    }
    let bytes = base64_decode(data)?;
    if bytes.len() > l.max_image_bytes {
        return Err(format!("the image is {} bytes; this server takes at most {} bytes per image (--max-image-bytes)", bytes.len(), l.max_image_bytes));
    }
    let format = vision::decode::sniff(&bytes).map_err(|e| explain(&e))?;
    if let Some(m) = media {
        let named = match m.to_ascii_lowercase().as_str() {
            "image/png" => Some(vision::Format::Png),
            "image/jpeg" | "image/jpg" => Some(vision::Format::Jpeg),
            "image/webp" => Some(vision::Format::WebP),
            "image/gif" => Some(vision::Format::Gif),
            _ => None,
        };
        match named {
            None => return Err(format!("media type `{m}` is not taken; send image/png, image/jpeg, image/webp or image/gif")),
            Some(f) if f != format => return Err(format!("the media type says `{m}` but the data is a {} image", format.name())),
            Some(_) => {}
        }
    }
    Ok(bytes)
}

/// A vision error as a client reads it, naming the server limit it hit.
fn explain(e: &VisionError) -> String {
    match e {
        VisionError::TooManyPixels { .. } => format!("{e} per image (--max-image-pixels)"),
        _ => e.to_string(),
    }
}

/// What the prompt cache knows an image by: its pixels' hash, the preprocessing settings and the grids.
pub fn image_key(image: &vision::Image, s: &Settings) -> [u8; 32] {
    let p = &image.patches;
    let mut h = Sha256::new();
    h.update(b"lockstep-image-1");
    h.update(image.pixel_hash());
    for v in [s.min_pixels, s.max_image_tokens, u64::from(s.patch), u64::from(s.cell), s.max_wh_ratio.map_or(0, u64::from)] {
        h.update(v.to_le_bytes());
    }
    for v in [p.grid_h, p.grid_w, p.llm_h, p.llm_w] {
        h.update(v.to_le_bytes());
    }
    h.finalize().into()
}

/// Replaces the k-th image token of `ids` by the k-th image's span.
fn expand(ids: Vec<u32>, images: Vec<vision::Image>, l: &VisionLimits) -> Result<(Vec<u32>, Vec<JobImage>), String> {
    let slots: Vec<usize> = ids.iter().enumerate().filter(|(_, &t)| t == l.image_token).map(|(i, _)| i).collect();
    if slots.len() != images.len() {
        return Err(format!("the rendered prompt has {} image placeholders for {} images", slots.len(), images.len()));
    }
    let mut out = Vec::with_capacity(ids.len() + images.iter().map(|i| i.span_tokens() as usize).sum::<usize>());
    let mut jobs = Vec::with_capacity(images.len());
    let mut from = 0;
    for (slot, image) in slots.into_iter().zip(images) {
        out.extend_from_slice(&ids[from..slot]);
        from = slot + 1;
        let key = image_key(&image, &l.settings);
        let p = image.patches;
        let len = vision::geometry::span_tokens(p.llm_h.into(), p.llm_w.into()) as usize;
        jobs.push(JobImage { at: out.len(), len, grid_h: p.grid_h as usize, grid_w: p.grid_w as usize, llm_h: p.llm_h as usize, llm_w: p.llm_w as usize, patches: p.data, key });
        out.extend(std::iter::repeat_n(l.image_token, len));
    }
    out.extend_from_slice(&ids[from..]);
    Ok((out, jobs))
}

/// Standard base64 (RFC 4648, padding optional, no whitespace) to bytes.
pub fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 || body.len() % 4 == 1 {
        return Err(format!("the image data is not valid base64: {} characters cannot be whole bytes", s.len()));
    }
    let value = |i: usize, c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("the image data is not valid base64: byte {c:#04x} at {i}")),
        } as u32)
    };
    let mut out = Vec::with_capacity(body.len() / 4 * 3 + 2);
    for (k, chunk) in body.as_bytes().chunks(4).enumerate() {
        let mut n = 0u32;
        for (j, &c) in chunk.iter().enumerate() {
            n |= value(k * 4 + j, c)? << (18 - 6 * j);
        }
        let b = n.to_be_bytes();
        out.extend_from_slice(&b[1..chunk.len()]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::base64_decode;

    #[test]
    fn base64_decodes_every_length_and_refuses_what_is_not_base64() {
        assert_eq!(base64_decode("").unwrap(), b"");
        assert_eq!(base64_decode("Zg==").unwrap(), b"f");
        assert_eq!(base64_decode("Zm8").unwrap(), b"fo");
        assert_eq!(base64_decode("Zm9v").unwrap(), b"foo");
        assert_eq!(base64_decode("Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(base64_decode("/+7dzA==").unwrap(), [0xff, 0xee, 0xdd, 0xcc]);
        for bad in ["Z", "Zm9v!", "Zm 9v", "Zg===", "Zm9vY"] {
            assert!(base64_decode(bad).is_err(), "{bad}");
        }
    }
}
