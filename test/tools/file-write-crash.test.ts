// A write killed part way (SIGKILL, a power cut) leaves the file as it was: the new content is complete under the
// file's name or not there at all, and what is left over is a hidden part that the next write of the file clears.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFileWriteTool } from '../../tools/file-write.ts';
import { until } from '../support/until.ts';
import { makeFileToolsFixture, runTool } from './file-helpers.ts';

const CHILD = fileURLToPath(new URL('./file-write-crash-child.ts', import.meta.url));
const fixture = makeFileToolsFixture('parlor-file-crash-');
const { workspace } = fixture;
const target = path.join(workspace, 'notes', 'log.txt');
const PART = /^\.log\.txt\.[0-9a-f]{8}\.part$/;
let child: ChildProcess | undefined;

/** Starts a writer of `bytes` bytes to notes/log.txt; resolves once it printed `line`. */
async function startWriter(bytes: number, mode: 'hold' | 'run', line: string): Promise<ChildProcess> {
  const started = spawn(process.execPath, ['--import', 'tsx', CHILD, workspace, 'notes/log.txt', String(bytes), mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  child = started;
  let out = '';
  await new Promise<void>((resolve, reject) => {
    started.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes(`${line}\n`)) resolve();
    });
    started.on('exit', (code) => reject(new Error(`the writer exited (${code}) before "${line}": ${out}`)));
  });
  return started;
}

/** SIGKILL, and waits for it to land; fails if the writer had already finished (the test would prove nothing). */
async function kill(writer: ChildProcess): Promise<void> {
  expect(writer.exitCode).toBeNull();
  const exited = new Promise((resolve) => writer.once('exit', resolve));
  writer.kill('SIGKILL');
  await exited;
  expect(writer.signalCode).toBe('SIGKILL');
}

function parts(): string[] {
  return fs.readdirSync(path.dirname(target)).filter((name) => PART.test(name));
}

beforeEach(() => {
  fs.rmSync(workspace, { recursive: true, force: true });
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.writeFileSync(target, 'the old content\n');
});
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
});
afterAll(() => fixture.remove());

describe('file_write killed mid-write', () => {
  it('keeps the old file when killed after the new content is written but before it takes the name', async () => {
    const writer = await startWriter(4 * 1024 * 1024, 'hold', 'ready');
    // The new content is there, complete and synced, in a hidden part of its own.
    expect(parts()).toHaveLength(1);
    expect(fs.statSync(path.join(path.dirname(target), parts()[0])).size).toBe(4 * 1024 * 1024);
    await kill(writer);
    expect(fs.readFileSync(target, 'utf8')).toBe('the old content\n');
    expect(fs.readdirSync(path.dirname(target)).filter((name) => !PART.test(name))).toEqual(['log.txt']);
  });

  it('keeps the old file whenever in the write it is killed', async () => {
    const writer = await startWriter(256 * 1024 * 1024, 'run', 'started');
    // As soon as some of the new content is on disk.
    await until(() => parts().some((name) => fs.statSync(path.join(path.dirname(target), name), { throwIfNoEntry: false })?.size));
    await kill(writer);
    expect(fs.readFileSync(target, 'utf8')).toBe('the old content\n');
    expect(fs.readdirSync(path.dirname(target)).filter((name) => !PART.test(name))).toEqual(['log.txt']);
  });

  it('leaves no file under the name when the file was new', async () => {
    fs.rmSync(target);
    const writer = await startWriter(1024, 'hold', 'ready');
    await kill(writer);
    expect(fs.existsSync(target)).toBe(false);
    expect(parts()).toHaveLength(1);
  });

  it('clears the leftover of a crash a while ago on the next write of the file', async () => {
    const writer = await startWriter(1024, 'hold', 'ready');
    await kill(writer);
    const [leftover] = parts();
    // A part as fresh as a write still running elsewhere is left alone...
    const tool = createFileWriteTool();
    expect(await runTool(tool, { path: 'notes/log.txt', content: 'first\n', overwrite: true }, fixture.ctx)).toBe('wrote notes/log.txt (6 bytes, 1 lines)');
    expect(parts()).toEqual([leftover]);
    // ...and one from minutes ago is removed.
    const old = new Date(Date.now() - 5 * 60_000);
    fs.utimesSync(path.join(path.dirname(target), leftover), old, old);
    expect(await runTool(tool, { path: 'notes/log.txt', content: 'second\n', overwrite: true }, fixture.ctx)).toBe('wrote notes/log.txt (7 bytes, 1 lines)');
    expect(fs.readdirSync(path.dirname(target))).toEqual(['log.txt']);
    expect(fs.readFileSync(target, 'utf8')).toBe('second\n');
  });
});
