// The address guard web_fetch checks every host with: which addresses are public, which a persona may allow, and
// which are never reachable.
import { describe, expect, it } from 'vitest';
import { AddressRefused, checkedAddresses, classifyAddress, HostNotFound, type Resolve } from '#src/tools/web/address-guard.ts';

describe('classifyAddress', () => {
  it.each([
    ['8.8.8.8', 'public', 'unicast', undefined],
    ['93.184.216.34', 'public', 'unicast', undefined],
    ['2606:4700:4700::1111', 'public', 'unicast', undefined],
    ['::ffff:8.8.8.8', 'public', 'unicast', '8.8.8.8'],
    ['10.0.0.5', 'private', 'private', undefined],
    ['172.16.0.1', 'private', 'private', undefined],
    ['172.31.255.255', 'private', 'private', undefined],
    ['192.168.1.1', 'private', 'private', undefined],
    ['100.64.0.1', 'private', 'carrierGradeNat', undefined],
    ['fd12:3456::1', 'private', 'uniqueLocal', undefined],
    ['fc00::1', 'private', 'uniqueLocal', undefined],
    ['127.0.0.1', 'blocked', 'loopback', undefined],
    ['127.255.0.9', 'blocked', 'loopback', undefined],
    ['::1', 'blocked', 'loopback', undefined],
    ['169.254.169.254', 'blocked', 'linkLocal', undefined],
    ['169.254.0.1', 'blocked', 'linkLocal', undefined],
    ['fe80::1', 'blocked', 'linkLocal', undefined],
    ['fe80::1%eth0', 'blocked', 'linkLocal', undefined],
    ['0.0.0.0', 'blocked', 'unspecified', undefined],
    ['0.1.2.3', 'blocked', 'unspecified', undefined],
    ['::', 'blocked', 'unspecified', undefined],
    ['224.0.0.1', 'blocked', 'multicast', undefined],
    ['ff02::1', 'blocked', 'multicast', undefined],
    ['255.255.255.255', 'blocked', 'broadcast', undefined],
    ['240.0.0.1', 'blocked', 'reserved', undefined],
    ['192.0.2.1', 'blocked', 'reserved', undefined],
    ['::ffff:127.0.0.1', 'blocked', 'loopback', '127.0.0.1'],
    ['::ffff:169.254.169.254', 'blocked', 'linkLocal', '169.254.169.254'],
    ['::ffff:10.0.0.1', 'private', 'private', '10.0.0.1'],
    ['::ffff:0:7f00:1', 'blocked', 'loopback', '127.0.0.1'],
    ['::127.0.0.1', 'blocked', 'loopback', '127.0.0.1'],
    ['64:ff9b::a9fe:a9fe', 'blocked', 'linkLocal', '169.254.169.254'],
    ['64:ff9b::808:808', 'public', 'unicast', '8.8.8.8'],
    ['64:ff9b:1::a00:5', 'blocked', 'rfc6052', undefined],
    ['2002:7f00:0001::1', 'blocked', 'loopback', '127.0.0.1'],
    ['2002:0a00:0005::1', 'private', 'private', '10.0.0.5'],
    ['2002:0808:0808::1', 'public', 'unicast', '8.8.8.8'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'blocked', 'teredo', undefined],
    ['not an address', 'blocked', 'unparsable', undefined],
  ])('%s is %s (%s)', (address, reach, range, embedded) => {
    expect(classifyAddress(address)).toEqual({ reach, range, ...(embedded ? { embedded } : {}) });
  });
});

describe('checkedAddresses', () => {
  const dns = (table: Record<string, string[]>): Resolve & { asked: string[] } => {
    const asked: string[] = [];
    const resolve = async (host: string) => {
      asked.push(host);
      if (!table[host]) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
      return table[host].map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };
    return Object.assign(resolve, { asked });
  };

  it('gives every address of a public name, asking DNS once', async () => {
    const resolve = dns({ 'news.example': ['93.184.216.34', '2606:2800:220:1::1'] });
    expect(await checkedAddresses('News.Example.', { allowHosts: [], resolve })).toEqual([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ]);
    expect(resolve.asked).toEqual(['news.example']);
  });

  it('refuses a name when any of its addresses is not public', async () => {
    const resolve = dns({ 'split.example': ['93.184.216.34', '10.1.2.3'] });
    await expect(checkedAddresses('split.example', { allowHosts: [], resolve })).rejects.toThrow(
      new AddressRefused('split.example', '10.1.2.3', 'private', undefined, true),
    );
  });

  it('lets a host on allowHosts be private, but never loopback or link-local', async () => {
    const resolve = dns({ 'nas.home': ['192.168.1.10', 'fd00::10'], 'box.home': ['192.168.1.11', '127.0.0.1'], 'meta.home': ['169.254.169.254'] });
    const allowHosts = ['nas.home', 'box.home', 'meta.home'];
    expect(await checkedAddresses('nas.home', { allowHosts, resolve })).toHaveLength(2);
    await expect(checkedAddresses('nas.home', { allowHosts: [], resolve })).rejects.toThrow('nas.home resolves to 192.168.1.10, a private network address');
    await expect(checkedAddresses('box.home', { allowHosts, resolve })).rejects.toThrow('box.home resolves to 127.0.0.1, a loopback address (this machine)');
    await expect(checkedAddresses('meta.home', { allowHosts, resolve })).rejects.toThrow('meta.home resolves to 169.254.169.254, a link-local address');
  });

  it('checks an address literal without DNS, allowed when it is listed itself', async () => {
    const resolve = dns({});
    expect(await checkedAddresses('[fd00::5]', { allowHosts: ['[FD00::5]'], resolve })).toEqual([{ address: 'fd00::5', family: 6 }]);
    await expect(checkedAddresses('192.168.0.2', { allowHosts: [], resolve })).rejects.toThrow('192.168.0.2 is a private network address');
    expect(resolve.asked).toEqual([]);
  });

  it.each(['localhost', 'app.localhost', 'metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data'])('refuses the name %s before DNS, listed or not', async (host) => {
    const resolve = dns({ [host]: ['93.184.216.34'] });
    await expect(checkedAddresses(host, { allowHosts: [host], resolve })).rejects.toThrow(`${host} is a name for this machine or a cloud metadata service`);
    expect(resolve.asked).toEqual([]);
  });

  it('refuses a name under .internal unless it is listed', async () => {
    const resolve = dns({ 'git.internal': ['10.0.0.7'] });
    await expect(checkedAddresses('git.internal', { allowHosts: [], resolve })).rejects.toThrow('git.internal is a private network name (.internal)');
    expect(await checkedAddresses('git.internal', { allowHosts: ['git.internal'], resolve })).toEqual([{ address: '10.0.0.7', family: 4 }]);
  });

  it('says when a name does not resolve', async () => {
    await expect(checkedAddresses('nowhere.example', { allowHosts: [], resolve: dns({}) })).rejects.toBeInstanceOf(HostNotFound);
    await expect(checkedAddresses('empty.example', { allowHosts: [], resolve: async () => [] })).rejects.toThrow('empty.example could not be resolved');
  });
});
