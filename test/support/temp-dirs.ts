// Scratch folders that go with the test file that made them: each-file.ts removes them after it, so a test that
// cannot clean up after itself (it fails, or its folder is made in a hook) leaves nothing in the system's temp folder.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const made = new Set<string>();

/** A new folder in the system's temp folder, named `prefix` and a random tail. */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  made.add(dir);
  return dir;
}

/** Removes the folders tempDir made since the last call (one removed already is not an error). */
export async function removeTempDirs(): Promise<void> {
  const dirs = [...made];
  made.clear();
  await Promise.all(dirs.map((dir) => fs.rm(dir, { recursive: true, force: true })));
}
