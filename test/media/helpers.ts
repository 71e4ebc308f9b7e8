import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import type { VideoArtifact } from '../../src/request/artifacts';

/** The system ffprobe (Debian's ffmpeg package; @ffmpeg-installer ships none). */
export function findFfprobe(): string {
  const fromEnv = process.env.OMNIRX_FFPROBE;
  if (fromEnv) return fromEnv;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && existsSync(path.join(dir, 'ffprobe'))) return path.join(dir, 'ffprobe');
  }
  if (existsSync('/usr/bin/ffprobe')) return '/usr/bin/ffprobe';
  throw new Error('ffprobe not found on PATH; install ffmpeg (apt-get install -y ffmpeg) to run the media tests');
}

export interface ProbeResult {
  streams: Array<Record<string, unknown>>;
  format: Record<string, unknown>;
}

/** Runs `ffprobe -count_frames -show_streams -show_format -of json` on a file. */
export function ffprobe(file: string): ProbeResult {
  const out = execFileSync(findFfprobe(), ['-v', 'error', '-count_frames', '-show_streams', '-show_format', '-of', 'json', file], {
    encoding: 'utf8',
  });
  return JSON.parse(out) as ProbeResult;
}

/** A synthetic clip: dark blue background, a coloured square moving left to right, `[F, H, W, 3]` RGB24. */
export function syntheticVideo(width: number, height: number, numFrames: number, fps: number): VideoArtifact {
  const frames = new Uint8Array(numFrames * height * width * 3);
  const side = Math.max(2, Math.floor(Math.min(width, height) / 4));
  for (let f = 0; f < numFrames; f++) {
    const x0 = Math.floor(((width - side) * f) / Math.max(1, numFrames - 1));
    const y0 = Math.floor((height - side) / 2);
    const hue = f / numFrames;
    const r = Math.round(255 * Math.abs(Math.sin(Math.PI * hue)));
    const g = Math.round(255 * Math.abs(Math.sin(Math.PI * (hue + 1 / 3))));
    const b = Math.round(255 * Math.abs(Math.sin(Math.PI * (hue + 2 / 3))));
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const i = ((f * height + y) * width + x) * 3;
        const inside = x >= x0 && x < x0 + side && y >= y0 && y < y0 + side;
        frames[i] = inside ? r : 10;
        frames[i + 1] = inside ? g : 20;
        frames[i + 2] = inside ? b : 90;
      }
    }
  }
  return { kind: 'video', width, height, numFrames, fps, frames };
}

/** Asserts (with jest's expect) that `file` is an H.264 yuv420p MP4 with the given geometry, frame count and rate. */
export function expectH264Mp4(file: string, want: { width: number; height: number; frames: number; fps: number }): ProbeResult {
  const probe = ffprobe(file);
  const video = probe.streams.filter((s) => s.codec_type === 'video');
  expect(video).toHaveLength(1);
  const s = video[0]!;
  expect(s.codec_name).toBe('h264');
  expect(s.pix_fmt).toBe('yuv420p');
  expect(s.width).toBe(want.width);
  expect(s.height).toBe(want.height);
  expect(Number(s.nb_read_frames)).toBe(want.frames);
  expect(s.r_frame_rate).toBe(`${want.fps}/1`);
  expect(s.avg_frame_rate).toBe(`${want.fps}/1`);
  expect(String(probe.format.format_name)).toContain('mp4');
  const duration = Number(probe.format.duration);
  expect(Math.abs(duration - want.frames / want.fps)).toBeLessThan(1e-3);
  const streamDuration = Number(s.duration);
  expect(Math.abs(streamDuration - want.frames / want.fps)).toBeLessThan(1e-3);
  return probe;
}
