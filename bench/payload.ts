/**
 * Stage payload throughput: how fast a `DiffusionStagePayload` moves through each connector (in-process, shared
 * memory = tmpfs frame files over a Unix socket, TCP on loopback), and through the framing alone (encode + decode
 * with checksum), against a baseline of one plain `Buffer.concat` copy of the same tensor bytes. One payload per
 * size class: a 256 KiB latent chunk and a 16 MiB one (float32), plus 4 KiB of metadata. Each connector runs with a
 * credit window of 4; the receiver reads one float of every payload it gets. Throughput is tensor MB (10^6 bytes)
 * per second, median of 5 rounds. Prints one JSON line per (size, path):
 * {"payload_mib", "path", "mb_per_s", "ratio_vs_copy"}. Run: npm run bench:payload
 */
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  connectShm,
  connectTcp,
  createInProcessConnector,
  defaultShmDir,
  listenShm,
  listenTcp,
  type StageReceiver,
  type StageSender,
} from '../src/placement/connectors';
import { decodePayload, encodePayload } from '../src/placement/payload-framing';
import { float32Elements, float32Tensor, type DiffusionStagePayload } from '../src/pipeline/stage-payload';

const ROUNDS = 5;
const CREDITS = 4;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function payload(elements: number, i: number): DiffusionStagePayload {
  const latents = new Float32Array(elements);
  for (let k = 0; k < elements; k += 1024) latents[k] = i + k;
  return {
    schemaVersion: 1,
    requestId: `bench-${i}`,
    sourceStage: 'denoise',
    targetStage: 'decode',
    payloadType: 'wan.latents_chunk',
    tensors: { latents: float32Tensor(latents, [elements]) },
    metadata: { note: 'x'.repeat(4096), chunk: i },
  };
}

/** Seconds to move `count` payloads over a link, sender and receiver running concurrently. */
async function overLink(sender: StageSender, receiver: StageReceiver, payloads: DiffusionStagePayload[]): Promise<number> {
  const t0 = process.hrtime.bigint();
  const sending = (async () => {
    for (const p of payloads) await sender.put(p);
  })();
  let checksum = 0;
  for (let i = 0; i < payloads.length; i++) checksum += float32Elements((await receiver.get()).tensors.latents!)[0]!;
  await sending;
  if (!Number.isFinite(checksum)) throw new Error('bad checksum');
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'omnirx-bench-'));
  const shmDir = mkdtempSync(path.join(defaultShmDir(), 'omnirx-bench-'));
  try {
    for (const [mib, count] of [
      [0.25, 256],
      [16, 16],
    ] as const) {
      const elements = (mib * 2 ** 20) / 4;
      const payloads = Array.from({ length: count }, (_, i) => payload(elements, i));
      const mb = (count * elements * 4) / 1e6;
      const results: Record<string, number[]> = { copy: [], framing: [], 'in-process': [], shm: [], tcp: [] };
      for (let r = 0; r < ROUNDS; r++) {
        let t0 = process.hrtime.bigint();
        for (const p of payloads) Buffer.concat([p.tensors.latents!.bytes]);
        results.copy!.push(Number(process.hrtime.bigint() - t0) / 1e9);

        t0 = process.hrtime.bigint();
        for (const p of payloads) decodePayload(encodePayload(p));
        results.framing!.push(Number(process.hrtime.bigint() - t0) / 1e9);

        const local = createInProcessConnector({ credits: CREDITS });
        results['in-process']!.push(await overLink(local.sender, local.receiver, payloads));
        await local.sender.close();

        const shmReceiver = listenShm({ socketPath: path.join(tmp, 'link.sock'), dir: shmDir, credits: CREDITS });
        await shmReceiver.ready;
        const shmSender = connectShm({ socketPath: path.join(tmp, 'link.sock'), dir: shmDir });
        await shmSender.ready;
        results.shm!.push(await overLink(shmSender, shmReceiver, payloads));
        await shmSender.close();
        await shmReceiver.close();

        const tcpReceiver = listenTcp({ port: 0, credits: CREDITS });
        await tcpReceiver.ready;
        const tcpSender = connectTcp({ port: (tcpReceiver.address() as { port: number }).port });
        await tcpSender.ready;
        results.tcp!.push(await overLink(tcpSender, tcpReceiver, payloads));
        await tcpSender.close();
        await tcpReceiver.close();
      }
      const copy = mb / median(results.copy!);
      for (const [name, secs] of Object.entries(results)) {
        const rate = mb / median(secs);
        console.log(JSON.stringify({ payload_mib: mib, path: name, mb_per_s: Math.round(rate), ratio_vs_copy: +(rate / copy).toFixed(3) }));
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
    rmSync(shmDir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
