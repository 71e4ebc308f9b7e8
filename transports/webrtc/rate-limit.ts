/**
 * Per-peer rate limits of the WebRTC transport (docs/webrtc.md, "Rate limits"): token buckets per message type plus
 * one on bytes, a throttle on the `rate_limited` errors they cause, and a flood detector. Pure: time comes from the
 * injected clock (`{ now(): number }` in ms, which an RxJS `SchedulerLike` satisfies), so tests run in virtual time.
 */

/** A clock in milliseconds. Default `performance.now()`. */
export interface Clock {
  now(): number;
}

const performanceClock: Clock = { now: () => performance.now() };

/** A sustained rate and the burst a full bucket allows. */
export interface Rate {
  /** Tokens added per second. */
  perSecond: number;
  /** Bucket size: the most taken at once after a quiet period. */
  burst: number;
}

/**
 * A token bucket: holds at most `burst` tokens, refilled continuously at `perSecond`; `tryTake(n)` takes `n` when
 * there are that many and says whether it did. Starts full.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    readonly rate: Rate,
    private readonly clock: Clock = performanceClock,
  ) {
    if (!(rate.perSecond > 0) || !(rate.burst >= 1)) throw new RangeError(`a token bucket needs perSecond > 0 and burst >= 1, got ${JSON.stringify(rate)}`);
    this.tokens = rate.burst;
    this.last = clock.now();
  }

  /** Takes `n` tokens if the bucket holds them (after refilling for the time passed); false leaves it as it was. */
  tryTake(n = 1): boolean {
    const now = this.clock.now();
    this.tokens = Math.min(this.rate.burst, this.tokens + ((now - this.last) / 1000) * this.rate.perSecond);
    this.last = now;
    if (this.tokens < n) return false;
    this.tokens -= n;
    return true;
  }
}

/** The limits of one peer's messages on one channel. */
export interface PeerLimits<T extends string> {
  /** Per message type; a type not listed is not limited by type (`close`, say). */
  messages: Partial<Record<T, Rate>>;
  /** Refused messages (malformed, unknown type), each of which costs an error reply. */
  invalid: Rate;
  /** Bytes of all messages together, charged before parsing. */
  bytes: Rate;
  /**
   * When to give up on a peer: `droppedPerSecond` messages dropped (all limits together) in each of `seconds`
   * one-second windows in a row closes it. Default 500 per second for 10 s: far past every limit, and never reached by
   * one burst (2,000 messages in one go reach the server through werift's SCTP over many seconds, about 100 per second
   * on loopback here, docs/webrtc.md "Rate limits").
   */
  flood?: { droppedPerSecond: number; seconds: number };
}

/** What to do with one message. */
export type Verdict =
  | { ok: true }
  | {
      ok: false;
      /** The limit that dropped it: a message type, `invalid` or `bytes`. */
      limit: string;
      /** Set when an error should be sent now (at most one per second): the drops since the last report, this one included. */
      report?: { dropped: number; rate: Rate };
      /** The peer kept flooding (`flood.seconds` flood seconds in a row): close it. */
      close: boolean;
    };

/**
 * The limits of one peer on one channel (a session's data channel, a signaling socket). {@link check} charges one
 * message of `bytes` bytes to the byte bucket and, when its type is known, to that type's bucket (a message not
 * yet parsed is `check`ed with its bytes only, then with its type once parsed). A dropped message asks for an
 * error report at most once per second; `flood.droppedPerSecond` drops within each of `flood.seconds` seconds in a
 * row ask to close the peer.
 */
export class PeerRateLimiter<T extends string> {
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly rates = new Map<string, Rate>();
  private lastReport = -Infinity;
  private unreported = 0;
  private windowStart: number;
  private windowDrops = 0;
  private floodRun = 0;
  private readonly flood: { droppedPerSecond: number; seconds: number };

  constructor(
    limits: PeerLimits<T>,
    private readonly clock: Clock = performanceClock,
  ) {
    for (const [type, rate] of [...Object.entries(limits.messages), ['invalid', limits.invalid], ['bytes', limits.bytes]] as Array<[string, Rate]>) {
      this.rates.set(type, rate);
      this.buckets.set(type, new TokenBucket(rate, clock));
    }
    this.flood = limits.flood ?? { droppedPerSecond: 500, seconds: 10 };
    this.windowStart = clock.now();
  }

  /** Charges `bytes` to the byte budget (call before parsing). */
  checkBytes(bytes: number): Verdict {
    const close = this.roll();
    if (this.buckets.get('bytes')!.tryTake(bytes)) return close ? this.drop('bytes', true) : { ok: true };
    return this.drop('bytes', close);
  }

  /** Charges one message of `type` (`invalid` for a refused one) to its bucket; a type with no limit passes. */
  check(type: T | 'invalid'): Verdict {
    const close = this.roll();
    const bucket = this.buckets.get(type);
    if (bucket === undefined || bucket.tryTake(1)) return close ? this.drop(type, true) : { ok: true };
    return this.drop(type, close);
  }

  private drop(limit: string, close: boolean): Verdict {
    this.windowDrops++;
    this.unreported++;
    const now = this.clock.now();
    if (now - this.lastReport < 1000) return { ok: false, limit, close };
    this.lastReport = now;
    const dropped = this.unreported;
    this.unreported = 0;
    return { ok: false, limit, report: { dropped, rate: this.rates.get(limit)! }, close };
  }

  /** Ends the one-second window when it is over; true when it was the last of `flood.seconds` flood seconds in a row. */
  private roll(): boolean {
    const now = this.clock.now();
    const elapsed = now - this.windowStart;
    if (elapsed < 1000) return false;
    this.floodRun = this.windowDrops >= this.flood.droppedPerSecond ? this.floodRun + 1 : 0;
    const close = this.floodRun >= this.flood.seconds;
    // A whole second with no message in between breaks the run.
    if (elapsed >= 2000) this.floodRun = 0;
    this.windowDrops = 0;
    this.windowStart = now;
    return close;
  }
}

/**
 * Data-channel limits of one session. Actions: well above any input device's rate (a 120 Hz pointer) and the model's
 * frame rate (20 fps by default; the latest action is sampled per chunk). `stats` and `flush`: a few per second
 * (`flush` restarts the chunk being denoised). Bytes: 64 KiB/s sustained, 256 KiB burst (an action is about 60 bytes,
 * the largest accepted message 16 KiB).
 */
export const CHANNEL_LIMITS: PeerLimits<'action' | 'flush' | 'stats' | 'close'> = {
  messages: { action: { perSecond: 120, burst: 240 }, flush: { perSecond: 5, burst: 10 }, stats: { perSecond: 5, burst: 10 } },
  invalid: { perSecond: 5, burst: 10 },
  bytes: { perSecond: 64 * 1024, burst: 256 * 1024 },
};

/**
 * Signaling limits of one socket: `start` and `answer` a few per second (a refused one may be corrected and sent
 * again), trickled candidates 50 per second (bursts of 100: a browser gathers a handful per interface and server).
 * Bytes: 1 MiB/s sustained, 2 MiB burst (a `start` may carry a base64 image of up to 1 MiB).
 */
export const SIGNALING_LIMITS: PeerLimits<'start' | 'answer' | 'candidate' | 'close'> = {
  messages: { start: { perSecond: 2, burst: 10 }, answer: { perSecond: 2, burst: 10 }, candidate: { perSecond: 50, burst: 100 } },
  invalid: { perSecond: 5, burst: 10 },
  bytes: { perSecond: 1024 * 1024, burst: 2 * 1024 * 1024 },
};
