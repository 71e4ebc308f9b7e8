import { concat, defer, EMPTY, forkJoin, from, merge, mergeMap, Observable, of, ReplaySubject, take, throwError } from 'rxjs';
import { driveLoop } from '../../operators';
import { OmniError } from '../errors';
import type { NodeSpec } from './spec';
import type { LoopStage, Stage, StageChunk, StepResult } from './stage';
import type { RequestState } from './request-state';
import type { OmniEvent } from '../request/omni-event';

/** What running a graph reports: node boundaries, loop steps and streamed chunks. */
export type GraphEvent = Extract<OmniEvent, { type: 'node_start' | 'step' | 'chunk' | 'node_end' }>;
import type { StepGrants } from './step-grants';

/** Where loop steps go: the pool's step scheduler, and the request's identity and priority there. */
export interface StepRouting {
  scheduler: StepGrants;
  requestId: string;
  priority: number;
}

/**
 * Runs one request's active graph nodes (docs/design.md §3–§4): a node starts when every edge it consumes has been
 * produced, so independent nodes run concurrently (fan-out) and the stream completes when all have finished
 * (fan-in). One-shot stages are one async call; loop stages are driven step by step by `driveLoop`, each step
 * granted by the step scheduler. Emits node_start / step / chunk / node_end events; the first failure errors the
 * stream (the engine turns it into an `error` event) and tears the other nodes down. A node consuming an edge that
 * no active node produces (a producer switched off by its `when`) fails the request at once (OMNIRX_ERR_INVALID_PIPELINE)
 * instead of waiting forever.
 */
export function runGraph<C extends { requestId: string }, S extends RequestState>(
  nodes: ReadonlyArray<NodeSpec<C, S>>,
  requestInputs: readonly string[],
  ctx: C,
  state: S,
  routing: StepRouting,
  onNode: (name: string) => void,
): Observable<GraphEvent> {
  return defer(() => {
    const produced = new Map<string, ReplaySubject<true>>();
    const edge = (name: string): ReplaySubject<true> => {
      let s = produced.get(name);
      if (s === undefined) {
        s = new ReplaySubject<true>(1);
        produced.set(name, s);
      }
      return s;
    };
    for (const input of requestInputs) edge(input).next(true);
    // An input no active node produces (its producer's `when` is false for this request) would wait forever.
    const available = new Set([...requestInputs, ...nodes.flatMap((n) => Object.keys(n.outputs))]);
    for (const n of nodes) {
      const missing = Object.keys(n.inputs).find((e) => !available.has(e));
      if (missing !== undefined) {
        onNode(n.name);
        return throwError(
          () => new OmniError('OMNIRX_ERR_INVALID_PIPELINE', `node '${n.name}' consumes edge '${missing}', which no active node produces for this request`),
        );
      }
    }
    const requestId = ctx.requestId;
    const node$ = nodes.map((node) => {
      const inputs = Object.keys(node.inputs).map((e) => edge(e).pipe(take(1)));
      const ready$ = inputs.length === 0 ? of([]) : forkJoin(inputs);
      const run = node.run;
      return ready$.pipe(
        mergeMap(() => {
          const t0 = performance.now();
          return concat(
            defer(() => {
              onNode(node.name);
              return of<GraphEvent>({ type: 'node_start', requestId, node: node.name });
            }),
            run.kind === 'stage' ? runStage(run.stage, ctx, state) : runLoop(run.stage, ctx, state, routing),
            defer(() => of<GraphEvent>({ type: 'node_end', requestId, node: node.name, ms: performance.now() - t0 })),
            // Successors start only after this node's end event went out.
            defer(() => {
              for (const out of Object.keys(node.outputs)) edge(out).next(true);
              return EMPTY;
            }),
          );
        }),
      );
    });
    return merge(...node$);
  });
}

/** One call of a one-shot stage; what it streams through `emit` (until it settles) becomes its `chunk` events. */
function runStage<C extends { requestId: string }, S extends RequestState>(stage: Stage<C, S>, ctx: C, state: S): Observable<GraphEvent> {
  return new Observable<GraphEvent>((subscriber) => {
    const emit = (c: StageChunk): void => {
      subscriber.next({
        type: 'chunk',
        requestId: ctx.requestId,
        node: stage.name,
        artifact: c.artifact,
        ...(c.decoded === undefined ? {} : { decoded: c.decoded }),
      });
    };
    state.track(stage.forward(ctx, state, emit)).then(
      () => subscriber.complete(),
      (err: unknown) => subscriber.error(err),
    );
  });
}

function runLoop<C extends { requestId: string }, S extends RequestState>(
  stage: LoopStage<C, S, unknown>,
  ctx: C,
  state: S,
  routing: StepRouting,
): Observable<GraphEvent> {
  let t0 = 0;
  const runner =
    stage.batching === undefined
      ? undefined
      : { maxBatch: stage.batching.maxBatch, run: (items: unknown[]) => stage.batching!.stepMany(items as Array<{ ctx: C; loop: unknown }>) };
  return driveLoop<unknown, StepResult>({
    init: () => from(Promise.resolve(stage.init(ctx, state))),
    step: (loop) => {
      // Measured from the request; a granted solo step resets it when it starts running.
      t0 = performance.now();
      const key = stage.batching?.batchKey(ctx, loop);
      return routing.scheduler.step<StepResult>({
        requestId: routing.requestId,
        priority: routing.priority,
        cost: stage.cost(ctx, loop),
        run: () => {
          t0 = performance.now();
          const r = stage.step(ctx, loop);
          return r instanceof Observable ? r : state.track(r);
        },
        batch: key === undefined || runner === undefined ? undefined : { key, item: { ctx, loop }, runner },
      });
    },
    finalize: (loop) => from(Promise.resolve(stage.finalize(ctx, loop, state)).then(() => true)),
    release: (loop) => {
      if (loop !== undefined) stage.release(loop);
    },
  }).pipe(
    mergeMap((r) => {
      const out: GraphEvent[] = [];
      if (r.progress !== undefined) {
        out.push({ type: 'step', requestId: ctx.requestId, node: stage.name, ...r.progress, ms: performance.now() - t0 });
      }
      for (const a of r.emit ?? []) out.push({ type: 'chunk', requestId: ctx.requestId, node: stage.name, artifact: a });
      return from(out);
    }),
  );
}
