import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OUTGOING_RETENTION_MS, pruneOutgoingFiles } from '../../src/tools/outgoing-files.ts';

let root: string;
beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-outgoing-test-'));
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

describe('pruneOutgoingFiles', () => {
  it('removes the copies older than the cut-off and keeps the newer ones', async () => {
    await fs.mkdir(path.join(root, 'old'));
    await fs.writeFile(path.join(root, 'old', 'a.pdf'), 'a');
    await fs.mkdir(path.join(root, 'new'));
    await fs.writeFile(path.join(root, 'new', 'b.pdf'), 'b');
    const longAgo = new Date(Date.now() - OUTGOING_RETENTION_MS - 60_000);
    await fs.utimes(path.join(root, 'old'), longAgo, longAgo);
    expect(await pruneOutgoingFiles(root, new Date(Date.now() - OUTGOING_RETENTION_MS))).toBe(1);
    expect(await fs.readdir(root)).toEqual(['new']);
  });

  it('finds nothing to do in a folder that does not exist yet', async () => {
    expect(await pruneOutgoingFiles(path.join(root, 'missing'), new Date())).toBe(0);
  });
});
