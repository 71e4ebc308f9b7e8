"""Loss curves as a PNG (Pillow only): one panel per training stage, log10 loss against step, EMA-smoothed."""

from __future__ import annotations

import math
from typing import Dict, List, Sequence, Tuple

from PIL import Image, ImageDraw

W, H, PAD = 420, 260, 36


def _smooth(xs: Sequence[float], beta: float = 0.9) -> List[float]:
    out, m = [], None
    for x in xs:
        m = x if m is None else beta * m + (1 - beta) * x
        out.append(m)
    return out


def plot_losses(path: str, series: Dict[str, List[Tuple[int, float]]]) -> None:
    """series {stage: [(step, loss)]} → PNG with one W×H panel per stage (raw in gray, EMA 0.9 in black)."""
    names = [n for n in series if series[n]]
    img = Image.new("RGB", (W * max(1, len(names)), H), "white")
    d = ImageDraw.Draw(img)
    for i, name in enumerate(names):
        pts = [(s, math.log10(max(l, 1e-12))) for s, l in series[name]]
        x0, x1 = pts[0][0], max(pts[-1][0], pts[0][0] + 1)
        lo, hi = min(p[1] for p in pts), max(p[1] for p in pts)
        hi = hi if hi > lo else lo + 1e-3
        ox = i * W

        def xy(s: float, v: float) -> Tuple[float, float]:
            return ox + PAD + (s - x0) / (x1 - x0) * (W - 2 * PAD), H - PAD - (v - lo) / (hi - lo) * (H - 2 * PAD)

        d.rectangle([ox + PAD, PAD, ox + W - PAD, H - PAD], outline="black")
        d.line([xy(s, v) for s, v in pts], fill=(170, 170, 170))
        d.line([xy(s, v) for (s, _), v in zip(pts, _smooth([p[1] for p in pts]))], fill="black", width=2)
        d.text((ox + PAD, 8), f"{name}: log10 loss vs step", fill="black")
        d.text((ox + 2, PAD - 4), f"{hi:.2f}", fill="black")
        d.text((ox + 2, H - PAD - 6), f"{lo:.2f}", fill="black")
        d.text((ox + PAD, H - PAD + 6), str(x0), fill="black")
        d.text((ox + W - PAD - 30, H - PAD + 6), str(x1), fill="black")
    img.save(path)
