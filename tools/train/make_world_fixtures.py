"""
Writes the detector's fixture clips test/fixtures/world/clip{i}.png (frames left to right, 64×64 each, no gutters) and
clips.json (per clip: the scene, action ids, agent centres; plus the geometry and palette the TS detector must mirror).

    /usr/bin/python3 tools/train/make_world_fixtures.py     # deterministic: same sources → same files
"""

from __future__ import annotations

import json
import os

import numpy as np

import procedural_world as world

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "test", "fixtures", "world")
SEEDS, FRAMES = (13, 2, 3, 4, 5, 6), 12


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    clips = []
    for i, seed in enumerate(SEEDS):
        c = world.make_clip(seed, FRAMES)
        world.save_png(os.path.join(OUT, f"clip{i}.png"), np.concatenate(list(c.frames), axis=1))
        clips.append({**c.scene.to_json(), "seed": seed, "actions": c.actions.tolist(), "positions": c.positions.tolist()})
    doc = {
        "generator": "tools/train/make_world_fixtures.py",
        "size": world.SIZE,
        "wall": world.WALL,
        "step": world.STEP,
        "agent": world.AGENT,
        "block": world.BLOCK,
        "room_colors": {k: list(v) for k, v in world.ROOM_COLORS.items()},
        "object_colors": {k: list(v) for k, v in world.OBJECT_COLORS.items()},
        "wall_colors": {k: list(world.wall_color(v)) for k, v in world.ROOM_COLORS.items()},
        "clips": clips,
    }
    with open(os.path.join(OUT, "clips.json"), "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
