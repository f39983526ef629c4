// inOneTrip: a transaction of a few statements in one round trip (BEGIN, the statements and COMMIT together), counted
// on the wire through a pass-through in front of Postgres.
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOneTrip } from '../../src/db/client.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
let proxy: Server;
let client: postgres.Sql;
/** Times the client spoke after Postgres had (each one a round trip begun). */
let trips = 0;

beforeAll(async () => {
  t = await createTestDatabase();
  await t.database.sql`create table trip_rows (n int primary key)`;
  const target = new URL(t.url);
  proxy = createServer((inbound: Socket) => {
    const outbound = createConnection({ host: target.hostname, port: Number(target.port) });
    let serverSpoke = true;
    inbound.on('data', (chunk) => {
      if (serverSpoke) trips++;
      serverSpoke = false;
      outbound.write(chunk);
    });
    outbound.on('data', (chunk) => {
      serverSpoke = true;
      inbound.write(chunk);
    });
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
    inbound.on('error', () => {});
    outbound.on('error', () => {});
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const url = new URL(t.url);
  url.host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  client = postgres(url.toString(), { max: 1, onnotice: () => {} });
});
afterAll(async () => {
  await client?.end({ timeout: 1 });
  proxy?.close();
  await t?.drop();
});

const insert = (c: postgres.Sql | postgres.TransactionSql, n: number) => c`insert into trip_rows (n) values (${n}) returning n`.then(([row]) => row.n as number);
const stored = async () => (await t.database.sql<{ n: number }[]>`select n from trip_rows order by n`).map((r) => r.n);

const both = (a: number, b: number) => async (c: postgres.ReservedSql) => [insert(c, a), insert(c, b)] as const;

describe('inOneTrip', () => {
  it('commits its statements in one round trip, where one trip per statement would take four', async () => {
    // Warm: a statement's first use on a connection asks Postgres for its parameter types first.
    await inOneTrip(client, both(1, 2));
    await t.database.sql`delete from trip_rows`;
    trips = 0;
    const results = await inOneTrip(client, both(1, 2));
    expect(trips).toBe(1);
    expect(results).toEqual([1, 2]);
    expect(await stored()).toEqual([1, 2]);
    trips = 0;
    await client.begin(async (tx) => {
      await insert(tx, 3);
      await insert(tx, 4);
    });
    expect(trips).toBe(4);
  });

  it('sends a statement the callback waited for before the ones after it, still in one round trip', async () => {
    trips = 0;
    const results = await inOneTrip<[number, number]>(client, async (c) => {
      const first = insert(c, 5);
      // As pg-boss's send does: a few steps pass before the next statement is written.
      for (let i = 0; i < 5; i++) await Promise.resolve();
      return [first, insert(c, 6)];
    });
    expect(results).toEqual([5, 6]);
    expect(trips).toBe(1);
    expect(await stored()).toEqual(expect.arrayContaining([5, 6]));
  });

  it('writes nothing when one statement fails, and leaves its connection out of any transaction', async () => {
    await expect(inOneTrip(client, both(20, 1))).rejects.toThrow(/duplicate key/);
    expect(await stored()).not.toContain(20);
    await expectNoTransaction();
    expect(await inOneTrip(client, async (c) => [insert(c, 21)] as const)).toEqual([21]);
  });

  it('writes nothing when the callback fails after sending a statement, and leaves its connection clean', async () => {
    await expect(
      inOneTrip(client, async (c) => {
        void insert(c, 30).catch(() => {});
        await Promise.resolve();
        throw new Error('changed its mind');
      }),
    ).rejects.toThrow(/changed its mind/);
    expect(await stored()).not.toContain(30);
    await expectNoTransaction();
  });
});

/** The pool's one connection: were it left in a transaction, now() would stand still between two statements. */
async function expectNoTransaction() {
  const [first] = await client`select now() as at`;
  await new Promise((r) => setTimeout(r, 20));
  const [second] = await client`select now() as at`;
  expect(second.at.getTime()).toBeGreaterThan(first.at.getTime());
}
