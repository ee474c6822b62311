//! What can go wrong between an image's bytes and its patches, with the input that caused it.

/// Why an image could not be decoded or planned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VisionError {
    /// The byte string was empty.
    #[error("the image is empty (0 bytes)")]
    Empty,
    /// The bytes start with no signature of a known image format.
    #[error("the bytes are not an image: no PNG, JPEG, WebP or GIF signature in the first {0} bytes")]
    NotAnImage(usize),
    /// The bytes are an image format the API does not accept.
    #[error("{0} images are not accepted; send PNG, JPEG, WebP or GIF")]
    UnsupportedFormat(String),
    /// The header or data is cut short or corrupt.
    #[error("cannot decode the {format} image: {reason}")]
    Decode {
        /// PNG, JPEG, WebP or GIF.
        format: &'static str,
        /// What the decoder reported.
        reason: String,
    },
    /// The decoder produced samples this module does not convert (float images).
    #[error("the {format} image has {color} samples, which have no RGB conversion here")]
    UnsupportedColor {
        /// PNG, JPEG, WebP or GIF.
        format: &'static str,
        /// The decoder's color type.
        color: String,
    },
    /// A side of the image is zero.
    #[error("the image is {width}x{height}: both sides must be at least 1 pixel")]
    ZeroSize {
        /// Width in pixels.
        width: u64,
        /// Height in pixels.
        height: u64,
    },
    /// The header announces more pixels than the caller allows; nothing was decoded.
    #[error("the image is {width}x{height} = {pixels} pixels, over the limit of {limit}")]
    TooManyPixels {
        /// Width in pixels.
        width: u64,
        /// Height in pixels.
        height: u64,
        /// width * height.
        pixels: u64,
        /// The caller's limit.
        limit: u64,
    },
    /// An RGB buffer's length is not width * height * 3.
    #[error("an RGB buffer of {width}x{height} needs {expected} bytes, got {got}")]
    BufferSize {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// width * height * 3.
        expected: u64,
        /// The buffer's length.
        got: usize,
    },
    /// A setting is out of the range the plan is defined on.
    #[error("invalid vision settings: {0}")]
    Settings(String),
    /// The closed-form shrink still leaves more tokens than allowed.
    #[error("a {width}x{height} image cannot fit in {max_image_tokens} image tokens (the plan gives {tokens})")]
    DoesNotFit {
        /// Width the plan started from.
        width: u64,
        /// Height the plan started from.
        height: u64,
        /// The budget.
        max_image_tokens: u64,
        /// Tokens of the shrunk plan.
        tokens: u64,
    },
    /// Fitting the image into its box rounds one side to zero pixels (Pillow refuses such a resize).
    #[error("a {width}x{height} image fitted into {box_w}x{box_h} rounds to {fit_w}x{fit_h}: too thin to resize")]
    TooThin {
        /// Image width.
        width: u32,
        /// Image height.
        height: u32,
        /// Box width.
        box_w: u32,
        /// Box height.
        box_h: u32,
        /// Fitted width.
        fit_w: u64,
        /// Fitted height.
        fit_h: u64,
    },
}
