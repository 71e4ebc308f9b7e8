import { readdirSync } from 'node:fs';
import { firstValueFrom, toArray } from 'rxjs';
import { OmniError } from '../../src/errors';
import { float32Elements, PayloadError } from '../../src/pipeline/stage-payload';
import { openLink, track, until, type LinkKind } from './connector-helpers';
import { samplePayload } from './payload-fixtures';

describe.each<LinkKind>(['in-process', 'shm', 'tcp'])('%s connector', (kind) => {
  it('delivers payloads in put order with their tensors and metadata', async () => {
    const link = await openLink(kind, 2);
    try {
      const puts = Array.from({ length: 10 }, (_, i) => link.sender.put(samplePayload(`r${i}`, i)));
      const got = [];
      for (let i = 0; i < 10; i++) got.push(await link.receiver.get());
      await Promise.all(puts);
      expect(got.map((p) => p.requestId)).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
      expect(got.map((p) => [...float32Elements(p.tensors.latents!)][0])).toEqual(Array.from({ length: 10 }, (_, i) => 1 + i));
      expect(got[3]!.metadata).toEqual({ chunk: 3, sigmas: [1, 0.5], nested: { ok: true, tag: null } });
      expect([...got[3]!.tensors.mask!.bytes]).toEqual([1, 0, 1, 0, 1]);
      if (link.dir !== undefined) expect(readdirSync(link.dir).filter((f) => f.endsWith('.frame'))).toEqual([]);
    } finally {
      await link.dispose();
    }
  });

  it('with 2 credits, accepts only 2 of 5 puts until the consumer takes one', async () => {
    const link = await openLink(kind, 2);
    try {
      const puts = track(Array.from({ length: 5 }, (_, i) => link.sender.put(samplePayload(`r${i}`))));
      await until(() => link.receiver.queued === 2 && puts.settled().filter((s) => s === 'resolved').length === 2);
      expect(puts.settled()).toEqual(['resolved', 'resolved', 'pending', 'pending', 'pending']);
      expect(link.sender.credits).toBe(0);
      expect((await link.receiver.get()).requestId).toBe('r0');
      await until(() => puts.settled()[2] === 'resolved');
      expect(puts.settled()).toEqual(['resolved', 'resolved', 'resolved', 'pending', 'pending']);
      expect(link.receiver.queued).toBe(2);
      const rest = [];
      for (let i = 0; i < 4; i++) rest.push((await link.receiver.get()).requestId);
      expect(rest).toEqual(['r1', 'r2', 'r3', 'r4']);
      await until(() => puts.settled().every((s) => s === 'resolved'));
    } finally {
      await link.dispose();
    }
  });

  it('emits payloads on payloads$, loses none to an early unsubscribe, and completes on close', async () => {
    const link = await openLink(kind, 3);
    await link.sender.put(samplePayload('a'));
    await link.sender.put(samplePayload('b'));
    expect((await firstValueFrom(link.receiver.payloads$)).requestId).toBe('a');
    const rest = firstValueFrom(link.receiver.payloads$.pipe(toArray()));
    await link.sender.put(samplePayload('c'));
    await until(() => link.receiver.queued === 0);
    await link.receiver.close();
    expect((await rest).map((p) => p.requestId)).toEqual(['b', 'c']);
    await link.dispose();
  });

  it('refuses an invalid payload at put, before it is sent', async () => {
    const link = await openLink(kind, 2);
    try {
      const bad = samplePayload('bad');
      bad.tensors.latents!.shape = [3, 3];
      await expect(link.sender.put(bad)).rejects.toThrow(PayloadError);
      await expect(link.sender.put(bad)).rejects.toThrow('tensor "latents" has shape [3, 3] of float32, which is 36 bytes, but carries 24 bytes');
      expect(link.sender.credits).toBe(2);
      await link.sender.put(samplePayload('good'));
      expect((await link.receiver.get()).requestId).toBe('good');
    } finally {
      await link.dispose();
    }
  });

  it('closing the sender rejects the puts waiting for credit with a clear error', async () => {
    const link = await openLink(kind, 1);
    try {
      await link.sender.put(samplePayload('a'));
      const waiting = link.sender.put(samplePayload('b')).then(
        () => null,
        (err: OmniError) => err,
      );
      await link.sender.close();
      const e = await waiting;
      expect(e).toBeInstanceOf(OmniError);
      expect(e!.code).toBe('OMNIRX_ERR_CONNECTOR');
      expect(e!.message).toMatch(/ is closed \(the payload was not accepted\)$/);
      await expect(link.sender.put(samplePayload('c'))).rejects.toThrow(/ is closed$/);
      expect(link.sender.state).toBe('closed');
      await expect(link.sender.ready).rejects.toThrow(/ is closed$/);
    } finally {
      await link.dispose();
    }
  });

  it('closing the receiver rejects a pending get', async () => {
    const link = await openLink(kind, 1);
    const pending = link.receiver.get();
    await link.receiver.close();
    await expect(pending).rejects.toMatchObject({ code: 'OMNIRX_ERR_CONNECTOR' });
    await expect(link.receiver.get()).rejects.toThrow(/ is closed$/);
    expect(link.receiver.state).toBe('closed');
    await link.dispose();
  });
});
