// postgres.js as patched at install (patches/): a connection whose backend dies with a write of its own waiting
// (a transaction's ROLLBACK, a reserved connection's next query) rejects that query instead of throwing where nothing
// can catch it, and the pool goes on. Unpatched, the process died: a Postgres restart took Parlor down with it. And its
// queues stay as long as what they hold.
import { execa } from 'execa';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
// @ts-expect-error: the driver's own module, without types
import Queue from '../../node_modules/postgres/src/queue.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t?.drop());

describe('postgres.js when a connection dies under it', () => {
  it('rejects what was in flight, answers the next query, and the process lives', async () => {
    const run = await execa('node', ['test/fixtures/postgres-close-race.mjs', t.url], { reject: false, timeout: 30_000 });
    expect(run.stderr).not.toMatch(/TypeError/);
    expect(run.exitCode, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout.trim().split('\n').pop()!);
    expect(result.transaction).toBe('CONNECTION_CLOSED');
    expect(result.afterDeath).not.toBe('no answer');
    expect(result.pool).toBe('ok');
  });
});

describe("postgres.js's queues", () => {
  it('stay as long as what they hold when never emptied, as the pool keeps its idle connections', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const open = Queue() as { push(x: object): void; shift(): object; remove(x: object): object | null; length: number };
    const connections = [{}, {}, {}];
    for (const c of connections) open.push(c);
    // What the pool does for each query: take the oldest idle connection, and when the query is done move it back (the
    // move removes it from the queue it was in first, where it no longer is).
    let found = 0;
    const serve = (queries: number) => {
      for (let i = 0; i < queries; i++) {
        const c = open.shift();
        if (open.remove(c)) found++;
        open.push(c);
      }
    };
    serve(1000);
    gc();
    const before = process.memoryUsage().heapUsed;
    serve(200_000);
    gc();
    // Unpatched, every query left a slot behind: 200 000 of them, 1.6 MB and more (and the test takes seconds, each
    // remove searching all of them).
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(400_000);
    expect(found).toBe(0);
    expect(open.length).toBe(3);
    // A connection still queued is found and taken out (as when it closes while idle), the others keep their order.
    expect(open.remove(connections[1])).toBe(connections[1]);
    expect(open.length).toBe(2);
    expect([open.shift(), open.shift()]).toEqual([connections[0], connections[2]]);
    expect(open.length).toBe(0);
  });
});
