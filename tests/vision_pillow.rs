//! lockstep's image preprocessing against Pillow: the padded canvas byte for byte, the normalized patches bit for bit, and decoder agreement per format.
//!
//! scripts/pillow_preprocess.py runs the reference's steps with Pillow on the same decoded RGB bytes.
//! Skips (with a message) only when python3 with Pillow and numpy is missing; scripts/test installs them.
use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;

use image::{DynamicImage, ImageBuffer, ImageFormat, Luma, LumaA, Rgb as Px, Rgba};
use lockstep::vision::{self, Rgb, Settings};
use serde_json::{json, Value};

/// xorshift64*: the test's images are a function of the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn byte(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }
}

/// Kinds of generated content.
#[derive(Clone, Copy)]
enum Kind {
    Noise,
    Gradient,
    Gray,
    Palette,
    Checker,
    AlphaDropped,
}

fn generate(kind: Kind, w: u32, h: u32, rng: &mut Rng) -> Rgb {
    let (wu, hu) = (w as usize, h as usize);
    let mut data = Vec::with_capacity(wu * hu * 3);
    let palette: Vec<[u8; 3]> = (0..7).map(|_| [rng.byte(), rng.byte(), rng.byte()]).collect();
    let phase = [rng.byte(), rng.byte(), rng.byte()];
    for y in 0..hu {
        for x in 0..wu {
            let px = match kind {
                Kind::Noise => [rng.byte(), rng.byte(), rng.byte()],
                Kind::Gradient => {
                    let fx = x as f64 / wu.max(2) as f64;
                    let fy = y as f64 / hu.max(2) as f64;
                    let r = (255.0 * fx) as u8;
                    let g = (255.0 * fy) as u8;
                    let b = (127.5 + 127.0 * ((fx * 7.0 + fy * 3.0) * std::f64::consts::PI).sin()) as u8;
                    [r.wrapping_add(phase[0] / 8), g.wrapping_add(phase[1] / 8), b]
                }
                Kind::Gray => {
                    let v = rng.byte();
                    [v, v, v]
                }
                Kind::Palette => palette[((x / 5 + y / 3) + (rng.next() % 2) as usize) % palette.len()],
                Kind::Checker => {
                    if (x / 9 + y / 13) % 2 == 0 {
                        [250, 10, 40]
                    } else {
                        [5, 240, 200]
                    }
                }
                Kind::AlphaDropped => {
                    let p = [rng.byte(), rng.byte(), rng.byte(), rng.byte()];
                    [p[0], p[1], p[2]]
                }
            };
            data.extend_from_slice(&px);
        }
    }
    Rgb { width: w, height: h, data }
}

/// (name, kind, width, height): tiny, huge, extreme aspects and both degenerate shrink branches.
const CASES: &[(&str, Kind, u32, u32)] = &[
    ("noise_5x3", Kind::Noise, 5, 3),
    ("grad_5x3", Kind::Gradient, 5, 3),
    ("noise_1x1", Kind::Noise, 1, 1),
    ("grad_7x2", Kind::Gradient, 7, 2),
    ("grad_14x14", Kind::Gradient, 14, 14),
    ("noise_1024x701", Kind::Noise, 1024, 701),
    ("grad_1024x701", Kind::Gradient, 1024, 701),
    ("grad_4000x3000", Kind::Gradient, 4000, 3000),
    ("noise_3000x4000", Kind::Noise, 3000, 4000),
    ("noise_3000x20", Kind::Noise, 3000, 20),
    ("noise_20x3000", Kind::Noise, 20, 3000),
    ("grad_3000x20", Kind::Gradient, 3000, 20),
    ("noise_20000x3", Kind::Noise, 20_000, 3),
    ("noise_3x20000", Kind::Noise, 3, 20_000),
    ("noise_2000x1", Kind::Noise, 2000, 1),
    ("noise_1x2000", Kind::Noise, 1, 2000),
    ("gray_640x480", Kind::Gray, 640, 480),
    ("palette_800x600", Kind::Palette, 800, 600),
    ("alpha_dropped_333x257", Kind::AlphaDropped, 333, 257),
    ("checker_333x777", Kind::Checker, 333, 777),
    ("noise_544x544", Kind::Noise, 544, 544),
    ("noise_543x545", Kind::Noise, 543, 545),
    ("grad_1920x1080", Kind::Gradient, 1920, 1080),
    ("noise_300x2000", Kind::Noise, 300, 2000),
];

fn python_has_pillow() -> bool {
    Command::new("python3").args(["-c", "import PIL, numpy"]).output().map(|o| o.status.success()).unwrap_or(false)
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pillow_preprocess.py")
}

fn encode_png(img: DynamicImage) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).expect("encode png");
    out.into_inner()
}

/// 16-bit PNGs Pillow cannot write, made here for Pillow to read.
fn foreign_pngs(rng: &mut Rng) -> Vec<(String, &'static str, Vec<u8>)> {
    let (w, h) = (61u32, 37u32);
    let n = (w * h) as usize;
    let mut v16 = |k: usize| -> Vec<u16> { (0..n * k).map(|_| (rng.next() >> 48) as u16).collect() };
    let rgb16 = ImageBuffer::<Px<u16>, _>::from_raw(w, h, v16(3)).expect("rgb16");
    let rgba16 = ImageBuffer::<Rgba<u16>, _>::from_raw(w, h, v16(4)).expect("rgba16");
    let la16 = ImageBuffer::<LumaA<u16>, _>::from_raw(w, h, v16(2)).expect("la16");
    // Small values so the clip to 255 of Pillow's I;16 shows.
    let l16: Vec<u16> = v16(1).into_iter().map(|v| v % 600).collect();
    let l16 = ImageBuffer::<Luma<u16>, _>::from_raw(w, h, l16).expect("l16");
    let mut out = vec![
        ("rgb16.png".to_string(), "PNG RGB 16-bit", encode_png(DynamicImage::ImageRgb16(rgb16))),
        ("rgba16.png".to_string(), "PNG RGBA 16-bit", encode_png(DynamicImage::ImageRgba16(rgba16))),
        ("la16.png".to_string(), "PNG LA 16-bit", encode_png(DynamicImage::ImageLumaA16(la16))),
        ("l16.png".to_string(), "PNG L 16-bit", encode_png(DynamicImage::ImageLuma16(l16))),
    ];
    for transparent in [None, Some(5)] {
        out.push((format!("partial{}.gif", transparent.unwrap_or(0)), "GIF partial first frame", partial_gif(rng, 16, transparent)));
    }
    out.push(("short_palette.gif".to_string(), "GIF index past palette", partial_gif(rng, 4, None)));
    // The encoder insists on a palette, so the global table is cut out of its output.
    let mut bare = partial_gif(rng, 16, None);
    assert_eq!(bare[10] & 0x87, 0x83, "a 16-color global table");
    bare[10] &= !0x87;
    bare.drain(13..13 + 16 * 3);
    out.push(("no_palette.gif".to_string(), "GIF without palette", bare));
    out
}

/// A 50x40 GIF whose first frame covers only the 21x17 block at (13, 9), with indices 0..16 into `colors` palette entries.
fn partial_gif(rng: &mut Rng, colors: usize, transparent: Option<u8>) -> Vec<u8> {
    let palette: Vec<u8> = (0..colors * 3).map(|_| rng.byte()).collect();
    let mut out = Vec::new();
    {
        let mut enc = gif::Encoder::new(&mut out, 50, 40, &palette).expect("gif encoder");
        let mut frame = gif::Frame { left: 13, top: 9, width: 21, height: 17, transparent, ..gif::Frame::default() };
        frame.buffer = (0..21 * 17).map(|_| (rng.next() % 16) as u8).collect::<Vec<u8>>().into();
        enc.write_frame(&frame).expect("gif frame");
    }
    out
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn canvases_and_patches_match_pillow_byte_for_byte_and_decoders_agree() {
    if !python_has_pillow() {
        eprintln!("SKIP vision_pillow: python3 with Pillow and numpy is missing (python3 -m pip install pillow numpy)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("lockstep-vision-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let s = Settings::release();
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let mut images = BTreeMap::new();
    let mut cases = Vec::new();
    let mut encode = Vec::new();
    for &(name, kind, w, h) in CASES {
        let img = generate(kind, w, h, &mut rng);
        std::fs::write(dir.join(format!("{name}.rgb")), &img.data).expect("write rgb");
        let pixels = u64::from(w) * u64::from(h);
        cases.push(json!({"name": name, "width": w, "height": h, "patches": pixels <= 800_000}));
        encode.push(json!({"name": name, "width": w, "height": h}));
        images.insert(name, img);
    }
    let foreign = foreign_pngs(&mut rng);
    for (file, _, bytes) in &foreign {
        std::fs::write(dir.join(file), bytes).expect("write png");
    }
    let manifest = json!({
        "settings": {"min_pixels": s.min_pixels, "max_image_tokens": s.max_image_tokens, "patch": s.patch, "cell": s.cell},
        "cases": cases,
        "encode": encode,
        "foreign": foreign.iter().map(|(f, l, _)| json!({"file": f, "label": l})).collect::<Vec<_>>(),
    });
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).expect("manifest");
    let start = std::time::Instant::now();
    let out = Command::new("python3").arg(script()).arg(&dir).output().expect("run python3");
    eprintln!("pillow_preprocess.py took {:.1} s", start.elapsed().as_secs_f64());
    let start = std::time::Instant::now();
    assert!(out.status.success(), "pillow_preprocess.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let results: Value = serde_json::from_slice(&read(&dir, "results.json")).expect("results.json");
    eprintln!("Pillow {}", results["pillow"]);

    // The normalization of every byte value, bit for bit against numpy float32.
    let lut: Vec<u32> = (0..=255u8).map(|v| vision::patches::normalize(v).to_bits()).collect();
    let want: Vec<u32> = results["normalize"].as_array().expect("normalize").iter().map(|v| v.as_u64().expect("u32") as u32).collect();
    assert_eq!(lut, want, "(v / 255 - 0.5) / 0.5 in f32");

    let (mut same_images, mut total_bytes, mut differing_bytes, mut same_patches, mut patch_sets) = (0, 0usize, 0usize, 0, 0);
    for &(name, ..) in CASES {
        let img = &images[name];
        let r = &results["cases"][name];
        let (plan, canvas) = vision::canvas(img.view(), &s).unwrap_or_else(|e| panic!("{name}: {e}"));
        let theirs = (r["box_w"].as_u64(), r["box_h"].as_u64(), r["llm_h"].as_u64(), r["llm_w"].as_u64(), r["tokens"].as_u64());
        let ours = (Some(plan.box_w.into()), Some(plan.box_h.into()), Some(plan.llm_h.into()), Some(plan.llm_w.into()), Some(plan.tokens));
        assert_eq!(ours, theirs, "{name}: plan (box_w, box_h, llm_h, llm_w, tokens)");
        let pil = read(&dir, &format!("{name}.canvas"));
        assert_eq!(pil.len(), canvas.data.len(), "{name}: canvas size");
        let diff = pil.iter().zip(&canvas.data).filter(|(a, b)| a != b).count();
        total_bytes += pil.len();
        differing_bytes += diff;
        same_images += usize::from(diff == 0);
        eprintln!("{name:>24}: {}x{} -> box {}x{}, {} tokens, {diff} of {} canvas bytes differ", img.width, img.height, plan.box_w, plan.box_h, plan.tokens, pil.len());
        if dir.join(format!("{name}.patches")).exists() {
            let theirs = read(&dir, &format!("{name}.patches"));
            let patches = vision::patches::patchify(&canvas, s.patch, s.cell);
            let ours: Vec<u8> = patches.data.iter().flat_map(|v| v.to_le_bytes()).collect();
            assert_eq!(ours.len(), theirs.len(), "{name}: patch count");
            patch_sets += 1;
            same_patches += usize::from(ours == theirs);
        }
    }
    eprintln!("canvas: {same_images} of {} images identical, {differing_bytes} of {total_bytes} bytes differ", CASES.len());
    eprintln!("patches: {same_patches} of {patch_sets} images bit-identical to numpy float32");
    eprintln!("lockstep's plans, canvases and patches took {:.1} s", start.elapsed().as_secs_f64());

    // Decoder agreement per format and mode.
    // (identical images, images, differing bytes, bytes, largest difference) per label.
    let mut tally: BTreeMap<String, (usize, usize, usize, usize, u8)> = BTreeMap::new();
    let entries = results["encoded"].as_array().expect("encoded").iter().chain(results["foreign"].as_array().expect("foreign"));
    for e in entries {
        let (file, label) = (e["file"].as_str().expect("file"), e["label"].as_str().expect("label"));
        let pil = read(&dir, &format!("{file}.pil"));
        if label == "GIF without palette" {
            // Pillow opens it as gray; the gif crate refuses it, and so does lockstep, with a decode error.
            let refused = vision::decode(&read(&dir, file), s.max_pixels);
            assert!(matches!(refused, Err(vision::VisionError::Decode { format: "GIF", .. })), "{label}: {refused:?}");
            eprintln!("{label:>24}: refused (Pillow opens it as gray)");
            continue;
        }
        let ours = vision::decode(&read(&dir, file), s.max_pixels).unwrap_or_else(|err| panic!("{label} {file}: {err}"));
        assert_eq!((Some(u64::from(ours.width)), Some(u64::from(ours.height))), (e["width"].as_u64(), e["height"].as_u64()), "{label} {file}: size");
        let t = tally.entry(label.to_string()).or_default();
        t.0 += usize::from(ours.data == pil);
        t.1 += 1;
        t.2 += ours.data.iter().zip(&pil).filter(|(a, b)| a != b).count();
        t.3 += pil.len();
        t.4 = t.4.max(ours.data.iter().zip(&pil).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0));
    }
    eprintln!("decoder agreement (images decoding byte-identical to Pillow):");
    for (label, (same, n, diff, bytes, max)) in &tally {
        eprintln!("{label:>24}: {same} of {n} identical; {diff} of {bytes} bytes differ, by at most {max}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(same_images, CASES.len(), "every canvas must equal Pillow's");
    assert_eq!(same_patches, patch_sets, "every patch set must equal numpy's float32");
    for (label, (same, n, ..)) in &tally {
        if label.starts_with("PNG") || label.starts_with("GIF") || label.starts_with("WebP lossless") {
            assert_eq!(same, n, "{label}: lossless formats must decode exactly as Pillow does");
        }
    }
}
