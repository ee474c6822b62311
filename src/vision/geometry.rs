//! The resize plan of the reference `image_processor.py`: the canvas box an image is fitted into and the patch and token grids that box gives.
//!
//! Float steps are f64 in Python's order (`/` true division, `math.floor`, `math.ceil`, `int()` truncation),
//! so the box is the reference's for every input.

use super::{Settings, VisionError};

/// The canvas an image is fitted into and the grids it gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Canvas width in pixels, a multiple of the patch side.
    pub box_w: u32,
    /// Canvas height in pixels, a multiple of the patch side.
    pub box_h: u32,
    /// ViT patch rows (`box_h / patch`).
    pub grid_h: u32,
    /// ViT patch columns (`box_w / patch`).
    pub grid_w: u32,
    /// LLM token rows after the cell x cell merge.
    pub llm_h: u32,
    /// LLM token columns after the cell x cell merge.
    pub llm_w: u32,
    /// Tokens of the image's span in the prompt.
    pub tokens: u64,
}

/// Tokens of an image span: each LLM row and its IMAGE_NEW_LINE, then IMAGE_START and IMAGE_END.
pub fn span_tokens(llm_h: u64, llm_w: u64) -> u64 {
    llm_h.saturating_mul(llm_w.saturating_add(1)).saturating_add(2)
}

/// The LLM grid (rows, columns) of a canvas: `ceil((side // patch) / cell)` per side.
pub fn llm_grid(box_h: u64, box_w: u64, patch: u64, cell: u64) -> (u64, u64) {
    let side = |s: u64| ((s / patch) as f64 / cell as f64).ceil() as u64;
    (side(box_h), side(box_w))
}

/// The closed-form shrink (`solve_resize_ratio`): the largest patch-aligned (h, w) of this aspect whose grid fits `max_tokens`.
pub fn shrink(height: u64, width: u64, patch: u64, cell: u64, max_tokens: u64) -> (u64, u64) {
    let ratio = height as f64 / width as f64;
    let max_w = ((max_tokens - 2) as f64 / ratio + 0.25).sqrt() - 0.5;
    let max_h = max_w * ratio;
    let cell_px = patch * cell;
    if max_w < 1.0 {
        // Very tall: one column of cells.
        return ((max_tokens - 2) / 2 * cell_px, cell_px);
    }
    if max_h < 1.0 {
        // Very wide: one row of cells.
        return (cell_px, (max_tokens - 3) * cell_px);
    }
    let by_w = (max_w.floor() as u64).saturating_mul(cell_px) as f64 / width as f64;
    let by_h = (max_h.floor() as u64).saturating_mul(cell_px) as f64 / height as f64;
    // Python's min keeps the first argument unless the second is smaller.
    let beta = if by_h < by_w { by_h } else { by_w };
    let side = |s: u64| (s as f64 * beta / patch as f64).floor() as u64 * patch;
    (side(height), side(width))
}

/// The sides after the aspect cap and the min-pixels scale-up (`plan_image_grid`'s first two steps).
pub fn scaled_size(width: u64, height: u64, min_pixels: u64, max_wh_ratio: Option<u32>) -> (u64, u64) {
    let mut w = width;
    let mut h = height;
    if let Some(r) = max_wh_ratio {
        if w > h.saturating_mul(u64::from(r)) {
            w = h * u64::from(r);
        }
    }
    let area = w * h;
    if 0 < area && area < min_pixels {
        // The reference writes `** 0.5`; sqrt is correctly rounded everywhere and gives the same sides (see the tests).
        let ratio = (min_pixels as f64 / area as f64).sqrt();
        w = (w as f64 * ratio) as u64;
        h = (h as f64 * ratio) as u64;
    }
    (w, h)
}

/// The plan for a `width` x `height` image (`plan_image_grid` then `safe_resize`).
pub fn plan(width: u32, height: u32, s: &Settings) -> Result<Plan, VisionError> {
    s.check()?;
    if width == 0 || height == 0 {
        return Err(VisionError::ZeroSize { width: width.into(), height: height.into() });
    }
    let (patch, cell, max_tokens) = (u64::from(s.patch), u64::from(s.cell), s.max_image_tokens);
    let (w, h) = scaled_size(width.into(), height.into(), s.min_pixels, s.max_wh_ratio);
    let mut box_w = (w as f64 / patch as f64).ceil() as u64 * patch;
    let mut box_h = (h as f64 / patch as f64).ceil() as u64 * patch;
    let (mut llm_h, mut llm_w) = llm_grid(box_h, box_w, patch, cell);
    if span_tokens(llm_h, llm_w) > max_tokens {
        (box_h, box_w) = shrink(h, w, patch, cell, max_tokens);
        (llm_h, llm_w) = llm_grid(box_h, box_w, patch, cell);
        let tokens = span_tokens(llm_h, llm_w);
        if tokens > max_tokens || box_h == 0 || box_w == 0 {
            return Err(VisionError::DoesNotFit { width: w, height: h, max_image_tokens: max_tokens, tokens });
        }
    }
    let narrow = |v: u64| u32::try_from(v).map_err(|_| VisionError::Settings(format!("the plan's box side {v} does not fit in 32 bits")));
    Ok(Plan {
        box_w: narrow(box_w)?,
        box_h: narrow(box_h)?,
        grid_h: narrow(box_h / patch)?,
        grid_w: narrow(box_w / patch)?,
        llm_h: narrow(llm_h)?,
        llm_w: narrow(llm_w)?,
        tokens: span_tokens(llm_h, llm_w),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release() -> Settings {
        Settings::release()
    }

    fn boxed(w: u32, h: u32) -> (u32, u32, u32, u32, u64) {
        let p = plan(w, h, &release()).expect("plan");
        (p.box_h, p.box_w, p.llm_h, p.llm_w, p.tokens)
    }

    #[test]
    fn the_spec_example_1024x701_gives_box_714x1036_and_444_tokens() {
        let p = plan(1024, 701, &release()).expect("plan");
        assert_eq!((p.box_h, p.box_w), (714, 1036));
        assert_eq!((p.grid_h, p.grid_w), (51, 74));
        assert_eq!((p.llm_h, p.llm_w), (17, 25));
        assert_eq!(p.tokens, 444);
    }

    #[test]
    fn a_tiny_image_is_scaled_up_to_min_pixels_then_ceiled_to_patches() {
        // 5x3: ratio = sqrt(295936/15) = 140.46..; int(5*r) = 702, int(3*r) = 421; ceil to 14: 714, 434.
        assert_eq!(boxed(5, 3), (434, 714, 11, 17, 11 * 18 + 2));
        // 1x1: ratio = 544 exactly.
        assert_eq!(boxed(1, 1), (546, 546, 13, 13, 13 * 14 + 2));
        // 544x543 is under min_pixels by 544: ratio = sqrt(544/543) = 1.00092..; int(544.5) = 544, int(543.5) = 543.
        assert_eq!(boxed(544, 543), (546, 546, 13, 13, 184));
    }

    #[test]
    fn an_image_at_min_pixels_keeps_its_size() {
        assert_eq!(scaled_size(544, 544, 295_936, None), (544, 544));
        assert_eq!(scaled_size(1088, 272, 295_936, None), (1088, 272));
    }

    #[test]
    fn a_huge_image_is_shrunk_in_closed_form_under_the_budget() {
        // 4000x3000: r = 0.75, max_w = sqrt(1022/0.75 + 0.25) - 0.5 = 36.418.., max_h = 27.31..;
        // beta = min(36*42/4000, 27*42/3000) = 0.378; box = (floor(1134/14)*14, floor(1512/14)*14) = (1134, 1512).
        let (bh, bw, lh, lw, t) = boxed(4000, 3000);
        assert_eq!((bw, bh), (1512, 1134));
        assert_eq!((lh, lw), (27, 36));
        assert_eq!(t, 27 * 37 + 2);
        assert!(t <= 1024);
    }

    #[test]
    fn a_very_wide_image_collapses_to_one_row_of_cells() {
        // 100000x2 scales up to 121643x2, then max_h < 1: box (42, 1021*42).
        let (bh, bw, lh, lw, t) = boxed(100_000, 2);
        assert_eq!((bh, bw), (42, 1021 * 42));
        assert_eq!((lh, lw, t), (1, 1021, 1024));
    }

    #[test]
    fn a_very_tall_image_collapses_to_one_column_of_cells() {
        // max_w < 1: box ((1024-2)//2*42, 42).
        let (bh, bw, lh, lw, t) = boxed(2, 100_000);
        assert_eq!((bh, bw), (511 * 42, 42));
        assert_eq!((lh, lw, t), (511, 1, 1024));
    }

    #[test]
    fn extreme_aspects_that_fit_are_not_shrunk() {
        // 3000x20 scales up by sqrt(295936/60000) = 2.2208..: int(6662.5..) = 6662, int(44.41..) = 44 -> box 56x6664.
        let (bh, bw, lh, lw, t) = boxed(3000, 20);
        assert_eq!((bh, bw), (56, 6664));
        assert_eq!((lh, lw), (2, 159));
        assert_eq!(t, 2 * 160 + 2);
        let (bh, bw, ..) = boxed(20, 3000);
        assert_eq!((bh, bw), (6664, 56));
    }

    #[test]
    fn every_plan_over_a_grid_of_sizes_fits_the_budget_and_is_patch_aligned() {
        let s = release();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let w = 1 + (seed % 20_000) as u32;
            let h = 1 + ((seed >> 32) % 20_000) as u32;
            let p = match plan(w, h, &s) {
                Ok(p) => p,
                Err(e) => panic!("{w}x{h}: {e}"),
            };
            assert!(p.tokens <= s.max_image_tokens, "{w}x{h}: {p:?}");
            assert_eq!(p.box_w % 14, 0);
            assert_eq!(p.box_h % 14, 0);
            assert!(p.box_w > 0 && p.box_h > 0);
            assert_eq!(p.grid_w * 14, p.box_w);
            assert_eq!(p.llm_w, p.grid_w.div_ceil(3));
        }
    }

    #[test]
    fn scale_up_with_sqrt_gives_the_same_sides_as_pow_half_at_release_min_pixels() {
        // Python computes `(min_pixels / area) ** 0.5`; over every area below min_pixels, int(side * ratio) agrees.
        let mp = 295_936u64;
        let mut differing_ratios = 0;
        for w in 1..mp {
            for h in 1..=(mp - 1) / w {
                let q = mp as f64 / (w * h) as f64;
                let (a, b) = (q.sqrt(), q.powf(0.5));
                if a != b {
                    differing_ratios += 1;
                    assert_eq!(((w as f64 * a) as u64, (h as f64 * a) as u64), ((w as f64 * b) as u64, (h as f64 * b) as u64), "{w}x{h}");
                }
            }
        }
        eprintln!("ratios one ulp apart: {differing_ratios}, sides all equal");
    }

    #[test]
    fn the_aspect_cap_narrows_before_the_scale_up() {
        let (w, h) = scaled_size(1000, 10, 0, Some(4));
        assert_eq!((w, h), (40, 10));
        assert_eq!(scaled_size(40, 10, 0, Some(4)), (40, 10));
    }

    #[test]
    fn bad_settings_are_refused() {
        let mut s = release();
        s.patch = 0;
        assert!(matches!(plan(10, 10, &s), Err(VisionError::Settings(_))));
        let mut s = release();
        s.max_image_tokens = 3;
        assert!(matches!(plan(10, 10, &s), Err(VisionError::Settings(_))));
        assert!(matches!(plan(0, 10, &release()), Err(VisionError::ZeroSize { .. })));
    }

    #[test]
    fn a_small_budget_the_shrink_cannot_meet_is_an_error_not_a_wrong_plan() {
        let mut s = release();
        s.max_image_tokens = 4;
        // One cell is 1*(1+1)+2 = 4 tokens, so only a single cell fits.
        let p = plan(30, 30, &s).expect("one cell");
        assert_eq!(p.tokens, 4);
        for (w, h) in [(4000, 3000), (3000, 4000), (1000, 1000)] {
            match plan(w, h, &s) {
                Ok(p) => assert!(p.tokens <= 4, "{w}x{h} {p:?}"),
                Err(e) => assert!(matches!(e, VisionError::DoesNotFit { .. }), "{e}"),
            }
        }
    }
}
