import { z } from 'zod';
import { StageRoleSchema } from '../pipeline/stage-payload';
import { CacheBudgetsSchema } from '../cache/budgets';
import { MATMUL_DTYPES } from '../native/plan-builder';
import type { StageProgress } from '../pipeline/family/session';
import type { StageMemory } from './stage-host';

/** Where a stage process listens or sends: a Unix socket path (shm links) or a TCP port on 127.0.0.1. */
export const LinkAddressSchema = z.union([
  z.strictObject({ socketPath: z.string().min(1).max(4096) }),
  z.strictObject({ port: z.number().int().min(0).max(65535) }),
]);
export type LinkAddress = z.infer<typeof LinkAddressSchema>;

/** What a stage process is started with (one JSON argument). */
export const StageProcessConfigSchema = z.strictObject({
  role: StageRoleSchema,
  /** Module specifiers of the deployment's families (`loadFamilyModule`: each exports `family`). */
  families: z.array(z.string().min(1).max(4096)).min(1).max(64),
  modelsDir: z.string().min(1),
  defaultModel: z.string().min(1),
  matmulDtype: z.enum(MATMUL_DTYPES).optional(),
  tasks: z.array(z.enum(['T2V', 'T2I'])).min(1),
  /** Whether the deployment serves world sessions (Denoise keeps a chunk-KV pool). */
  world: z.boolean(),
  /** The deployment's cache budgets. */
  caches: CacheBudgetsSchema,
  connector: z.enum(['shm', 'tcp']),
  /** Folder of shm frame files (both ends of a link use the same one). */
  shmDir: z.string().min(1).optional(),
  /** The stage's input link (for TCP, port 0 picks one; the process reports it). */
  listen: LinkAddressSchema,
  /** The next stage's input (the front's result link after decode). */
  downstream: LinkAddressSchema,
  credits: z.number().int().min(1).max(64),
  maxInFlight: z.number().int().min(1).max(64).optional(),
  /** Native compute threads (OMNIRX_THREADS of the process). */
  threads: z.number().int().min(1).max(256).optional(),
});
export type StageProcessConfig = z.infer<typeof StageProcessConfigSchema>;

/** Stage process → parent. */
export type StageToParent =
  | { type: 'ready'; port?: number }
  | { type: 'held'; requestId: string }
  | { type: 'passed'; requestId: string }
  | { type: 'progress'; event: StageProgress }
  | { type: 'holding'; seq: number; requestIds: string[] }
  | { type: 'memory'; seq: number; rssBytes: number; nativeBytesInUse: number; stage: StageMemory }
  /** The answer to a liveness `ping` (sent from the process's event loop, so a frozen or wedged process sends none). */
  | { type: 'pong'; seq: number }
  | { type: 'fatal'; message: string };

/** Parent → stage process. */
export type ParentToStage =
  | { type: 'holding?'; seq: number }
  | { type: 'memory?'; seq: number }
  | { type: 'ping'; seq: number }
  | { type: 'cancel'; requestId: string }
  | { type: 'shutdown' };
