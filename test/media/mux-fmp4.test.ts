import { TestScheduler } from 'rxjs/testing';
import { OmniError } from '../../src/errors';
import { initSegment, mediaSegment } from '../../src/media/fmp4';
import type { EncodedFrame } from '../../src/media/h264-encoder';
import { muxFmp4 } from '../../src/media/mux-fmp4';

const hex = (s: string) => Uint8Array.from(Buffer.from(s, 'hex'));
/** x264 ultrafast, 64x64: Constrained Baseline, level 1.0. */
const SPS = hex('6742c00ada109b011000000300100000030108f1226a');
const PPS = hex('68ce0fc8');
const IDR = hex('00000002658a');
const P = hex('00000002419a');

const frame = (pts: number, keyframe: boolean): EncodedFrame => ({
  data: keyframe ? IDR : P,
  keyframe,
  pts,
  timeMs: (pts * 1000) / 3,
  ...(keyframe ? { sps: SPS, pps: PPS } : {}),
});

function scheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
}

describe('muxFmp4', () => {
  it('emits the init segment with the first fragment, then one fragment per frame (marble from the docstring)', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const frames = cold('-k----d-d-|', { k: frame(0, true), d: frame(1, false) });
      expectObservable(frames.pipe(muxFmp4({ width: 64, height: 64, fps: 8 }))).toBe('-(if)-g-g-|', {
        i: { kind: 'init', data: initSegment({ width: 64, height: 64, timescale: 90000, sps: SPS, pps: PPS }), codec: 'avc1.42C00A' },
        f: {
          kind: 'fragment',
          data: mediaSegment({ sequenceNumber: 1, baseMediaDecodeTime: 0, duration: 11250, sample: IDR, keyframe: true }),
          pts: 0,
          keyframe: true,
        },
        g: expect.objectContaining({ kind: 'fragment', pts: 1, keyframe: false }),
      });
    });
  });

  it('counts sequence numbers from 1 per subscription and rounds decode times so durations never drift', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const frames = cold('a---bcd|', { a: frame(0, true), b: frame(1, false), c: frame(2, false), d: frame(3, false) });
      // fps 3 at timescale 1000: frames start at 0, 333, 667, 1000 ticks.
      const seg = (seq: number, t: number, d: number, k: boolean) =>
        mediaSegment({ sequenceNumber: seq, baseMediaDecodeTime: t, duration: d, sample: k ? IDR : P, keyframe: k });
      const muxed = frames.pipe(muxFmp4({ width: 64, height: 64, fps: 3, timescale: 1000 }));
      const values = {
        i: expect.objectContaining({ kind: 'init' }),
        a: { kind: 'fragment', data: seg(1, 0, 333, true), pts: 0, keyframe: true },
        b: { kind: 'fragment', data: seg(2, 333, 334, false), pts: 1, keyframe: false },
        c: { kind: 'fragment', data: seg(3, 667, 333, false), pts: 2, keyframe: false },
        d: { kind: 'fragment', data: seg(4, 1000, 333, false), pts: 3, keyframe: false },
      };
      expectObservable(muxed).toBe('(ia)bcd|', values);
      expectObservable(muxed).toBe('(ia)bcd|', values);
    });
  });

  it('fails the stream when the first frame is not a keyframe with parameter sets', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const err = new OmniError('OMNIRX_ERR_INVALID_REQUEST', 'muxFmp4: the first frame (pts 1) must be a keyframe with sps and pps', { param: 'frame' });
      expectObservable(cold('-d-|', { d: frame(1, false) }).pipe(muxFmp4({ width: 64, height: 64, fps: 8 }))).toBe('-#', undefined, err);
    });
  });

  it('fails the stream when the picture size differs from the SPS', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const err = new OmniError('OMNIRX_ERR_INVALID_REQUEST', 'initSegment: 128x64 given but the SPS describes 64x64 pictures', { param: 'width' });
      expectObservable(cold('k|', { k: frame(0, true) }).pipe(muxFmp4({ width: 128, height: 64, fps: 8 }))).toBe('#', undefined, err);
    });
  });

  it('rejects a non-positive fps when the operator is made', () => {
    expect(() => muxFmp4({ width: 64, height: 64, fps: 0 })).toThrow(/fps must be a positive number; got 0/);
  });
});
