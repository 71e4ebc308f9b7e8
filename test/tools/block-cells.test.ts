/**
 * The loss weight of the blocks in the training command (tools/train/train.py `block_cells`, `--block-weight`, issue 8):
 * which latent cells a block covers, checked on hand-computed rectangles of the procedural world, and that every clip of
 * a DiT batch carries its scene's cells in every frame. Runs Debian's PyTorch.
 */
import { trainPython as python } from '../helpers/train-python';

/** The (row, column) pairs set in a [16, 16] mask. */
function cells(mask: number[][]): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  mask.forEach((row, r) => row.forEach((v, c) => v && out.push([r, c])));
  return out;
}

describe('block_cells', () => {
  it('marks the 4×4-pixel latent cells a block rectangle meets, x0/y0 inclusive and x1/y1 exclusive', () => {
    // a 10×10 block at x 4–13, y 8–17: columns 4//4 = 1 … 13//4 = 3, rows 8//4 = 2 … 17//4 = 4;
    // a block ending on a cell edge (x1 = 28) does not reach the next cell; one at the floor's far edge stays in the grid
    const out: Record<string, number[][]> = python(
      'import json, train\n' +
        'print(json.dumps({k: train.block_cells(r).tolist() for k, r in {"one": [(4, 8, 14, 18)], "edge": [(20, 40, 28, 48)], "far": [(51, 51, 61, 61)], "two": [(4, 8, 14, 18), (20, 40, 28, 48)], "none": []}.items()}))',
    );
    const rect = (r0: number, r1: number, c0: number, c1: number) => {
      const out: Array<[number, number]> = [];
      for (let r = r0; r <= r1; r++) for (let c = c0; c <= c1; c++) out.push([r, c]);
      return out;
    };
    expect(cells(out.one)).toEqual(rect(2, 4, 1, 3));
    expect(cells(out.edge)).toEqual(rect(10, 11, 5, 6));
    expect(cells(out.far)).toEqual(rect(12, 15, 12, 15));
    expect(cells(out.two)).toEqual([...rect(2, 4, 1, 3), ...rect(10, 11, 5, 6)]);
    expect(cells(out.none)).toEqual([]);
    for (const m of Object.values(out)) expect(m.flat().every((v) => v === 0 || v === 1)).toBe(true);
  });

  it("gives each clip of a DiT batch its own scene's block cells in every frame, and none to a scene without blocks", () => {
    const out: { shape: number[]; same: boolean[]; counts: number[]; blocks: number[] } = python(
      'import json, numpy as np, torch, train\n' +
        'torch.manual_seed(0)\n' +
        'enc = train.cref.WanVaeEncoder({**train.default_model.default_spec()["vae"]}).eval()\n' +
        'c = train.DitClips(3, 0, enc)\n' +
        'want = [np.repeat(train.block_cells(k.scene.obstacles)[None], len(c.positions), 0) for k in c.clips]\n' +
        'print(json.dumps({"shape": list(c.blocks.shape), "same": [bool(np.array_equal(c.blocks[i].numpy(), w)) for i, w in enumerate(want)], "counts": [int(c.blocks[i, 0].sum()) for i in range(len(want))], "blocks": [len(k.scene.obstacles) for k in c.clips]}))',
    );
    expect(out.shape.slice(2)).toEqual([16, 16]);
    expect(out.same.every(Boolean)).toBe(true);
    // the world puts 10×10 blocks on the 4-pixel grid, apart from each other: each meets 3×3 cells
    expect(out.counts).toEqual(out.blocks.map((n) => 9 * n));
    expect(out.blocks.some((n) => n > 0)).toBe(true);
  });
});
