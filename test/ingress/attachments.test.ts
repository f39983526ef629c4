// Attachments are fetched after the message is committed, within a per-persona disk cap, and a turn reads its
// messages only once their files are in (or given up on). Real Postgres, a scripted connector.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/agent/delivery.ts';
import type { Attachment, Connector, InboundEvent } from '../../src/connector.ts';
import { claimArrivedMessages, claimPendingMessages } from '../../src/db/messages.ts';
import type { CommandHandler } from '../../src/ingress/control.ts';
import { awaitAttachmentDownloads } from '../../src/ingress/downloads.ts';
import { createIngress } from '../../src/ingress/pipeline.ts';
import { startJobSystem, type JobSystem } from '../../src/jobs/boss.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { makePersona } from '../support/persona.ts';
import { until } from '../support/until.ts';

let db: TestDatabase;
let jobs: JobSystem;
let workspace: string;
/** Where a command inside the sandbox would point `uploads` (its stand-in for /etc/cron.d). */
let outside: string;
let ingress: ReturnType<typeof createIngress>;
const downloads: string[] = [];
/** Downloads of these file ids wait until the test lets them go. */
const gates = new Map<string, Promise<void>>();
/** Bytes a file turns out to have (when its declared size is missing or wrong). */
const actualBytes = new Map<string, number>();
let seq = 0;

const uploads = () => path.join(workspace, 'uploads');
const CAP = 1000;

const connector: Connector = {
  id: 'chat',
  capabilities: { buttons: false, removeButtons: false, react: false, threads: false, typing: false, privateReplies: false, maxTextLength: 4096 },
  async start() {},
  async stop() {},
  async send() {
    return { ids: [] };
  },
  async download(attachment: Attachment, directory: string) {
    downloads.push(attachment.fileId!);
    await gates.get(attachment.fileId!);
    await fs.mkdir(directory, { recursive: true });
    const target = path.join(directory, attachment.name ?? attachment.fileId!);
    await fs.writeFile(target, Buffer.alloc(actualBytes.get(attachment.fileId!) ?? attachment.size ?? 10, 'x'));
    return target;
  },
};

function gate(fileId: string): () => void {
  let release!: () => void;
  gates.set(fileId, new Promise<void>((resolve) => (release = resolve)));
  return release;
}

function message(attachments: Attachment[], extra: Partial<InboundEvent> = {}): InboundEvent {
  seq++;
  return {
    connector: 'chat',
    externalId: `att-${seq}`,
    kind: 'message',
    chat: { id: 'u1', type: 'dm' },
    sender: { id: 'u1', name: 'Ana' },
    messageId: `m-${seq}`,
    text: `message ${seq}`,
    attachments,
    ...extra,
  };
}

type Row = { id: number; content: { content: string; attachments?: Record<string, unknown>[] } };
const lastMessage = async () =>
  ((await db.database.db.execute(sql`select id, content from messages order by id desc limit 1`)) as unknown as Row[])[0];


beforeAll(async () => {
  db = await createTestDatabase();
  // The queue a message's turn job is written to, beside the message.
  jobs = await startJobSystem(db.database, pino({ level: 'silent' }), { poolSize: 1 });
  workspace = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-uploads-'));
  outside = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-uploads-target-'));
  const persona = makePersona({ name: 'ana', users: ['chat:u1'], workspace });
  ingress = createIngress({
    database: db.database,
    personas: () => [persona],
    delivery: { deliver: async () => ({ status: 'sent' }) } as unknown as Delivery,
    commands: { run: async () => ({ text: '', personal: false }), stop: async () => 'idle' } as CommandHandler,
    log: pino({ level: 'silent' }),
    connectors: new Map([['chat', connector]]),
    uploadCapBytes: CAP,
  });
});
afterAll(async () => {
  await ingress?.stop();
  await jobs?.stop({ timeoutMs: 1000 });
  await db?.drop();
  await fs.rm(workspace, { recursive: true, force: true });
  await fs.rm(outside, { recursive: true, force: true });
});
beforeEach(async () => {
  downloads.length = 0;
  gates.clear();
  actualBytes.clear();
  await fs.rm(uploads(), { recursive: true, force: true });
  await db.database.db.execute(sql`update messages set turn_id = gen_random_uuid() where turn_id is null`);
});

describe('attachment downloads', () => {
  it('happen after the message is committed: the ingress answers while the file is still on its way', async () => {
    const release = gate('slow-1');
    const result = await ingress.handle(message([{ type: 'document', name: 'slow.pdf', size: 10, fileId: 'slow-1' }]));
    expect(result.status).toBe('queued');
    const stored = await lastMessage();
    expect(stored.content.content).toBe('message 1\n[attachment: document (slow.pdf, 10 bytes, downloading)]');
    release();
    const done = await until(async () => ((await lastMessage()).content.content.includes('saved at') ? lastMessage() : undefined));
    expect(done.content.content).toBe('message 1\n[attachment: document (slow.pdf, 10 bytes, saved at uploads/slow.pdf)]');
    expect(done.content.attachments).toEqual([{ type: 'document', name: 'slow.pdf', size: 10, fileId: 'slow-1', downloadId: expect.any(String), path: 'uploads/slow.pdf' }]);
  });

  it('a redelivered event downloads nothing', async () => {
    const event = message([{ type: 'photo', size: 10, fileId: 'dup-photo' }]);
    expect((await ingress.handle(event)).status).toBe('queued');
    expect((await ingress.handle(event)).status).toBe('duplicate');
    await until(async () => (await lastMessage()).content.content.includes('saved at'));
    await new Promise((r) => setTimeout(r, 200));
    expect(downloads).toEqual(['dup-photo']);
  });

  it('keep a persona\'s uploads under its cap: a file that would pass it is recorded "not downloaded: upload space full"', async () => {
    await fs.mkdir(uploads(), { recursive: true });
    await fs.writeFile(path.join(uploads(), 'old.bin'), Buffer.alloc(900));
    await ingress.handle(message([{ type: 'document', name: 'big.bin', size: 200, fileId: 'over-cap' }]));
    const refused = await until(async () => ((await lastMessage()).content.content.includes('upload space full') ? lastMessage() : undefined));
    expect(refused.content.content).toMatch(/\[attachment: document \(big\.bin, 200 bytes, not downloaded: upload space full\)\]$/);
    expect(downloads).toEqual([]);

    // A file whose size was not declared is checked once it is here, and removed when it does not fit.
    actualBytes.set('undeclared', 300);
    await ingress.handle(message([{ type: 'document', name: 'undeclared.bin', fileId: 'undeclared' }]));
    await until(async () => (await lastMessage()).content.content.includes('upload space full'));
    expect(downloads).toEqual(['undeclared']);
    expect(await fs.readdir(uploads())).toEqual(['old.bin']);

    // What fits is still saved.
    await ingress.handle(message([{ type: 'document', name: 'small.bin', size: 50, fileId: 'fits' }]));
    await until(async () => (await lastMessage()).content.content.includes('saved at uploads/small.bin'));
    expect((await fs.readdir(uploads())).sort()).toEqual(['old.bin', 'small.bin']);
  });

  it('two files arriving together cannot pass the cap between them', async () => {
    const release = gate('pair-a');
    gates.set('pair-b', gates.get('pair-a')!);
    await ingress.handle(message([
      { type: 'document', name: 'a.bin', size: 600, fileId: 'pair-a' },
      { type: 'document', name: 'b.bin', size: 600, fileId: 'pair-b' },
    ]));
    await until(async () => (await lastMessage()).content.content.includes('upload space full'));
    release();
    const settled = await until(async () => ((await lastMessage()).content.content.includes('saved at') ? lastMessage() : undefined));
    // Either may be the one that fits; exactly one does.
    const lines = settled.content.content.split('\n').slice(1).sort();
    expect([
      ['[attachment: document (a.bin, 600 bytes, saved at uploads/a.bin)]', '[attachment: document (b.bin, 600 bytes, not downloaded: upload space full)]'],
      ['[attachment: document (a.bin, 600 bytes, not downloaded: upload space full)]', '[attachment: document (b.bin, 600 bytes, saved at uploads/b.bin)]'],
    ]).toContainEqual(lines);
  });
});

describe('awaitAttachmentDownloads', () => {
  it('holds a turn until the files of the messages it claimed are in, so the model sees where they were saved', async () => {
    const release = gate('held');
    await ingress.handle(message([{ type: 'photo', size: 10, fileId: 'held' }]));
    const turnId = randomUUID();
    await claimPendingMessages(db.database.db, 'ana:chat:u1', turnId);
    let resolved = false;
    const waiting = awaitAttachmentDownloads(db.database.db, 'ana:chat:u1', turnId, 10_000).then(() => (resolved = true));
    await new Promise((r) => setTimeout(r, 400));
    expect(resolved).toBe(false);
    release();
    await waiting;
    expect((await lastMessage()).content.content).toMatch(/\[attachment: photo \(10 bytes, saved at uploads\/held\)\]$/);
  });

  it('gives up after its timeout: the model reads "not downloaded", and a file that comes later is discarded', async () => {
    const release = gate('too-slow');
    await ingress.handle(message([{ type: 'document', name: 'late.pdf', size: 10, fileId: 'too-slow' }]));
    const turnId = randomUUID();
    await claimPendingMessages(db.database.db, 'ana:chat:u1', turnId);
    const started = Date.now();
    await awaitAttachmentDownloads(db.database.db, 'ana:chat:u1', turnId, 300);
    expect(Date.now() - started).toBeLessThan(2000);
    expect((await lastMessage()).content.content).toMatch(/\(late\.pdf, 10 bytes, not downloaded: the download took too long\)\]$/);
    release();
    await until(async () => downloads.includes('too-slow'));
    await new Promise((r) => setTimeout(r, 300));
    expect((await lastMessage()).content.content).toMatch(/not downloaded: the download took too long\)\]$/);
    expect(await fs.readdir(uploads()).catch(() => [])).toEqual([]);
  });

  it('does not wait for a download whose process is gone (a crash between the commit and the download)', async () => {
    const turnId = randomUUID();
    const orphan = { type: 'photo', size: 10, fileId: 'orphan', download: 'pending', downloadId: randomUUID(), downloader: 'parlor:999999:dead' };
    await db.database.db.execute(sql`
      insert into messages (conversation_id, turn_id, role, content)
      values ('ana:chat:u1', ${turnId}, 'user', ${JSON.stringify({ role: 'user', content: 'look\n[attachment: photo (10 bytes, downloading)]', attachments: [orphan] })}::jsonb)`);
    const started = Date.now();
    await awaitAttachmentDownloads(db.database.db, 'ana:chat:u1', turnId, 30_000);
    expect(Date.now() - started).toBeLessThan(2000);
    expect((await lastMessage()).content.content).toBe('look\n[attachment: photo (10 bytes, not downloaded: the download was interrupted)]');
  });

  it('a message read mid-turn (moved to a new row) still gets its file', async () => {
    const release = gate('moved');
    await ingress.handle(message([{ type: 'photo', size: 10, fileId: 'moved' }]));
    const before = await lastMessage();
    const [arrived] = await claimArrivedMessages(db.database.db, 'ana:chat:u1', randomUUID());
    expect(arrived.content).toMatch(/downloading\)\]$/);
    release();
    const after = await until(async () => ((await lastMessage()).content.content.includes('saved at') ? lastMessage() : undefined));
    expect(after.id).not.toBe(before.id);
    expect(after.content.content).toMatch(/\[attachment: photo \(10 bytes, saved at uploads\/moved\)\]$/);
  });
});

describe('attachment downloads and what a command did to the workspace', () => {
  const settledLines = async (count: number) => {
    const rows = (await db.database.db.execute(sql`select content from messages order by id desc limit ${count}`)) as unknown as Row[];
    if (rows.some((r) => r.content.content.includes('downloading'))) return undefined;
    return rows.map((r) => r.content.content.split('\n')[1]);
  };

  it('never write through an uploads folder replaced with a symlink: nothing lands outside, and the model reads why', async () => {
    // What `rmdir uploads; ln -s /etc/cron.d uploads` in a sandboxed command leaves behind.
    await fs.symlink(outside, uploads());
    await ingress.handle(message([{ type: 'document', name: 'job', size: 10, fileId: 'into-cron' }]));
    const [line] = await until(() => settledLines(1));
    expect(line).toBe('[attachment: document (job, 10 bytes, not downloaded: "uploads" leads outside the workspace)]');
    expect(await fs.readdir(outside)).toEqual([]);
    expect(await fs.readlink(uploads())).toBe(outside);
  });

  it('follow an uploads symlink that stays inside the workspace, and say where the file went', async () => {
    await fs.mkdir(path.join(workspace, 'data', 'in'), { recursive: true });
    await fs.symlink(path.join('data', 'in'), uploads());
    try {
      await ingress.handle(message([{ type: 'document', name: 'notes.txt', size: 10, fileId: 'linked-in' }]));
      const [line] = await until(() => settledLines(1));
      expect(line).toBe('[attachment: document (notes.txt, 10 bytes, saved at data/in/notes.txt)]');
      expect(await fs.readdir(path.join(workspace, 'data', 'in'))).toEqual(['notes.txt']);
    } finally {
      await fs.rm(path.join(workspace, 'data'), { recursive: true, force: true });
    }
  });

  it('never write outside while a command swaps uploads for a symlink in a loop during the downloads', async () => {
    await fs.mkdir(uploads());
    // mv keeps the real folder (and what was written into it) inside the workspace; the symlink is up a third of the time.
    const swapper = spawn('/bin/sh', ['-c', `cd '${workspace}' && while :; do mv uploads held 2>/dev/null; ln -s '${outside}' uploads 2>/dev/null; rm -f uploads; mv held uploads 2>/dev/null; done`], {
      stdio: 'ignore',
    });
    const count = 24;
    try {
      for (let i = 0; i < count; i++) await ingress.handle(message([{ type: 'document', name: `race-${i}`, size: 10, fileId: `race-${i}` }]));
      const lines = await until(() => settledLines(count), 30_000);
      expect(lines).toHaveLength(count);
      for (const line of lines) expect(line).toMatch(/, 10 bytes, (saved at .+|not downloaded: .+)\)\]$/);
    } finally {
      swapper.kill('SIGKILL');
      await new Promise((resolve) => swapper.once('exit', resolve));
    }
    expect(await fs.readdir(outside)).toEqual([]);
    await fs.rm(path.join(workspace, 'held'), { recursive: true, force: true });
  });

  it('count the upload space without following a symlink out of the workspace', async () => {
    await fs.writeFile(path.join(outside, 'big.bin'), Buffer.alloc(CAP * 2));
    await fs.mkdir(uploads());
    await fs.symlink(outside, path.join(uploads(), 'elsewhere'));
    try {
      await ingress.handle(message([{ type: 'document', name: 'fits.bin', size: 10, fileId: 'counted' }]));
      const [line] = await until(() => settledLines(1));
      expect(line).toBe('[attachment: document (fits.bin, 10 bytes, saved at uploads/fits.bin)]');
    } finally {
      await fs.rm(path.join(outside, 'big.bin'), { force: true });
    }
  });
});
