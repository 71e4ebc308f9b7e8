import { concatMap, map } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { creditGate } from '../../operators';

function scheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
}

describe('creditGate', () => {
  it('emits one permit per `cost` credits (marble from the docstring)', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const credits = cold('-a-a-b---b-|', { a: 1, b: 2 });
      expectObservable(credits.pipe(creditGate(2))).toBe('---0-1---2-|', { 0: 0, 1: 1, 2: 2 });
    });
  });

  it('a large grant releases several permits at once; leftovers carry over', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const credits = cold('a---b|', { a: 7, b: 2 });
      expectObservable(credits.pipe(creditGate(3))).toBe('(01)2|', { 0: 0, 1: 1, 2: 2 });
    });
  });

  it('credits stall and resume a producer: no unit starts without credit', () => {
    // Each unit of work takes 2 frames; the consumer grants 1 credit per unit, late.
    scheduler().run(({ cold, hot, expectObservable }) => {
      const credits = hot('a-------a-a----', { a: 1 });
      const work = (i: number) => cold('--x|', { x: `chunk${i}` });
      const out = credits.pipe(
        creditGate(1),
        concatMap((p) => work(p)),
      );
      // chunk0 runs 0–3; nothing starts until the next credit at 8; chunk2's permit (10) waits for chunk1 to end (11).
      expectObservable(out).toBe('--x-------y--z-', { x: 'chunk0', y: 'chunk1', z: 'chunk2' });
    });
  });

  it('rejects invalid grants with a RangeError naming the value, and an invalid cost synchronously', () => {
    scheduler().run(({ cold, expectObservable }) => {
      expectObservable(cold('a-b', { a: 1, b: -1 }).pipe(creditGate(1))).toBe(
        'a-#',
        { a: 0 },
        new RangeError('creditGate: a credit grant must be a non-negative integer, got -1'),
      );
      expectObservable(cold('a', { a: 0.5 }).pipe(creditGate(1))).toBe(
        '#',
        undefined,
        new RangeError('creditGate: a credit grant must be a non-negative integer, got 0.5'),
      );
    });
    expect(() => creditGate(0)).toThrow(/cost must be a positive integer, got 0/);
    expect(() => creditGate(Number.NaN)).toThrow(RangeError);
  });

  it('keeps its balance per subscription', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const gated = cold('a-a|', { a: 1 }).pipe(
        creditGate(2),
        map((p) => `p${p}`),
      );
      expectObservable(gated).toBe('--x|', { x: 'p0' });
      expectObservable(gated).toBe('--x|', { x: 'p0' });
    });
  });
});
