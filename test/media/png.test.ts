import { PNG } from 'pngjs';
import { encodePng, thumbnail } from '../../src/media/png';

describe('preview images', () => {
  const image = (width: number, height: number) => {
    const pixels = new Uint8Array(width * height * 3);
    for (let i = 0; i < width * height; i++) pixels.set([i % 256, (i * 7) % 256, 255 - (i % 256)], i * 3);
    return { kind: 'image' as const, width, height, pixels };
  };

  it('thumbnail keeps an image that fits and scales a larger one by nearest neighbour, keeping the aspect ratio', () => {
    const small = image(4, 2);
    expect(thumbnail(small, 4)).toBe(small);
    // 8×4 → 4×2 at scale 1/2: output pixel (x, y) samples source (2x + 1, 2y + 1).
    const big = image(8, 4);
    const t = thumbnail(big, 4);
    expect([t.width, t.height]).toEqual([4, 2]);
    for (let y = 0; y < 2; y++)
      for (let x = 0; x < 4; x++) {
        const s = ((2 * y + 1) * 8 + (2 * x + 1)) * 3;
        expect(Array.from(t.pixels.subarray((y * 4 + x) * 3, (y * 4 + x) * 3 + 3))).toEqual(Array.from(big.pixels.subarray(s, s + 3)));
      }
    // A 1000×3 strip scaled to 128 wide keeps at least one row.
    expect(thumbnail(image(1000, 3), 128)).toMatchObject({ width: 128, height: 1 });
  });

  it('encodePng writes an RGB PNG that decodes to the same pixels', () => {
    const img = image(5, 3);
    const png = PNG.sync.read(encodePng(img));
    expect([png.width, png.height]).toEqual([5, 3]);
    for (let i = 0; i < 15; i++) expect(Array.from(png.data.subarray(i * 4, i * 4 + 3))).toEqual(Array.from(img.pixels.subarray(i * 3, i * 3 + 3)));
  });
});
