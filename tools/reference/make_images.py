#!/usr/bin/env python3
"""Preprocessing fixtures for engine/vision, made with the real Pillow (Debian python3-pil):
testdata/vision/images.json and the PNG files it names.

For each picture, the RGB bytes Moonshot's K3 processor (docs/VISION.md §4, source S5) hands to
normalisation after resizing it to each listed size: `Image.resize(size, BICUBIC)`, then a picture
with alpha laid on the 8-pixel chessboard (white 255 top left, gray 180) in float32 and truncated.
Also the processor's resize rule (navit_resize_image) for a table of upload sizes.

    /usr/bin/python3 tools/reference/make_images.py
"""

import json
import math
import os

import numpy as np
from PIL import Image

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "testdata", "vision")

BG = {"chessboard_square_size": 8, "chessboard_square_on_top_left": True,
      "chessboard_white_value": 255, "chessboard_gray_value": 180}


def chessboard(h, w):
    y = np.arange(h)[:, None] // BG["chessboard_square_size"]
    x = np.arange(w)[None, :] // BG["chessboard_square_size"]
    gray = (x + y) % 2 == (1 if BG["chessboard_square_on_top_left"] else 0)
    bg = np.full((h, w, 3), BG["chessboard_white_value"], dtype=np.uint8)
    bg[gray] = BG["chessboard_gray_value"]
    return bg


def fill(image):
    """The processor's _fill_transparent_background."""
    if image.mode == "RGB":
        return image
    if "A" not in image.getbands() and "transparency" not in image.info:
        return image.convert("RGB")
    rgba = np.asarray(image.convert("RGBA"))
    h, w = rgba.shape[:2]
    alpha = rgba[:, :, 3:4].astype(np.float32) / 255.0
    out = alpha * rgba[:, :, :3] + (1.0 - alpha) * chessboard(h, w)
    return Image.fromarray(out.astype(np.uint8))


def processed(image, size):
    """transparent_bg_fill_stage = after_resize."""
    return np.asarray(fill(image.resize(size, resample=Image.Resampling.BICUBIC)))


def navit(w, h, patch=14, merge=2, limit=65536, side=512):
    s1 = math.sqrt(limit / (max(1.0, w // patch) * max(1.0, h // patch)))
    s2 = side * patch / w
    s3 = side * patch / h
    scale = min(1.0, s1, s2, s3)
    nw, nh = max(1, int(w * scale)), max(1, int(h * scale))
    nw, nh = min(nw, side * patch), min(nh, side * patch)
    f = merge * patch
    ph, pw = (f - nh % f) % f, (f - nw % f) % f
    return {"w": w, "h": h, "new_w": nw, "new_h": nh, "pad_w": pw, "pad_h": ph,
            "tokens": ((nh + ph) // f) * ((nw + pw) // f)}


def pictures():
    yy, xx = np.mgrid[0:29, 0:41]
    rgb = np.stack([(xx * 37 + yy * 11) % 256, (xx * 5 + yy * 53 + 17) % 256, ((xx ^ yy) * 29) % 256],
                   axis=-1).astype(np.uint8)
    rgb[10:18, 12:30] = [250, 10, 10]                       # a hard-edged block: ringing, clamping
    gray = ((xx * 7 + yy * yy) % 256).astype(np.uint8)[:23, :31]
    alpha = np.clip((xx * 9 - 60), 0, 255).astype(np.uint8)   # 0 on the left .. opaque on the right
    alpha[:5] = 255
    rgba = np.concatenate([rgb, alpha[..., None]], axis=-1)
    return [("rgb.png", Image.fromarray(rgb, "RGB")),
            ("gray.png", Image.fromarray(gray, "L")),
            ("rgba.png", Image.fromarray(rgba, "RGBA"))]


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = []
    for name, im in pictures():
        im.save(os.path.join(OUT, name))
        back = Image.open(os.path.join(OUT, name))
        back.load()
        w, h = back.size
        for size in [(w // 2, h // 3), (17, 11), (w, h // 2), (w - 3, h), (5, 4), (w + 9, h + 5)]:
            arr = processed(back, size)
            cases.append({"file": name, "mode": back.mode, "size": list(size),
                          "rgb_hex": arr.astype(np.uint8).tobytes().hex()})
    Image.fromarray(np.asarray(pictures()[0][1])[:9, :13]).save(os.path.join(OUT, "tiny.webp"), lossless=True)
    table = [navit(w, h) for (w, h) in [(1024, 1024), (1920, 1080), (224, 224), (13, 7), (1, 1), (7168, 100),
                                         (10000, 10000), (4000, 3000), (3585, 3585), (100, 9000), (640, 427)]]
    with open(os.path.join(OUT, "images.json"), "w") as f:
        json.dump({"note": "made by tools/reference/make_images.py with Pillow " + Image.__version__,
                   "resized": cases, "navit": table}, f, indent=1)
        f.write("\n")
    print("wrote", len(cases), "resize cases")


if __name__ == "__main__":
    main()
