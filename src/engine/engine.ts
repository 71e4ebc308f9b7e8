import { randomUUID } from 'node:crypto';
import { concat, defer, from, map, mergeMap, Observable, of, catchError, EMPTY } from 'rxjs';
import { driveLoop } from '../../operators';
import { OmniError } from '../errors';
import { loadNative, type NativeBinding } from '../native/binding';
import { ModelRegistry, defaultModelsDir } from '../models/registry';
import type { WanT2VModel } from '../models/wan/wan-t2v';
import type { ResolvedParams } from '../pipeline/params';
import type { PipelineNode, StepResult } from '../pipeline/stage';
import type { WanT2VContext } from '../pipeline/wan-t2v/context';
import { wanT2VPipeline } from '../pipeline/wan-t2v/pipeline';
import { WanT2VState } from '../pipeline/wan-t2v/state';
import { DEFAULT_LIMITS, type RequestLimits } from '../request/limits';
import type { OmniEvent } from '../request/omni-event';
import { createOmniRequestSchema, type OmniRequestInput } from '../request/omni-request';
import { resolveParams } from './admission';
import { failureEvent, validationErrorEvent } from './events';

export interface EngineOptions {
  /** Folder of model directories (default: `models/` in the package, or OMNIRX_MODELS_DIR). */
  modelsDir?: string;
  /** Model used when a request names none. */
  defaultModel?: string;
  limits?: RequestLimits;
  native?: NativeBinding;
}

type Ctx = WanT2VContext;
type Node = PipelineNode<Ctx, WanT2VState>;

/**
 * The execution plane's entry point (DESIGN.md §4). `generate` returns a cold `Observable<OmniEvent>`:
 * subscribing submits the request, every node boundary and denoise step is an event, the last event is `final`
 * or `error` (failures are events, never stream errors), and unsubscribing cancels the request at the next step
 * boundary and releases its native buffers once its in-flight native call returns.
 */
export class Engine {
  private readonly schema;
  private closed = false;

  private constructor(
    readonly native: NativeBinding,
    readonly models: ModelRegistry,
    readonly limits: RequestLimits,
  ) {
    this.schema = createOmniRequestSchema(limits);
  }

  /** Creates an engine; models load lazily on their first request. */
  static async create(options: EngineOptions = {}): Promise<Engine> {
    const native = options.native ?? loadNative();
    const registry = new ModelRegistry(native, options.modelsDir ?? defaultModelsDir(), options.defaultModel ?? 'omnirx-default');
    return new Engine(native, registry, options.limits ?? DEFAULT_LIMITS);
  }

  /** Ids of the models this engine can serve. */
  listModels(): string[] {
    return this.models.list();
  }

  /** Runs one request as a cold event stream (see the class docs). */
  generate(input: OmniRequestInput): Observable<OmniEvent> {
    return defer(() => {
      const fallbackId = typeof (input as { requestId?: unknown })?.requestId === 'string' ? String((input as { requestId: string }).requestId) : randomUUID();
      if (this.closed) return of(failureEvent(fallbackId, new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine is closed')));
      const parsed = this.schema.safeParse(input);
      if (!parsed.success) return of<OmniEvent>(validationErrorEvent(fallbackId, parsed.error));
      const req = parsed.data;
      const requestId = req.requestId ?? fallbackId;
      const started = performance.now();
      const admitted$ = defer(() => from(this.models.get(req.model))).pipe(
        map((model) => ({ model, params: resolveParams(req, model, this.limits) })),
        mergeMap(({ model, params }) => concat(of<OmniEvent>(this.admittedEvent(requestId, params)), this.run(requestId, model, params, started))),
        catchError((err) => of(failureEvent(requestId, err))),
      );
      return concat(of<OmniEvent>({ type: 'queued', requestId, position: 0 }), admitted$);
    });
  }

  private admittedEvent(requestId: string, p: ResolvedParams): OmniEvent {
    const forwards = p.numInferenceSteps * (p.guidanceScale !== 1 ? 2 : 1);
    const { task, model, width, height, numFrames, fps, numInferenceSteps, guidanceScale, flowShift, seed } = p;
    return { type: 'admitted', requestId, model, params: { task, width, height, numFrames, fps, numInferenceSteps, guidanceScale, flowShift, seed }, estimate: { steps: numInferenceSteps, forwards } };
  }

  /** Runs the pipeline's nodes in order, then emits `final`; any failure becomes an `error` event. */
  private run(requestId: string, model: WanT2VModel, params: ResolvedParams, started: number): Observable<OmniEvent> {
    return new Observable<OmniEvent>((subscriber) => {
      const abort = new AbortController();
      const state = new WanT2VState();
      const ctx: Ctx = { requestId, model, params, native: this.native, signal: abort.signal };
      let current = '';
      const nodes$ = wanT2VPipeline.map((node) =>
        defer(() => {
          current = node.stage.name;
          const t0 = performance.now();
          return concat(
            of<OmniEvent>({ type: 'node_start', requestId, node: node.stage.name }),
            this.runNode(node, ctx, state),
            defer(() => of<OmniEvent>({ type: 'node_end', requestId, node: node.stage.name, ms: performance.now() - t0 })),
          );
        }),
      );
      const final$ = defer(() => of<OmniEvent>({ type: 'final', requestId, output: { requestId, artifacts: { ...state.artifacts }, seed: params.seed, ms: performance.now() - started } }));
      const sub = concat(...nodes$, final$)
        .pipe(catchError((err) => of(failureEvent(requestId, err, { node: current || undefined, completedSteps: state.completedSteps, partial: { ...state.artifacts } }))))
        .subscribe(subscriber);
      return () => {
        abort.abort();
        sub.unsubscribe();
        state.release();
      };
    });
  }

  private runNode(node: Node, ctx: Ctx, state: WanT2VState): Observable<OmniEvent> {
    if (node.kind === 'stage') {
      return defer(() => from(state.track(node.stage.forward(ctx, state)))).pipe(mergeMap(() => EMPTY));
    }
    const stage = node.stage;
    let t0 = 0;
    return driveLoop<unknown, StepResult>({
      init: () => {
        t0 = performance.now();
        return from(Promise.resolve(stage.init(ctx, state)));
      },
      step: (loop) => {
        t0 = performance.now();
        const r = stage.step(ctx, loop);
        return r instanceof Observable ? r : state.track(r);
      },
      finalize: (loop) => from(Promise.resolve(stage.finalize(ctx, loop, state)).then(() => true)),
      release: (loop) => {
        if (loop !== undefined) stage.release(loop);
      },
    }).pipe(
      mergeMap((r) => {
        const out: OmniEvent[] = [];
        if (r.progress !== undefined) {
          state.completedSteps = r.progress.index + 1;
          out.push({ type: 'step', requestId: ctx.requestId, node: stage.name, ...r.progress, ms: performance.now() - t0 });
        }
        for (const a of r.emit ?? []) out.push({ type: 'chunk', requestId: ctx.requestId, node: stage.name, artifact: a });
        return from(out);
      }),
    );
  }

  /** Stops admitting requests and frees every loaded model. */
  async close(): Promise<void> {
    this.closed = true;
    await this.models.dispose();
  }
}
