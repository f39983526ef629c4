// send_message checks a file when the tool runs; the connector opens it later (at upload, on a retry, from another
// process). Between the two a command running in parallel may swap a checked folder for a symlink to Parlor's
// secrets. Here the "secret" is a file of the test's own temp folder, standing in for PARLOR_HOME/postgres.json.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ToolContext } from '../../src/tools/types.ts';
import { createSendMessageTool } from '../../tools/send-message.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';

const SECRET = 'postgres-password-9b3e';
const DAY_MS = 24 * 3600_000;
let root: string;
let workspace: string;
let secrets: string;
let outgoingDir: string;
let persona: ReturnType<typeof makePersona>;

beforeAll(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-send-files-')));
  workspace = path.join(root, 'workspace');
  secrets = path.join(root, 'home');
  outgoingDir = path.join(root, 'outgoing');
  await fs.mkdir(secrets);
  await fs.writeFile(path.join(secrets, 'report.txt'), SECRET);
  persona = makePersona({ workspace, users: ['telegram:1'] });
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});
beforeEach(async () => {
  await fs.rm(workspace, { recursive: true, force: true });
  await fs.mkdir(path.join(workspace, 'd'), { recursive: true });
  await fs.writeFile(path.join(workspace, 'd', 'report.txt'), 'the quarterly report');
});

const origin = { connector: 'telegram', chat: '1', chatType: 'dm' as const };

/** `mv d d2 && ln -s $SECRET_DIR d`, as a command running beside the turn would do it. */
async function swapForSymlink(): Promise<void> {
  await fs.rename(path.join(workspace, 'd'), path.join(workspace, 'd2'));
  await fs.symlink(secrets, path.join(workspace, 'd'));
}

describe('send_message files', () => {
  it('are copied when the tool runs, so a folder swapped for a symlink before the upload sends the checked file, not the secret', async () => {
    const tool = createSendMessageTool({ outgoingDir });
    const uploaded: string[] = [];
    const ctx: ToolContext = {
      ...makeToolContext({ persona, origin }),
      // The connector reads the file only now, after the swap (a queued or retried send reads it later still).
      async deliver(_target, _text, options) {
        await swapForSymlink();
        for (const file of options?.files ?? []) uploaded.push(await fs.readFile(file, 'utf8'));
        return { status: 'sent' };
      },
    };
    expect(await tool.run({ text: 'here', files: ['d/report.txt'] }, ctx)).toBe('sent to telegram:1');
    expect(uploaded).toEqual(['the quarterly report']);
  });

  it('name a copy outside the workspace that keeps the file name, the same copy for the same file sent again', async () => {
    const tool = createSendMessageTool({ outgoingDir });
    const ctx = makeToolContext({ persona, origin });
    await tool.run({ text: 'one', files: ['d/report.txt'] }, ctx);
    await tool.run({ text: 'two', files: ['./d/report.txt'] }, ctx);
    const [first, second] = ctx.deliveries.map((d) => d.options?.files?.[0] ?? '');
    expect(path.basename(first)).toBe('report.txt');
    expect(path.dirname(path.dirname(first))).toBe(outgoingDir);
    // A turn that runs again sends the same path, so the ledger knows the message it already sent.
    expect(second).toBe(first);
    expect((await fs.stat(path.dirname(first))).mode & 0o077).toBe(0);
  });

  it('never send the secret while a command swaps the folder for a symlink in a loop', async () => {
    const tool = createSendMessageTool({ outgoingDir });
    const swapper = spawn('/bin/sh', ['-c', `cd '${workspace}' && while :; do mv d d2 && ln -s '${secrets}' d && rm d && mv d2 d; done`], { stdio: 'ignore' });
    const contents: string[] = [];
    const results: string[] = [];
    try {
      for (let i = 0; i < 200; i++) {
        const ctx: ToolContext = {
          ...makeToolContext({ persona, origin }),
          async deliver(_target, _text, options) {
            for (const file of options?.files ?? []) contents.push(await fs.readFile(file, 'utf8'));
            return { status: 'sent' };
          },
        };
        results.push(String(await tool.run({ text: 'here', files: ['d/report.txt'] }, ctx)));
      }
    } finally {
      swapper.kill('SIGKILL');
      await new Promise((resolve) => swapper.once('exit', resolve));
    }
    expect(contents.filter((c) => c !== 'the quarterly report')).toEqual([]);
    // Refusals say what happened; none is a crash.
    for (const result of results) expect(result).toMatch(/^(sent to telegram:1|error: "d\/report\.txt" .+)$/);
  });

  it('refuse a .env and a file with a second name, and send nothing', async () => {
    const tool = createSendMessageTool({ outgoingDir });
    const ctx = makeToolContext({ persona, origin });
    await fs.writeFile(path.join(workspace, '.env'), `TOKEN=${SECRET}`);
    await fs.link(path.join(secrets, 'report.txt'), path.join(workspace, 'linked.txt'));
    try {
      expect(await tool.run({ text: 'x', files: ['.env'] }, ctx)).toBe('error: ".env" is a secrets file and cannot be used');
      expect(await tool.run({ text: 'x', files: ['linked.txt'] }, ctx)).toMatch(/^error: "linked\.txt" has 2 hard links/);
      expect(ctx.deliveries).toEqual([]);
    } finally {
      await fs.rm(path.join(workspace, 'linked.txt'));
    }
  });

  it('are checked but not copied by a dry run', async () => {
    const dir = path.join(root, 'dry-outgoing');
    const tool = createSendMessageTool({ outgoingDir: dir });
    const ctx = makeToolContext({ persona, origin });
    expect(await tool.run({ text: 'x', files: ['d/report.txt'], dry_run: true }, ctx)).toBe(
      'dry run: would send 1 characters and 1 file(s) to telegram:1; nothing was sent',
    );
    await expect(fs.readdir(dir)).rejects.toThrow(/ENOENT/);
  });
});

describe('copies of sent files', () => {
  it('are swept by send_message itself: an old copy is gone after the next send', async () => {
    const dir = path.join(root, 'swept');
    await fs.mkdir(path.join(dir, 'stale'), { recursive: true });
    const longAgo = new Date(Date.now() - DAY_MS - 60_000);
    await fs.utimes(path.join(dir, 'stale'), longAgo, longAgo);
    const tool = createSendMessageTool({ outgoingDir: dir });
    await tool.run({ text: 'x', files: ['d/report.txt'] }, makeToolContext({ persona, origin }));
    await expect.poll(() => fs.readdir(dir).then((names) => names.includes('stale'))).toBe(false);
  });
});
