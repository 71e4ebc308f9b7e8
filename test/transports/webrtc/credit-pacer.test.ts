import { CreditPacer } from '../../../transports/webrtc/credit-pacer';

describe('CreditPacer', () => {
  beforeEach(() => jest.useFakeTimers({ now: 0 }));
  afterEach(() => jest.useRealTimers());

  function pacer(minIntervalMs: number, windowFrames = 2): { p: CreditPacer; grants: Array<[number, number]> } {
    const grants: Array<[number, number]> = [];
    const p = new CreditPacer({ windowFrames, minIntervalMs, grant: (n) => grants.push([performance.now(), n]) });
    return { p, grants };
  }

  it('grants the window, then one credit per frame sent, never two grants closer than the spacing', () => {
    const { p, grants } = pacer(50);
    p.start();
    expect(grants).toEqual([[0, 1]]); // spaced: the second window credit comes 50 ms later
    jest.advanceTimersByTime(50);
    expect(grants).toEqual([
      [0, 1],
      [50, 1],
    ]);
    expect(p.framesInFlight).toBe(2);
    jest.advanceTimersByTime(100);
    expect(grants.length).toBe(2); // nothing sent: nothing more granted
    p.frameSent();
    expect(grants[2]).toEqual([150, 1]);
    p.frameSent();
    expect(grants.length).toBe(3);
    jest.advanceTimersByTime(49);
    expect(grants.length).toBe(3);
    jest.advanceTimersByTime(1);
    expect(grants[3]).toEqual([200, 1]);
    expect(p.framesInFlight).toBe(2);
  });

  it('without spacing grants everything owed at once', () => {
    const { p, grants } = pacer(0, 3);
    p.start();
    p.frameSent();
    p.frameSent();
    expect(grants).toEqual([
      [0, 3],
      [0, 1],
      [0, 1],
    ]);
  });

  it('expedite grants an owed credit at once (an action arrived) but never beyond the window', () => {
    const { p, grants } = pacer(50);
    p.start();
    jest.advanceTimersByTime(50);
    p.frameSent(); // owed 1, due at 100
    jest.advanceTimersByTime(10);
    expect(grants.length).toBe(2);
    p.expedite();
    expect(grants[2]).toEqual([60, 1]);
    expect(p.framesInFlight).toBe(2);
    jest.advanceTimersByTime(200);
    expect(grants.length).toBe(3); // the window is in flight: nothing more until a frame is sent
  });

  it('an action while the whole window is in flight gets the credit of the next frame sent at once, once', () => {
    const { p, grants } = pacer(50, 1);
    p.start();
    jest.advanceTimersByTime(20);
    p.expedite(); // the frame granted at 0 is still being made: nothing owed
    p.expedite(); // a second action before the grant: still one grant
    expect(grants).toEqual([[0, 1]]);
    jest.advanceTimersByTime(10);
    p.frameSent(); // at 30, before the 50 ms spacing
    expect(grants).toEqual([
      [0, 1],
      [30, 1],
    ]);
    jest.advanceTimersByTime(10);
    p.frameSent(); // at 40: spaced again, due at 80
    expect(grants.length).toBe(2);
    jest.advanceTimersByTime(39);
    expect(grants.length).toBe(2);
    jest.advanceTimersByTime(1);
    expect(grants[2]).toEqual([80, 1]);
  });

  it('stop drops pending grants; a bad window is a RangeError', () => {
    const { p, grants } = pacer(50);
    p.start();
    p.stop();
    jest.advanceTimersByTime(500);
    p.frameSent();
    p.expedite();
    expect(grants).toEqual([[0, 1]]);
    expect(() => new CreditPacer({ windowFrames: 0, minIntervalMs: 0, grant: () => undefined })).toThrow(RangeError);
  });
});
