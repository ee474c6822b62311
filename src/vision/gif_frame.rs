//! A GIF's first frame as Pillow's `convert("RGB")` shows it: palette indices on the logical screen, looked up in the frame's palette.
//!
//! Pillow fills the screen outside the first frame with the frame's transparent index (or index 0) and
//! never composites; an index past the palette's end reads black. A GIF without any color table, which
//! Pillow opens as gray, is refused: the gif crate does not decode one.

use std::io::Cursor;
use std::num::NonZeroU64;

use super::{Rgb, VisionError};

fn failed(e: impl std::fmt::Display) -> VisionError {
    VisionError::Decode { format: "GIF", reason: e.to_string() }
}

/// Decodes the first frame of a GIF; `max_frame_bytes` bounds the frame buffer the decoder may allocate.
pub fn first_frame(bytes: &[u8], max_frame_bytes: u64) -> Result<Rgb, VisionError> {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::Indexed);
    if let Some(limit) = NonZeroU64::new(max_frame_bytes) {
        options.set_memory_limit(gif::MemoryLimit::Bytes(limit));
    }
    let mut decoder = options.read_info(Cursor::new(bytes)).map_err(failed)?;
    let (w, h) = (usize::from(decoder.width()), usize::from(decoder.height()));
    let global = decoder.global_palette().map(<[u8]>::to_vec);
    let frame = decoder.read_next_frame().map_err(failed)?.ok_or_else(|| failed("the file has no frame"))?;
    let mut indices = vec![frame.transparent.unwrap_or(0); w * h];
    let (left, top, fw, fh) = (usize::from(frame.left), usize::from(frame.top), usize::from(frame.width), usize::from(frame.height));
    if frame.buffer.len() < fw * fh {
        return Err(failed(format!("the first frame has {} of its {} pixels", frame.buffer.len(), fw * fh)));
    }
    // Pixels of a frame that overhangs the screen are cut off.
    for y in 0..fh.min(h.saturating_sub(top)) {
        let n = fw.min(w.saturating_sub(left));
        if n == 0 {
            break;
        }
        let dst = (top + y) * w + left;
        indices[dst..dst + n].copy_from_slice(&frame.buffer[y * fw..y * fw + n]);
    }
    let palette = frame.palette.as_deref().or(global.as_deref()).ok_or_else(|| failed("the first frame has no color table"))?;
    let mut lut = [[0u8; 3]; 256];
    for (entry, c) in lut.iter_mut().zip(palette.chunks_exact(3)) {
        *entry = [c[0], c[1], c[2]];
    }
    let data = indices.iter().flat_map(|&i| lut[usize::from(i)]).collect();
    Ok(Rgb { width: w as u32, height: h as u32, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 6x4 GIF whose first frame is the 3x2 block at (2, 1), with transparent index 1 when `transparent`.
    fn partial_gif(transparent: bool) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let palette = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120];
            let mut enc = gif::Encoder::new(&mut out, 6, 4, &palette).expect("encoder");
            let mut frame = gif::Frame { left: 2, top: 1, width: 3, height: 2, ..gif::Frame::default() };
            frame.buffer = std::borrow::Cow::Owned(vec![0, 1, 2, 3, 2, 1]);
            frame.transparent = transparent.then_some(1);
            enc.write_frame(&frame).expect("frame");
        }
        out
    }

    #[test]
    fn outside_the_first_frame_is_the_transparent_index_or_index_zero() {
        let rgb = first_frame(&partial_gif(false), 1 << 20).expect("decode");
        assert_eq!((rgb.width, rgb.height), (6, 4));
        let px = |x: usize, y: usize| &rgb.data[(y * 6 + x) * 3..(y * 6 + x) * 3 + 3];
        assert_eq!(px(0, 0), [10, 20, 30]);
        assert_eq!(px(2, 1), [10, 20, 30]);
        assert_eq!(px(3, 1), [40, 50, 60]);
        assert_eq!(px(4, 2), [40, 50, 60]);
        let rgb = first_frame(&partial_gif(true), 1 << 20).expect("decode");
        let px = |x: usize, y: usize| &rgb.data[(y * 6 + x) * 3..(y * 6 + x) * 3 + 3];
        assert_eq!(px(0, 0), [40, 50, 60]);
        assert_eq!(px(3, 1), [40, 50, 60]);
        assert_eq!(px(4, 1), [70, 80, 90]);
    }

    #[test]
    fn a_truncated_gif_is_a_decode_error() {
        let bytes = partial_gif(false);
        for cut in [bytes.len() - 3, 20, 8] {
            assert!(matches!(first_frame(&bytes[..cut], 1 << 20), Err(VisionError::Decode { format: "GIF", .. })), "cut {cut}");
        }
    }
}
