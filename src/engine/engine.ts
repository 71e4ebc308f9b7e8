import { randomUUID } from 'node:crypto';
import { Observable, type SchedulerLike, type Subscription } from 'rxjs';
import { CacheBudgetsSchema, type CacheBudgets } from '../cache/budgets';
import { SlabReservations } from '../cache/slab-reservations';
import { OmniError } from '../errors';
import type { AdmittedRequest, Executor, ExecutorHealth } from '../executor/executor';
import { InProcessExecutor } from '../executor/in-process';
import type { StepScheduler } from '../executor/scheduler';
import { loadNative, type NativeBinding } from '../native/binding';
import type { MatmulDtype } from '../native/plan-builder';
import { defaultModelsDir, ModelCatalog } from '../pipeline/family/catalog';
import type { ModelFamily, RequestContext, RequestWork } from '../pipeline/family/family';
import { FamilyRegistry } from '../pipeline/family/registry';
import type { AdmittedSession } from '../pipeline/family/session';
import type { ResolvedParams } from '../pipeline/params';
import { defaultPolicies, type PipelinePolicies } from '../pipeline/policies/policies';
import type { RequestState } from '../pipeline/request-state';
import { SessionConfigSchema, type SessionConfig } from '../pipeline/session-config';
import { buildPipeline, type BuiltPipeline } from '../pipeline/spec';
import type { DeployConfig, DeployTask } from '../placement/deploy-config';
import { StageExecutor } from '../placement/stage-executor';
import { TopologySchema, type Topology, type TopologyInput } from '../placement/topology';
import { DEFAULT_LIMITS, type RequestLimits } from '../request/limits';
import type { OmniEvent } from '../request/omni-event';
import { createOmniRequestSchema, type OmniRequest, type OmniRequestInput, type Task } from '../request/omni-request';
import { invalidInput } from '../request/invalid-input';
import { createSessionRequestSchema, type SessionRequestInput } from '../request/session-request';
import type { Logger } from '../util/logger';
import { AdmissionPlanner } from './admission-planner';
import { errorEventOf, failureEvent } from './events';
import { takeRequestOrAnswer } from './intake';
import { watchRequests, type RequestWatcher } from './request-watch';
import { SessionInputs, WorldSession } from './session';

export interface EngineOptions {
  /**
   * The model families this engine can run, keyed by `model.json`'s `family` (`builtinFamilies()` from 'omnirx', and
   * your own beside them). The engine names no family itself.
   */
  families: readonly ModelFamily[];
  /** Folder of model directories (default: `models/` in the package, or OMNIRX_MODELS_DIR). */
  modelsDir?: string;
  /** Model used when a request names none. */
  defaultModel?: string;
  /** Operand dtype of the denoisers' matrix products, linear layers and attention (deploy config `matmulDtype`). Default float32. */
  matmulDtype?: MatmulDtype;
  limits?: RequestLimits;
  native?: NativeBinding;
  /**
   * Tasks this deployment serves: request tasks (T2V, T2I) and WORLD (interactive sessions, `session`). Components
   * and cache pools no deployed task needs are never loaded or created. Default T2V, T2I and WORLD.
   */
  tasks?: DeployTask[];
  /** Policies bound to the pipelines at build (default: classic CFG, one transformer, the model's flow shift, Euler, adaLN actions). */
  policies?: Partial<PipelinePolicies>;
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
  /** Time source of the step scheduler and the sessions' idle timers (virtual time in tests). */
  scheduler?: SchedulerLike;
  /** A step scheduler to share with loops of your own (in process): your steps and the engine's interleave on it. */
  steps?: StepScheduler;
  /** Byte budget of the engine's feature cache (text embeddings reused across requests). Default 64 MiB; 0 caches nothing. */
  featureCacheBytes?: number;
  /** Cache budgets (deploy config `caches`); `featureCacheBytes` above wins for the feature cache. */
  caches?: Partial<CacheBudgets>;
  /** World-session settings (deploy config `sessions`). */
  sessions?: Partial<SessionConfig>;
  /**
   * Where admitted work runs (deploy config `topology`): in this process when absent or monolithic, else on Encode /
   * Denoise / Decode stages; validated here (stage settings take their defaults).
   */
  topology?: TopologyInput;
  /** The compiled stage entry point of stage processes (tests). Default: `stage-main.js` beside the placement code. */
  stageEntry?: string;
  /**
   * Where the engine logs what an operator must see: stage processes restarted, frozen, or the pipeline going down.
   * Any pino-style logger (a server passes Fastify's `app.log`). Default: nothing is logged.
   */
  logger?: Logger;
}

/** Lifecycle of a request in the engine (ordered; everything after `running` is final). */
export enum RequestStatus {
  Queued = 0,
  Admitted = 1,
  Running = 2,
  Done = 3,
  Failed = 4,
  Cancelled = 5,
}

/** A request resolved while it waits: its family, parameters, validated node params, memory claim and work. */
interface Prepared {
  family: ModelFamily;
  params: ResolvedParams;
  nodeParams: Record<string, unknown>;
  claim: { residentBytes: number; peakBytes: number };
  work: RequestWork;
}

interface Waiter {
  requestId: string;
  status: RequestStatus;
  /** Resolved while queued (or the admission failure). */
  prepared: Promise<Prepared>;
  settled?: Prepared | { error: unknown };
  start: () => void;
  fail: (err: unknown) => void;
}

/**
 * The `admitted` event of request `requestId`: the values actually used (the guidance interval as
 * `guidanceIntervalStart` / `guidanceIntervalEnd`, as event params are scalars) and the work `estimate` (`ms` when
 * the executor predicts it).
 */
export function requestAdmittedEvent(requestId: string, p: ResolvedParams, estimate: { steps: number; forwards: number; ms?: number }): OmniEvent {
  const { task, model, width, height, numFrames, fps, numInferenceSteps, guidanceScale, guidanceInterval, flowShift, sampler, eta, seed, priority } = p;
  return {
    type: 'admitted',
    requestId,
    model,
    params: {
      task,
      width,
      height,
      numFrames,
      fps,
      numInferenceSteps,
      guidanceScale,
      guidanceIntervalStart: guidanceInterval[0],
      guidanceIntervalEnd: guidanceInterval[1],
      flowShift,
      sampler,
      eta,
      seed,
      priority,
      ...(p.previewEvery !== undefined ? { previewEvery: p.previewEvery } : {}),
      ...(p.decodeChunkFrames !== undefined ? { decodeChunkFrames: p.decodeChunkFrames } : {}),
    },
    estimate,
  };
}

/**
 * Validates a topology as a caller wrote it.
 * @throws OmniError OMNIRX_ERR_CONFIG naming the field (`topology.<path>`).
 */
function parseTopology(input: TopologyInput): Topology {
  const r = TopologySchema.safeParse(input);
  if (r.success) return r.data;
  const field = ['topology', ...r.error.issues[0].path.map(String)].join('.');
  throw new OmniError('OMNIRX_ERR_CONFIG', `${field}: ${r.error.issues[0].message}`, { param: field });
}

/** Engine options that the deploy config carries, from a validated config (`loadDeployConfig`). */
export function deployOptions(config: DeployConfig): Omit<EngineOptions, 'families'> {
  return {
    ...(config.modelsDir === undefined ? {} : { modelsDir: config.modelsDir }),
    ...(config.defaultModel === undefined ? {} : { defaultModel: config.defaultModel }),
    ...(config.matmulDtype === undefined ? {} : { matmulDtype: config.matmulDtype }),
    ...(config.topology === undefined ? {} : { topology: config.topology }),
    tasks: config.tasks,
    caches: config.caches,
    sessions: config.sessions,
  };
}

/**
 * The front of the runtime (docs/design.md §4): the one place requests and sessions enter, whatever the topology.
 * `generate` returns a cold `Observable<OmniEvent>`: subscribing submits the request (queued → admitted → running
 * nodes → done / failed / cancelled), every node boundary and loop step is an event, the last event is `final` or
 * `error` (failures are events, never stream errors), and unsubscribing cancels the request — removed from the queue
 * at once, or stopped at the next step boundary with its native buffers released once its in-flight native call
 * returns. `session` opens an interactive world session (`WorldSession`).
 *
 * Level 1 here: validation, a bounded FIFO queue, memory admission (Σ resident + max peak ≤ budget) and the events.
 * The admitted work runs on an `Executor` — in this process on one step scheduler (priority, then least attained
 * service), or on Encode / Denoise / Decode stages (`topology`) — which receives plain data only.
 */
export class Engine {
  private readonly schema;
  private readonly sessionSchema;
  /** Each family's graph for the deployed tasks: the front validates tasks and `nodeParams` against it. */
  private readonly pipelines = new Map<string, BuiltPipeline<RequestContext, RequestState>>();
  private readonly admission: AdmissionPlanner;
  private readonly waiting: Waiter[] = [];
  private readonly runningIds = new Set<string>();
  private readonly worldSessions = new Map<string, WorldSession>();
  /** Ids of sessions the executor is opening (they count against `maxSessions` and cannot be reused meanwhile). */
  private readonly openingSessions = new Set<string>();
  private readonly slabs: SlabReservations;
  /** What watches every request (`watchRequests`: metrics). */
  private readonly watchers = new Set<RequestWatcher>();
  private closed = false;
  private closePromise?: Promise<void>;

  private constructor(
    /** The models this engine serves: specs and families, read from `model.json` (no weights). */
    readonly models: ModelCatalog,
    /** Where admitted work runs. */
    readonly executor: Executor,
    readonly limits: RequestLimits,
    private readonly policies: PipelinePolicies,
    private readonly tasks: readonly Task[],
    private readonly deployTasks: readonly DeployTask[],
    private readonly options: { maxQueued: number; maxRunning: number; memoryBudgetBytes: number },
    budgets: CacheBudgets,
    private readonly sessionConfig: SessionConfig,
    private readonly timers: SchedulerLike | undefined,
  ) {
    this.schema = createOmniRequestSchema(limits);
    this.sessionSchema = createSessionRequestSchema(limits);
    this.admission = new AdmissionPlanner(options.memoryBudgetBytes);
    this.slabs = new SlabReservations(budgets);
  }

  /**
   * Creates an engine; models load lazily on their first request, only the components the deployment needs.
   * @throws OmniError OMNIRX_ERR_CONFIG for two families of one name, or custom policies with stage processes (a stage
   *   process builds its policies from the deploy config alone); OMNIRX_ERR_STAGE_FAILED when a stage process fails to start.
   */
  static async create(options: EngineOptions): Promise<Engine> {
    const native = options.native ?? loadNative();
    const catalog = new ModelCatalog(options.modelsDir ?? defaultModelsDir(), options.defaultModel ?? 'omnirx-default', new FamilyRegistry(options.families));
    const policies = { ...defaultPolicies(), ...options.policies };
    const deployTasks = options.tasks ?? ['T2V', 'T2I', 'WORLD'];
    const tasks = deployTasks.filter((t): t is Task => t !== 'WORLD');
    const world = deployTasks.includes('WORLD');
    const budgets = CacheBudgetsSchema.parse({
      ...options.caches,
      ...(options.featureCacheBytes !== undefined ? { featureCacheBytes: options.featureCacheBytes } : {}),
    });
    const load = options.matmulDtype === undefined ? {} : { matmulDtype: options.matmulDtype };
    const t = options.topology === undefined ? undefined : parseTopology(options.topology);
    const executor: Executor =
      t === undefined || t.kind === 'monolithic'
        ? new InProcessExecutor({
            native,
            catalog,
            tasks,
            world,
            policies,
            budgets,
            load,
            scheduler: options.scheduler,
            batchWindowMs: options.batchWindowMs,
            costSeed: options.costSeed,
            steps: options.steps,
          })
        : await StageExecutor.start({
            native,
            catalog,
            tasks,
            world,
            policies,
            customPolicies: options.policies !== undefined,
            budgets,
            load,
            topology: t,
            entry: options.stageEntry,
            logger: options.logger,
          });
    return new Engine(
      catalog,
      executor,
      options.limits ?? DEFAULT_LIMITS,
      policies,
      tasks,
      deployTasks,
      { maxQueued: options.maxQueued ?? 64, maxRunning: options.maxRunning ?? 8, memoryBudgetBytes: options.memoryBudgetBytes ?? 8 * 2 ** 30 },
      budgets,
      SessionConfigSchema.parse(options.sessions ?? {}),
      options.scheduler,
    );
  }

  /**
   * Creates an engine for a validated deploy config (`loadDeployConfig`): its models folder, default model, matmul
   * dtype, tasks, cache budgets, session settings and topology; `extra` adds what the config does not carry (the
   * families, limits, policies, scheduler).
   */
  static fromDeployConfig(config: DeployConfig, extra: EngineOptions): Promise<Engine> {
    return Engine.create({ ...extra, ...deployOptions(config) });
  }

  /** Ids of the models this engine can serve. */
  listModels(): string[] {
    return this.models.list();
  }

  /** Requests waiting for admission, requests running, their admitted memory and the open world sessions. */
  stats(): { queued: number; running: number; memoryBytes: number; sessions: number } {
    return { queued: this.waiting.length, running: this.runningIds.size, memoryBytes: this.admission.usedBytes, sessions: this.worldSessions.size };
  }

  /** The memory budget of admission, bytes (`memoryBudgetBytes`): `stats().memoryBytes` of it is claimed. */
  get memoryBudgetBytes(): number {
    return this.options.memoryBudgetBytes;
  }

  /**
   * Has `watcher` see every request `generate` runs from now on (`EngineMetrics` counts and times them this way): it is
   * called once per subscription and the watch it returns sees each event before the consumer does, then `cancelled`
   * when the consumer unsubscribed before the end. A watcher that throws is ignored. Returns its removal.
   */
  watchRequests(watcher: RequestWatcher): () => void {
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  /**
   * Whether the engine takes work: its executor's health (`degraded` while a stage process restarts; `down` when the
   * stages cannot recover, or once closed). New requests and sessions are refused while it is `down`.
   */
  health(): ExecutorHealth {
    return this.closed ? { status: 'down', reason: 'the engine is closed' } : this.executor.health();
  }

  /** The graph of `family` for the deployed tasks (built once). */
  private pipeline(family: ModelFamily): BuiltPipeline<RequestContext, RequestState> {
    let p = this.pipelines.get(family.name);
    if (p === undefined) {
      p = buildPipeline(family.pipeline(this.policies), { tasks: this.tasks.filter((t) => family.tasks.includes(t)) });
      this.pipelines.set(family.name, p);
    }
    return p;
  }

  /**
   * Opens an interactive world session (docs/sessions.md; see `WorldSession`): validates the input, resolves it against
   * the model (its family's defaults and stride), reserves the session's chunk-KV slabs (sink + window + the chunk in
   * flight, per layer), so an open session never fails for lack of KV room mid-rollout, and opens it on the executor.
   * The rollout starts when `events$` is subscribed.
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST (`param` names the field) for invalid input or a duplicate id;
   *   OMNIRX_ERR_UNSUPPORTED_VALUE when the deployment does not serve WORLD, the model's family has no sessions, or the
   *   size is not a multiple of the model's stride; OMNIRX_ERR_QUEUE_FULL at `sessions.maxSessions`;
   *   OMNIRX_ERR_CACHE_EXHAUSTED when the chunk-KV budget cannot hold the session; OMNIRX_ERR_UNKNOWN_MODEL /
   *   MODEL_LOAD from the model; OMNIRX_ERR_UNAVAILABLE once the engine is closed; a stage's failure to open it.
   */
  async session(input: SessionRequestInput): Promise<WorldSession> {
    if (this.closed) throw new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine is closed');
    if (!this.deployTasks.includes('WORLD'))
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', 'this deployment does not serve world sessions (add WORLD to its tasks)', { param: 'task' });
    const parsed = this.sessionSchema.safeParse(input);
    if (!parsed.success) throw invalidInput(parsed.error);
    const req = parsed.data;
    const { spec, family } = await this.models.get(req.model);
    const sessions = family.sessions;
    if (sessions === undefined)
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `model '${spec.id}' (family '${family.name}') has no world sessions`, { param: 'model' });
    const cfg = this.sessionConfig;
    const resolved = sessions.resolve(req, spec);
    // Checked after the model's spec is read so that concurrent opens cannot both pass.
    if (this.closed) throw new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine is closed');
    const sessionId = req.sessionId ?? randomUUID();
    if (this.idInUse(sessionId)) throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `sessionId '${sessionId}' is already in use`, { param: 'sessionId' });
    const open = this.worldSessions.size + this.openingSessions.size;
    if (open >= cfg.maxSessions)
      throw new OmniError('OMNIRX_ERR_QUEUE_FULL', `${open} world sessions are open, the deployment's bound (sessions.maxSessions); retry later`);
    const kv = sessions.kv(spec, resolved, cfg);
    this.slabs.reserve(sessionId, kv.slabBytes, kv.slabs);
    const admitted: AdmittedSession = {
      sessionId,
      family: family.name,
      model: spec.id,
      prompt: req.prompt,
      ...resolved,
      initialAction: req.initialAction,
      chunkFrames: cfg.chunkFrames,
      sinkFrames: cfg.sinkFrames,
      localWindowFrames: cfg.localWindowFrames,
      steps: cfg.steps,
      firstChunkSteps: cfg.firstChunkSteps,
    };
    const inputs = new SessionInputs(cfg.chunkFrames, req.initialAction);
    const checkAction = (a: Parameters<typeof sessions.checkAction>[1]) => sessions.checkAction(spec, a, this.policies.conditioning, cfg);
    this.openingSessions.add(sessionId);
    let execution;
    try {
      execution = await this.executor.openSession(admitted, req.image, inputs);
    } catch (e) {
      this.slabs.release(sessionId);
      throw e;
    } finally {
      this.openingSessions.delete(sessionId);
    }
    const session = new WorldSession(admitted, execution, inputs, {
      idleTimeoutMs: cfg.idleTimeoutMs,
      timers: this.timers,
      checkAction,
      onReleased: (id) => {
        this.worldSessions.delete(id);
        this.slabs.release(id);
      },
    });
    this.worldSessions.set(sessionId, session);
    if (this.closed) session.close();
    return session;
  }

  /** Runs one request as a cold event stream (see the class docs). */
  generate(input: OmniRequestInput): Observable<OmniEvent> {
    const events$ = new Observable<OmniEvent>((subscriber) => {
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
          subscriber.next(this.admittedEvent(requestId, s));
          const admitted: AdmittedRequest = { requestId, family: s.family.name, params: s.params, nodeParams: s.nodeParams };
          let completedSteps = 0;
          run = this.executor.execute(admitted).subscribe({
            next: (ev) => {
              if (ev.type === 'step') completedSteps = ev.index + 1;
              if (ev.type === 'output') {
                waiter.status = RequestStatus.Done;
                subscriber.next({
                  type: 'final',
                  requestId,
                  output: { requestId, artifacts: ev.artifacts, seed: s.params.seed, ms: performance.now() - started },
                });
              } else if (ev.type === 'failed') {
                waiter.status = RequestStatus.Failed;
                subscriber.next(errorEventOf(requestId, { ...ev.failure, completedSteps }));
              } else {
                subscriber.next(ev);
              }
            },
            complete: () => {
              this.finishRunning(requestId);
              subscriber.complete();
            },
          });
        },
        fail: (err) => {
          waiter.status = RequestStatus.Failed;
          subscriber.next(failureEvent(requestId, err));
          subscriber.complete();
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
    return events$.pipe(watchRequests(this.watchers));
  }

  /** Why a valid request cannot enter now (closed engine, an id in use, a full queue), or undefined. */
  private refusal(requestId: string): OmniError | undefined {
    if (this.closed) return new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine is closed');
    const h = this.executor.health();
    if (h.status === 'down') return new OmniError('OMNIRX_ERR_STAGE_FAILED', `the pipeline is down: ${h.reason}`);
    if (this.idInUse(requestId)) {
      return new OmniError('OMNIRX_ERR_INVALID_REQUEST', `requestId '${requestId}' is already queued or running`, { param: 'requestId' });
    }
    // Waiters headed for a free running slot (still loading their model) are not queued behind anything: only the
    // rest count against maxQueued, so the engine holds at most maxQueued + maxRunning requests.
    const queued = this.waiting.length - Math.max(0, this.options.maxRunning - this.runningIds.size);
    if (queued >= this.options.maxQueued) return new OmniError('OMNIRX_ERR_QUEUE_FULL', `the queue holds ${queued} requests, its bound; retry later`);
    return undefined;
  }

  /** Whether `id` names a queued or running request, or an open (or opening) world session. */
  private idInUse(id: string): boolean {
    return this.runningIds.has(id) || this.waiting.some((w) => w.requestId === id) || this.worldSessions.has(id) || this.openingSessions.has(id);
  }

  /** Reads the model's spec, resolves the request with its family and has the executor load the model, while it waits. */
  private async prepare(req: OmniRequest): Promise<Prepared> {
    const { spec, family } = await this.models.get(req.model);
    if (!family.tasks.includes(req.task)) {
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `model '${spec.id}' (family '${family.name}') serves ${family.tasks.join(', ')}, not ${req.task}`, {
        param: 'task',
      });
    }
    const params = family.resolve(req, spec, { limits: this.limits, policies: this.policies });
    const pipeline = this.pipeline(family);
    pipeline.activeNodes(params);
    const nodeParams = pipeline.parseNodeParams(req.nodeParams);
    await this.executor.prepare(spec.id);
    return { family, params, nodeParams, claim: family.claim(params, spec), work: family.work(params, nodeParams, this.policies, spec) };
  }

  /** Admits queued requests in FIFO order while running slots and memory allow. */
  private pump(): void {
    if (this.closed) return;
    while (this.waiting.length > 0) {
      const head = this.waiting[0];
      if (head.settled === undefined) return; // still resolving: keep FIFO order
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
    this.pump();
  }

  /** The `admitted` event: the family's work estimate, priced by the executor's cost model when it has one. */
  private admittedEvent(requestId: string, s: Prepared): OmniEvent {
    const ms = this.executor.price(s.work.costs);
    return requestAdmittedEvent(requestId, s.params, { steps: s.work.steps, forwards: s.work.forwards, ...(ms === undefined ? {} : { ms: Math.round(ms) }) });
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
    const sessions = [...this.worldSessions.values()];
    for (const s of sessions) s.close();
    await Promise.all(sessions.map((s) => s.whenReleased()));
    await this.executor.close();
  }
}
