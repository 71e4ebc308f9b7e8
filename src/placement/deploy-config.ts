import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { z } from 'zod';
import { OmniError } from '../errors';
import { TaskSchema } from '../request/omni-request';
import { TopologySchema } from './topology';
import { CacheBudgetsSchema } from '../cache/budgets';
import { SessionConfigSchema } from '../pipeline/session-config';
import { MATMUL_DTYPES } from '../native/plan-builder';
import { WebrtcConfigSchema } from './webrtc-config';

const MiB = 2 ** 20;

/** What a deployment serves: the request tasks (`OmniRequest.task`) and `WORLD` (interactive sessions, `Engine.session`). */
export const DeployTaskSchema = z.union([TaskSchema, z.literal('WORLD')]);
export type DeployTask = z.infer<typeof DeployTaskSchema>;

/**
 * A deployment (docs/design.md §9): which tasks this process serves, its cache budgets and its session settings.
 * Versioned so a file written for a later omnirx is refused rather than half-read.
 */
export const DeployConfigSchema = z.strictObject({
  schemaVersion: z.literal(1),
  /** Folder of model directories. Default: the package's `models/` (or OMNIRX_MODELS_DIR). */
  modelsDir: z.string().min(1).max(4096).optional(),
  /** Model used when a request names none. */
  defaultModel: z.string().min(1).max(128).optional(),
  /**
   * Operand dtype of the DiT's matrix products (linear layers and attention): 'float32' (default; matches the
   * reference) or 'bfloat16' (operands rounded to bf16, float32 accumulation with the CPU's bf16 dot-product
   * instruction: faster; operands rounded with relative error ≤ 2⁻⁸; docs/benchmarks.md). Absent: float32, or what
   * the caller's engine options say.
   */
  matmulDtype: z.enum(MATMUL_DTYPES).optional(),
  /** Tasks served; components and pools no deployed task needs are never loaded or created. Default T2V, T2I, WORLD. */
  tasks: z.array(DeployTaskSchema).min(1).max(16).default(['T2V', 'T2I', 'WORLD']),
  caches: CacheBudgetsSchema.default(CacheBudgetsSchema.parse({})),
  sessions: SessionConfigSchema.default(SessionConfigSchema.parse({})),
  /** Where computation runs (`./topology`): monolithic when absent. */
  topology: TopologySchema.optional(),
  /** WebRTC transport (`./webrtc-config`): ICE servers, bind address, UDP ports, transport policy. Absent: loopback and host candidates only. */
  webrtc: WebrtcConfigSchema.optional(),
});
export type DeployConfig = z.infer<typeof DeployConfigSchema>;
export type DeployConfigInput = z.input<typeof DeployConfigSchema>;

/**
 * Validates a deploy config object.
 * @throws OmniError OMNIRX_ERR_CONFIG naming the first offending field as a dotted path (`caches.chunkKvBytes`).
 */
export function parseDeployConfig(input: unknown, source = 'deploy config'): DeployConfig {
  const r = DeployConfigSchema.safeParse(input);
  if (!r.success) {
    const issue = r.error.issues[0];
    const field = issue.path.map(String).join('.');
    throw new OmniError('OMNIRX_ERR_CONFIG', `${source}: ${field || '(root)'}: ${issue.message}`, { param: field || undefined });
  }
  return r.data;
}

/**
 * Reads at most `limit` bytes of regular file `file`, and refuses anything else before reading it whole: a device, pipe
 * or folder (`/dev/zero` would otherwise be read without end), or a file over `limit` (also one that grows past it
 * while read).
 * @throws Error naming what is wrong (an fs error's code, "not a regular file", the limit).
 */
async function readBounded(file: string, limit: number): Promise<Buffer> {
  // non-blocking, so opening a FIFO with no writer returns at once (to be refused) instead of waiting for one
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error('not a regular file');
    if (stat.size > limit) throw new Error(`${stat.size} bytes, more than the 1 MiB limit`);
    const buf = Buffer.alloc(limit + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, length, buf.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > limit) throw new Error('more than the 1 MiB limit');
    }
    return buf.subarray(0, length);
  } finally {
    await handle.close();
  }
}

/**
 * Reads and validates a deploy config file (JSON, a regular file of at most 1 MiB, read no further).
 * @throws OmniError OMNIRX_ERR_CONFIG for an unreadable, oversized or non-regular file, invalid JSON (with the
 *   parser's position) or an invalid field.
 */
export async function loadDeployConfig(file: string): Promise<DeployConfig> {
  let text: string;
  try {
    text = (await readBounded(file, MiB)).toString('utf8');
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_CONFIG', `${file}: ${(e as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_CONFIG', `${file}: not valid JSON (${(e as Error).message})`);
  }
  return parseDeployConfig(json, file);
}
