import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { checkedAddresses, type GuardOptions, type ResolvedAddress } from './address-guard.ts';

export interface FetchLimits {
  /** Decoded bytes read at most; the rest of the body is not read. */
  maxBytes: number;
  /** From the start of the request to the first byte of the answer's connection. */
  connectTimeoutMs: number;
  /** The whole fetch, redirects included; a body still arriving then is cut with what came. */
  totalTimeoutMs: number;
  maxRedirects: number;
}

export interface FetchOptions extends GuardOptions {
  limits: FetchLimits;
  userAgent: string;
  signal?: AbortSignal;
  /** Whether a body of this type is worth reading (else only its size is reported). */
  wantsBody(contentType: string): boolean;
  /**
   * Test seam: the address a checked address is actually dialled at. Production passes nothing; the tests map a
   * checked public address to their loopback server.
   */
  dialAddress?: (checked: string) => string;
}

export interface FetchedResponse {
  url: string;
  status: number;
  statusText: string;
  contentType: string;
  /** The Content-Type header as sent (its charset, say). */
  contentTypeHeader?: string;
  /** Bytes of the body read (decoded), or its announced size when it was not read. */
  size: number;
  body?: Buffer;
  /** Why the body is not whole: the size cap, the deadline, or the server closing the connection early. */
  cut?: Cut;
  redirectedFrom?: string;
}

/** A fetch that could not give an answer: `kind` says what went wrong, the message says it in words. */
export class FetchFailed extends Error {
  constructor(
    readonly kind: 'url' | 'redirects' | 'timeout' | 'network' | 'encoding',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'FetchFailed';
  }
}

export type Cut = 'size' | 'deadline' | 'closed';

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Checks a URL's form: http(s) only, no credentials in it. */
export function parseFetchUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new FetchFailed('url', `"${text}" is not a URL; give a full address such as https://example.com/page`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new FetchFailed('url', `${url.protocol} addresses are not fetched; web_fetch reads http:// and https:// pages only`);
  }
  if (url.username || url.password) throw new FetchFailed('url', 'an address with a user name or password in it is not fetched');
  if (!url.hostname) throw new FetchFailed('url', `"${text}" has no host name`);
  return url;
}

/**
 * GETs a URL, following redirects itself and checking every hop's host before connecting; the connection goes to
 * the addresses that were checked (no second DNS answer can slip in between). Throws FetchFailed, AddressRefused or
 * HostNotFound.
 */
export async function fetchGuarded(start: string, options: FetchOptions): Promise<FetchedResponse> {
  const deadline = Date.now() + options.limits.totalTimeoutMs;
  const seen = new Set<string>();
  let url = parseFetchUrl(start);
  for (let hop = 0; ; hop++) {
    seen.add(url.href);
    const addresses = await beforeDeadline(checkedAddresses(url.hostname, options), deadline, `${url.hostname} could not be resolved within ${seconds(options.limits.totalTimeoutMs)}`);
    const answer = await requestOnce(url, addresses, deadline, options);
    if (!('location' in answer)) return { ...answer, redirectedFrom: hop > 0 ? start : undefined };
    const next = (() => {
      try {
        return parseFetchUrl(new URL(answer.location, url).href);
      } catch (err) {
        throw new FetchFailed('redirects', `${url.href} redirected to an address that is not fetched: ${(err as Error).message}`);
      }
    })();
    if (seen.has(next.href)) throw new FetchFailed('redirects', `redirect loop: ${url.href} sends back to ${next.href}, which was already visited`);
    if (hop + 1 > options.limits.maxRedirects) {
      throw new FetchFailed('redirects', `more than ${options.limits.maxRedirects} redirects; the last one, from ${url.href}, went to ${next.href}`);
    }
    url = next;
  }
}

/** A slow resolver counts against the fetch's time too. */
function beforeDeadline<T>(work: Promise<T>, deadline: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new FetchFailed('timeout', message)), Math.max(0, deadline - Date.now()));
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

type Answer = Omit<FetchedResponse, 'redirectedFrom'> | { location: string };

function requestOnce(url: URL, addresses: ResolvedAddress[], deadline: number, options: FetchOptions): Promise<Answer> {
  const dial = options.dialAddress ?? ((a: string) => a);
  const pinned = addresses.map((a) => ({ address: dial(a.address), family: a.family }));
  // Node asks for every address (autoSelectFamily) or for one; either way it gets the checked ones.
  const lookup = ((_host: string, opts: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (opts?.all) callback(null, pinned);
    else callback(null, pinned[0].address, pinned[0].family);
  }) as unknown as LookupFunction;
  const client = url.protocol === 'https:' ? https : http;
  const literal = addresses.length === 1 && addresses[0].address === url.hostname.replace(/^\[|\]$/g, '');

  return new Promise<Answer>((resolve, reject) => {
    let settled = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (error: Error | undefined, answer?: Answer) => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      options.signal?.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve(answer!);
    };
    const onAbort = () => {
      req.destroy();
      finish(new FetchFailed('timeout', 'the fetch was stopped'));
    };

    const req = client.request(url, {
      method: 'GET',
      agent: false,
      lookup,
      // An IP literal never goes through lookup; it is the address that was checked, mapped like the others.
      ...(literal ? { hostname: pinned[0].address } : {}),
      headers: {
        host: url.host,
        'user-agent': options.userAgent,
        accept: 'text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.5',
        'accept-encoding': 'gzip, deflate, br',
      },
    });
    const remaining = () => Math.max(0, deadline - Date.now());
    timers.push(
      setTimeout(() => {
        req.destroy();
        finish(new FetchFailed('timeout', `${url.host} did not answer within ${seconds(options.limits.totalTimeoutMs)}`));
      }, remaining()),
    );
    const connectTimer = setTimeout(() => {
      req.destroy();
      finish(new FetchFailed('timeout', `could not connect to ${url.host} within ${seconds(options.limits.connectTimeoutMs)}`));
    }, Math.min(options.limits.connectTimeoutMs, remaining()));
    timers.push(connectTimer);
    req.on('socket', (socket) => socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer)));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.signal?.aborted) return onAbort();

    req.on('error', (err) => finish(new FetchFailed('network', `could not fetch ${url.href}: ${networkReason(err)}`, { cause: err })));
    req.on('response', (res) => {
      // From here the body reader keeps the deadline, and cuts rather than fails.
      for (const t of timers) clearTimeout(t);
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (REDIRECTS.has(status) && location) {
        res.destroy();
        return finish(undefined, { location });
      }
      const contentType = (res.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
      const announced = Number(res.headers['content-length']);
      const base = { url: url.href, status, statusText: res.statusMessage ?? '', contentType, contentTypeHeader: res.headers['content-type'] };
      if (!options.wantsBody(contentType) && Number.isFinite(announced)) {
        res.destroy();
        return finish(undefined, { ...base, size: announced });
      }
      readBody(res, options.limits.maxBytes, remaining()).then(
        (read) => {
          req.destroy();
          finish(undefined, options.wantsBody(contentType) ? { ...base, ...read } : { ...base, size: read.size, cut: read.cut });
        },
        (err: Error) => {
          req.destroy();
          finish(err);
        },
      );
    });
    req.end();
  });
}

/** Reads a body, decoded, until it ends, passes `maxBytes` or the time runs out. */
function readBody(res: http.IncomingMessage, maxBytes: number, timeLeftMs: number): Promise<{ body: Buffer; size: number; cut?: Cut }> {
  let stream: Readable;
  try {
    stream = decoded(res);
  } catch (err) {
    res.destroy();
    return Promise.reject(err);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const end = (cut?: Cut) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      stream.destroy();
      res.destroy();
      const body = Buffer.concat(chunks, size);
      resolve({ body, size, cut });
    };
    const timer = setTimeout(() => end('deadline'), timeLeftMs);
    stream.on('data', (chunk: Buffer) => {
      if (done) return;
      const room = maxBytes - size;
      if (chunk.length > room) {
        chunks.push(chunk.subarray(0, room));
        size += room;
        return end('size');
      }
      chunks.push(chunk);
      size += chunk.length;
    });
    stream.on('end', () => end());
    stream.on('error', (err) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      res.destroy();
      reject(new FetchFailed('encoding', `the body could not be read (${err.message})`, { cause: err }));
    });
    // The server hung up mid-body: what came is kept, and said to be incomplete.
    res.on('error', () => end('closed'));
    res.on('aborted', () => end('closed'));
  });
}

/** The body through the decoders its Content-Encoding names, last applied first. */
function decoded(res: http.IncomingMessage): Readable {
  const names = (res.headers['content-encoding'] ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s && s !== 'identity');
  let stream: Readable = res;
  for (const name of names.reverse()) {
    const decoder =
      name === 'gzip' || name === 'x-gzip'
        ? zlib.createGunzip()
        : name === 'deflate'
          ? zlib.createInflate()
          : name === 'br'
            ? zlib.createBrotliDecompress()
            : undefined;
    if (!decoder) throw new FetchFailed('encoding', `the page is compressed as "${name}", which web_fetch cannot decode`);
    stream.on('error', (err) => decoder.destroy(err));
    stream = stream.pipe(decoder);
  }
  return stream;
}

function networkReason(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'the connection was refused';
    case 'ECONNRESET':
      return 'the connection was reset';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'the host name could not be resolved';
    case 'ETIMEDOUT':
      return 'the connection timed out';
    default:
      return err.code?.startsWith('ERR_TLS') || err.code?.includes('CERT') ? `the TLS certificate was not accepted (${err.code})` : err.message;
  }
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}
