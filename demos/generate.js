// Generation demo: sends a prompt over the /v1/stream WebSocket, shows the denoise progress, and plays the fMP4
// stream through Media Source Extensions, granting one credit per fragment appended (docs/streaming.md).

/** Credits granted when the stream starts: frames the page may have in flight before it has appended any. */
const INITIAL_CREDITS = 8;

const $ = (id) => document.getElementById(id);

/** The /v1/stream URL of this page's server, with the page's `?token=` passed on (browsers cannot set headers). */
function streamUrl() {
  const url = new URL('/v1/stream', location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const token = new URLSearchParams(location.search).get('token');
  if (token) url.searchParams.set('token', token);
  return url;
}

/** The generate request of the form's fields (empty numeric fields are left to the model's defaults). */
function requestOf(form) {
  const data = new FormData(form);
  const request = { prompt: String(data.get('prompt')), size: String(data.get('size')) };
  for (const f of ['num_frames', 'fps', 'num_inference_steps', 'seed']) {
    const v = String(data.get(f) ?? '').trim();
    if (v !== '') request[f] = Number(v);
  }
  return request;
}

/** Appends buffers to a SourceBuffer one at a time; `onAppended(kind)` runs after each append completes. */
class AppendQueue {
  constructor(sourceBuffer, onAppended) {
    this.sb = sourceBuffer;
    this.items = [];
    this.onAppended = onAppended;
    this.current = null;
    this.sb.addEventListener('updateend', () => {
      const done = this.current;
      this.current = null;
      if (done) this.onAppended(done.kind);
      this.next();
    });
  }

  push(kind, data) {
    this.items.push({ kind, data });
    this.next();
  }

  get idle() {
    return this.current === null && this.items.length === 0;
  }

  next() {
    if (this.current !== null || this.sb.updating || this.items.length === 0) return;
    this.current = this.items.shift();
    this.sb.appendBuffer(this.current.data);
  }
}

/** Streams one generation into the video element; resolves when the stream ended (or failed). */
function play(request) {
  const video = $('video');
  const status = (text, error = false) => {
    $('status').textContent = text;
    $('status').className = error ? 'error' : '';
  };
  const mediaSource = new MediaSource();
  video.src = URL.createObjectURL(mediaSource);
  const stats = { frames: 0, appended: 0, ended: false };
  window.omnirxDemo = stats;

  return new Promise((resolve) => {
    mediaSource.addEventListener(
      'sourceopen',
      () => {
        const ws = new WebSocket(streamUrl());
        ws.binaryType = 'arraybuffer';
        let queue = null;
        let pendingInit = false;
        const finish = () => {
          if (stats.ended && queue !== null && queue.idle && mediaSource.readyState === 'open') mediaSource.endOfStream();
        };

        ws.addEventListener('open', () => {
          ws.send(JSON.stringify({ type: 'generate', format: 'fmp4', request }));
          ws.send(JSON.stringify({ type: 'credit', frames: INITIAL_CREDITS }));
          status('queued');
        });
        ws.addEventListener('message', (ev) => {
          if (typeof ev.data !== 'string') {
            queue.push(pendingInit ? 'init' : 'fragment', ev.data);
            pendingInit = false;
            return;
          }
          const m = JSON.parse(ev.data);
          if (m.type === 'progress') {
            $('progress').max = m.total;
            $('progress').value = m.step;
            status(`denoising: step ${m.step} of ${m.total} (${m.ms.toFixed(0)} ms)`);
          } else if (m.type === 'init') {
            const sb = mediaSource.addSourceBuffer(`video/mp4; codecs="${m.codec}"`);
            sb.mode = 'segments';
            queue = new AppendQueue(sb, (kind) => {
              if (kind === 'fragment') {
                stats.appended++;
                if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'credit', frames: 1 }));
              }
              if (stats.appended === 1) video.play().catch(() => undefined);
              finish();
            });
            pendingInit = true;
            status(`streaming ${m.width}×${m.height} at ${m.fps} fps (${m.codec})`);
          } else if (m.type === 'frame') {
            stats.frames++;
          } else if (m.type === 'end') {
            stats.ended = true;
            status(`done: ${m.frames} frames (${m.reason})`);
            finish();
            resolve();
          } else if (m.type === 'error') {
            status(`${m.code}${m.param ? ` (${m.param})` : ''}: ${m.message}`, true);
            // A refused start (nothing streams yet) or a fatal error ends this attempt; the form can be sent again.
            if (m.fatal || queue === null) {
              ws.close();
              resolve();
            }
          }
        });
        ws.addEventListener('close', () => resolve());
      },
      { once: true },
    );
  });
}

$('form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('go').disabled = true;
  $('progress').value = 0;
  try {
    await play(requestOf(ev.target));
  } finally {
    $('go').disabled = false;
  }
});
