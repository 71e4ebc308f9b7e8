import { PNG } from 'pngjs';

/**
 * RGB24 frames ([H, W, 3] each, same size) side by side as one PNG (RGBA 8-bit, opaque), with a `gutter`-pixel white
 * gap between frames: width = n·W + (n − 1)·gutter, height = H. For frame strips in docs and eval output.
 */
export function frameStripPng(frames: readonly Uint8Array[], width: number, height: number, gutter = 2): Buffer {
  const n = frames.length;
  const png = new PNG({ width: n * width + Math.max(0, n - 1) * gutter, height });
  png.data.fill(255);
  frames.forEach((rgb, f) => {
    const x0 = f * (width + gutter);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const o = 4 * (y * png.width + x0 + x),
          i = 3 * (y * width + x);
        png.data[o] = rgb[i];
        png.data[o + 1] = rgb[i + 1];
        png.data[o + 2] = rgb[i + 2];
      }
    }
  });
  return PNG.sync.write(png);
}
