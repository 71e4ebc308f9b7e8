import { promises as fsp, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ownedTempDir } from '../../src/util/owned-temp-dir';

/** Bounds of an {@link Mp4Store}. */
export interface Mp4StoreLimits {
  /** Most finished videos kept. */
  maxFiles: number;
  /** Most bytes of finished videos kept. */
  maxBytes: number;
}

/**
 * Finished MP4s of the server's jobs, as files in a private temporary folder (made at construction, removed with
 * {@link dispose}). Bounded by count and bytes: adding a file past either bound evicts the oldest stored files
 * first (a reader that already opened an evicted file still reads it whole); `onEvict` names each evicted id.
 */
export class Mp4Store {
  readonly dir: string;
  private readonly files = new Map<string, { path: string; bytes: number }>();
  private totalBytes = 0;

  constructor(
    private readonly limits: Mp4StoreLimits,
    private readonly onEvict: (id: string) => void,
  ) {
    this.dir = ownedTempDir(tmpdir(), 'omnirx-http-');
  }

  /** Path a new video `id` is encoded to (then registered with {@link add}). */
  pathFor(id: string): string {
    return path.join(this.dir, `${id}.mp4`);
  }

  /** Registers the encoded file of `id` (`bytes` long) and evicts the oldest files past the bounds. */
  async add(id: string, bytes: number): Promise<void> {
    this.files.set(id, { path: this.pathFor(id), bytes });
    this.totalBytes += bytes;
    for (const [old] of this.files) {
      if (this.files.size <= this.limits.maxFiles && this.totalBytes <= this.limits.maxBytes) break;
      if (old === id && this.files.size === 1) break; // a single file larger than maxBytes is still served
      await this.remove(old);
      this.onEvict(old);
    }
  }

  /** The stored file of `id`, if any. */
  get(id: string): { path: string; bytes: number } | undefined {
    return this.files.get(id);
  }

  /** Deletes the file of `id` (no-op when absent). */
  async remove(id: string): Promise<void> {
    const f = this.files.get(id);
    this.files.delete(id);
    await fsp.rm(this.pathFor(id), { force: true });
    if (f) this.totalBytes -= f.bytes;
  }

  /** Stored files and their bytes. */
  usage(): { files: number; bytes: number } {
    return { files: this.files.size, bytes: this.totalBytes };
  }

  /** Removes the folder and every file in it. */
  dispose(): void {
    this.files.clear();
    this.totalBytes = 0;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
