// Acknowledging by the platform's deadline, whatever the core is doing (connectors/shared/ack.ts).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { acknowledgeBy } from '../../connectors/shared/ack.ts';
import { storeInOrder } from '../../connectors/discord/store.ts';
import type { InboundEvent } from '../../src/connector.ts';
import { createHeldEvents } from '../../src/ingress/held-events.ts';
import type { IngressResult } from '../../src/connector.ts';

const log = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('acknowledgeBy', () => {
  it('answers with the core\'s result when the event is stored in time', async () => {
    const ack = await acknowledgeBy(3000, async () => ({ status: 'click', notice: 'Done.' }), { log });
    expect(ack).toEqual({ kind: 'stored', result: { status: 'click', notice: 'Done.' } });
  });

  it('answers before the deadline when storing takes longer, and the event is still stored after', async () => {
    let stored = false;
    const started = Date.now();
    const ack = await acknowledgeBy(1500, async () => {
      await sleep(2500);
      stored = true;
      return { status: 'queued' } as IngressResult;
    }, { log });
    const ms = Date.now() - started;
    expect(ack.kind).toBe('late');
    expect(ms).toBeLessThan(1500);
    expect(stored).toBe(false);
    if (ack.kind === 'late') expect(await ack.result).toEqual({ status: 'queued' });
    expect(stored).toBe(true);
  });

  it('after acknowledging, retries a store that fails (the platform will not deliver the event again)', async () => {
    let attempts = 0;
    const ack = await acknowledgeBy(600, async () => {
      attempts++;
      await sleep(attempts === 1 ? 700 : 10);
      if (attempts < 3) throw new Error('database busy');
      return { status: 'queued' } as IngressResult;
    }, { log, firstRetryMs: 20 });
    expect(ack.kind).toBe('late');
    if (ack.kind === 'late') expect(await ack.result).toEqual({ status: 'queued' });
    expect(attempts).toBe(3);
  });

  it('a failure before the deadline is thrown, for the platform to deliver the event again', async () => {
    await expect(acknowledgeBy(3000, async () => { throw new Error('database down'); }, { log })).rejects.toThrow('database down');
  });

  it('gives up, saying so, once its retry time is over', async () => {
    const ack = await acknowledgeBy(600, async () => {
      await sleep(700);
      throw new Error('still down');
    }, { log, firstRetryMs: 50, retryForMs: 200 });
    if (ack.kind !== 'late') throw new Error('expected a late acknowledgement');
    expect(await ack.result).toBeUndefined();
  });

  it('an acknowledged store that never finishes (a statement a dying connection left hanging) is tried again beside it', async () => {
    let attempts = 0;
    const ack = await acknowledgeBy(600, () => {
      attempts++;
      // The first never settles, as a query on a connection that died while Postgres restarted.
      return attempts === 1 ? new Promise<IngressResult>(() => {}) : Promise.resolve({ status: 'queued' } as IngressResult);
    }, { log, stallMs: 200 });
    if (ack.kind !== 'late') throw new Error('expected a late acknowledgement');
    expect(await ack.result).toEqual({ status: 'queued' });
    expect(attempts).toBe(2);
  });

  it('counts a hanging store from its start, not from the acknowledgement: the next try begins when the first has hung for the stall time', async () => {
    const starts: number[] = [];
    const t0 = Date.now();
    const ack = await acknowledgeBy(1000, () => {
      starts.push(Date.now() - t0);
      return starts.length === 1 ? new Promise<IngressResult>(() => {}) : Promise.resolve({ status: 'queued' } as IngressResult);
    }, { log, stallMs: 900 });
    if (ack.kind !== 'late') throw new Error('expected a late acknowledgement');
    expect(await ack.result).toEqual({ status: 'queued' });
    // Acknowledged at 500 ms; the second try at 900 ms, where counting from the acknowledgement would make it 1400.
    expect(starts[1]).toBeGreaterThanOrEqual(880);
    expect(starts[1]).toBeLessThan(1300);
  });

  it('keeps a late event on disk before acknowledging it, and drops it from there once stored', async () => {
    const steps: string[] = [];
    const ack = await acknowledgeBy(600, async () => {
      await sleep(700);
      steps.push('stored');
      return { status: 'queued' } as IngressResult;
    }, {
      log,
      keep: async () => {
        steps.push('kept');
        return async () => void steps.push('released');
      },
    });
    steps.push('acknowledged');
    if (ack.kind !== 'late') throw new Error('expected a late acknowledgement');
    await ack.result;
    expect(steps).toEqual(['kept', 'acknowledged', 'stored', 'released']);
  });

  it('an event stored in time is never kept on disk', async () => {
    let kept = 0;
    const ack = await acknowledgeBy(3000, async () => ({ status: 'queued' }) as IngressResult, { log, keep: async () => (kept++, async () => {}) });
    expect(ack.kind).toBe('stored');
    expect(kept).toBe(0);
  });

  it('a late event that cannot be kept on disk is not acknowledged: the error is thrown, for the platform to deliver it again', async () => {
    await expect(
      acknowledgeBy(600, () => sleep(700).then(() => ({ status: 'queued' }) as IngressResult), { log, keep: async () => { throw new Error('disk full'); } }),
    ).rejects.toThrow('disk full');
  });

  it('a kept event that could not be stored in the retry time stays kept, for the next start', async () => {
    let released = false;
    const ack = await acknowledgeBy(600, async () => {
      await sleep(700);
      throw new Error('still down');
    }, { log, firstRetryMs: 50, retryForMs: 200, keep: async () => async () => void (released = true) });
    if (ack.kind !== 'late') throw new Error('expected a late acknowledgement');
    expect(await ack.result).toBeUndefined();
    expect(released).toBe(false);
  });
});

describe('storeInOrder (Discord gateway events)', () => {
  const event = { connector: 'discord', externalId: 'e1' } as InboundEvent;

  it('a store that never finishes is tried again beside it, and the channel\'s next event follows', async () => {
    const stored: string[] = [];
    let attempts = 0;
    const store = storeInOrder({ log, signal: new AbortController().signal, stallMs: 200 });
    store.add('c1', async () => event, (e) => {
      attempts++;
      if (attempts === 1) return new Promise<IngressResult>(() => {});
      stored.push(e.externalId);
      return Promise.resolve({ status: 'queued' } as IngressResult);
    });
    store.add('c1', async () => ({ ...event, externalId: 'e2' }), (e) => {
      stored.push(e.externalId);
      return Promise.resolve({ status: 'queued' } as IngressResult);
    });
    await store.drain(3000);
    expect(stored).toEqual(['e1', 'e2']);
    expect(attempts).toBe(2);
  });
  it('an event stored at once is never kept on disk', async () => {
    const kept: string[] = [];
    const store = storeInOrder({ log, signal: new AbortController().signal, keep: async (e) => (kept.push(e.externalId), async () => {}) });
    store.add('c1', async () => event, () => Promise.resolve({ status: 'queued' } as IngressResult));
    await store.drain(3000);
    expect(kept).toEqual([]);
  });

  it('an event the core could not store at once is kept on disk while it is tried again, and dropped from it once stored', async () => {
    const directory = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'held-discord-')), 'held-events');
    const held = createHeldEvents({ directory, log });
    let attempts = 0;
    let onDiskDuringRetry: string[] = [];
    const store = storeInOrder({ log, signal: new AbortController().signal, firstRetryMs: 50, keep: (e) => held.keep(e) });
    store.add('c1', async () => event, async () => {
      attempts++;
      if (attempts === 1) throw new Error('database unavailable');
      onDiskDuringRetry = await fs.readdir(directory);
      return { status: 'queued' } as IngressResult;
    });
    await store.drain(3000);
    expect(attempts).toBe(2);
    expect(onDiskDuringRetry).toHaveLength(1);
    expect(await fs.readdir(directory)).toEqual([]);
    await fs.rm(path.dirname(directory), { recursive: true, force: true });
  });

  it('an event given up on (or left as the process stops) stays on disk for a later replay', async () => {
    const directory = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'held-discord-')), 'held-events');
    const held = createHeldEvents({ directory, log });
    const stopping = new AbortController();
    const store = storeInOrder({ log, signal: stopping.signal, firstRetryMs: 20, retryForMs: 150, stallMs: 100, keep: (e) => held.keep(e) });
    store.add('c1', async () => event, () => Promise.reject(new Error('database unavailable')));
    store.add('c2', async () => ({ ...event, externalId: 'e2' }), () => new Promise<IngressResult>(() => {}));
    await sleep(300);
    stopping.abort();
    await store.drain(3000);
    // e1 failed until its tries gave up; e2's store never finished before the process stopped.
    expect(await fs.readdir(directory)).toHaveLength(2);
    // The next start (or a running process's replay) stores them.
    const replayed: string[] = [];
    expect(await held.replay(async (e) => (replayed.push(e.externalId), { status: 'queued' }))).toEqual({ stored: 2, left: 0 });
    expect(replayed.sort()).toEqual(['e1', 'e2']);
    await fs.rm(path.dirname(directory), { recursive: true, force: true });
  });
});
