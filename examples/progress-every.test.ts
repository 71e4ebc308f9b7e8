/**
 * A marble test of a custom operator (examples/progress-every.ts), written the way omnirx's own operators are tested:
 * a `TestScheduler` from `rxjs/testing` with jest's deep equality, the docstring's marble first, then the edges
 * (empty, error, unsubscribe, bad argument).
 */
import { TestScheduler } from 'rxjs/testing';
import type { OmniEvent } from 'omnirx';
import { progressEvery } from './progress-every';

const scheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
const step = (index: number, total = 5): OmniEvent => ({ type: 'step', requestId: 'r', node: 'denoise', index, total, timestep: 0, sigma: 0, ms: 1 });
const values: Record<string, OmniEvent> = {
  a: { type: 'queued', requestId: 'r', position: 0 },
  0: step(0),
  1: step(1),
  2: step(2),
  3: step(3),
  4: step(4),
  f: { type: 'final', requestId: 'r', output: { requestId: 'r', artifacts: {}, seed: 1, ms: 5 } },
};

describe('progressEvery', () => {
  it('keeps every nth step and the last (marble from the docstring)', () => {
    scheduler().run(({ cold, expectObservable }) => {
      expectObservable(cold('a-0-1-2-3-4-f|', values).pipe(progressEvery(2))).toBe('a---1---3-4-f|', values);
    });
  });

  it('n = 1 keeps everything; a node of one step keeps its only step', () => {
    scheduler().run(({ cold, expectObservable }) => {
      expectObservable(cold('a0123f|', values).pipe(progressEvery(1))).toBe('a0123f|', values);
      const only = { s: step(0, 1) };
      expectObservable(cold('s|', only).pipe(progressEvery(10))).toBe('s|', only);
    });
  });

  it('passes completion, errors and unsubscription through', () => {
    scheduler().run(({ cold, expectObservable, expectSubscriptions }) => {
      expectObservable(cold<OmniEvent>('|').pipe(progressEvery(3))).toBe('|');
      expectObservable(cold('a-#', values).pipe(progressEvery(3))).toBe('a-#', values);
      const source = cold('a-0-1-2-f|', values);
      expectObservable(source.pipe(progressEvery(2)), '^----!').toBe('a---1', values);
      expectSubscriptions(source.subscriptions).toBe('^----!');
    });
  });

  it('refuses an n that is not a positive integer, naming it', () => {
    expect(() => progressEvery(0)).toThrow('progressEvery: n must be a positive integer, got 0');
    expect(() => progressEvery(1.5)).toThrow(RangeError);
  });
});
