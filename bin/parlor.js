#!/usr/bin/env -S node --max-semi-space-size=4 --heap-growing-percent=25
// The `parlor` command: runs the bundle built at install time when it is up to date, else the TypeScript sources
// through tsx's loader (which costs about a second of start-up).
// A young generation of 4 MB semi-spaces instead of V8's 16, and an old generation let grow by a quarter over what
// the last full collection kept (V8 lets it grow by up to four times): when a hundred chats write at once, `parlor
// start` peaks at 125-150 MB (Node 20 to 24) instead of 160 to 250. With 8 MB semi-spaces Node 24 peaked at 152-159
// MB; 4 cost it no CPU per message that runs could tell apart, and Node 20 and 22 about 0.3 ms more per message (less
// than runs of test/bench/telegram.ts vary). `npm start` passes the same flags.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const bundle = `${root}dist/parlor.mjs`;

function newestSource(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : fs.statSync(path).mtimeMs);
  }
  return newest;
}

function bundleIsFresh() {
  try {
    const built = fs.statSync(bundle).mtimeMs;
    return ['src', 'connectors', 'tools'].every((dir) => newestSource(`${root}${dir}`) <= built);
  } catch {
    return false;
  }
}

if (process.env.PARLOR_FROM_SOURCE !== '1' && bundleIsFresh()) {
  await import(bundle);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/main.ts');
}
