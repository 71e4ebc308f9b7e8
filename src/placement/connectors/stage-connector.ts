import type { Observable } from 'rxjs';
import { OmniError } from '../../errors';
import type { DiffusionStagePayload } from '../../pipeline/stage-payload';

/** Lifecycle of a connector end: `connecting` until it can move payloads, `ready` while it can, `closed` for good. */
export type ConnectorState = 'connecting' | 'ready' | 'closed';

/**
 * The sending end of a stage link (e.g. Denoise → Decode). Flow control is by credit: the receiver grants one
 * credit per payload it has room for, `put` spends one, and a `put` without credit waits — so a slow receiver
 * throttles its sender instead of payloads piling up anywhere.
 */
export interface StageSender {
  readonly state: ConnectorState;
  /** Resolves when the link can move payloads (again, after a reconnect); rejects once the sender is closed. */
  readonly ready: Promise<void>;
  /** Credits granted and not yet spent: how many `put`s would be sent right now without waiting. */
  readonly credits: number;
  /**
   * Sends one payload (validated first). Resolves when the receiver has accepted it into its queue; the tensor
   * bytes must stay unchanged until then. Puts are delivered in call order.
   * @throws PayloadError (OMNIRX_ERR_PAYLOAD) when the payload is invalid or the receiver rejected it;
   *   OmniError OMNIRX_ERR_CONNECTOR when the sender is closed, or the link was lost before the receiver accepted it.
   */
  put(payload: DiffusionStagePayload): Promise<void>;
  /** Closes the sender; pending puts reject with OMNIRX_ERR_CONNECTOR. Idempotent. */
  close(): Promise<void>;
}

/**
 * The receiving end of a stage link. Accepted payloads wait in a queue bounded by the credits granted; taking one
 * (`get` or an emission of `payloads$`) returns its credit to the sender it came from.
 */
export interface StageReceiver {
  readonly state: ConnectorState;
  /** Resolves when the receiver accepts senders (listening); rejects once it is closed. */
  readonly ready: Promise<void>;
  /** Payloads accepted and not yet taken. */
  readonly queued: number;
  /** The next payload, in arrival order. @throws OmniError OMNIRX_ERR_CONNECTOR once the receiver is closed. */
  get(): Promise<DiffusionStagePayload>;
  /**
   * Received payloads, taken one per emission (the credit goes back as it is emitted, so a subscriber doing
   * asynchronous work per payload should loop on `get()` instead to keep the backpressure). Completes on `close()`.
   */
  readonly payloads$: Observable<DiffusionStagePayload>;
  /** Stops receiving: queued payloads are dropped, pending `get`s reject with OMNIRX_ERR_CONNECTOR. Idempotent. */
  close(): Promise<void>;
}

/** The error of an operation refused because the connector end `what` is closed. */
export function connectorClosed(what: string, detail = ''): OmniError {
  return new OmniError('OMNIRX_ERR_CONNECTOR', `${what} is closed${detail}`);
}

/** Whether `e` is the error `connectorClosed` makes. */
export function isConnectorClosed(e: unknown): boolean {
  return e instanceof OmniError && e.code === 'OMNIRX_ERR_CONNECTOR' && / is closed/.test(e.message);
}
