#!/usr/bin/env python3
"""The reference's image preprocessing with Pillow, for tests/vision_pillow.rs to compare byte for byte.

Usage: pillow_preprocess.py DIR

DIR/manifest.json lists
  cases:   {name, width, height, patches}  raw RGB in DIR/<name>.rgb; writes <name>.canvas (the padded canvas,
           RGB bytes) and, when patches is true, <name>.patches (little-endian f32, patch-major, (c, ph, pw))
  encode:  {name, width, height}           raw RGB in DIR/<name>.rgb; crops it to at most 384x384 and encodes that
           in several modes as PNG, JPEG, WebP and GIF with Pillow; writes each file and Pillow's decode of it
  foreign: {file, label}                    files written by the caller; writes Pillow's decode of each
and the settings (min_pixels, max_image_tokens, patch, cell). Results go to DIR/results.json.

The steps follow the reference inference/image_processor.py: Image.convert("RGB"), the resize plan
(plan_image_grid / safe_resize / solve_resize_ratio), ImageOps.pad(image, box, color=(127, 127, 127)),
then (x / 255 - 0.5) / 0.5 in float32 and the patch reshape.
"""
import io
import json
import math
import sys

import numpy as np
import PIL
from PIL import Image, ImageOps


# Images are cropped to this side before encoding, which keeps the encoders fast.
ENCODE_SIDE = 384


def tokens_of(llm_h, llm_w):
    return llm_h * (llm_w + 1) + 2


def grid_of(box_h, box_w, patch, cell):
    return math.ceil((box_h // patch) / cell), math.ceil((box_w // patch) / cell)


def shrink(height, width, patch, cell, max_tokens):
    ratio = height / width
    max_w = math.sqrt((max_tokens - 2) / ratio + 0.25) - 0.5
    max_h = max_w * ratio
    px = patch * cell
    if max_w < 1.0:
        return (max_tokens - 2) // 2 * px, px
    if max_h < 1.0:
        return px, (max_tokens - 3) * px
    beta = min(math.floor(max_w) * px / width, math.floor(max_h) * px / height)
    return math.floor(height * beta / patch) * patch, math.floor(width * beta / patch) * patch


def plan(width, height, s):
    patch, cell, max_tokens = s["patch"], s["cell"], s["max_image_tokens"]
    if 0 < width * height < s["min_pixels"]:
        ratio = (s["min_pixels"] / (width * height)) ** 0.5
        width, height = int(width * ratio), int(height * ratio)
    box_w = math.ceil(width / patch) * patch
    box_h = math.ceil(height / patch) * patch
    llm_h, llm_w = grid_of(box_h, box_w, patch, cell)
    if tokens_of(llm_h, llm_w) > max_tokens:
        box_h, box_w = shrink(height, width, patch, cell, max_tokens)
        llm_h, llm_w = grid_of(box_h, box_w, patch, cell)
        if tokens_of(llm_h, llm_w) > max_tokens:
            raise ValueError("does not fit")
    return {"box_w": box_w, "box_h": box_h, "llm_h": llm_h, "llm_w": llm_w, "tokens": tokens_of(llm_h, llm_w)}


def patchify(canvas, patch):
    x = np.asarray(canvas, dtype=np.float32).transpose(2, 0, 1) / np.float32(255)
    x = (x - np.float32(0.5)) / np.float32(0.5)
    c, h, w = x.shape
    gh, gw = h // patch, w // patch
    p = x.reshape(c, gh, patch, gw, patch).transpose(1, 3, 0, 2, 4).reshape(gh * gw, c * patch * patch)
    return np.ascontiguousarray(p, dtype="<f4")


def load_rgb(d, name, width, height):
    with open(f"{d}/{name}.rgb", "rb") as f:
        return Image.frombytes("RGB", (width, height), f.read())


def variants(rgb):
    """(label, image, format, save options) per encoding of one RGB image."""
    gray = rgb.convert("L")
    yy, xx = np.mgrid[0 : rgb.height, 0 : rgb.width]
    alpha = Image.fromarray(((xx * 37 + yy * 11) % 256).astype(np.uint8))
    rgba = rgb.copy()
    rgba.putalpha(alpha)
    la = gray.copy()
    la.putalpha(alpha)
    pal = rgb.quantize(colors=200)
    pal16 = rgb.quantize(colors=12)
    g16 = Image.fromarray((np.asarray(gray, dtype=np.uint16) * 257 - np.asarray(alpha, dtype=np.uint16)).astype(np.uint16))
    out = [
        ("PNG RGB", rgb, "PNG", {}),
        ("PNG L", gray, "PNG", {}),
        ("PNG LA", la, "PNG", {}),
        ("PNG RGBA", rgba, "PNG", {}),
        ("PNG P", pal, "PNG", {}),
        ("PNG P 4-bit + tRNS", pal16, "PNG", {"transparency": 3}),
        ("PNG 1-bit", gray.convert("1"), "PNG", {}),
        ("PNG I;16", g16, "PNG", {}),
        ("PNG I;16 + tRNS", g16, "PNG", {"transparency": 300}),
        ("PNG L + tRNS", gray, "PNG", {"transparency": 7}),
        ("PNG RGB + tRNS", rgb, "PNG", {"transparency": (1, 2, 3)}),
        ("JPEG RGB", rgb, "JPEG", {}),
        ("JPEG L", gray, "JPEG", {}),
        ("JPEG RGB q95 4:4:4", rgb, "JPEG", {"quality": 95, "subsampling": 0}),
        ("JPEG RGB progressive", rgb, "JPEG", {"progressive": True}),
        ("JPEG CMYK", rgb.convert("CMYK"), "JPEG", {}),
        ("WebP lossy RGB", rgb, "WEBP", {}),
        ("WebP lossy RGBA", rgba, "WEBP", {}),
        ("WebP lossless RGB", rgb, "WEBP", {"lossless": True}),
        ("WebP lossless RGBA", rgba, "WEBP", {"lossless": True}),
        ("GIF P", rgb, "GIF", {}),
        ("GIF L", gray, "GIF", {}),
        ("GIF P + transparency", pal16, "GIF", {"transparency": 3}),
    ]
    return out


def main():
    d = sys.argv[1]
    with open(f"{d}/manifest.json") as f:
        m = json.load(f)
    s = m["settings"]
    results = {"cases": {}, "encoded": [], "foreign": [], "normalize": [], "pillow": PIL.__version__}
    lut = (np.arange(256, dtype=np.float32) / np.float32(255) - np.float32(0.5)) / np.float32(0.5)
    results["normalize"] = [int(v) for v in lut.astype("<f4").view("<u4")]
    for c in m["cases"]:
        image = load_rgb(d, c["name"], c["width"], c["height"]).convert("RGB")
        p = plan(image.width, image.height, s)
        canvas = ImageOps.pad(image, (p["box_w"], p["box_h"]), color=(127, 127, 127))
        with open(f"{d}/{c['name']}.canvas", "wb") as f:
            f.write(canvas.tobytes())
        if c["patches"]:
            with open(f"{d}/{c['name']}.patches", "wb") as f:
                f.write(patchify(canvas, s["patch"]).tobytes())
        results["cases"][c["name"]] = p
    for e in m["encode"]:
        rgb = load_rgb(d, e["name"], e["width"], e["height"])
        rgb = rgb.crop((0, 0, min(rgb.width, ENCODE_SIDE), min(rgb.height, ENCODE_SIDE)))
        for i, (label, im, fmt, opts) in enumerate(variants(rgb)):
            buf = io.BytesIO()
            im.save(buf, fmt, **opts)
            file = f"{e['name']}.{i}.{fmt.lower()}"
            with open(f"{d}/{file}", "wb") as f:
                f.write(buf.getvalue())
            with Image.open(io.BytesIO(buf.getvalue())) as src:
                decoded = src.convert("RGB")
            with open(f"{d}/{file}.pil", "wb") as f:
                f.write(decoded.tobytes())
            results["encoded"].append({"file": file, "label": label, "width": decoded.width, "height": decoded.height})
    for e in m["foreign"]:
        with Image.open(f"{d}/{e['file']}") as src:
            decoded = src.convert("RGB")
        with open(f"{d}/{e['file']}.pil", "wb") as f:
            f.write(decoded.tobytes())
        results["foreign"].append({"file": e["file"], "label": e["label"], "width": decoded.width, "height": decoded.height})
    with open(f"{d}/results.json", "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
