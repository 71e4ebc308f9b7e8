"""
Procedural top-down world for training and checking the embedded default model (issue 8).

A 64×64 RGB room seen from above: a floor of the room colour inside a wall border, a coloured agent (a disc or a
square) and up to three static obstacles (blocks) of one colour. Each frame f the agent moves one step of
``STEP`` pixels by its action a_f ∈ {0 none, 1 up, 2 down, 3 left, 4 right} (the ids of src/request/action.ts
``ACTION_KEYS``); a move that would enter a wall or an obstacle is not made (the agent stops). Frame f shows the
position after action a_f, so a_f is the displacement from frame f−1 to frame f (frame 0 from the start position).

Scenes and prompts come from a grammar using only words of ``DEFAULT_WORDS`` (src/families/wan/default-spec.ts), e.g.
"a red ball in a dark blue room with two yellow blocks". Everything is a pure function of the seed (numpy
``default_rng``), so clips are reproducible.

CLI (PNG strips so a person can look at the data; one row per clip, frames left to right, prompt and actions
printed to stdout)::

    /usr/bin/python3 tools/train/procedural_world.py --out /tmp/world.png --clips 4 --frames 12 --seed 1
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

SIZE = 64
"""Frame width and height in pixels."""
WALL = 3
"""Wall border thickness in pixels; the floor is [WALL, SIZE − WALL) in both axes."""
STEP = 3
"""Agent displacement per frame in pixels for a directional action."""
AGENT = 12
"""Agent size in pixels (square side, disc diameter); 8 until 2026-12-05 (docs/model-card.md, "Agent size")."""
BLOCK = 10
"""Obstacle side in pixels."""
SPAWN = (SIZE // 2, SIZE // 2)
"""Spawn point: the agent's start centre (x, y) in scenes sampled with ``spawn`` (the room's centre), as a game starts
its player at a fixed point: the agent's first position is not drawn, so frame 0 shows it at the spawn point moved by
the first action (``simulate``: one STEP in its direction, or none), one of five places instead of any free one.
``sample_scene`` keeps obstacles off it."""

ACTIONS = ("none", "up", "down", "left", "right")
"""Action key names in id order (src/request/action.ts ACTION_KEYS)."""
DIRECTIONS = {0: (0, 0), 1: (0, -1), 2: (0, 1), 3: (-1, 0), 4: (1, 0)}
"""Action id → unit displacement (dx, dy) in image coordinates (y down)."""

ROOM_COLORS: Dict[str, Tuple[int, int, int]] = {
    "dark blue": (30, 40, 120),
    "dark green": (25, 90, 40),
    "gray": (110, 110, 110),
    "black": (15, 15, 15),
    "brown": (100, 60, 30),
}
"""Floor colours (uint8 RGB) by their prompt words."""
OBJECT_COLORS: Dict[str, Tuple[int, int, int]] = {
    "red": (225, 35, 35),
    "green": (40, 205, 60),
    "yellow": (235, 215, 40),
    "cyan": (40, 215, 225),
    "magenta": (225, 50, 205),
    "white": (245, 245, 245),
    "orange": (245, 140, 25),
}
"""Agent and obstacle colours (uint8 RGB); an agent and the obstacles of one scene never share a colour."""
AGENT_SHAPES = {"ball": "disc", "disc": "disc", "circle": "disc", "dot": "disc", "cube": "square", "square": "square", "box": "square"}
"""Agent nouns of the grammar → drawn shape."""
COUNT_WORDS = {2: "two", 3: "three"}


def wall_color(room: Tuple[int, int, int]) -> Tuple[int, int, int]:
    """Wall colour of a room: halfway between the floor colour and mid-gray 160 (uint8 RGB)."""
    return tuple(int((c + 160) // 2) for c in room)  # type: ignore[return-value]


@dataclass
class Scene:
    """One room: colour names, the agent's shape and start centre (x, y), obstacle rectangles (x0, y0, x1, y1), exclusive."""

    room: str
    agent_color: str
    agent_noun: str
    obstacle_color: Optional[str]
    obstacles: List[Tuple[int, int, int, int]] = field(default_factory=list)
    start: Tuple[int, int] = (32, 32)

    @property
    def prompt(self) -> str:
        article = "an" if self.agent_color[0] in "aeiou" else "a"
        text = f"{article} {self.agent_color} {self.agent_noun} in a {self.room} room"
        n = len(self.obstacles)
        if n:
            count = ("an" if self.obstacle_color[0] in "aeiou" else "a") if n == 1 else COUNT_WORDS[n]
            text += f" with {count} {self.obstacle_color} block{'s' if n > 1 else ''}"
        return text

    def to_json(self) -> dict:
        return {
            "prompt": self.prompt,
            "room": self.room,
            "agent_color": self.agent_color,
            "agent_shape": AGENT_SHAPES[self.agent_noun],
            "obstacle_color": self.obstacle_color,
            "obstacles": [list(r) for r in self.obstacles],
        }


def agent_box(x: int, y: int) -> Tuple[int, int, int, int]:
    """Agent bounding box (x0, y0, x1, y1), exclusive, for centre (x, y): [x − AGENT/2, x + AGENT/2)."""
    h = AGENT // 2
    return x - h, y - h, x + h, y + h


def _overlaps(a: Tuple[int, int, int, int], b: Tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def free(scene: Scene, x: int, y: int) -> bool:
    """Whether the agent may stand at centre (x, y): inside the floor and overlapping no obstacle."""
    box = agent_box(x, y)
    if box[0] < WALL or box[1] < WALL or box[2] > SIZE - WALL or box[3] > SIZE - WALL:
        return False
    return not any(_overlaps(box, r) for r in scene.obstacles)


def sample_scene(rng: np.random.Generator, spawn: bool = False) -> Scene:
    """A random scene: room colour, agent colour/noun, 0–3 obstacles of another colour, and a random free start
    position, or with ``spawn`` the spawn point ``SPAWN`` (an obstacle draw that would overlap the agent there is skipped,
    as one too close to another obstacle). The draws before the start are the same, so a scene's colours, noun and the
    obstacle count asked for do not depend on ``spawn`` (the obstacles that fit do); as no start is drawn, the draws
    after it (a clip's actions, in make_clip) differ."""
    room = str(rng.choice(list(ROOM_COLORS)))
    colors = list(OBJECT_COLORS)
    agent_color = str(colors.pop(int(rng.integers(len(colors)))))
    noun = str(rng.choice(list(AGENT_SHAPES)))
    n = int(rng.integers(0, 4))
    scene = Scene(room, agent_color, noun, str(rng.choice(colors)) if n else None)
    # obstacles on a 4-pixel grid inside the floor, separated by at least one agent width so no region is sealed off;
    # a draw that does not fit is skipped (at most 50 draws), so a scene may get fewer obstacles than n
    for _ in range(50):
        if len(scene.obstacles) == n:
            break
        x0, y0 = (int(v) * 4 for v in rng.integers(WALL // 4 + 3, (SIZE - WALL - BLOCK) // 4 - 2, size=2))
        rect = (x0, y0, x0 + BLOCK, y0 + BLOCK)
        grown = (x0 - AGENT - 1, y0 - AGENT - 1, x0 + BLOCK + AGENT + 1, y0 + BLOCK + AGENT + 1)
        if not any(_overlaps(grown, r) for r in scene.obstacles) and not (spawn and _overlaps(rect, agent_box(*SPAWN))):
            scene.obstacles.append(rect)
    if not scene.obstacles:
        scene.obstacle_color = None
    if spawn:
        scene.start = SPAWN
        return scene
    while True:
        x, y = (int(v) for v in rng.integers(WALL + AGENT // 2, SIZE - WALL - AGENT // 2 + 1, size=2))
        if free(scene, x, y):
            scene.start = (x, y)
            return scene


def sample_actions(rng: np.random.Generator, frames: int, mean_run: float = 4.0, p_none: float = 0.1) -> np.ndarray:
    """Persistent random actions [frames] int64: runs of one action with geometric lengths (mean `mean_run`)."""
    out = np.zeros(frames, dtype=np.int64)
    f = 0
    while f < frames:
        a = 0 if rng.random() < p_none else int(rng.integers(1, 5))
        run = int(rng.geometric(1.0 / mean_run))
        out[f : f + run] = a
        f += run
    return out


def simulate(scene: Scene, actions: Sequence[int]) -> np.ndarray:
    """Agent centres [F, 2] int64 (x, y): frame f = frame f−1 moved by actions[f], unless the move is not free."""
    x, y = scene.start
    out = np.zeros((len(actions), 2), dtype=np.int64)
    for f, a in enumerate(actions):
        dx, dy = DIRECTIONS[int(a)]
        if free(scene, x + STEP * dx, y + STEP * dy):
            x, y = x + STEP * dx, y + STEP * dy
        out[f] = (x, y)
    return out


def render(scene: Scene, position: Tuple[int, int]) -> np.ndarray:
    """One frame [SIZE, SIZE, 3] uint8 RGB: walls, floor, obstacles, the agent at centre `position`."""
    room = np.array(ROOM_COLORS[scene.room], dtype=np.uint8)
    img = np.empty((SIZE, SIZE, 3), dtype=np.uint8)
    img[:] = np.array(wall_color(ROOM_COLORS[scene.room]), dtype=np.uint8)
    img[WALL : SIZE - WALL, WALL : SIZE - WALL] = room
    if scene.obstacle_color is not None:
        for x0, y0, x1, y1 in scene.obstacles:
            img[y0:y1, x0:x1] = OBJECT_COLORS[scene.obstacle_color]
    x0, y0, x1, y1 = agent_box(*position)
    color = np.array(OBJECT_COLORS[scene.agent_color], dtype=np.uint8)
    if AGENT_SHAPES[scene.agent_noun] == "square":
        img[y0:y1, x0:x1] = color
    else:
        yy, xx = np.mgrid[y0:y1, x0:x1]
        r = AGENT / 2
        inside = (xx + 0.5 - position[0]) ** 2 + (yy + 0.5 - position[1]) ** 2 <= r * r
        img[y0:y1, x0:x1][inside] = color
    return img


@dataclass
class Clip:
    """frames [F, 64, 64, 3] uint8 RGB; actions [F] int64 (ACTIONS ids); positions [F, 2] int64 agent centres (x, y)."""

    scene: Scene
    frames: np.ndarray
    actions: np.ndarray
    positions: np.ndarray

    @property
    def prompt(self) -> str:
        return self.scene.prompt


def make_clip(seed: int, frames: int, spawn: bool = False) -> Clip:
    """Clip number `seed`: a deterministic function of (seed, frames, spawn); ``spawn``: the agent starts at the spawn
    point ``SPAWN`` (sample_scene)."""
    rng = np.random.default_rng(seed)
    scene = sample_scene(rng, spawn)
    actions = sample_actions(rng, frames)
    positions = simulate(scene, actions)
    video = np.stack([render(scene, (int(x), int(y))) for x, y in positions])
    return Clip(scene, video, actions, positions)


def strip(clips: Sequence[Clip]) -> np.ndarray:
    """Clips as one image [rows·66, F·66, 3] uint8: one row per clip, 2-pixel white gutters."""
    f = max(len(c.frames) for c in clips)
    out = np.full((len(clips) * (SIZE + 2), f * (SIZE + 2), 3), 255, dtype=np.uint8)
    for i, c in enumerate(clips):
        for j, frame in enumerate(c.frames):
            out[i * (SIZE + 2) : i * (SIZE + 2) + SIZE, j * (SIZE + 2) : j * (SIZE + 2) + SIZE] = frame
    return out


def save_png(path: str, image: np.ndarray) -> None:
    """Writes a uint8 RGB image [H, W, 3] as PNG (Pillow)."""
    from PIL import Image

    Image.fromarray(image, "RGB").save(path, optimize=True)


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="PNG strip path")
    ap.add_argument("--clips", type=int, default=4)
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0, help="clip i uses seed + i")
    ap.add_argument("--spawn", action="store_true", help="start the agent at the spawn point (the room's centre) instead of a random free position")
    a = ap.parse_args(argv)
    if a.clips < 1:
        ap.error(f"--clips must be at least 1; got {a.clips}")
    if a.frames < 1:
        ap.error(f"--frames must be at least 1; got {a.frames}")
    if a.seed < 0:
        ap.error(f"--seed must not be negative (numpy seeds are non-negative); got {a.seed}")
    folder = os.path.dirname(os.path.abspath(a.out))
    if not a.out.lower().endswith(".png") or os.path.isdir(a.out):
        ap.error(f"--out must be the path of a .png file; got {a.out}")
    if not os.path.isdir(folder):
        ap.error(f"--out: folder {folder} does not exist")
    clips = [make_clip(a.seed + i, a.frames, a.spawn) for i in range(a.clips)]
    save_png(a.out, strip(clips))
    for c in clips:
        print(json.dumps({"prompt": c.prompt, "start": list(c.scene.start), "obstacles": [list(r) for r in c.scene.obstacles], "actions": [ACTIONS[int(k)] for k in c.actions]}))


if __name__ == "__main__":
    main()
