// A pass-through in front of Postgres that reads what its clients send (the frontend protocol, unencrypted) and
// records every statement they have Postgres execute: the text of each Execute (through its Bind's prepared
// statement) and of each simple Query. What a piece of Parlor costs in statements is then counted from outside it.
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface StatementProxy {
  /** A URL like `serverUrl`, reaching the server through the proxy. */
  url: string;
  /** Every statement executed through the proxy so far, oldest first. */
  executed: string[];
  /**
   * The same statements by round trip: those a connection sent before the server answered it, together (a
   * transaction sent whole with its BEGIN and COMMIT is one trip).
   */
  trips: Trip[];
  close(): Promise<void>;
}

export interface Trip {
  /** The statements executed, in order. */
  statements: string[];
  /**
   * Statements the trip prepared under a name: the first use of a statement on a connection. A client that learns a
   * statement's parameter types first (postgres.js) sends only its Parse and Describe and waits for the answer, so its
   * first use on each connection splits the trip it is in.
   */
  prepared: string[];
}

/** Reads the client's side of one connection: after the startup message, typed messages (a byte, then a length). */
function frontendReader(onStatement: (text: string) => void, onPrepare: (text: string) => void) {
  let buffer = Buffer.alloc(0);
  let started = false;
  // Per connection: named prepared statements, and the unnamed one (Parse with an empty name replaces it).
  const prepared = new Map<string, string>();
  let bound = '';
  const cstring = (at: number) => {
    const end = buffer.indexOf(0, at);
    return { text: buffer.toString('utf8', at, end), next: end + 1 };
  };
  return (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      if (!started) {
        if (buffer.length < 4) return;
        const length = buffer.readInt32BE(0);
        if (buffer.length < length) return;
        const code = buffer.readInt32BE(4);
        buffer = buffer.subarray(length);
        // An SSL or GSS request is answered 'N' by servers without it, and the startup message follows.
        if (code !== 80877103 && code !== 80877104) started = true;
        continue;
      }
      if (buffer.length < 5) return;
      const length = buffer.readInt32BE(1);
      if (buffer.length < 1 + length) return;
      const type = String.fromCharCode(buffer[0]);
      if (type === 'Q') onStatement(cstring(5).text);
      else if (type === 'P') {
        const name = cstring(5);
        const text = cstring(name.next).text;
        prepared.set(name.text, text);
        if (name.text) onPrepare(text);
      } else if (type === 'B') {
        const portal = cstring(5);
        bound = prepared.get(cstring(portal.next).text) ?? '';
      } else if (type === 'E') onStatement(bound);
      buffer = buffer.subarray(1 + length);
    }
  };
}

export async function startStatementProxy(serverUrl: string): Promise<StatementProxy> {
  const target = new URL(serverUrl);
  const executed: string[] = [];
  const trips: Trip[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const outbound = createConnection({ host: target.hostname, port: Number(target.port) });
    sockets.add(inbound).add(outbound);
    let trip: Trip | undefined;
    const current = () => {
      if (!trip) trips.push((trip = { statements: [], prepared: [] }));
      return trip;
    };
    const normal = (text: string) => text.replace(/\s+/g, ' ').trim();
    const read = frontendReader(
      (text) => {
        const statement = normal(text);
        executed.push(statement);
        current().statements.push(statement);
      },
      (text) => current().prepared.push(normal(text)),
    );
    inbound.on('data', (chunk: Buffer) => {
      read(chunk);
      outbound.write(chunk);
    });
    outbound.on('data', (chunk: Buffer) => {
      trip = undefined;
      inbound.write(chunk);
    });
    for (const [a, b] of [[inbound, outbound], [outbound, inbound]]) {
      a.on('close', () => b.destroy());
      a.on('error', () => {});
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(serverUrl);
  url.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  url.searchParams.delete('host');
  return {
    url: url.toString(),
    executed,
    trips,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
