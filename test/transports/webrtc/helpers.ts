import type { FastifyInstance } from 'fastify';
import { RTCPeerConnection, type RTCDataChannel } from 'werift';
import WebSocket from 'ws';
import { Engine } from '../../../src/engine/engine';
import { createServer } from '../../../transports/server';
import { rtcPeerConfig } from '../../../transports/webrtc/peer-config';
import { makeModelsDir, tinyWorldSpec } from '../../helpers/tiny-model';
import { builtinFamilies } from '../../../src/families';

/** A listening server over an engine on the tiny world model (chunks of one frame, two denoise steps). */
export interface RtcTestServer {
  app: FastifyInstance;
  engine: Engine;
  origin: string;
  wsUrl: string;
}

/** Starts the server on 127.0.0.1 (random port); `maxSessions` bounds the engine's open sessions. */
export async function startRtcServer(opts: { maxSessions?: number } = {}): Promise<RtcTestServer> {
  const maxSessions = opts.maxSessions ?? 4;
  const modelsDir = await makeModelsDir([{ spec: tinyWorldSpec(), seed: 3 }]);
  const engine = await Engine.create({
    families: builtinFamilies(),
    modelsDir,
    defaultModel: 'tiny-world',
    sessions: { chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, steps: 2, maxSessions },
  });
  const app = await createServer({ engine });
  await app.omnirx.engineReady;
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') throw new Error('the server has no TCP address');
  return { app, engine, origin: `http://127.0.0.1:${addr.port}`, wsUrl: `ws://127.0.0.1:${addr.port}/v1/rtc` };
}

/** Resolves once `pred()` holds, checking on every event-loop turn. */
export async function until(pred: () => boolean): Promise<void> {
  while (!pred()) await new Promise((r) => setTimeout(r, 5));
}

/** Collected JSON messages of one channel; `next(pred)` resolves with the first (past or future) match. */
export class Inbox {
  readonly all: Array<Record<string, unknown>> = [];
  private waiters: Array<{ pred: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }> = [];

  push(m: Record<string, unknown>): void {
    this.all.push(m);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(m)) return true;
      w.resolve(m);
      return false;
    });
  }

  /** The first message matching `pred` received since index `from` (default: all), now or later. */
  next(pred: (m: Record<string, unknown>) => boolean, from = 0): Promise<Record<string, unknown>> {
    const found = this.all.slice(from).find(pred);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve) => this.waiters.push({ pred, resolve }));
  }
}

/** A Node (werift) viewer of one session. */
export interface RtcClient {
  ws: WebSocket;
  pc: RTCPeerConnection;
  signaling: Inbox;
  channelInbox: Inbox;
  /** Resolves with the data channel once it is open. */
  channel: Promise<RTCDataChannel>;
  /** RTP timestamps of the video frames received (marker packets), in order. */
  rtpFrames: number[];
  /** Sends a JSON message on the data channel. */
  send(m: unknown): Promise<void>;
  /** The client's SDP answer to the server's offer (made once, when the offer arrived; sent only with `autoAnswer`). */
  answer(): Promise<string>;
  /** The signaling socket's close: code, reason, and how many signaling messages arrived before it. */
  closeFrame: Promise<{ code: number; reason: string; after: number }>;
}

/**
 * Opens the signaling socket, sends `start` with `session`, answers the offer (unless `autoAnswer` is false: the
 * test sends `answer()` itself), and collects what comes back.
 */
export async function connectClient(wsUrl: string, session: Record<string, unknown>, opts: { autoAnswer?: boolean } = {}): Promise<RtcClient> {
  const ws = new WebSocket(wsUrl);
  const signaling = new Inbox();
  const channelInbox = new Inbox();
  const rtpFrames: number[] = [];
  const pc = new RTCPeerConnection(rtcPeerConfig());
  pc.onTrack.subscribe((track) => {
    track.onReceiveRtp.subscribe((rtp) => {
      if (rtp.header.marker) rtpFrames.push(rtp.header.timestamp);
    });
  });
  const channel = new Promise<RTCDataChannel>((resolve) => {
    pc.onDataChannel.subscribe((dc) => {
      dc.onMessage.subscribe((data) => channelInbox.push(JSON.parse(data.toString()) as Record<string, unknown>));
      if (dc.readyState === 'open') resolve(dc);
      else dc.stateChanged.subscribe((s) => s === 'open' && resolve(dc));
    });
  });
  const answer = signaling
    .next((m) => m.type === 'offer')
    .then(async (m) => {
      await pc.setRemoteDescription({ type: 'offer', sdp: m.sdp as string });
      await pc.setLocalDescription(await pc.createAnswer());
      return pc.localDescription!.sdp;
    });
  ws.on('message', (data) => signaling.push(JSON.parse(data.toString()) as Record<string, unknown>));
  if (opts.autoAnswer !== false) void answer.then((sdp) => ws.send(JSON.stringify({ type: 'answer', sdp })));
  const closeFrame = new Promise<{ code: number; reason: string; after: number }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString(), after: signaling.all.length })),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.send(JSON.stringify({ type: 'start', session }));
  return {
    ws,
    pc,
    signaling,
    channelInbox,
    channel,
    rtpFrames,
    send: async (m) => (await channel).send(JSON.stringify(m)),
    answer: () => answer,
    closeFrame,
  };
}
