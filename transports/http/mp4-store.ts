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
 * Finished MP4s of the server's jobs, as files `<id>.mp4` in a folder: by default a private temporary folder (made at
 * construction, removed with {@link dispose}); with `dir` (a data folder's `videos/`) that folder, whose files
 * outlive the server. Bounded by count and bytes: adding a file past either bound evicts the oldest stored files
 * first (a reader that already opened an evicted file still reads it whole); `onEvict` names each evicted id.
 */
export class Mp4Store {
  readonly dir: string;
  private readonly files = new Map<string, { path: string; bytes: number }>();
  private totalBytes = 0;

  private readonly durable: boolean;

  constructor(
    private readonly limits: Mp4StoreLimits,
    private readonly onEvict: (id: string) => void,
    dir?: string,
  ) {
    this.durable = dir !== undefined;
    this.dir = dir ?? ownedTempDir(tmpdir(), 'omnirx-http-');
  }

  /** File name of video `id` in {@link dir}. */
  static fileName(id: string): string {
    return `${id}.mp4`;
  }

  /** Path a new video `id` is encoded to (then registered with {@link add}). */
  pathFor(id: string): string {
    return path.join(this.dir, Mp4Store.fileName(id));
  }

  /** Registers the encoded file of `id` (`bytes` long) and evicts the oldest files past the bounds. */
  async add(id: string, bytes: number): Promise<void> {
    this.restore(id, bytes);
    await this.evictPastBounds();
  }

  /** Registers the file of `id` kept from an earlier run, as the newest, without evicting (then {@link evictPastBounds}). */
  restore(id: string, bytes: number): void {
    this.files.set(id, { path: this.pathFor(id), bytes });
    this.totalBytes += bytes;
  }

  /** Evicts the oldest files while the store is past a bound (a single file larger than maxBytes is still served). */
  async evictPastBounds(): Promise<void> {
    for (const [old] of this.files) {
      if (this.files.size <= this.limits.maxFiles && this.totalBytes <= this.limits.maxBytes) break;
      if (this.files.size === 1) break;
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
    // The videos folder is the server's own: whatever sits at a job's path (a file, or a folder put there by hand) goes.
    await fsp.rm(this.pathFor(id), { force: true, recursive: true });
    if (f) this.totalBytes -= f.bytes;
  }

  /** Stored files and their bytes. */
  usage(): { files: number; bytes: number } {
    return { files: this.files.size, bytes: this.totalBytes };
  }

  /** Forgets every file; a private temporary folder is removed with its files, a given `dir` is kept as it is. */
  dispose(): void {
    this.files.clear();
    this.totalBytes = 0;
    if (!this.durable) rmSync(this.dir, { recursive: true, force: true });
  }
}
