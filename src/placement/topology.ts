import { z } from 'zod';

/** Settings of one stage of a disaggregated topology. */
export const StageSettingsSchema = z.strictObject({
  /** Requests the stage works on at once (the Denoise stage interleaves their steps). Default: encode 1, denoise 4, decode 1. */
  maxInFlight: z.number().int().min(1).max(64).optional(),
  /** Credit window of the stage's input link: payloads it accepts ahead of its work (queue-time prefetch). Default 2. */
  credits: z.number().int().min(1).max(64).default(2),
  /** Native compute threads of the stage process (OMNIRX_THREADS); default: one per core. Ignored in-process. */
  threads: z.number().int().min(1).max(256).optional(),
});
export type StageSettings = z.infer<typeof StageSettingsSchema>;

const defaults = () => StageSettingsSchema.parse({});

/**
 * Supervision of stage processes. A dead stage process is restarted; more than `maxRestarts` restarts (all stages
 * together) within `windowMs` is a crash loop: the pipeline goes down (work refused, `/ready` and `/health` 503). A
 * stage process that does not answer a liveness ping for `livenessTimeoutMs` (stopped, wedged event loop) is killed
 * and restarted. Ignored in-process.
 */
export const SupervisionSchema = z
  .strictObject({
    maxRestarts: z.number().int().min(0).max(1000).default(5),
    windowMs: z.number().int().min(1000).max(86_400_000).default(60_000),
    livenessIntervalMs: z.number().int().min(100).max(60_000).default(1000),
    livenessTimeoutMs: z.number().int().min(1000).max(600_000).default(10_000),
  })
  .refine((s) => s.livenessTimeoutMs >= 2 * s.livenessIntervalMs, {
    path: ['livenessTimeoutMs'],
    message: 'livenessTimeoutMs must be at least twice livenessIntervalMs',
  });
export type Supervision = z.infer<typeof SupervisionSchema>;

/**
 * Where computation runs (docs/design.md §9, docs/disaggregation.md). `monolithic`: one process runs the whole graph
 * (the default). `disaggregated`: Encode → Denoise → Decode stages, each loading only its components; with the
 * `in-process` connector they share this process (tests), with `shm` (same host) or `tcp` each stage is its own
 * OS process, restarted when it dies.
 */
export const TopologySchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('monolithic') }),
  z.strictObject({
    kind: z.literal('disaggregated'),
    connector: z.enum(['in-process', 'shm', 'tcp']).default('shm'),
    stages: z
      .strictObject({
        encode: StageSettingsSchema.default(defaults),
        denoise: StageSettingsSchema.default(defaults),
        decode: StageSettingsSchema.default(defaults),
      })
      .default(() => ({ encode: defaults(), denoise: defaults(), decode: defaults() })),
    supervision: SupervisionSchema.default(() => SupervisionSchema.parse({})),
  }),
]);
export type Topology = z.infer<typeof TopologySchema>;
/** A topology as a caller writes it (defaults not yet applied). */
export type TopologyInput = z.input<typeof TopologySchema>;
export type DisaggregatedTopology = Extract<Topology, { kind: 'disaggregated' }>;

/** Requests a stage works on at once when its settings do not say. */
export const DEFAULT_MAX_IN_FLIGHT = { encode: 1, denoise: 4, decode: 1 } as const;
