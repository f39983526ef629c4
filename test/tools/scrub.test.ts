import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { scrubSecrets } from '../../src/tools/scrub.ts';

// Built from parts so that no scanner mistakes this file for a leak.
const join = (...parts: string[]) => parts.join('');

describe('scrubbing credentials from tool output', () => {
  it.each([
    ['a GitHub fine-grained token', join('github_pat_', '11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV'), '[redacted]'],
    ['a GitHub classic token', join('ghp_', 'abcdefghijklmnopqrstuvwxyz0123456789'), '[redacted]'],
    ['an AWS session key id', join('ASIA', 'IOSFODNN7EXAMPLE'), '[redacted]'],
    ['an AWS access key id', join('AKIA', 'IOSFODNN7EXAMPLE'), '[redacted]'],
    ['an AWS secret in an env line', join('AWS_SECRET_ACCESS_KEY=', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'), 'AWS_SECRET_ACCESS_KEY=[redacted]'],
    ['an AWS secret in a credentials file', join('aws_secret_access_key = ', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'), 'aws_secret_access_key = [redacted]'],
    ['an AWS secret in the CLI JSON', join('"SecretAccessKey": "', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', '",'), '"SecretAccessKey": "[redacted]",'],
    ['a Discord token starting with O', join('OTk5', 'OTk5OTk5OTk5OTk5OTk5OTk5.GAbCdE.', 'abcdefghijklmnopqrstuvwxyz0123456789AB'), '[redacted]'],
    ['a Discord token starting with M', join('MTk4', 'NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.', 'ZnCjm1XVW7vRze4b7Cq4se7kKWs'), '[redacted]'],
    ['a Stripe live secret key', join('sk_live_', '4eC39HqLyjWDarjtT1zdp7dc'), '[redacted]'],
    ['a Stripe restricted key', join('rk_live_', '4eC39HqLyjWDarjtT1zdp7dc'), '[redacted]'],
    ['a Slack webhook', join('https://hooks.slack.com/services/', 'T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'), 'https://hooks.slack.com/services/[redacted]'],
    ['a Slack bot token', join('xoxb-', '123456789012-1234567890123-abcdefghijklmnop'), '[redacted]'],
    [
      'a Bearer JWT',
      join('Authorization: Bearer ', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'),
      'Authorization: Bearer [redacted]',
    ],
    ['a JWT on its own', join('token=', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'), 'token=[redacted]'],
    ['an opaque Bearer token', join('-H "Authorization: Bearer ', 'ya29.a0AfH6SMBx3kq9z"'), '-H "Authorization: Bearer [redacted]"'],
    ['an https password', join('https://deploy:', 'hunter2hunter2', '@git.example.com/repo.git'), 'https://deploy:[redacted]@git.example.com/repo.git'],
    ['an ftp password', join('ftp://anna:', 's3cr3t', '@files.example.com/'), 'ftp://anna:[redacted]@files.example.com/'],
    ['a password holding an @', join('postgres://postgres:', 'p@ss', '@127.0.0.1:5432/db'), 'postgres://postgres:[redacted]@127.0.0.1:5432/db'],
    ['a password with no user', join('redis://:', 'topsecret', '@cache:6379'), 'redis://:[redacted]@cache:6379'],
    ['an OpenAI key', join('sk-proj-', 'abcdefghijklmnop1234'), '[redacted]'],
    ['a Telegram bot token', join('123456789:', 'AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw'), '[redacted]'],
  ])('masks %s', (_name, input, expected) => {
    expect(scrubSecrets(input)).toBe(expected);
  });

  it.each([
    ['a git commit SHA', 'commit 3b95caf0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6'],
    ['a UUID', 'id 123e4567-e89b-12d3-a456-426614174000'],
    ['base64 that is not a key', 'SGVsbG8sIHRoaXMgaXMganVzdCBzb21lIHRleHQu'],
    ['a 40-character base64 line without a label', 'data: QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0'],
    ['sk_test words in prose', 'Use an sk_test_ key (sk_test_example) while developing; never sk_live_ in tests.'],
    ['a URL without a password', 'https://example.com/a:b@c and http://host:8080/path@x and git@github.com:org/repo.git'],
    ['a URL with a user only', 'ssh://git@example.com/repo'],
    ['Bearer prose', 'The API expects Bearer authentication; send a Bearer token in the Authorization header.'],
    ['a hooks URL that is not Slack', 'https://hooks.example.com/services/T0/B0/abc'],
    ['a Discord-like sentence', 'Mention.example.com'],
    ['an AWS-like word', 'ASIAN food and AKIA is short'],
  ])('leaves %s unchanged', (_name, input) => {
    expect(scrubSecrets(input)).toBe(input);
  });

  describe("a persona's own secret values", () => {
    const secret = join('ghp_', 'not_really_a_token_0123');
    // Long enough that base64 wraps it over two lines.
    const long = join('-----key-', 'a'.repeat(30), 'b'.repeat(30), '-----');
    const encode = (command: string, value = secret) =>
      execFileSync('/bin/sh', ['-c', command], { env: { PATH: process.env.PATH, TOKEN: value } }).toString();

    it.each([
      ['as given', 'printf %s "$TOKEN"'],
      ['echoed through base64', 'echo "$TOKEN" | base64'],
      ['after one byte, through base64', 'printf "x%s" "$TOKEN" | base64'],
      ['after two bytes, through base64', 'printf "xy%s" "$TOKEN" | base64'],
      ['in URL-safe base64', 'printf "x%s" "$TOKEN" | base64 | tr "+/" "-_"'],
      ['in hex', 'printf %s "$TOKEN" | od -An -tx1 | tr -d " \\n"'],
      ['in upper-case hex', 'printf %s "$TOKEN" | od -An -tx1 | tr -d " \\n" | tr a-f A-F'],
    ])('are masked %s', (_how, command) => {
      const output = encode(command);
      const scrubbed = scrubSecrets(output, [secret]);
      expect(scrubbed).toContain('[redacted]');
      // Nothing left that decodes back to most of the secret.
      const left = scrubbed.replace(/\[redacted\]/g, '');
      expect(left.length).toBeLessThan(8);
    });

    it('are masked when base64 wraps them over lines', () => {
      const output = encode('echo "$TOKEN" | base64', long);
      expect(output.trim().split('\n')).toHaveLength(2);
      expect(scrubSecrets(output, [long]).replace(/\[redacted\]/g, '').trim().length).toBeLessThan(8);
    });

    it('leaves unrelated base64 and hex alone', () => {
      const output = encode('printf %s "something else entirely" | base64; printf %s "other" | od -An -tx1');
      expect(scrubSecrets(output, [secret])).toBe(output);
    });
  });
});
