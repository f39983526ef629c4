import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { withDeadline } from '#src/abort.ts';

/** How long one file download may take. */
const DOWNLOAD_TIMEOUT_MS = 5 * 60_000;

/**
 * Downloads `url` to `directory/name` for a connector's `download`. `directory` is a folder of Parlor's own that no
 * command sees; the core moves the finished file into the workspace. The body is streamed to a hidden name and then
 * renamed, so a half-written file never looks like a finished one. Stops with `stop`, or after five minutes.
 */
export async function saveDownload(url: string, target: { directory: string; name: string }, stop: AbortSignal, headers: Record<string, string> = {}): Promise<string> {
  return withDeadline(DOWNLOAD_TIMEOUT_MS, stop, (signal) => download(url, target, signal, headers));
}

async function download(url: string, target: { directory: string; name: string }, signal: AbortSignal, headers: Record<string, string>): Promise<string> {
  const response = await fetch(url, { headers, signal });
  if (!response.ok || !response.body) throw new Error(`file download answered HTTP ${response.status}`);
  await fs.mkdir(target.directory, { recursive: true });
  const file = path.join(target.directory, target.name);
  const partial = path.join(target.directory, `.${target.name}.${randomBytes(4).toString('hex')}.part`);
  try {
    await pipeline(Readable.fromWeb(response.body as never), createWriteStream(partial), { signal });
    await fs.rename(partial, file);
  } catch (err) {
    await fs.rm(partial, { force: true });
    throw err;
  }
  return file;
}
