import { execFileSync } from 'node:child_process';

/** What ffprobe reports of a file's first video stream, frames counted by decoding them. */
export interface ProbedVideo {
  codec_name: string;
  width: number;
  height: number;
  r_frame_rate: string;
  /** Frames decoded (a string, as ffprobe writes it). */
  nb_read_frames: string;
}

/** Runs the real ffprobe on `file` (an MP4 or fMP4 written by a test) and returns its first video stream. */
export function probeVideo(file: string): ProbedVideo {
  const out = execFileSync('ffprobe', [
    '-v',
    'error',
    '-count_frames',
    '-select_streams',
    'v:0',
    '-show_entries',
    'stream=nb_read_frames,width,height,r_frame_rate,codec_name',
    '-of',
    'json',
    file,
  ]);
  return (JSON.parse(out.toString()) as { streams: ProbedVideo[] }).streams[0]!;
}
