import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveWorkspaceFile, resolveWorkspaceFolder } from '../../src/tools/workspace.ts';
import { createSendMessageTool } from '../../tools/send-message.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';

let root: string;
let persona: ReturnType<typeof makePersona>;

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-ws-'));
  const workspace = path.join(root, 'workspace');
  await fs.mkdir(path.join(workspace, 'out'), { recursive: true });
  await fs.writeFile(path.join(workspace, 'out', 'report.txt'), 'hello');
  await fs.writeFile(path.join(workspace, '.env'), 'TOKEN=secret');
  await fs.writeFile(path.join(root, 'outside.txt'), 'not yours');
  await fs.symlink(path.join(root, 'outside.txt'), path.join(workspace, 'sneaky.txt'));
  await fs.writeFile(path.join(workspace, '..notes.txt'), 'dots are part of the name');
  await fs.mkdir(path.join(workspace, '..cache'));
  // A second name, inside the workspace, for a file outside it.
  await fs.link(path.join(root, 'outside.txt'), path.join(workspace, 'hardlinked.txt'));
  persona = makePersona({ workspace, users: ['telegram:1'] });
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

describe('files a tool may use', () => {
  it('resolves a file inside the workspace', async () => {
    expect(await resolveWorkspaceFile(persona, 'out/report.txt')).toBe(path.join(await fs.realpath(root), 'workspace', 'out', 'report.txt'));
  });

  it('resolves names that merely start with two dots', async () => {
    const real = path.join(await fs.realpath(root), 'workspace');
    expect(await resolveWorkspaceFile(persona, '..notes.txt')).toBe(path.join(real, '..notes.txt'));
    expect(await resolveWorkspaceFile(persona, './..notes.txt')).toBe(path.join(real, '..notes.txt'));
    expect(await resolveWorkspaceFolder(persona, '..cache')).toBe(path.join(real, '..cache'));
  });

  it('refuses a hard link to a file outside the workspace, saying why', async () => {
    await expect(resolveWorkspaceFile(persona, 'hardlinked.txt')).rejects.toThrow(
      '"hardlinked.txt" has 2 hard links, so it may be a file from outside the workspace; copy it (cp) and use the copy',
    );
  });

  it('resolves folders for commands to run in, and refuses what is not one', async () => {
    const real = path.join(await fs.realpath(root), 'workspace');
    expect(await resolveWorkspaceFolder(persona)).toBe(real);
    expect(await resolveWorkspaceFolder(persona, 'out')).toBe(path.join(real, 'out'));
    await expect(resolveWorkspaceFolder(persona, '..')).rejects.toThrow('".." is outside the workspace');
    await expect(resolveWorkspaceFolder(persona, 'out/report.txt')).rejects.toThrow('"out/report.txt" is not a folder');
  });

  it.each([
    ['..', /outside the workspace/],
    ['out/../../outside.txt', /outside the workspace/],
    ['../outside.txt', /outside the workspace/],
    ['/etc/passwd', /outside the workspace/],
    ['sneaky.txt', /leads outside the workspace/],
    ['.env', /secrets file/],
    ['missing.txt', /does not exist/],
    ['out', /not a file/],
  ])('refuses %s', async (given, message) => {
    await expect(resolveWorkspaceFile(persona, given)).rejects.toThrow(message);
  });

  it('send_message sends workspace files (as copies under their own names) and refuses the rest without sending anything', async () => {
    const tool = createSendMessageTool({ outgoingDir: path.join(root, 'outgoing') });
    const ctx = makeToolContext({ persona, origin: { connector: 'telegram', chat: '1', chatType: 'dm' }, kind: 'user' });
    expect(await tool.run({ text: 'here it is', files: ['out/report.txt'] }, ctx)).toBe('sent to telegram:1');
    const [sent] = ctx.deliveries[0].options?.files ?? [];
    expect(path.basename(sent)).toBe('report.txt');
    expect(await fs.readFile(sent, 'utf8')).toBe('hello');
    expect(await tool.run({ text: 'and this', files: ['../outside.txt'] }, ctx)).toBe('error: "../outside.txt" is outside the workspace');
    expect(ctx.deliveries).toHaveLength(1);
  });
});
