import { Worker } from 'node:worker_threads';

/**
 * The model's regular expression, run over a file's lines in a worker thread with a deadline. V8's regular
 * expressions backtrack: `(a+)+$` against a line of 30 `a`s and a `!` takes minutes, and on the event loop that
 * freezes every persona and chat, with no timer able to fire. A worker is ended from outside (terminate) however
 * long its match would take, and the loop stays free meanwhile.
 *
 * The worker's code is the string below, run with `eval: true`, not a file: the bundle (scripts/build.mjs puts src/
 * into dist/ with esbuild), tsx and vitest would each need a file found in a different place, and a function's
 * source turned into a string would carry whatever helpers the loader injected into it. It only needs `RegExp`.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const regex = new RegExp(workerData.source, workerData.flags);
parentPort.on('message', ({ lines, limit }) => {
  const matches = [];
  for (let index = 0; index < lines.length && matches.length < limit; index++) {
    if (regex.test(lines[index])) matches.push(index);
  }
  parentPort.postMessage(matches);
});
`;

/** Time one file's lines may take: far over what a sane pattern needs for 10 MB, well under grep's timeout. */
export const GREP_DEADLINE_MS = 2_000;

export class GrepPatternTooSlowError extends Error {
  override name = 'GrepPatternTooSlowError';
  constructor(readonly deadlineMs: number) {
    super(`the pattern ran over ${deadlineMs} ms on one file's lines`);
  }
}

/** Finds the lines a pattern matches; `close` must be called when the search is over. */
export interface LineMatcher {
  /** The indexes of the first `limit` matching lines (none once the signal has aborted). */
  match(lines: readonly string[], limit: number): Promise<number[]>;
  close(): Promise<void>;
}

/** Matches on the calling thread: for a pattern that cannot backtrack badly (literal text, escaped). */
export function matchOnThread(regex: RegExp): LineMatcher {
  return {
    match: async (lines, limit) => {
      const matches: number[] = [];
      for (let index = 0; index < lines.length && matches.length < limit; index++) if (regex.test(lines[index])) matches.push(index);
      return matches;
    },
    close: async () => {},
  };
}

/**
 * Matches in a worker thread (started on the first call), ended when one call runs past `deadlineMs` (the call then
 * throws GrepPatternTooSlowError) or when `signal` aborts.
 */
export function matchInWorker(regex: RegExp, options: { deadlineMs?: number; signal?: AbortSignal } = {}): LineMatcher {
  const deadlineMs = options.deadlineMs ?? GREP_DEADLINE_MS;
  let worker: Worker | undefined;
  let online: Promise<void> | undefined;
  let failure: Error | undefined;
  let ended = false;
  const end = async () => {
    ended = true;
    await worker?.terminate();
  };
  const start = () => {
    const started = new Worker(WORKER_SOURCE, { eval: true, workerData: { source: regex.source, flags: regex.flags } });
    // Not unref'd: while a search waits on it, it is what keeps the process going (searchWithJs always closes it).
    worker = started;
    started.on('error', (err) => (failure ??= err));
    started.once('exit', (code) => (failure ??= new Error(`the search worker stopped (exit code ${code})`)));
    online = new Promise((resolve, reject) => {
      started.once('online', resolve);
      started.once('error', reject);
    });
    return online;
  };
  return {
    async match(lines, limit) {
      if (ended || options.signal?.aborted) return [];
      await (online ?? start());
      if (ended || options.signal?.aborted) return [];
      if (failure) throw failure;
      const current = worker!;
      return new Promise<number[]>((resolve, reject) => {
        const settle = (outcome: () => void) => {
          clearTimeout(timer);
          options.signal?.removeEventListener('abort', onAbort);
          current.off('message', onMessage);
          current.off('error', onError);
          current.off('exit', onExit);
          outcome();
        };
        const onMessage = (matches: number[]) => settle(() => resolve(matches));
        const onError = (err: Error) => settle(() => reject(err));
        const onExit = (code: number) => settle(() => reject(new Error(`the search worker stopped (exit code ${code})`)));
        const onAbort = () => settle(() => void end().then(() => resolve([]), reject));
        const timer = setTimeout(() => {
          settle(() => void end().then(() => reject(new GrepPatternTooSlowError(deadlineMs)), reject));
        }, deadlineMs);
        current.on('message', onMessage);
        current.once('error', onError);
        current.once('exit', onExit);
        options.signal?.addEventListener('abort', onAbort, { once: true });
        current.postMessage({ lines, limit });
      });
    },
    close: end,
  };
}
