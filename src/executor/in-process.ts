import {
  asyncScheduler,
  catchError,
  concat,
  defer,
  filter,
  from,
  map,
  Observable,
  of,
  ReplaySubject,
  switchMap,
  takeUntil,
  type SchedulerLike,
  type Subscription,
} from 'rxjs';
import { concatMapWithLatest } from '../../operators';
import type { CacheBudgets } from '../cache/budgets';
import { CacheManager } from '../cache/cache-manager';
import { OmniError } from '../errors';
import type { NativeBinding } from '../native/binding';
import type { ModelCatalog } from '../pipeline/family/catalog';
import type { ModelFamily, RequestContext, RequestWork } from '../pipeline/family/family';
import { ModelLoader } from '../pipeline/family/loader';
import type { ModelLoadOptions } from '../pipeline/family/model';
import type { AdmittedSession, SessionExecutionEvent, SessionImage, SessionRollout } from '../pipeline/family/session';
import { runGraph } from '../pipeline/graph-runner';
import type { PipelinePolicies } from '../pipeline/policies/policies';
import type { RequestState } from '../pipeline/request-state';
import { buildPipeline, type BuiltPipeline } from '../pipeline/spec';
import type { Task } from '../request/omni-request';
import type { AdmittedRequest, ExecutionEvent, Executor, ExecutorHealth, SessionExecution, SessionInputs } from './executor';
import { toExecutionFailure } from './failure';
import { CostModel, StepScheduler } from './scheduler';

/** Options of an `InProcessExecutor`. */
export interface InProcessExecutorOptions {
  native: NativeBinding;
  /** The models (specs and families) this executor loads from. */
  catalog: ModelCatalog;
  /** Request tasks deployed; with `world`, the components sessions need are loaded too. */
  tasks: readonly Task[];
  world: boolean;
  policies: PipelinePolicies;
  budgets: CacheBudgets;
  load?: ModelLoadOptions;
  /** Time source of the step scheduler (virtual time in tests). Default `asyncScheduler`. */
  scheduler?: SchedulerLike;
  /** Bounded wait for more members of a step batch, ms. Default 2. */
  batchWindowMs?: number;
  /** Seeds of the cost model: `CostModel.keyOf(key)` → ms per step. */
  costSeed?: Record<string, number>;
  /** A step scheduler to share (e.g. with loops of the caller's own): the executor's steps interleave on it. */
  steps?: StepScheduler;
}

/**
 * Runs admitted work in this process (docs/design.md §4): each family's graph built once with the deployment's
 * policies, models loaded with only the components the deployed tasks need, one `StepScheduler` for the pool (every
 * loop step of every request and session is one grant: priority, then least attained service), and the cache pools
 * (feature cache; chunk-KV slabs when WORLD is deployed) with the deployment's budgets.
 */
export class InProcessExecutor implements Executor {
  /** The pool's step scheduler. */
  readonly steps: StepScheduler;
  /** The pool's caches. */
  readonly caches: CacheManager;
  readonly models: ModelLoader;
  private readonly pipelines = new Map<string, BuiltPipeline<RequestContext, RequestState>>();
  /** Emits once, when `close()` starts: every running request ends at its next step boundary. */
  private readonly closing$ = new ReplaySubject<void>(1);
  /** States of running requests and sessions not yet freed. */
  private readonly live = new Set<{ whenReleased(): Promise<void> }>();
  private closePromise?: Promise<void>;

  constructor(private readonly o: InProcessExecutorOptions) {
    const scheduler = o.scheduler ?? asyncScheduler;
    this.steps = o.steps ?? new StepScheduler({ scheduler, costModel: new CostModel({ seed: o.costSeed ?? {} }), batchWindowMs: o.batchWindowMs ?? 2 });
    this.caches = new CacheManager(o.budgets, { features: true, chunkKv: o.world, tokenKv: false });
    this.models = new ModelLoader(o.native, o.catalog, (f) => this.components(f), o.load);
  }

  /** The built graph of `family` for the deployed tasks (built once). */
  pipeline(family: ModelFamily): BuiltPipeline<RequestContext, RequestState> {
    let p = this.pipelines.get(family.name);
    if (p === undefined) {
      p = buildPipeline(family.pipeline(this.o.policies), { tasks: this.o.tasks.filter((t) => family.tasks.includes(t)) });
      this.pipelines.set(family.name, p);
    }
    return p;
  }

  /** Components a model of `family` loads here: its graph's for the deployed tasks, and its sessions' with WORLD. */
  private components(family: ModelFamily): ReadonlySet<string> {
    const c = new Set(this.pipeline(family).components);
    if (this.o.world) for (const x of family.sessions?.components ?? []) c.add(x);
    return c;
  }

  async prepare(model: string): Promise<void> {
    await this.models.get(model);
  }

  /** `ok` until closed: work in this process has no part that can die on its own. */
  health(): ExecutorHealth {
    return this.closePromise === undefined ? { status: 'ok' } : { status: 'down', reason: 'the executor is closed' };
  }

  price(costs: RequestWork['costs']): number {
    return costs.reduce((ms, c) => ms + this.steps.estimate(c.cost, c.steps), 0);
  }

  execute(request: AdmittedRequest): Observable<ExecutionEvent> {
    return new Observable<ExecutionEvent>((subscriber) => {
      const { requestId, params } = request;
      const family = this.o.catalog.families.get(request.family, `request ${requestId}`);
      const abort = new AbortController();
      const state = family.createState();
      this.track(state);
      let current: string | undefined;
      const run$ = defer(() => from(this.models.get(params.model))).pipe(
        switchMap((model) => {
          const ctx: RequestContext = {
            requestId,
            model,
            params,
            nodeParams: request.nodeParams,
            native: this.o.native,
            signal: abort.signal,
            featureCache: this.caches.features,
          };
          const pipeline = this.pipeline(family);
          const nodes = pipeline.activeNodes(params);
          return concat(
            runGraph(
              nodes,
              Object.keys(pipeline.spec.requestInputs),
              ctx,
              state,
              { scheduler: this.steps, requestId, priority: params.priority },
              (n) => (current = n),
            ),
            defer(() => of<ExecutionEvent>({ type: 'output', artifacts: { ...state.artifacts } })),
          );
        }),
        takeUntil(
          this.closing$.pipe(
            map(() => {
              throw new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine closed before the request finished');
            }),
          ),
        ),
        catchError((err: unknown) =>
          of<ExecutionEvent>({
            type: 'failed',
            failure: toExecutionFailure(err, { node: current, ...(Object.keys(state.artifacts).length > 0 ? { partial: { ...state.artifacts } } : {}) }),
          }),
        ),
      );
      const sub = run$.subscribe(subscriber);
      return () => {
        abort.abort();
        sub.unsubscribe();
        state.release();
        this.steps.forget(requestId);
      };
    });
  }

  async openSession(session: AdmittedSession, image: SessionImage | undefined, inputs: SessionInputs): Promise<SessionExecution> {
    const family = this.o.catalog.families.get(session.family, `session ${session.sessionId}`);
    const sessions = family.sessions;
    if (sessions === undefined) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `model family '${family.name}' has no world sessions`, { param: 'model' });
    const model = await this.models.get(session.model);
    let rollout: SessionRollout | undefined;
    let opening: Promise<SessionRollout> | undefined;
    let run: Subscription | undefined;
    let started = false;
    let releasing: Promise<void> | undefined;
    let markReleased!: () => void;
    const released = new Promise<void>((resolve) => (markReleased = resolve));
    this.track({ whenReleased: () => released });
    const close = (): Promise<void> => {
      started = true; // a session closed before its rollout started never starts it
      run?.unsubscribe();
      releasing ??= (async () => {
        await opening?.then(
          (r) => r.release(),
          () => undefined,
        );
        this.steps.forget(session.sessionId);
        markReleased();
      })();
      return releasing;
    };
    const events$ = new Observable<SessionExecutionEvent>((subscriber) => {
      if (started) {
        subscriber.error(new OmniError('OMNIRX_ERR_INTERNAL', `session '${session.sessionId}': its execution was already started or closed`));
        return undefined;
      }
      started = true;
      const env = { native: this.o.native, model, steps: this.steps, caches: this.caches, conditioning: this.o.policies.conditioning };
      opening = sessions.open(env, session, image);
      run = from(opening)
        .pipe(
          switchMap((r) => {
            rollout = r;
            return inputs.permits$.pipe(
              concatMapWithLatest(inputs.actions$, session.initialAction, (_permit, action, index) => r.chunk$(index, action), {
                restart$: inputs.flush$.pipe(filter(() => r.denoising)),
              }),
            );
          }),
        )
        .subscribe(subscriber);
      return () => run?.unsubscribe();
    });
    return { events$, stats: () => rollout?.stats() ?? { nativeBytes: 0, slabBytes: 0 }, close };
  }

  /** Keeps `x` until it is released, so `close()` can wait for its native work. */
  private track(x: { whenReleased(): Promise<void> }): void {
    this.live.add(x);
    void x.whenReleased().then(() => this.live.delete(x));
  }

  close(): Promise<void> {
    this.closePromise ??= (async () => {
      this.closing$.next();
      await Promise.all([...this.live].map((x) => x.whenReleased()));
      this.caches.dispose();
      await this.models.dispose();
    })();
    return this.closePromise;
  }
}
