import { GuidanceIntervalSchema, isGuidanceInterval, parseGuidanceIntervalText } from '../../src/request/guidance-interval';

describe('GuidanceIntervalSchema / isGuidanceInterval', () => {
  it('accepts two fractions in [0, 1] with start ≤ end, the empty interval included', () => {
    for (const pair of [
      [0, 1],
      [0, 0.25],
      [0.3, 0.6],
      [0.5, 0.5],
      [0, 0],
      [1, 1],
    ]) {
      expect(isGuidanceInterval(pair)).toBe(true);
      expect(GuidanceIntervalSchema.parse(pair)).toEqual(pair);
    }
  });

  it('refuses a start after the end, fractions out of [0, 1], non-finite values and other lengths', () => {
    for (const pair of [[0.5, 0.25], [-0.01, 0.5], [0, 1.01], [Number.NaN, 1], [0, Number.NaN], [0, Infinity], [-Infinity, 0], [0.5], [], [0, 0.5, 1]]) {
      expect(isGuidanceInterval(pair)).toBe(false);
    }
    const r = GuidanceIntervalSchema.safeParse([0.75, 0.25]);
    expect(r.success).toBe(false);
    expect(r.error?.issues[0].message).toBe('start must not exceed end ([start, end) are fractions of the denoise steps)');
    // Not a pair at all: the message says what is taken, as a pair or as text.
    expect(GuidanceIntervalSchema.safeParse('0,0.25').error?.issues[0].message).toBe(
      'expected [start, end], two fractions of the denoise steps in [0, 1] (as text: "start,end", e.g. "0,0.25")',
    );
  });
});

describe('parseGuidanceIntervalText', () => {
  it('reads "start,end" as two numbers, spaces and exponents allowed', () => {
    expect(parseGuidanceIntervalText('0,0.25')).toEqual([0, 0.25]);
    expect(parseGuidanceIntervalText(' 0.1 , 1 ')).toEqual([0.1, 1]);
    expect(parseGuidanceIntervalText('0,2.5e-1')).toEqual([0, 0.25]);
    expect(parseGuidanceIntervalText('.5,1.')).toEqual([0.5, 1]);
  });

  it('leaves range checks to the schema: a reversed or out-of-range pair is read as typed', () => {
    expect(parseGuidanceIntervalText('0.5,0.25')).toEqual([0.5, 0.25]);
    expect(parseGuidanceIntervalText('-1,2')).toEqual([-1, 2]);
  });

  it('refuses text that is not two decimal numbers separated by one comma', () => {
    for (const raw of [
      '',
      '0.25',
      '0,0.25,1',
      '0;0.25',
      'a,b',
      '0,',
      ',1',
      'NaN,1',
      '0,Infinity',
      '0x1,1',
      '[0,0.25]',
      '0,,1',
      '1_0,1',
      '0, 0.25abc',
      '.,1',
      '0,e5',
    ]) {
      expect(parseGuidanceIntervalText(raw)).toBeUndefined();
    }
  });
});
