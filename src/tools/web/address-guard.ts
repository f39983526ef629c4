import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** An address a name resolved to, as `dns.lookup(name, { all: true })` gives it. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

/**
 * Where an address points: `public`, `private` (a LAN: reachable only for a host the persona allows), or `blocked`
 * (this machine, the link, cloud metadata, multicast, reserved space: never reachable). `range` names why.
 */
export interface AddressClass {
  reach: 'public' | 'private' | 'blocked';
  range: string;
  /** The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), which was judged instead. */
  embedded?: string;
}

// A LAN, a VPN (Tailscale hands out 100.64/10), an IPv6 ULA: where a home server lives.
const PRIVATE_RANGES = new Set(['private', 'carrierGradeNat', 'uniqueLocal']);

const RANGE_WORDS: Record<string, string> = {
  loopback: 'a loopback address (this machine)',
  linkLocal: 'a link-local address (cloud metadata lives there)',
  private: 'a private network address',
  uniqueLocal: 'a private network address',
  carrierGradeNat: 'a carrier-grade NAT address',
  unspecified: 'the unspecified address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  teredo: 'a Teredo tunnel address',
  unparsable: 'not an address',
  name: 'a name for this machine or a cloud metadata service',
  internalName: 'a private network name (.internal)',
};

/** What a refusal says about a range, in words. */
export function describeRange(range: string): string {
  return RANGE_WORDS[range] ?? `a reserved address (${range})`;
}

/** Classifies an IPv4 or IPv6 address; an IPv4 address embedded in IPv6 (mapped, NAT64, 6to4) is judged as itself. */
export function classifyAddress(text: string): AddressClass {
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    address = ipaddr.parse(text.replace(/^\[|\]$/g, ''));
  } catch {
    return { reach: 'blocked', range: 'unparsable' };
  }
  if (address.kind() === 'ipv6') {
    const embedded = embeddedIPv4(address as ipaddr.IPv6);
    if (embedded === 'blocked') return { reach: 'blocked', range: (address as ipaddr.IPv6).range() };
    if (embedded) return { ...classifyAddress(embedded.toString()), embedded: embedded.toString() };
  }
  const range = address.range();
  if (range === 'unicast') return { reach: 'public', range };
  return { reach: PRIVATE_RANGES.has(range) ? 'private' : 'blocked', range };
}

/** The IPv4 address inside an IPv6 one, `blocked` for a tunnel that cannot be judged, or undefined. */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | 'blocked' | undefined {
  const p = address.parts;
  const fromWords = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  const range = address.range();
  // ::ffff:a.b.c.d (mapped), ::ffff:0:a.b.c.d (SIIT) and the deprecated ::a.b.c.d (compatible).
  if (range === 'ipv4Mapped' || range === 'rfc6145') return fromWords(p[6], p[7]);
  if (p.slice(0, 6).every((w) => w === 0) && (p[6] !== 0 || p[7] > 1)) return fromWords(p[6], p[7]);
  if (range === 'rfc6052') {
    // 64:ff9b::/96 carries the address in its last 32 bits; the local-use 64:ff9b:1::/48 spreads it around a gap.
    return p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0 ? fromWords(p[6], p[7]) : 'blocked';
  }
  if (range === '6to4') return fromWords(p[1], p[2]);
  if (range === 'teredo') return 'blocked';
  return undefined;
}

// Names that lead to a cloud's metadata service or to this machine whatever DNS says.
const BLOCKED_NAMES = new Set(['localhost', 'metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal']);

/** A hostname as compared: lower case, without a final dot or IPv6 brackets. */
export function normalizeHost(hostname: string): string {
  return hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.+$/, '');
}

/** A name that is never fetched; one under .internal (private by definition) only when the persona allows it. */
function blockedName(host: string, allowed: boolean): boolean {
  if (BLOCKED_NAMES.has(host) || host.endsWith('.localhost') || host.endsWith('.goog')) return true;
  return host.endsWith('.internal') && !allowed;
}

export class AddressRefused extends Error {
  constructor(
    readonly host: string,
    readonly address: string | undefined,
    readonly range: string,
    readonly embedded: string | undefined,
    /** An owner may allow this host in tools.jsonc (it is on a private network). */
    readonly allowable: boolean,
  ) {
    const resolved = Boolean(address && address !== host);
    super(`${resolved ? `${host} resolves to ${address}` : host}${embedded ? ` (${embedded} inside)` : ''}${resolved ? ',' : ' is'} ${describeRange(range)}`);
    this.name = 'AddressRefused';
  }
}

export class HostNotFound extends Error {
  constructor(
    readonly host: string,
    options?: { cause?: unknown },
  ) {
    super(`${host} could not be resolved`, options);
    this.name = 'HostNotFound';
  }
}

export interface GuardOptions {
  /** Hostnames the persona allows to be on a private network (`tools.web.allowHosts`). */
  allowHosts: readonly string[];
  resolve: Resolve;
}

/**
 * The addresses a URL's host may be reached at: every address it resolves to must be public, or private on a host
 * the persona allows. Throws AddressRefused or HostNotFound. The caller connects to exactly these addresses.
 */
export async function checkedAddresses(hostname: string, options: GuardOptions): Promise<ResolvedAddress[]> {
  const host = normalizeHost(hostname);
  const allowed = options.allowHosts.some((h) => normalizeHost(h) === host);
  const family = isIP(host);
  if (!family && blockedName(host, allowed)) {
    const internal = host.endsWith('.internal') && !BLOCKED_NAMES.has(host);
    throw new AddressRefused(host, undefined, internal ? 'internalName' : 'name', undefined, internal);
  }
  let addresses: ResolvedAddress[];
  if (family) {
    addresses = [{ address: host, family }];
  } else {
    try {
      addresses = await options.resolve(host);
    } catch (err) {
      throw new HostNotFound(host, { cause: err });
    }
    if (addresses.length === 0) throw new HostNotFound(host);
  }
  for (const { address } of addresses) {
    const { reach, range, embedded } = classifyAddress(address);
    if (reach === 'public' || (reach === 'private' && allowed)) continue;
    throw new AddressRefused(host, address, range, embedded, reach === 'private');
  }
  return addresses;
}
