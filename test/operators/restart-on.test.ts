import { TestScheduler } from 'rxjs/testing';
import { restartOn } from '../../operators';

function scheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
}

describe('restartOn', () => {
  it('drops the running attempt and resubscribes (marble from the docstring)', () => {
    scheduler().run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const source = cold('--a--b|');
      const signal = hot('----s------');
      expectObservable(source.pipe(restartOn(signal))).toBe('--a---a--b|');
      expectSubscriptions(source.subscriptions).toBe(['^---!', '----^-----!']);
    });
  });

  it('discards exactly the stale output: what was emitted stays, nothing later of the old attempt appears', () => {
    scheduler().run(({ cold, hot, expectObservable }) => {
      const source = cold('-x-y-(z|)');
      const signal = hot('--s-s------');
      // attempt 1: x at 1, dropped at 2; attempt 2 (from 2): x at 3, dropped at 4; attempt 3 (from 4): x 5, y 7, z 9.
      expectObservable(source.pipe(restartOn(signal))).toBe('-x-x-x-y-(z|)');
    });
  });

  it('signals after completion do nothing; errors of the attempt and of the signal are forwarded', () => {
    scheduler().run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const signal = hot('-----s');
      expectObservable(cold('-a|').pipe(restartOn(signal))).toBe('-a|');
      expectSubscriptions(signal.subscriptions).toBe('^-!');
      expectObservable(cold('-#').pipe(restartOn(hot('----')))).toBe('-#');
      expectObservable(cold('-----a').pipe(restartOn(hot('--#')))).toBe('--#');
    });
  });

  it('unsubscribing tears down the attempt and the signal', () => {
    scheduler().run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const source = cold('----a');
      const signal = hot('-s----');
      expectObservable(source.pipe(restartOn(signal)), '---!').toBe('');
      expectSubscriptions(source.subscriptions).toBe(['^!', '-^-!']);
      expectSubscriptions(signal.subscriptions).toBe('^--!');
    });
  });
});
