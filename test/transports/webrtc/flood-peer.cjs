// A werift viewer in its own process (forked by rate-limit-peer.test.ts), so that the cost of sending a flood is not
// paid on the server's event loop: what the test measures there is the server's own work. Driven over IPC:
//   → {cmd:'connect', wsUrl, session}          ← {event:'ready'} once the channel is open and a frame arrived
//   → {cmd:'flood', type, count, markerId}     ← {event:'flooded', ms, messages} once the marker action's frame came
//   → {cmd:'send', message, until}             ← {event:'got', message} for the first reply whose type is `until`
//   → {cmd:'close'}                            ← {event:'closed'} (then the process exits)
const { RTCPeerConnection } = require('werift');
const WebSocket = require('ws');

let ws;
let pc;
let dc;
const inbox = [];
let waiters = [];

function push(m) {
  inbox.push(m);
  waiters = waiters.filter((w) => {
    if (!w.pred(m)) return true;
    w.resolve(m);
    return false;
  });
}

function next(pred, from = 0) {
  const found = inbox.slice(from).find(pred);
  if (found !== undefined) return Promise.resolve(found);
  return new Promise((resolve) => waiters.push({ pred, resolve }));
}

async function connect(wsUrl, session) {
  pc = new RTCPeerConnection({ iceServers: [], bundlePolicy: 'max-bundle', iceAdditionalHostAddresses: ['127.0.0.1'], iceUseIpv6: false });
  const opened = new Promise((resolve) => {
    pc.onDataChannel.subscribe((channel) => {
      channel.onMessage.subscribe((data) => push(JSON.parse(data.toString())));
      if (channel.readyState === 'open') resolve(channel);
      else channel.stateChanged.subscribe((s) => s === 'open' && resolve(channel));
    });
  });
  ws = new WebSocket(wsUrl);
  ws.on('message', async (data) => {
    const m = JSON.parse(data.toString());
    push({ ...m, signaling: true });
    if (m.type === 'offer') {
      await pc.setRemoteDescription({ type: 'offer', sdp: m.sdp });
      await pc.setLocalDescription(await pc.createAnswer());
      ws.send(JSON.stringify({ type: 'answer', sdp: pc.localDescription.sdp }));
    }
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  ws.send(JSON.stringify({ type: 'start', session }));
  dc = await opened;
  await next((m) => m.type === 'frame');
  process.send({ event: 'ready' });
}

async function flood(type, count, markerId) {
  const from = inbox.length;
  const t0 = performance.now();
  const text = JSON.stringify({ type });
  for (let i = 0; i < count; i++) dc.send(text);
  // Ordered channel: once the marker action shows on a frame, the server went through the whole flood.
  dc.send(JSON.stringify({ type: 'action', key: 'left', id: markerId }));
  await next((m) => m.type === 'frame' && m.action_id === markerId, from);
  const ms = performance.now() - t0;
  process.send({ event: 'flooded', ms, messages: inbox.slice(from).filter((m) => m.type !== 'frame') });
}

process.on('message', (msg) => {
  const run = async () => {
    if (msg.cmd === 'connect') return connect(msg.wsUrl, msg.session);
    if (msg.cmd === 'flood') return flood(msg.type, msg.count, msg.markerId);
    if (msg.cmd === 'send') {
      const from = inbox.length;
      dc.send(JSON.stringify(msg.message));
      return process.send({ event: 'got', message: await next((m) => m.type === msg.until, from) });
    }
    if (msg.cmd === 'close') {
      ws.close();
      await pc.close();
      process.send({ event: 'closed' }, () => process.exit(0));
    }
  };
  run().catch((err) => process.send({ event: 'error', message: String(err && err.stack) }));
});
