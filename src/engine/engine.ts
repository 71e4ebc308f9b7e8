import { randomUUID } from 'node:crypto';
import { asyncScheduler, catchError, concat, defer, map, Observable, of, ReplaySubject, takeUntil, type SchedulerLike, type Subscription } from 'rxjs';
import { CacheManager } from '../cache/cache-manager';
import { PoolExhaustedError } from '../cache/kv-handle';
import type { FeatureCache } from '../cache/feature-cache';
import { OmniError } from '../errors';
import { loadNative, type NativeBinding } from '../native/binding';
import type { MatmulDtype } from '../native/plan-builder';
import { ModelRegistry, defaultModelsDir } from '../models/registry';
import type { WanT2VModel } from '../families/wan/model';
import type { ResolvedParams } from '../pipeline/params';
import { buildPipeline, type BuiltPipeline } from '../pipeline/spec';
import type { WanT2VContext } from '../families/wan/context';
import { defaultWanT2VPolicies, wanT2VPipelineSpec, type WanT2VPolicies } from '../families/wan/pipeline';
import { WanT2VState } from '../families/wan/state';
import { denoiseWork } from '../families/wan/denoise-work';
import { actionAdaLNInjector, type ConditioningInjector } from '../pipeline/policies/conditioning-injector';
import { CacheBudgetsSchema, type CacheBudgets } from '../cache/budgets';
import { SessionConfigSchema, type SessionConfig } from '../pipeline/session-config';
import type { DeployConfig, DeployTask } from '../placement/deploy-config';
import { createSessionRequestSchema, type SessionRequestInput } from '../request/session-request';
import { DEFAULT_LIMITS, type RequestLimits } from '../request/limits';
import type { OmniEvent } from '../request/omni-event';
import { createOmniRequestSchema, type OmniRequest, type OmniRequestInput, type Task } from '../request/omni-request';
import { estimateMemory, resolveParams } from './admission';
import { failureEvent } from './events';
import { takeRequestOrAnswer } from './intake';
import { resolveSessionParams } from '../families/wan/session-params';
import { invalidInput } from '../request/invalid-input';
import { runGraph } from '../pipeline/graph-runner';
import { CostModel, StepScheduler } from '../executor/scheduler';
import { AdmissionPlanner } from './admission-planner';
import { WorldSession } from './session';
import { ChunkRollout } from '../families/wan/chunk-rollout';

export interface EngineOptions {
  /** Folder of model directories (default: `models/` in the package, or OMNIRX_MODELS_DIR). */
  modelsDir?: string;
  /** Model used when a request names none. */
  defaultModel?: string;
  /** Operand dtype of the DiT's matrix products, linear layers and attention (deploy config `matmulDtype`). Default float32. */
  matmulDtype?: MatmulDtype;
  limits?: RequestLimits;
  native?: NativeBinding;
  /**
   * Tasks this deployment serves: request tasks (T2V, T2I) and WORLD (interactive sessions, `session`). Components
   * and cache pools no deployed task needs are never loaded or created. Default T2V, T2I and WORLD.
   */
  tasks?: DeployTask[];
  /** Policies bound to the pipeline at build (default: classic CFG, one transformer, the model's flow shift). */
  policies?: Partial<WanT2VPolicies>;
  /** Requests waiting for admission before new ones are refused with OMNIRX_ERR_QUEUE_FULL. Default 64. */
  maxQueued?: number;
  /** Requests admitted (running) at once. Default 8. */
  maxRunning?: number;
  /** Memory budget of the pool for admission (Σ resident + max peak), bytes. Default 8 GiB. */
  memoryBudgetBytes?: number;
  /** Bounded wait for more members of a step batch (T2I at one resolution), ms. Default 2. */
  batchWindowMs?: number;
  /** Seeds of the cost model: `CostModel.keyOf(key)` → ms per step. */
  costSeed?: Record<string, number>;
  /** Time source of the step scheduler (virtual time in tests). */
  scheduler?: SchedulerLike;
  /** Byte budget of the engine's feature cache (text embeddings reused across requests). Default 64 MiB; 0 caches nothing. */
  featureCacheBytes?: number;
  /** Cache budgets (deploy config `caches`); `featureCacheBytes` above wins for the feature cache. */
  caches?: Partial<CacheBudgets>;
  /** World-session settings (deploy config `sessions`). */
  sessions?: Partial<SessionConfig>;
  /** How session actions reach the model (default: adaLN action injection). */
  injector?: ConditioningInjector;
}

/** Components a WORLD deployment loads besides the generation pipeline's: the VAE encoder (image-to-world). */
const WORLD_COMPONENTS = ['tokenizer', 'text_encoder', 'transformer', 'vae', 'vae_encoder'] as const;

/** Lifecycle of a request in the engine (ordered; everything after `running` is final). */
export enum RequestStatus {
  Queued = 0,
  Admitted = 1,
  Running = 2,
  Done = 3,
  Failed = 4,
  Cancelled = 5,
}

interface Waiter {
  requestId: string;
  status: RequestStatus;
  /** Model and params resolved while queued (or the admission failure). */
  prepared: Promise<{ model: WanT2VModel; params: ResolvedParams; nodeParams: Record<string, unknown>; claim: { residentBytes: number; peakBytes: number } }>;
  settled?: { model: WanT2VModel; params: ResolvedParams; nodeParams: Record<string, unknown>; claim: { residentBytes: number; peakBytes: number } } | { error: unknown };
  start: () => void;
  fail: (err: unknown) => void;
}

/**
 * The `admitted` event of request `requestId`: the values actually used (the guidance interval as
 * `guidanceIntervalStart` / `guidanceIntervalEnd`, as event params are scalars) and the work `estimate` (`ms` when
 * predicted).
 */
export function requestAdmittedEvent(requestId: string, p: ResolvedParams, estimate: { steps: number; forwards: number; ms?: number }): OmniEvent {
  const { task, model, width, height, numFrames, fps, numInferenceSteps, guidanceScale, guidanceInterval, flowShift, sampler, eta, seed, priority } = p;
  return {
    type: 'admitted',
    requestId,
    model,
    params: { task, width, height, numFrames, fps, numInferenceSteps, guidanceScale, guidanceIntervalStart: guidanceInterval[0], guidanceIntervalEnd: guidanceInterval[1], flowShift, sampler, eta, seed, priority, ...(p.previewEvery !== undefined ? { previewEvery: p.previewEvery } : {}) },
    estimate,
  };
}

/**
 * The execution plane's entry point (DESIGN.md §4). `generate` returns a cold `Observable<OmniEvent>`:
 * subscribing submits the request (queued → admitted → running nodes → done / failed / cancelled), every node
 * boundary and loop step is an event, the last event is `final` or `error` (failures are events, never stream
 * errors), and unsubscribing cancels the request — removed from the queue at once, or stopped at the next step
 * boundary with its native buffers released once its in-flight native call returns.
 *
 * Level 1 here: a bounded FIFO queue, memory admission (Σ resident + max peak ≤ budget), the graph runner per
 * request. Level 2: one `StepScheduler` for the pool interleaves the loop steps of every running request
 * (priority, then least attained service), so a short job never waits for a long one to finish.
 */
export class Engine {
  private readonly schema;
  private readonly pipeline: BuiltPipeline<WanT2VContext, WanT2VState>;
  private readonly policies: WanT2VPolicies;
  readonly steps: StepScheduler;
  readonly costModel: CostModel;
  private readonly admission: AdmissionPlanner;
  private readonly waiting: Waiter[] = [];
  private readonly runningIds = new Set<string>();
  private closed = false;
  private closePromise?: Promise<void>;
  /** Emits once, when `close()` starts: every running request ends at its next step boundary. */
  private readonly closing$ = new ReplaySubject<void>(1);
  /** Errors when `close()` starts: a run's `takeUntil` notifier, so closing ends it like a failure of its current node. */
  private readonly closed$ = this.closing$.pipe(
    map(() => {
      throw new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine closed before the request finished');
    }),
  );
  /** States of the requests that have started running and not yet freed their native buffers. */
  private readonly liveStates = new Set<WanT2VState>();
  /** The engine's cache pools (DESIGN.md §8): feature cache, chunk-KV slabs; only those the deployment needs. */
  readonly caches: CacheManager;
  private readonly sessionSchema;
  private readonly worldSessions = new Map<string, WorldSession>();
  /** Chunk-KV slabs each open session may hold at most (reserved at open, so no session fails mid-rollout). */
  private readonly slabReservations = new Map<string, number>();

  private constructor(
    readonly native: NativeBinding,
    readonly models: ModelRegistry,
    readonly limits: RequestLimits,
    private readonly options: Required<Pick<EngineOptions, 'maxQueued' | 'maxRunning' | 'memoryBudgetBytes'>>,
    policies: WanT2VPolicies,
    tasks: Task[],
    scheduler: SchedulerLike,
    batchWindowMs: number,
    costSeed: Record<string, number>,
    budgets: CacheBudgets,
    private readonly deployTasks: readonly DeployTask[],
    private readonly sessionConfig: SessionConfig,
    private readonly injector: ConditioningInjector,
    private readonly timers: SchedulerLike,
  ) {
    this.caches = new CacheManager(budgets, { features: true, chunkKv: deployTasks.includes('WORLD'), tokenKv: false });
    this.schema = createOmniRequestSchema(limits);
    this.sessionSchema = createSessionRequestSchema(limits);
    this.policies = policies;
    this.pipeline = buildPipeline(wanT2VPipelineSpec(policies), { tasks });
    this.costModel = new CostModel({ seed: costSeed });
    this.steps = new StepScheduler({ scheduler, costModel: this.costModel, batchWindowMs });
    this.admission = new AdmissionPlanner(options.memoryBudgetBytes);
  }

  /** Creates an engine; models load lazily on their first request, only the components the deployment needs. */
  static async create(options: EngineOptions = {}): Promise<Engine> {
    const native = options.native ?? loadNative();
    const policies = { ...defaultWanT2VPolicies(), ...options.policies };
    const deployTasks = options.tasks ?? ['T2V', 'T2I', 'WORLD'];
    const tasks = deployTasks.filter((t): t is Task => t !== 'WORLD');
    const components = new Set(buildPipeline(wanT2VPipelineSpec(policies), { tasks }).components);
    if (deployTasks.includes('WORLD')) for (const c of WORLD_COMPONENTS) components.add(c);
    const registry = new ModelRegistry(native, options.modelsDir ?? defaultModelsDir(), options.defaultModel ?? 'omnirx-default', components, { matmulDtype: options.matmulDtype });
    const budgets = CacheBudgetsSchema.parse({ ...options.caches, ...(options.featureCacheBytes !== undefined ? { featureCacheBytes: options.featureCacheBytes } : {}) });
    const scheduler = options.scheduler ?? asyncScheduler;
    return new Engine(
      native,
      registry,
      options.limits ?? DEFAULT_LIMITS,
      { maxQueued: options.maxQueued ?? 64, maxRunning: options.maxRunning ?? 8, memoryBudgetBytes: options.memoryBudgetBytes ?? 8 * 2 ** 30 },
      policies,
      tasks,
      scheduler,
      options.batchWindowMs ?? 2,
      options.costSeed ?? {},
      budgets,
      deployTasks,
      SessionConfigSchema.parse(options.sessions ?? {}),
      options.injector ?? actionAdaLNInjector,
      scheduler,
    );
  }

  /**
   * Creates an engine for a validated deploy config (`loadDeployConfig`): its models folder, default model, matmul
   * dtype, tasks, cache budgets and session settings; `extra` adds options the config does not carry (limits, policies, scheduler).
   */
  static fromDeployConfig(config: DeployConfig, extra: EngineOptions = {}): Promise<Engine> {
    return Engine.create({
      ...extra,
      ...(config.modelsDir === undefined ? {} : { modelsDir: config.modelsDir }),
      ...(config.defaultModel === undefined ? {} : { defaultModel: config.defaultModel }),
      tasks: config.tasks,
      ...(config.matmulDtype === undefined ? {} : { matmulDtype: config.matmulDtype }),
      caches: config.caches,
      sessions: config.sessions,
    });
  }

  /** The feature cache (text embeddings shared by requests and sessions); undefined when its budget is 0. */
  get featureCache(): FeatureCache | undefined {
    return this.caches.features;
  }

  /** Ids of the models this engine can serve. */
  listModels(): string[] {
    return this.models.list();
  }

  /** Requests waiting for admission, and requests running. */
  stats(): { queued: number; running: number; memoryBytes: number; sessions: number } {
    return { queued: this.waiting.length, running: this.runningIds.size, memoryBytes: this.admission.usedBytes, sessions: this.worldSessions.size };
  }

  /**
   * Opens an interactive world session (DESIGN.md §8; see `WorldSession`): validates the input, loads the model,
   * applies its defaults and reserves the session's chunk-KV slabs (sink + window + the chunk in flight, per layer),
   * so an open session never fails for lack of KV room mid-rollout. The rollout starts when `events$` is subscribed.
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST (`param` names the field) for invalid input or a duplicate id;
   *   OMNIRX_ERR_UNSUPPORTED_VALUE when the deployment does not serve WORLD or the size is not a multiple of the
   *   model's stride; OMNIRX_ERR_QUEUE_FULL at `sessions.maxSessions`; OMNIRX_ERR_CACHE_EXHAUSTED when the chunk-KV
   *   budget cannot hold the session; OMNIRX_ERR_UNKNOWN_MODEL / MODEL_LOAD from the registry; OMNIRX_ERR_UNAVAILABLE
   *   once the engine is closed.
   */
  async session(input: SessionRequestInput): Promise<WorldSession> {
    if (this.closed) throw new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine is closed');
    if (!this.deployTasks.includes('WORLD')) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', 'this deployment does not serve world sessions (add WORLD to its tasks)', { param: 'task' });
    const parsed = this.sessionSchema.safeParse(input);
    if (!parsed.success) throw invalidInput(parsed.error);
    const req = parsed.data;
    const model = await this.models.get(req.model);
    const cfg = this.sessionConfig;
    const resolved = resolveSessionParams(req, model);
    const { width, height } = resolved;
    // Checked after the model load so that concurrent opens cannot both pass.
    if (this.closed) throw new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine is closed');
    const sessionId = req.sessionId ?? randomUUID();
    if (this.worldSessions.has(sessionId) || this.runningIds.has(sessionId) || this.waiting.some((w) => w.requestId === sessionId)) {
      throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `sessionId '${sessionId}' is already in use`, { param: 'sessionId' });
    }
    if (this.worldSessions.size >= cfg.maxSessions) throw new OmniError('OMNIRX_ERR_QUEUE_FULL', `${this.worldSessions.size} world sessions are open, the deployment's bound (sessions.maxSessions); retry later`);
    const pool = this.caches.chunkKv(ChunkRollout.slabBytes(model, cfg.chunkFrames, width, height));
    const need = model.spec.transformer.numLayers * ((cfg.sinkFrames + cfg.localWindowFrames) / cfg.chunkFrames + 1);
    let reserved = 0;
    for (const n of this.slabReservations.values()) reserved += n;
    if (reserved + need > pool.totalSlabs) {
      throw new PoolExhaustedError(pool.name, sessionId, need, pool.totalSlabs - reserved, 'slabs', pool.slabBytes, pool.totalSlabs);
    }
    this.slabReservations.set(sessionId, need);
    const session = new WorldSession(
      { sessionId, prompt: req.prompt, image: req.image, initialAction: req.initialAction, ...resolved },
      {
        native: this.native,
        model,
        config: cfg,
        steps: this.steps,
        timers: this.timers,
        caches: this.caches,
        injector: this.injector,
        onClosed: (id) => {
          this.worldSessions.delete(id);
          this.slabReservations.delete(id);
        },
      },
    );
    this.worldSessions.set(sessionId, session);
    return session;
  }

  /** Runs one request as a cold event stream (see the class docs). */
  generate(input: OmniRequestInput): Observable<OmniEvent> {
    return new Observable<OmniEvent>((subscriber) => {
      const finish = (ev: OmniEvent) => {
        subscriber.next(ev);
        subscriber.complete();
      };
      const intake = takeRequestOrAnswer(subscriber, this.schema, input, (id) => this.refusal(id));
      if (intake === undefined) return undefined;
      const { request: req, requestId } = intake;
      const started = performance.now();
      let run: Subscription | undefined;
      const waiter: Waiter = {
        requestId,
        status: RequestStatus.Queued,
        prepared: this.prepare(req),
        start: () => {
          const s = waiter.settled;
          if (s === undefined || 'error' in s) return;
          waiter.status = RequestStatus.Running;
          subscriber.next(this.admittedEvent(requestId, s.params, s.model, s.nodeParams));
          run = this.run(requestId, s.model, s.params, s.nodeParams, started).subscribe({
            next: (ev) => {
              if (ev.type === 'final') waiter.status = RequestStatus.Done;
              if (ev.type === 'error') waiter.status = RequestStatus.Failed;
              subscriber.next(ev);
            },
            complete: () => {
              this.finishRunning(requestId);
              subscriber.complete();
            },
          });
        },
        fail: (err) => {
          waiter.status = RequestStatus.Failed;
          finish(failureEvent(requestId, err));
        },
      };
      this.waiting.push(waiter);
      subscriber.next({ type: 'queued', requestId, position: this.waiting.length - 1 });
      waiter.prepared.then(
        (v) => {
          waiter.settled = v;
          this.pump();
        },
        (error: unknown) => {
          waiter.settled = { error };
          this.pump();
        },
      );
      return () => {
        if (waiter.status === RequestStatus.Queued) {
          waiter.status = RequestStatus.Cancelled;
          this.removeWaiter(waiter);
          this.pump();
        } else if (waiter.status === RequestStatus.Running) {
          waiter.status = RequestStatus.Cancelled;
          run?.unsubscribe();
          this.finishRunning(requestId);
        }
      };
    });
  }

  /** Why a valid request cannot enter now (closed engine, an id in use, a full queue), or undefined. */
  private refusal(requestId: string): OmniError | undefined {
    if (this.closed) return new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine is closed');
    if (this.runningIds.has(requestId) || this.waiting.some((w) => w.requestId === requestId) || this.worldSessions.has(requestId)) {
      return new OmniError('OMNIRX_ERR_INVALID_REQUEST', `requestId '${requestId}' is already queued or running`, { param: 'requestId' });
    }
    // Waiters headed for a free running slot (still loading their model) are not queued behind anything: only the
    // rest count against maxQueued, so the engine holds at most maxQueued + maxRunning requests.
    const queued = this.waiting.length - Math.max(0, this.options.maxRunning - this.runningIds.size);
    if (queued >= this.options.maxQueued) return new OmniError('OMNIRX_ERR_QUEUE_FULL', `the queue holds ${queued} requests, its bound; retry later`);
    return undefined;
  }

  /** Loads the model and resolves the request while it waits in the queue. */
  private async prepare(req: OmniRequest) {
    const model = await this.models.get(req.model);
    const params = resolveParams(req, model, this.limits, this.policies);
    this.pipeline.activeNodes(params);
    const nodeParams = this.pipeline.parseNodeParams(req.nodeParams);
    return { model, params, nodeParams, claim: estimateMemory(params, model) };
  }

  /** Admits queued requests in FIFO order while running slots and memory allow. */
  private pump(): void {
    if (this.closed) return;
    while (this.waiting.length > 0) {
      const head = this.waiting[0];
      if (head.settled === undefined) return; // still loading its model: keep FIFO order
      if ('error' in head.settled) {
        this.removeWaiter(head);
        head.fail(head.settled.error);
        continue;
      }
      if (this.runningIds.size >= this.options.maxRunning) return;
      const d = this.admission.tryAdmit({ requestId: head.requestId, ...head.settled.claim });
      if (d.decision === 'wait') return;
      this.removeWaiter(head);
      if (d.decision === 'reject') {
        head.fail(new OmniError('OMNIRX_ERR_MEMORY', d.message));
        continue;
      }
      this.runningIds.add(head.requestId);
      head.status = RequestStatus.Admitted;
      head.start();
    }
  }

  private removeWaiter(w: Waiter): void {
    const i = this.waiting.indexOf(w);
    if (i >= 0) this.waiting.splice(i, 1);
  }

  private finishRunning(requestId: string): void {
    if (!this.runningIds.delete(requestId)) return;
    this.admission.release(requestId);
    this.steps.forget(requestId);
    this.pump();
  }

  private admittedEvent(requestId: string, p: ResolvedParams, model: WanT2VModel, nodeParams: Record<string, unknown>): OmniEvent {
    const { steps, guidedSteps, forwards } = denoiseWork(p, nodeParams, this.policies.cfg);
    const [pt, ph, pw] = model.spec.transformer.patchSize;
    const s = 2 ** (model.spec.vae.channels.length - 1);
    const shape = `${p.numFrames / pt}x${p.height / s / ph * ph}x${p.width / s / pw * pw}`;
    // Priced step by step: guided steps at the policy's guided cost, the others at a single forward's.
    const key = { model: `${model.spec.id}/transformer`, phase: 'denoise', shape } as const;
    const ms = this.steps.estimate({ ...key, guidance: this.policies.cfg.variant === 'batched' ? 'batched' : 'sequential' }, guidedSteps) + this.steps.estimate({ ...key, guidance: 'single' }, steps - guidedSteps);
    return requestAdmittedEvent(requestId, p, { steps, forwards, ms: Math.round(ms) });
  }


  /** Runs the active nodes of the graph, then emits `final`; any failure becomes an `error` event. */
  private run(requestId: string, model: WanT2VModel, params: ResolvedParams, nodeParams: Record<string, unknown>, started: number): Observable<OmniEvent> {
    return new Observable<OmniEvent>((subscriber) => {
      const abort = new AbortController();
      const state = new WanT2VState();
      const ctx: WanT2VContext = { requestId, model, params, nodeParams, native: this.native, signal: abort.signal, featureCache: this.caches.features };
      this.liveStates.add(state);
      void state.whenReleased().then(() => this.liveStates.delete(state));
      let current = '';
      const nodes = this.pipeline.activeNodes(params);
      const final$ = defer(() => of<OmniEvent>({ type: 'final', requestId, output: { requestId, artifacts: { ...state.artifacts }, seed: params.seed, ms: performance.now() - started } }));
      const sub = concat(
        runGraph(nodes, Object.keys(this.pipeline.spec.requestInputs), ctx, state, { scheduler: this.steps, requestId, priority: params.priority }, (n) => (current = n)),
        final$,
      )
        .pipe(
          takeUntil(this.closed$),
          catchError((err) => of(failureEvent(requestId, err, { node: current || undefined, completedSteps: state.completedSteps, partial: { ...state.artifacts } }))),
        )
        .subscribe(subscriber);
      return () => {
        abort.abort();
        sub.unsubscribe();
        state.release();
      };
    });
  }

  /**
   * Stops admitting requests, ends the work in flight and frees every loaded model. Queued requests end with an
   * `error` event (OMNIRX_ERR_UNAVAILABLE) at once; running ones end with one at their next step boundary (with
   * `node`, `completedSteps` and `partial`, as any failure); world sessions close. Resolves once every request's
   * and session's in-flight native call has returned and their buffers, the caches and the models are freed, so
   * no native work of this engine is left running. Idempotent: every call returns the first call's promise.
   */
  close(): Promise<void> {
    this.closePromise ??= this.shutdown();
    return this.closePromise;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    for (const w of this.waiting.splice(0)) w.fail(new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine closed before the request started'));
    this.closing$.next();
    const sessions = [...this.worldSessions.values()];
    for (const s of sessions) s.close();
    await Promise.all([...sessions.map((s) => s.whenReleased()), ...[...this.liveStates].map((s) => s.whenReleased())]);
    this.caches.dispose();
    await this.models.dispose();
  }
}
