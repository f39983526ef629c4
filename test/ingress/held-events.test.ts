// Events kept on disk between a platform's acknowledgement and the core storing them (src/ingress/held-events.ts).
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { InboundEvent, IngressResult } from '../../src/connector.ts';
import { createHeldEvents } from '../../src/ingress/held-events.ts';

const log = pino({ level: 'silent' });
let directory: string;

const event = (externalId: string, text = 'hello'): InboundEvent => ({
  connector: 'slack',
  externalId,
  kind: 'message',
  chat: { id: 'D0ANA', type: 'dm' },
  sender: { id: 'U0ANA', name: 'Ana' },
  text,
});

/** The part of a kept event's file name that comes from its id (see held-events.ts). */
/** Keeps the events one after another, far enough apart that their files' times tell the order they were kept in. */
async function keepInTurn(held: ReturnType<typeof createHeldEvents>, events: InboundEvent[]) {
  for (const e of events) {
    await held.keep(e);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const fileOf = (externalId: string) => createHash('sha256').update(`slack\0${externalId}`).digest('hex').slice(0, 32);

beforeEach(async () => {
  directory = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'held-')), 'held-events');
});
afterEach(async () => {
  await fs.rm(path.dirname(directory), { recursive: true, force: true });
});

describe('held events', () => {
  it('keeps an event as a file of its own, readable only by its owner, and release drops it', async () => {
    const held = createHeldEvents({ directory, log });
    const release = await held.keep(event('Ev1'));
    const names = await fs.readdir(directory);
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^slack-[0-9a-f]{32}\.json$/);
    expect((await fs.stat(path.join(directory, names[0]))).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await fs.readFile(path.join(directory, names[0]), 'utf8')).event).toEqual(event('Ev1'));
    await release();
    expect(await fs.readdir(directory)).toEqual([]);
  });

  it('the same event kept twice (a redelivery) is one file', async () => {
    const held = createHeldEvents({ directory, log });
    await held.keep(event('Ev1'));
    await held.keep(event('Ev1'));
    await held.keep(event('Ev2'));
    expect(await fs.readdir(directory)).toHaveLength(2);
  });

  it('replay hands each kept event to the core and drops those it stored; what fails stays for the next start', async () => {
    const held = createHeldEvents({ directory, log });
    await held.keep(event('Ev1', 'one'));
    await held.keep(event('Ev2', 'two'));
    const seen: string[] = [];
    const first = await held.replay(async (e): Promise<IngressResult> => {
      seen.push(e.text);
      if (e.text === 'two') throw new Error('database unavailable');
      return { status: 'queued' };
    });
    expect(first).toEqual({ stored: 1, left: 1 });
    expect(seen.sort()).toEqual(['one', 'two']);
    // A new process, the database back.
    const next = createHeldEvents({ directory, log });
    const again: InboundEvent[] = [];
    expect(await next.replay(async (e) => (again.push(e), { status: 'duplicate' }))).toEqual({ stored: 1, left: 0 });
    expect(again).toEqual([event('Ev2', 'two')]);
    expect(await fs.readdir(directory)).toEqual([]);
  });

  it('replay hands the events over in the order they were kept, whatever their files are called', async () => {
    const held = createHeldEvents({ directory, log });
    const ids = Array.from({ length: 8 }, (_, i) => `Ev${i}`);
    await keepInTurn(held, ids.map((id) => event(id, id)));
    // Their names (hashes of their ids) sort in another order than they were kept in.
    const byName = [...ids].sort((a, b) => fileOf(a).localeCompare(fileOf(b)));
    expect(byName).not.toEqual(ids);
    const seen: string[] = [];
    await held.replay(async (e) => (seen.push(e.text), { status: 'queued' }));
    expect(seen).toEqual(ids);
  });

  it('an event kept again (a redelivery) keeps its place among the others', async () => {
    const held = createHeldEvents({ directory, log });
    await keepInTurn(held, [event('Ev1', 'first'), event('Ev2', 'second'), event('Ev1', 'first')]);
    const seen: string[] = [];
    await held.replay(async (e) => (seen.push(e.text), { status: 'queued' }));
    expect(seen).toEqual(['first', 'second']);
  });

  it("replay stores none of a chat's later events while an earlier one of it cannot be stored", async () => {
    const held = createHeldEvents({ directory, log });
    const other = (id: string, text: string): InboundEvent => ({ ...event(id, text), chat: { id: 'D0BEN', type: 'dm' } });
    await keepInTurn(held, [event('Ev1', 'ana first'), other('Ev2', 'ben'), event('Ev3', 'ana second')]);
    const seen: string[] = [];
    const result = await held.replay(async (e) => {
      seen.push(e.text);
      if (e.text === 'ana first') throw new Error('database unavailable');
      return { status: 'queued' };
    });
    expect(seen).toEqual(['ana first', 'ben']);
    expect(result).toEqual({ stored: 1, left: 2 });
    const again: string[] = [];
    await held.replay(async (e) => (again.push(e.text), { status: 'queued' }));
    expect(again).toEqual(['ana first', 'ana second']);
  });

  it('replay with an age leaves the events kept more recently to their keeper', async () => {
    const held = createHeldEvents({ directory, log });
    await held.keep(event('Old', 'old'));
    await held.keep(event('New', 'new'));
    const [oldFile] = (await fs.readdir(directory)).filter((n) => n.includes(fileOf('Old')));
    const tenMinutesAgo = new Date(Date.now() - 10 * 60_000);
    await fs.utimes(path.join(directory, oldFile), tenMinutesAgo, tenMinutesAgo);
    const seen: string[] = [];
    expect(await held.replay(async (e) => (seen.push(e.text), { status: 'queued' }), { olderThanMs: 5 * 60_000 })).toEqual({ stored: 1, left: 0 });
    expect(seen).toEqual(['old']);
    expect(await fs.readdir(directory)).toHaveLength(1);
    // Without an age (a start), every one.
    expect(await held.replay(async (e) => (seen.push(e.text), { status: 'queued' }))).toEqual({ stored: 1, left: 0 });
    expect(seen).toEqual(['old', 'new']);
  });

  it('with nothing kept, replay finds nothing (and no folder is made)', async () => {
    const held = createHeldEvents({ directory, log });
    expect(await held.replay(async () => ({ status: 'queued' }))).toEqual({ stored: 0, left: 0 });
    await expect(fs.stat(directory)).rejects.toThrow();
  });

  it('an unreadable file is dropped, and an old partial write is removed while a fresh one is left to its writer', async () => {
    await fs.mkdir(directory, { recursive: true });
    await fs.writeFile(path.join(directory, 'slack-broken.json'), '{"event": ');
    await fs.writeFile(path.join(directory, 'slack-old.json.123.partial'), '{');
    const old = new Date(Date.now() - 5 * 60_000);
    await fs.utimes(path.join(directory, 'slack-old.json.123.partial'), old, old);
    await fs.writeFile(path.join(directory, 'slack-new.json.456.partial'), '{');
    const handled: InboundEvent[] = [];
    const held = createHeldEvents({ directory, log });
    expect(await held.replay(async (e) => (handled.push(e), { status: 'queued' }))).toEqual({ stored: 0, left: 0 });
    expect(handled).toEqual([]);
    expect(await fs.readdir(directory)).toEqual(['slack-new.json.456.partial']);
  });
});
