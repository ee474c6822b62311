//! Image bytes to 8-bit RGB as Pillow's `Image.open(..).convert("RGB")` gives them, for PNG, JPEG, WebP and GIF (first frame, in gif_frame.rs).
//!
//! Pillow's RGB conversion per mode: gray replicates; palette looks colors up; alpha is dropped, never composited;
//! 16-bit gray (`I;16`) clips to 255; 16-bit RGB, RGBA and LA keep the high byte.

use std::io::Cursor;

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

use super::{Rgb, VisionError};

/// The image formats the API accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// PNG, any bit depth and color type.
    Png,
    /// Baseline or progressive JPEG.
    Jpeg,
    /// Lossy or lossless WebP.
    WebP,
    /// GIF; the first frame is used.
    Gif,
}

impl Format {
    /// The format's usual name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Png => "PNG",
            Format::Jpeg => "JPEG",
            Format::WebP => "WebP",
            Format::Gif => "GIF",
        }
    }

    fn image_format(self) -> ImageFormat {
        match self {
            Format::Png => ImageFormat::Png,
            Format::Jpeg => ImageFormat::Jpeg,
            Format::WebP => ImageFormat::WebP,
            Format::Gif => ImageFormat::Gif,
        }
    }
}

/// The format named by the bytes' signature.
pub fn sniff(bytes: &[u8]) -> Result<Format, VisionError> {
    if bytes.is_empty() {
        return Err(VisionError::Empty);
    }
    match image::guess_format(bytes) {
        Ok(ImageFormat::Png) => Ok(Format::Png),
        Ok(ImageFormat::Jpeg) => Ok(Format::Jpeg),
        Ok(ImageFormat::WebP) => Ok(Format::WebP),
        Ok(ImageFormat::Gif) => Ok(Format::Gif),
        Ok(other) => Err(VisionError::UnsupportedFormat(format!("{other:?}"))),
        Err(_) => Err(VisionError::NotAnImage(bytes.len().min(16))),
    }
}

/// Decoder limits that keep every allocation near what `max_pixels` RGBA16 pixels need.
fn limits(max_pixels: u64) -> Limits {
    let mut limits = Limits::default();
    limits.max_alloc = Some(max_pixels.saturating_mul(8).saturating_add(64 << 20));
    limits
}

/// A decoder over the bytes with its header read and its size checked against `max_pixels`.
fn open(bytes: &[u8], max_pixels: u64) -> Result<(Format, impl ImageDecoder + '_), VisionError> {
    let format = sniff(bytes)?;
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format.image_format());
    reader.limits(limits(max_pixels));
    let decoder = reader.into_decoder().map_err(|e| failed(format, e))?;
    let (w, h) = decoder.dimensions();
    let (width, height) = (u64::from(w), u64::from(h));
    if width == 0 || height == 0 {
        return Err(VisionError::ZeroSize { width, height });
    }
    if width * height > max_pixels {
        return Err(VisionError::TooManyPixels { width, height, pixels: width * height, limit: max_pixels });
    }
    Ok((format, decoder))
}

fn failed(format: Format, e: image::ImageError) -> VisionError {
    VisionError::Decode { format: format.name(), reason: e.to_string() }
}

/// Format, width and height from the header alone; refuses an image over `max_pixels` before any pixel is decoded.
pub fn check_pixels(bytes: &[u8], max_pixels: u64) -> Result<(Format, u32, u32), VisionError> {
    let (format, decoder) = open(bytes, max_pixels)?;
    let (w, h) = decoder.dimensions();
    Ok((format, w, h))
}

/// Whether a PNG's IHDR says 16-bit grayscale, which Pillow opens as `I;16` (clipped to 255 in RGB) even when tRNS adds alpha.
fn png_is_gray16(bytes: &[u8]) -> bool {
    // Signature (8), chunk length (4), "IHDR" (4), width (4), height (4), then bit depth and color type.
    bytes.len() > 25 && &bytes[12..16] == b"IHDR" && bytes[24] == 16 && bytes[25] == 0
}

/// Whether a JPEG's markers reach EOI after its scans; libjpeg (so Pillow) calls the file truncated otherwise, where the decoder here would fill gray.
fn jpeg_reaches_eoi(b: &[u8]) -> bool {
    let be16 = |i: usize| b.get(i..i + 2).map(|v| usize::from(u16::from_be_bytes([v[0], v[1]])));
    let mut i = 2;
    loop {
        // Bytes between segments and fill bytes before a marker are skipped, as libjpeg skips them.
        while i < b.len() && b[i] != 0xff {
            i += 1;
        }
        while i + 1 < b.len() && b[i + 1] == 0xff {
            i += 1;
        }
        let Some(&marker) = b.get(i + 1) else { return false };
        match marker {
            0xd9 => return true,
            0x01 | 0xd0..=0xd8 => i += 2,
            _ => {
                let Some(len) = be16(i + 2) else { return false };
                i += 2 + len;
                if marker == 0xda {
                    // Entropy-coded data ends at the first 0xFF not followed by a stuffed 0x00 or a restart marker.
                    while i + 1 < b.len() && (b[i] != 0xff || matches!(b[i + 1], 0x00 | 0xd0..=0xd7)) {
                        i += 1;
                    }
                }
            }
        }
    }
}

/// Decodes PNG, JPEG, WebP or GIF bytes to RGB with Pillow's `convert("RGB")` semantics.
pub fn decode(bytes: &[u8], max_pixels: u64) -> Result<Rgb, VisionError> {
    let (format, decoder) = open(bytes, max_pixels)?;
    let (width, height) = decoder.dimensions();
    if format == Format::Gif {
        drop(decoder);
        let rgb = super::gif_frame::first_frame(bytes, max_pixels.saturating_add(1 << 20))?;
        if crate::testing::planted("image") && rgb.width != rgb.height {
            panic!("planted bug: a GIF decoded to a non-square image");
        }
        return Ok(rgb);
    }
    if format == Format::Jpeg && !jpeg_reaches_eoi(bytes) {
        return Err(VisionError::Decode { format: "JPEG", reason: "the file is truncated: no end-of-image marker after the scans".into() });
    }
    let image = DynamicImage::from_decoder(decoder).map_err(|e| failed(format, e))?;
    let gray16 = format == Format::Png && png_is_gray16(bytes);
    let data = to_rgb(image, gray16).map_err(|color| VisionError::UnsupportedColor { format: format.name(), color })?;
    Ok(Rgb { width, height, data })
}

/// Pillow's `I;16` to RGB: values over 255 clip.
fn clip16(v: u16) -> u8 {
    v.min(255) as u8
}

/// Pillow's 16-bit unpackers keep the most significant byte.
fn high(v: u16) -> u8 {
    (v >> 8) as u8
}

/// The decoded samples as RGB bytes; alpha is dropped as Pillow's `convert("RGB")` drops it.
fn to_rgb(image: DynamicImage, gray16: bool) -> Result<Vec<u8>, String> {
    let gray16_to_u8: fn(u16) -> u8 = if gray16 { clip16 } else { high };
    Ok(match image {
        DynamicImage::ImageRgb8(b) => b.into_raw(),
        DynamicImage::ImageRgba8(b) => b.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect(),
        DynamicImage::ImageLuma8(b) => b.iter().flat_map(|&l| [l, l, l]).collect(),
        DynamicImage::ImageLumaA8(b) => b.chunks_exact(2).flat_map(|p| [p[0], p[0], p[0]]).collect(),
        DynamicImage::ImageLuma16(b) => b.iter().map(|&l| clip16(l)).flat_map(|l| [l, l, l]).collect(),
        DynamicImage::ImageLumaA16(b) => b.chunks_exact(2).map(|p| gray16_to_u8(p[0])).flat_map(|l| [l, l, l]).collect(),
        DynamicImage::ImageRgb16(b) => b.iter().map(|&v| high(v)).collect(),
        DynamicImage::ImageRgba16(b) => b.chunks_exact(4).flat_map(|p| [high(p[0]), high(p[1]), high(p[2])]).collect(),
        other => return Err(format!("{:?}", other.color())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageBuffer, Luma, LumaA, Rgb as Px, Rgba};

    fn png(img: DynamicImage) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).expect("encode png");
        out.into_inner()
    }

    /// A PNG with its IHDR size replaced and the chunk's CRC recomputed.
    fn with_size(png: &[u8], w: u32, h: u32) -> Vec<u8> {
        let mut out = png.to_vec();
        out[16..20].copy_from_slice(&w.to_be_bytes());
        out[20..24].copy_from_slice(&h.to_be_bytes());
        let mut crc = !0u32;
        for &b in &out[12..29] {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
            }
        }
        out[29..33].copy_from_slice(&(!crc).to_be_bytes());
        out
    }

    fn noise(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (s >> 23) as u8
            })
            .collect()
    }

    #[test]
    fn rgb_png_round_trips_byte_for_byte() {
        let data = noise(7 * 5 * 3, 1);
        let img = ImageBuffer::<Px<u8>, _>::from_raw(7, 5, data.clone()).expect("buffer");
        let rgb = decode(&png(DynamicImage::ImageRgb8(img)), 1 << 20).expect("decode");
        assert_eq!((rgb.width, rgb.height), (7, 5));
        assert_eq!(rgb.data, data);
    }

    #[test]
    fn alpha_is_dropped_not_composited() {
        let data = noise(6 * 4 * 4, 2);
        let img = ImageBuffer::<Rgba<u8>, _>::from_raw(6, 4, data.clone()).expect("buffer");
        let rgb = decode(&png(DynamicImage::ImageRgba8(img)), 1 << 20).expect("decode");
        let want: Vec<u8> = data.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        assert_eq!(rgb.data, want);
        let la = noise(6 * 4 * 2, 3);
        let img = ImageBuffer::<LumaA<u8>, _>::from_raw(6, 4, la.clone()).expect("buffer");
        let rgb = decode(&png(DynamicImage::ImageLumaA8(img)), 1 << 20).expect("decode");
        let want: Vec<u8> = la.chunks(2).flat_map(|p| [p[0]; 3]).collect();
        assert_eq!(rgb.data, want);
    }

    #[test]
    fn gray16_clips_and_rgb16_keeps_the_high_byte() {
        let vals: Vec<u16> = vec![0, 100, 255, 256, 1000, 65535];
        let img = ImageBuffer::<Luma<u16>, _>::from_raw(6, 1, vals.clone()).expect("buffer");
        let rgb = decode(&png(DynamicImage::ImageLuma16(img)), 1 << 20).expect("decode");
        let want: Vec<u8> = [0u8, 100, 255, 255, 255, 255].iter().flat_map(|&v| [v; 3]).collect();
        assert_eq!(rgb.data, want);
        let img = ImageBuffer::<Px<u16>, _>::from_raw(2, 1, vec![0x1234, 0xff00, 0x00ff, 1, 65535, 300]).expect("buffer");
        let rgb = decode(&png(DynamicImage::ImageRgb16(img)), 1 << 20).expect("decode");
        assert_eq!(rgb.data, vec![0x12, 0xff, 0x00, 0, 255, 1]);
    }

    #[test]
    fn a_truncated_png_is_a_decode_error() {
        let data = noise(40 * 30 * 3, 4);
        let img = ImageBuffer::<Px<u8>, _>::from_raw(40, 30, data).expect("buffer");
        let bytes = png(DynamicImage::ImageRgb8(img));
        for cut in [bytes.len() / 2, bytes.len() - 13, 40, 20] {
            let e = decode(&bytes[..cut], 1 << 20).expect_err("truncated");
            assert!(matches!(e, VisionError::Decode { format: "PNG", .. }), "cut {cut}: {e}");
        }
    }

    #[test]
    fn truncated_jpeg_and_webp_are_decode_errors() {
        let img = ImageBuffer::<Px<u8>, _>::from_raw(64, 48, noise(64 * 48 * 3, 8)).expect("buffer");
        for (fmt, name) in [(ImageFormat::Jpeg, "JPEG"), (ImageFormat::WebP, "WebP")] {
            let mut out = Cursor::new(Vec::new());
            DynamicImage::ImageRgb8(img.clone()).write_to(&mut out, fmt).expect("encode");
            let bytes = out.into_inner();
            assert!(decode(&bytes, 1 << 20).is_ok(), "{name} whole");
            let mut trailing = bytes.clone();
            trailing.extend_from_slice(b"trailing bytes");
            assert!(decode(&trailing, 1 << 20).is_ok(), "{name} with trailing bytes");
            for cut in [bytes.len() / 2, bytes.len() * 3 / 4, bytes.len() - 2, bytes.len() - 1, 30] {
                let e = decode(&bytes[..cut], 1 << 20).expect_err(name);
                assert!(matches!(e, VisionError::Decode { format, .. } if format == name), "{name} cut {cut}: {e}");
            }
        }
    }

    #[test]
    fn random_bytes_and_empty_input_are_not_images() {
        assert_eq!(decode(&[], 1 << 20), Err(VisionError::Empty));
        let junk = noise(1000, 5);
        assert!(matches!(decode(&junk, 1 << 20), Err(VisionError::NotAnImage(16))));
        assert!(matches!(decode(b"hello", 1 << 20), Err(VisionError::NotAnImage(5))));
        // A BMP signature is an image, but not one the API takes.
        assert!(matches!(decode(b"BM\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 1 << 20), Err(VisionError::UnsupportedFormat(_))));
    }

    #[test]
    fn too_many_pixels_are_refused_from_the_header() {
        let img = ImageBuffer::<Px<u8>, _>::from_raw(50, 40, noise(50 * 40 * 3, 6)).expect("buffer");
        let bytes = png(DynamicImage::ImageRgb8(img));
        assert_eq!(check_pixels(&bytes, 2000), Ok((Format::Png, 50, 40)));
        let e = decode(&bytes, 1999).expect_err("over the limit");
        assert_eq!(e, VisionError::TooManyPixels { width: 50, height: 40, pixels: 2000, limit: 1999 });
        // A header claiming 100000 x 100000 is refused without allocating its pixels.
        let huge = with_size(&bytes, 100_000, 100_000);
        let e = decode(&huge, 1 << 28).expect_err("huge");
        assert_eq!(e, VisionError::TooManyPixels { width: 100_000, height: 100_000, pixels: 10_000_000_000, limit: 1 << 28 });
    }

    #[test]
    fn a_zero_width_png_is_refused_by_its_decoder() {
        let img = ImageBuffer::<Px<u8>, _>::from_raw(3, 3, noise(27, 7)).expect("buffer");
        let bytes = with_size(&png(DynamicImage::ImageRgb8(img)), 0, 3);
        // The PNG decoder itself rejects a zero side in IHDR.
        let e = decode(&bytes, 1 << 20).expect_err("zero width");
        assert!(matches!(e, VisionError::Decode { format: "PNG", .. }), "{e}");
    }
}
