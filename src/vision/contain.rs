//! Pillow's `ImageOps.pad(image, box, color=fill)`: fit inside the box keeping the aspect (`ImageOps.contain`), bicubic resize, centre on a filled canvas.

use super::resize::resize_bicubic;
use super::{Rgb, RgbRef, VisionError};

/// The size `ImageOps.contain` resizes a `w` x `h` image to inside `box_w` x `box_h`: one side exact, the other `round()`ed half to even.
pub fn contain_size(w: u32, h: u32, box_w: u32, box_h: u32) -> (u64, u64) {
    let im_ratio = f64::from(w) / f64::from(h);
    let dest_ratio = f64::from(box_w) / f64::from(box_h);
    let mut size = (u64::from(box_w), u64::from(box_h));
    if im_ratio != dest_ratio {
        if im_ratio > dest_ratio {
            size.1 = (f64::from(h) / f64::from(w) * f64::from(box_w)).round_ties_even() as u64;
        } else {
            size.0 = (f64::from(w) / f64::from(h) * f64::from(box_h)).round_ties_even() as u64;
        }
    }
    size
}

/// Top-left corner of a `fit_w` x `fit_h` image centred in the box: `round(diff * 0.5)` half to even on the side that differs.
pub fn pad_offset(fit_w: u32, fit_h: u32, box_w: u32, box_h: u32) -> (u32, u32) {
    let half = |d: u32| (f64::from(d) * 0.5).round_ties_even() as u32;
    if fit_w != box_w {
        (half(box_w - fit_w), 0)
    } else {
        (0, half(box_h - fit_h))
    }
}

/// `ImageOps.pad(image, (box_w, box_h), method=BICUBIC, color=(fill, fill, fill))` on an RGB image.
pub fn pad(image: RgbRef<'_>, box_w: u32, box_h: u32, fill: u8) -> Result<Rgb, VisionError> {
    let (fit_w, fit_h) = contain_size(image.width, image.height, box_w, box_h);
    if fit_w == 0 || fit_h == 0 {
        return Err(VisionError::TooThin { width: image.width, height: image.height, box_w, box_h, fit_w, fit_h });
    }
    // contain never grows a side past the box, so both fit in u32.
    let (fit_w, fit_h) = (fit_w.min(u64::from(box_w)) as u32, fit_h.min(u64::from(box_h)) as u32);
    let fitted = resize_bicubic(image, fit_w, fit_h);
    if (fit_w, fit_h) == (box_w, box_h) {
        return Ok(fitted);
    }
    let (x0, y0) = pad_offset(fit_w, fit_h, box_w, box_h);
    let mut canvas = Rgb { width: box_w, height: box_h, data: vec![fill; box_w as usize * box_h as usize * 3] };
    let row = fit_w as usize * 3;
    for y in 0..fit_h as usize {
        let dst = ((y + y0 as usize) * box_w as usize + x0 as usize) * 3;
        canvas.data[dst..dst + row].copy_from_slice(&fitted.data[y * row..(y + 1) * row]);
    }
    Ok(canvas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contain_rounds_the_free_side_half_to_even() {
        // 5x3 into 714x434: 3/5*714 = 428.4 -> 428 rows, width exact.
        assert_eq!(contain_size(5, 3, 714, 434), (714, 428));
        // 2x1 into 5x5: 1/2*5 = 2.5 -> 2 (half to even), 3x2 into 3x3: 2/3*3 = 2.0.
        assert_eq!(contain_size(2, 1, 5, 5), (5, 2));
        assert_eq!(contain_size(2, 1, 7, 7), (7, 4));
        // Taller than the box: the width is the rounded side; 1x2 into 5x5 -> 2.5 -> 2.
        assert_eq!(contain_size(1, 2, 5, 5), (2, 5));
        // Same aspect: the box.
        assert_eq!(contain_size(1024, 701, 2048, 1402), (2048, 1402));
    }

    #[test]
    fn pad_offsets_round_half_to_even() {
        assert_eq!(pad_offset(10, 7, 10, 10), (0, 2));
        assert_eq!(pad_offset(10, 5, 10, 10), (0, 2));
        assert_eq!(pad_offset(10, 9, 10, 14), (0, 2));
        assert_eq!(pad_offset(6, 10, 10, 10), (2, 0));
        assert_eq!(pad_offset(3, 10, 10, 10), (4, 0));
        assert_eq!(pad_offset(10, 10, 10, 10), (0, 0));
    }

    #[test]
    fn the_padded_canvas_keeps_the_fill_outside_the_fitted_image() {
        let mut seed = 12345u32;
        let data: Vec<u8> = (0..20 * 10 * 3)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (seed >> 24) as u8
            })
            .collect();
        let img = Rgb { width: 20, height: 10, data };
        let out = pad(img.view(), 28, 28, 127).expect("pad");
        assert_eq!((out.width, out.height), (28, 28));
        // 10/20*28 = 14 rows at round(14 * 0.5) = 7.
        for y in 0..28usize {
            let inside = (7..21).contains(&y);
            let row = &out.data[y * 84..(y + 1) * 84];
            if !inside {
                assert!(row.iter().all(|&v| v == 127), "row {y} should be fill");
            }
        }
        assert!(out.data[7 * 84..21 * 84].iter().any(|&v| v != 127));
    }

    #[test]
    fn a_side_that_rounds_to_zero_is_an_error() {
        let img = Rgb { width: 10_000, height: 1, data: vec![0; 30_000] };
        assert!(matches!(pad(img.view(), 42, 42, 127), Err(VisionError::TooThin { .. })));
    }
}
