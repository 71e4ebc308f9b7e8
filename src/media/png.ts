import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { PNG } from 'pngjs';
import type { ImageArtifact } from '../request/artifacts';
import { checkOutputPath } from './mp4';

/** Encodes an RGB24 image artifact (`pixels` `[H, W, 3]` uint8) as an 8-bit RGB PNG. */
export function encodePng(image: ImageArtifact): Buffer {
  const png = new PNG({ width: image.width, height: image.height, colorType: 2, inputColorType: 2, inputHasAlpha: false });
  png.data = Buffer.from(image.pixels.buffer, image.pixels.byteOffset, image.pixels.byteLength);
  return PNG.sync.write(png, { colorType: 2, inputColorType: 2, inputHasAlpha: false });
}

/**
 * The image scaled down (nearest neighbour) so that its longer side is at most `maxSide` pixels, keeping the aspect
 * ratio (each side at least 1 pixel); the image itself when it already fits.
 */
export function thumbnail(image: ImageArtifact, maxSide: number): ImageArtifact {
  const scale = Math.min(1, maxSide / Math.max(image.width, image.height));
  if (scale === 1) return image;
  const width = Math.max(1, Math.round(image.width * scale));
  const height = Math.max(1, Math.round(image.height * scale));
  const pixels = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const sy = Math.min(image.height - 1, Math.floor((y + 0.5) / scale));
    for (let x = 0; x < width; x++) {
      const sx = Math.min(image.width - 1, Math.floor((x + 0.5) / scale));
      const s = (sy * image.width + sx) * 3;
      pixels.set(image.pixels.subarray(s, s + 3), (y * width + x) * 3);
    }
  }
  return { kind: 'image', width, height, pixels };
}

/**
 * Writes `image` as a PNG at `outPath`, through a temporary name renamed when complete (a failure never leaves a
 * truncated file); the folder is created when missing.
 * @returns the absolute path written.
 * @throws OmniError OMNIRX_ERR_OUTPUT_PATH when the path cannot take the file (see `checkOutputPath`).
 */
export async function writePng(image: ImageArtifact, outPath: string): Promise<string> {
  const abs = await checkOutputPath(outPath);
  const tmp = path.join(path.dirname(abs), `.${path.basename(abs)}.${process.pid}.${Date.now().toString(36)}.partial`);
  try {
    await fsp.writeFile(tmp, encodePng(image));
    await fsp.rename(tmp, abs);
  } catch (e) {
    await fsp.rm(tmp, { force: true }).catch(() => undefined);
    throw e;
  }
  return abs;
}
