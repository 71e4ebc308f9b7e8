// World-session demo: opens a WebRTC session over the /v1/rtc signaling socket (docs/webrtc.md), plays its video
// track, sends arrow/WASD keys as actions on the data channel and measures motion-to-photon latency.
//
// How a displayed frame is matched to its metadata: the server sends one {"type":"frame", rtp, action_id} message
// per video frame, carrying the frame's RTP timestamp. requestVideoFrameCallback reports, for every frame the
// compositor shows, the same RTP timestamp (metadata.rtpTimestamp) and when it is shown (expectedDisplayTime). The
// page joins the two on the RTP timestamp, in whichever order they arrive (a data-channel message may come after its
// picture), so the latency of a key press is: expectedDisplayTime of the first shown frame whose action_id is the
// press's id − the keydown event's timeStamp (both on the page's performance.now() clock).

const $ = (id) => document.getElementById(id);

/** Keys → action keys of the world model. */
const KEYS = {
  ArrowUp: 'up',
  ArrowDown: 'down',
  ArrowLeft: 'left',
  ArrowRight: 'right',
  w: 'up',
  s: 'down',
  a: 'left',
  d: 'right',
  W: 'up',
  S: 'down',
  A: 'left',
  D: 'right',
  ' ': 'none',
};

/** Shown frames kept while their metadata has not arrived yet. */
const MAX_UNMATCHED = 600;

/** The /v1/rtc URL of this page's server, with the page's `?token=` passed on (browsers cannot set headers). */
function signalingUrl() {
  const url = new URL('/v1/rtc', location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const token = new URLSearchParams(location.search).get('token');
  if (token) url.searchParams.set('token', token);
  return url;
}

/** p-th percentile (0–100) of numbers, nearest rank; null for none. */
function percentile(values, p) {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** Resolves once ICE gathering is complete (loopback: a few ms), or after 2 s with what was gathered. */
function gathered(pc) {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => pc.iceGatheringState === 'complete' && resolve();
    pc.addEventListener('icegatheringstatechange', done);
    setTimeout(resolve, 2000);
  });
}

/**
 * One world session of the page. Its public state (`window.omnirxWorld`) is what tests and the benchmark read:
 * `framesShown`, `latencies` ({id, key, ms}), `errors`, `state`.
 */
class WorldClient {
  constructor(video, onChange) {
    this.video = video;
    this.onChange = onChange;
    this.state = 'idle';
    this.framesShown = 0;
    this.firstShownAt = null;
    this.lastShownAt = null;
    this.latencies = [];
    this.errors = [];
    this.actionsSent = 0;
    this.metaByRtp = new Map();
    this.unmatched = [];
    this.pressed = new Map();
    this.seenActions = new Set();
    this.lastFrame = null;
  }

  /** Opens the session: `start` over the socket, answer the server's offer, wait for the data channel. */
  async start(session) {
    this.state = 'connecting';
    this.onChange();
    const ws = new WebSocket(signalingUrl());
    this.ws = ws;
    ws.onmessage = async (m) => {
      const msg = JSON.parse(m.data);
      if (msg.type === 'offer') {
        // The server names the ICE servers (STUN/TURN) and policy of its deployment (docs/webrtc.md, "ICE servers and NAT").
        const pc = this.connect({ iceServers: msg.ice_servers ?? [], iceTransportPolicy: msg.ice_transport_policy ?? 'all' });
        await pc.setRemoteDescription({ type: 'offer', sdp: msg.sdp });
        await pc.setLocalDescription(await pc.createAnswer());
        await gathered(pc);
        ws.send(JSON.stringify({ type: 'answer', sdp: pc.localDescription.sdp }));
        this.sessionId = msg.session_id;
      } else if (msg.type === 'error') {
        this.errors.push(msg);
        this.onChange();
      } else if (msg.type === 'closed') {
        this.end(msg.reason);
      }
    };
    ws.onclose = () => this.end('signaling closed');
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = () => reject(new Error('the signaling socket could not open'));
    });
    ws.send(JSON.stringify({ type: 'start', session }));
  }

  /** The peer connection of the session, made when the offer arrives with the server's ICE configuration. */
  connect(config) {
    const pc = new RTCPeerConnection(config);
    this.pc = pc;
    pc.ontrack = (e) => {
      // Play frames as soon as they are decoded (no added jitter-buffer delay).
      if ('jitterBufferTarget' in e.receiver) e.receiver.jitterBufferTarget = 0;
      this.video.srcObject = e.streams[0] ?? new MediaStream([e.track]);
      this.video.play().catch(() => undefined);
      this.watchFrames();
    };
    pc.ondatachannel = (e) => {
      this.channel = e.channel;
      this.channel.onmessage = (m) => this.onChannelMessage(m.data);
      this.channel.onclose = () => this.end('data channel closed');
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === 'failed' || pc.connectionState === 'closed') this.end(`peer ${pc.connectionState}`);
    };
    return pc;
  }

  /** Sends an action with a fresh id; `at` is when the key went down (performance.now() clock). */
  act(key, at) {
    if (this.channel?.readyState !== 'open') return null;
    const id = `a${++this.actionsSent}`;
    this.pressed.set(id, { key, at });
    this.channel.send(JSON.stringify({ type: 'action', key, id }));
    return id;
  }

  /** Sends a control message (`flush`, `close`, `stats`). */
  control(type) {
    if (this.channel?.readyState === 'open') this.channel.send(JSON.stringify({ type }));
  }

  /** Closes the session (data channel `close`, then the peer and socket). */
  stop() {
    this.control('close');
    this.end('stopped');
  }

  end(reason) {
    if (this.state === 'ended') return;
    this.state = 'ended';
    this.endReason = reason;
    this.pc?.close();
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.close();
    this.onChange();
  }

  onChannelMessage(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg.type === 'ready') {
      this.state = 'running';
      this.params = msg;
    } else if (msg.type === 'frame') {
      this.metaByRtp.set(msg.rtp, msg);
      if (this.metaByRtp.size > MAX_UNMATCHED) this.metaByRtp.delete(this.metaByRtp.keys().next().value);
      // A frame already shown before its metadata arrived is matched now.
      const i = this.unmatched.findIndex((f) => f.rtp === msg.rtp);
      if (i >= 0) this.matched(this.unmatched.splice(i, 1)[0], msg);
      return;
    } else if (msg.type === 'error') {
      this.errors.push(msg);
    } else if (msg.type === 'stats') {
      this.stats = msg;
    } else if (msg.type === 'closed') {
      this.end(msg.reason);
      return;
    }
    this.onChange();
  }

  /** requestVideoFrameCallback loop: each shown frame, with its RTP timestamp and display time. */
  watchFrames() {
    const video = this.video;
    const onFrame = (now, md) => {
      if (this.state === 'ended') return;
      const shownAt = md.expectedDisplayTime ?? now;
      const rtp = md.rtpTimestamp ?? this.pc.getReceivers()[0]?.getSynchronizationSources()[0]?.rtpTimestamp;
      this.framesShown++;
      this.firstShownAt ??= shownAt;
      this.lastShownAt = shownAt;
      // Keep the frame count and fps of the readout current (at most 4 redraws a second).
      if (shownAt - (this.lastRedrawAt ?? -Infinity) >= 250) {
        this.lastRedrawAt = shownAt;
        this.onChange();
      }
      const shown = { rtp, shownAt };
      const meta = this.metaByRtp.get(rtp);
      if (meta !== undefined) this.matched(shown, meta);
      else {
        this.unmatched.push(shown);
        if (this.unmatched.length > MAX_UNMATCHED) this.unmatched.shift();
      }
      video.requestVideoFrameCallback(onFrame);
    };
    video.requestVideoFrameCallback(onFrame);
  }

  /** A shown frame met its metadata: the first frame carrying a pressed action's id gives that press's latency. */
  matched(shown, meta) {
    this.lastFrame = meta;
    const id = meta.action_id;
    if (id === undefined || this.seenActions.has(id)) return;
    this.seenActions.add(id);
    const press = this.pressed.get(id);
    if (press === undefined) return;
    this.pressed.delete(id);
    this.latencies.push({ id, key: press.key, ms: shown.shownAt - press.at, pts: meta.pts });
    this.onChange();
  }

  /** Shown frames per second between the first and the last shown frame. */
  fps() {
    if (this.framesShown < 2) return null;
    return ((this.framesShown - 1) * 1000) / (this.lastShownAt - this.firstShownAt);
  }
}

const video = $('video');
let client = null;

function render() {
  if (client === null) return;
  const ms = client.latencies.map((l) => l.ms);
  const last = ms.length > 0 ? ms[ms.length - 1].toFixed(1) : '–';
  const p50 = percentile(ms, 50);
  const p95 = percentile(ms, 95);
  const fps = client.fps();
  $('status').textContent = `${client.state}${client.endReason ? ` (${client.endReason})` : ''}${client.sessionId ? ` · session ${client.sessionId}` : ''}`;
  const err = client.errors.at(-1);
  $('readout').textContent = [
    `motion-to-photon: last ${last} ms · p50 ${p50?.toFixed(1) ?? '–'} ms · p95 ${p95?.toFixed(1) ?? '–'} ms (${ms.length} presses)`,
    `frames shown: ${client.framesShown}${fps ? ` · ${fps.toFixed(1)} fps` : ''}${client.lastFrame ? ` · frame ${client.lastFrame.pts} (${client.lastFrame.key})` : ''}`,
    err ? `error: ${err.code} ${err.param ?? ''} ${err.message}` : '',
  ].join('\n');
  $('readout').className = err ? 'error' : '';
  $('start-button').disabled = client.state === 'connecting' || client.state === 'running';
  $('stop-button').disabled = client.state !== 'running';
}

$('start').addEventListener('submit', (e) => {
  e.preventDefault();
  const data = new FormData(e.target);
  const session = { prompt: String(data.get('prompt')) };
  const seed = String(data.get('seed') ?? '').trim();
  if (seed !== '') session.seed = Number(seed);
  // Optional session size and rate from the page URL (`/demos/world?width=64&height=64&fps=20`).
  const query = new URLSearchParams(location.search);
  for (const f of ['width', 'height', 'fps']) if (query.get(f)) session[f] = Number(query.get(f));
  client = new WorldClient(video, render);
  window.omnirxWorld = client;
  client.start(session).catch((err) => {
    client.errors.push({ code: 'client', message: String(err), param: null });
    client.end('could not connect');
  });
});

$('stop-button').addEventListener('click', () => client?.stop());

document.addEventListener('keydown', (e) => {
  const key = KEYS[e.key];
  if (key === undefined || client === null || e.target instanceof HTMLInputElement) return;
  e.preventDefault();
  if (e.repeat) return;
  client.act(key, e.timeStamp);
});
