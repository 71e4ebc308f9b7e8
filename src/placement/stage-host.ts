import type { CacheBudgets } from '../cache/budgets';
import { CacheManager, type CacheManagerStats } from '../cache/cache-manager';
import { StepScheduler } from '../executor/scheduler';
import type { NativeBinding } from '../native/binding';
import { ModelCatalog } from '../pipeline/family/catalog';
import type { FamilyStages, ModelFamily, RequestContext } from '../pipeline/family/family';
import { ModelLoader } from '../pipeline/family/loader';
import type { LoadedModel, ModelLoadOptions } from '../pipeline/family/model';
import type { FamilyRegistry } from '../pipeline/family/registry';
import type { SessionStageHandler, StageProgress } from '../pipeline/family/session';
import type { PipelinePolicies } from '../pipeline/policies/policies';
import type { RequestState } from '../pipeline/request-state';
import { buildPipeline, type BuiltPipeline } from '../pipeline/spec';
import { PayloadError, RUNTIME_PAYLOAD, type DiffusionStagePayload, type StageRole } from '../pipeline/stage-payload';
import type { Task } from '../request/omni-request';
import type { StageReceiver, StageSender } from './connectors/stage-connector';
import { jobPayload, packOutputs, unpackJob } from './stage-job';
import { StageWorker, type PhaseRun } from './stage-worker';
import { DEFAULT_MAX_IN_FLIGHT } from './topology';

export interface StageHostOptions {
  role: StageRole;
  native: NativeBinding;
  families: FamilyRegistry;
  modelsDir: string;
  defaultModel: string;
  /** How this stage's models load (the Denoise stage's matmul dtype). */
  load?: ModelLoadOptions;
  policies: PipelinePolicies;
  tasks: readonly Task[];
  /** Whether the deployment serves world sessions (the Denoise stage then keeps a chunk-KV pool). */
  world: boolean;
  /** The deployment's cache budgets: Encode's feature cache, Denoise's chunk-KV pool. */
  budgets: CacheBudgets;
  input: StageReceiver;
  output: StageSender;
  /** Further consumers of the stage's outputs (fan-out; see `StageWorkerOptions.taps`). */
  taps?: readonly StageSender[];
  maxInFlight?: number;
  onHeld?(requestId: string): void;
  onPassed?(requestId: string): void;
  onProgress?(ev: StageProgress): void;
}

/** What a stage holds resident: its loaded components' weight bytes, per model and in sum. */
export interface StageMemory {
  role: StageRole;
  /** Components constructed on this stage (over the models it has loaded). */
  components: string[];
  /**
   * Component → weight bytes resident when the model was loaded, summed over its models. Components whose weights
   * load lazily on first use (the DiT) count 0 here; `components` says what is constructed at all.
   */
  weightBytes: Record<string, number>;
  /** Weight bytes of encoder components (the families' `encoderComponents`) constructed here. */
  encoderBytes: number;
  /** World-session state held here: sessions, and the chunk-KV slabs they claim. */
  sessions: { open: number; chunkKvSlabs: number };
  /** The stage's cache pools: the deployment's budgets and each pool's occupancy (a pool this stage does not keep is absent). */
  caches: CacheManagerStats & { budgets: CacheBudgets };
}

/** The stage phases of `family`. @throws PayloadError when the family cannot run on stages. */
function stagesOf(family: ModelFamily): FamilyStages {
  if (family.stages === undefined)
    throw new PayloadError(`model family '${family.name}' has no stage phases: it runs in process only`, { param: 'metadata.job.family' });
  return family.stages;
}

/**
 * One stage of a disaggregated deployment (docs/disaggregation.md): a model loader that constructs only the stage's
 * components of each family (`FamilyStages.components`), the families' graphs, its own StepScheduler and cache pools
 * (with the deployment's budgets), the families' session handlers, and a `StageWorker` over the given links. The
 * runtime's request and outputs payloads are packed here; only a family reads and writes its hand-offs. The same host
 * runs in process (the `in-process` connector) and in a stage process (`stage-main`).
 */
export class StageHost {
  readonly worker: StageWorker;
  readonly models: ModelLoader;
  private readonly pipelines = new Map<string, BuiltPipeline<RequestContext, RequestState>>();
  private readonly caches: CacheManager;
  private readonly sessions: SessionStageHandler[];

  constructor(private readonly o: StageHostOptions) {
    const catalog = new ModelCatalog(o.modelsDir, o.defaultModel, o.families);
    this.models = new ModelLoader(o.native, catalog, (f) => f.stages?.components(o.role, o.policies) ?? new Set(), o.load);
    this.caches = new CacheManager(o.budgets, { features: o.role === 'encode', chunkKv: o.role === 'denoise' && o.world, tokenKv: false });
    const steps = new StepScheduler();
    const env = {
      role: o.role,
      native: o.native,
      model: (id: string) => this.models.get(id),
      steps,
      caches: this.caches,
      conditioning: o.policies.conditioning,
    };
    this.sessions = o.families.list().flatMap((f) => (f.stages?.sessions === undefined ? [] : [f.stages.sessions(env)]));
    this.worker = new StageWorker({
      role: o.role,
      phases: {
        open: (role, p) => this.open(role, p),
        pack: (role, run) => this.pack(role, run),
        session: {
          claims: (p) => p.sessionId !== undefined,
          handle: (p, emit, report) => {
            const handler = this.sessions.find((h) => h.claims(p));
            if (handler === undefined)
              throw new PayloadError(`${p.payloadType} of session '${p.sessionId}': no model family's session handler on the ${o.role} stage takes it`, {
                param: 'payloadType',
              });
            return handler.handle(p, emit, report);
          },
        },
      },
      input: o.input,
      output: o.output,
      taps: o.taps,
      steps,
      maxInFlight: o.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT[o.role],
      onHeld: o.onHeld,
      onPassed: o.onPassed,
      onProgress: o.onProgress,
    });
  }

  private pipeline(family: ModelFamily): BuiltPipeline<RequestContext, RequestState> {
    let p = this.pipelines.get(family.name);
    if (p === undefined) {
      p = buildPipeline(family.pipeline(this.o.policies), { tasks: this.o.tasks.filter((t) => family.tasks.includes(t)) });
      this.pipelines.set(family.name, p);
    }
    return p;
  }

  /**
   * Opens `role`'s phase for an incoming payload: validates the job, loads (or reuses) the model, restores the
   * payload's tensors into a fresh state (the family's `restore`).
   * @throws PayloadError for a payload this stage cannot take; the model's load errors.
   */
  private async open(role: StageRole, p: DiffusionStagePayload): Promise<PhaseRun> {
    if (role === 'encode' && p.payloadType !== RUNTIME_PAYLOAD.request)
      throw new PayloadError(`the encode stage expects an ${RUNTIME_PAYLOAD.request} payload, got ${p.payloadType}`, { param: 'payloadType' });
    const job = unpackJob(p);
    const family = this.o.families.get(job.family, `request ${job.requestId}`);
    const stages = stagesOf(family);
    const model: LoadedModel = await this.models.get(job.params.model);
    const abort = new AbortController();
    const ctx: RequestContext = {
      requestId: job.requestId,
      model,
      params: job.params,
      nodeParams: job.nodeParams,
      native: this.o.native,
      signal: abort.signal,
      featureCache: this.caches.features,
    };
    const state = family.createState();
    try {
      if (role !== 'encode') stages.restore(role, ctx, p, state);
    } catch (e) {
      state.release();
      throw e;
    }
    const phase = stages.phases[role];
    const nodes = this.pipeline(family)
      .activeNodes(job.params)
      .filter((n) => phase.nodes.includes(n.name));
    return { family, job, ctx, state, nodes, consumes: phase.consumes, abort };
  }

  /** The payload of what `role`'s phase produced: the family's hand-off to the next stage, or (decode) the artifacts for the front. */
  private pack(role: StageRole, run: PhaseRun): DiffusionStagePayload {
    if (role === 'decode') return packOutputs(run.job, run.state.artifacts);
    const handoff = stagesOf(run.family).pack(role, run.ctx, run.state);
    return jobPayload(run.job, role, role === 'encode' ? 'denoise' : 'decode', handoff.payloadType, handoff.tensors);
  }

  /** Loads model `id` now (a stage process warms up before it reports ready). */
  async preload(id: string): Promise<void> {
    await this.models.get(id);
  }

  /** The weight bytes this stage holds, per component. */
  async memory(): Promise<StageMemory> {
    const weightBytes: Record<string, number> = {};
    const components = new Set<string>();
    const encoders = new Set(this.o.families.list().flatMap((f) => f.stages?.encoderComponents ?? []));
    for (const p of this.models.loaded()) {
      const m = await p.catch(() => undefined);
      if (m === undefined) continue;
      for (const c of m.loadedComponents) components.add(c);
      for (const [c, b] of Object.entries(m.weightBytes)) weightBytes[c] = (weightBytes[c] ?? 0) + b;
    }
    const encoderBytes = [...encoders].reduce((n, c) => n + (weightBytes[c] ?? 0), 0);
    const sessions = this.sessions.reduce((s, h) => ({ open: s.open + h.stats().open, chunkKvSlabs: h.stats().chunkKvSlabs }), { open: 0, chunkKvSlabs: 0 });
    return {
      role: this.o.role,
      components: [...components].sort(),
      weightBytes,
      encoderBytes,
      sessions,
      caches: { budgets: this.caches.budgets, ...this.caches.stats() },
    };
  }

  async close(): Promise<void> {
    await this.worker.close();
    for (const h of this.sessions) await h.close();
    this.caches.dispose();
    await this.models.dispose();
  }
}
