import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { scrubSecrets } from '../../src/tools/scrub.ts';

// Built from parts so that no scanner mistakes this file for a leak.
const join = (...parts: string[]) => parts.join('');

describe('scrubbing credentials from tool output', () => {
  it.each([
    ['a GitHub fine-grained token', join('github_pat_', '11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV'), '[REDACTED]'],
    ['a GitHub classic token', join('ghp_', 'abcdefghijklmnopqrstuvwxyz0123456789'), '[REDACTED]'],
    ['an AWS session key id', join('ASIA', 'IOSFODNN7EXAMPLE'), '[REDACTED]'],
    ['an AWS access key id', join('AKIA', 'IOSFODNN7EXAMPLE'), '[REDACTED]'],
    ['an AWS secret in an env line', join('AWS_SECRET_ACCESS_KEY=', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'), 'AWS_SECRET_ACCESS_KEY=[REDACTED]'],
    ['an AWS secret in a credentials file', join('aws_secret_access_key = ', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'), 'aws_secret_access_key = [REDACTED]'],
    ['an AWS secret in the CLI JSON', join('"SecretAccessKey": "', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', '",'), '"SecretAccessKey": "[REDACTED]",'],
    ['a Discord token starting with O', join('OTk5', 'OTk5OTk5OTk5OTk5OTk5OTk5.GAbCdE.', 'abcdefghijklmnopqrstuvwxyz0123456789AB'), '[REDACTED]'],
    ['a Discord token starting with M', join('MTk4', 'NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.', 'ZnCjm1XVW7vRze4b7Cq4se7kKWs'), '[REDACTED]'],
    ['a Stripe live secret key', join('sk_live_', '4eC39HqLyjWDarjtT1zdp7dc'), '[REDACTED]'],
    ['a Stripe restricted key', join('rk_live_', '4eC39HqLyjWDarjtT1zdp7dc'), '[REDACTED]'],
    ['a Slack webhook', join('https://hooks.slack.com/services/', 'T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'), 'https://hooks.slack.com/services/[REDACTED]'],
    ['a Slack bot token', join('xoxb-', '123456789012-1234567890123-abcdefghijklmnop'), '[REDACTED]'],
    [
      'a Bearer JWT',
      join('Authorization: Bearer ', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'),
      'Authorization: Bearer [REDACTED]',
    ],
    ['a JWT on its own', join('token=', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'), 'token=[REDACTED]'],
    ['an opaque Bearer token', join('-H "Authorization: Bearer ', 'ya29.a0AfH6SMBx3kq9z"'), '-H "Authorization: Bearer [REDACTED]"'],
    ['an https password', join('https://deploy:', 'hunter2hunter2', '@git.example.com/repo.git'), 'https://deploy:[REDACTED]@git.example.com/repo.git'],
    ['an ftp password', join('ftp://anna:', 's3cr3t', '@files.example.com/'), 'ftp://anna:[REDACTED]@files.example.com/'],
    ['a password holding an @', join('postgres://postgres:', 'p@ss', '@127.0.0.1:5432/db'), 'postgres://postgres:[REDACTED]@127.0.0.1:5432/db'],
    ['a password with no user', join('redis://:', 'topsecret', '@cache:6379'), 'redis://:[REDACTED]@cache:6379'],
    ['an OpenAI key', join('sk-proj-', 'abcdefghijklmnop1234'), '[REDACTED]'],
    ['a Telegram bot token', join('123456789:', 'AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw'), '[REDACTED]'],
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
      expect(scrubbed).toContain('[REDACTED]');
      // Nothing left that decodes back to most of the secret.
      const left = scrubbed.replace(/\[REDACTED\]/g, '');
      expect(left.length).toBeLessThan(8);
    });

    it('are masked when base64 wraps them over lines', () => {
      const output = encode('echo "$TOKEN" | base64', long);
      expect(output.trim().split('\n')).toHaveLength(2);
      expect(scrubSecrets(output, [long]).replace(/\[REDACTED\]/g, '').trim().length).toBeLessThan(8);
    });

    it('leaves unrelated base64 and hex alone', () => {
      const output = encode('printf %s "something else entirely" | base64; printf %s "other" | od -An -tx1');
      expect(scrubSecrets(output, [secret])).toBe(output);
    });
  });
});

describe('scrubbing credentials by shape and by label', () => {
  const pem = (kind: string, body: string) => join('-----BEGIN ', kind, 'PRIVATE KEY-----\n', body, '\n-----END ', kind, 'PRIVATE KEY-----');
  const jwt = join('eyJhbGciOiJIUzI1NiJ9', '.eyJzdWIiOiJwYXJsb3IifQ', '.c2lnbmF0dXJlXzEyMzQ1Njc4');

  // Each row: the tool's output, and what reaches the model. A label and its separator stay, so the line still reads.
  it.each([
    // Provider tokens, masked wherever they appear.
    [join('OPENAI_API_KEY=', 'sk-', 'Xk29fjQ81LmZp0Rt5Vw7Yb3N'), 'OPENAI_API_KEY=[REDACTED]'],
    [join('using sk-', 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL for the call'), 'using [REDACTED] for the call'],
    [join('x-api-key: ', 'sk-ant-', 'api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345'), 'x-api-key: [REDACTED]'],
    [join('remote: ', 'ghp_', 'abcdefghijklmnopqrstuvwxyz0123456789', '@github.com'), 'remote: [REDACTED]@github.com'],
    [join('oauth ', 'gho_', '16C7e42F292c6912E7710c838347Ae178B4a'), 'oauth [REDACTED]'],
    [join('user-to-server ', 'ghu_', '16C7e42F292c6912E7710c838347Ae178B4a'), 'user-to-server [REDACTED]'],
    [join('GITHUB_TOKEN: ', 'ghs_', '16C7e42F292c6912E7710c838347Ae178B4a'), 'GITHUB_TOKEN: [REDACTED]'],
    [join('refresh ', 'ghr_', '1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498'), 'refresh [REDACTED]'],
    [join('SLACK_BOT_TOKEN=', 'xoxb-', '2048-1234567890-AbCdEfGhIjKlMnOp'), 'SLACK_BOT_TOKEN=[REDACTED]'],
    [join('app ', 'xoxa-', '2-1234567890-AbCdEfGhIjKl'), 'app [REDACTED]'],
    [join('user ', 'xoxp-', '1234567890-0987654321-AbCdEfGhIjKl'), 'user [REDACTED]'],
    [join('refresh ', 'xoxr-', '1234567890-AbCdEfGhIjKlMnOp'), 'refresh [REDACTED]'],
    [join('SLACK_APP_TOKEN=', 'xapp-', '1-A0123456789-1234567890123-abcdef0123456789'), 'SLACK_APP_TOKEN=[REDACTED]'],
    [join('aws_access_key_id = ', 'AKIA', 'Z3BQ7XN2K5M4R8TW'), 'aws_access_key_id = [REDACTED]'],
    [join('curl https://api.telegram.org/bot', '123456789:', 'AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw', '/getMe'), 'curl https://api.telegram.org/bot[REDACTED]/getMe'],
    [`"id_token": "${jwt}"`, '"id_token": "[REDACTED]"'],
    [`session=${jwt}; Path=/`, 'session=[REDACTED]; Path=/'],
    // Private keys: whole, cut short, inside JSON, and found by grep.
    [`cat key.pem\n${pem('RSA ', 'MIIEowIBAAKCAQEAx4UbaDzY\nq1w2e3r4t5y6u7i8o9p0==')}\ndone`, 'cat key.pem\n[REDACTED]\ndone'],
    [pem('OPENSSH ', 'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ'), '[REDACTED]'],
    [join('$ head -c 120 id_rsa\n-----BEGIN ', 'ENCRYPTED PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nMIIFHDBOBgkqhkiG9w0BBQ0wQTAp'), '$ head -c 120 id_rsa\n[REDACTED]'],
    [join('{"private_key": "-----BEGIN ', 'PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n-----END ', 'PRIVATE KEY-----\\n"}'), '{"private_key": "[REDACTED]\\n"}'],
    [join('./a.pem:-----BEGIN ', 'EC PRIVATE KEY-----\n./b.txt:hello'), './a.pem:[REDACTED]\n./b.txt:hello'],
    // Labelled values: the label is a credential word or an identifier ending in one.
    ['GITHUB_TOKEN=abc123def456', 'GITHUB_TOKEN=[REDACTED]'],
    ['"password": "hunter2!"', '"password": "[REDACTED]"'],
    ['api_key: 9f8e7d6c5b4a', 'api_key: [REDACTED]'],
    ['Authorization: Basic dXNlcjpwYXNz', 'Authorization: Basic [REDACTED]'],
    ['client_secret=Qm9vYmFy42xyz&grant_type=client_credentials', 'client_secret=[REDACTED]&grant_type=client_credentials'],
    ["DB_PASSWORD='p@ss w0rd'", "DB_PASSWORD='[REDACTED]'"],
    ['X-Api-Key: 3f9a8c2e71b04d6e', 'X-Api-Key: [REDACTED]'],
    ['MY_SERVICE_TOKEN=tok_8f7e6d5c', 'MY_SERVICE_TOKEN=[REDACTED]'],
    ['secretKey: "wJalrXUtnFEMI42"', 'secretKey: "[REDACTED]"'],
    ['const apiKey = "a1b2c3d4e5f6";', 'const apiKey = "[REDACTED]";'],
    ['APIKEY=Zx81Qw72Er63', 'APIKEY=[REDACTED]'],
    ['mysql --password=hunter22 -h db', 'mysql --password=[REDACTED] -h db'],
    ['deploy --api-key=abc123def456 --yes', 'deploy --api-key=[REDACTED] --yes'],
    ['GET /v1/me?access_token=EAAB12cd34&fields=id', 'GET /v1/me?access_token=[REDACTED]&fields=id'],
    ['export SMTP_PASSWORD="correct horse battery staple"', 'export SMTP_PASSWORD="[REDACTED]"'],
    ["'password' => 's3cr3t!!',", "'password' => '[REDACTED]',"],
    ['token := "ab12cd34ef56"', 'token := "[REDACTED]"'],
    ['{\\"password\\":\\"hunter22\\"}', '{\\"password\\":\\"[REDACTED]\\"}'],
    ['Proxy-Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l', 'Proxy-Authorization: Basic [REDACTED]'],
    ['"Authorization": "Bearer abc123def"', '"Authorization": "Bearer [REDACTED]"'],
    ['Authorization: token 0123abcd4567', 'Authorization: token [REDACTED]'],
    ['auth_token: 5c6d7e8f9a0b', 'auth_token: [REDACTED]'],
    ['refresh_token=1//0gAbC-dEf42', 'refresh_token=[REDACTED]'],
    ['bearer: abc123XYZ789', 'bearer: [REDACTED]'],
    ['DB_PASS=hunter22', 'DB_PASS=[REDACTED]'],
    ['smtpPass: Tr0ub4dor', 'smtpPass: [REDACTED]'],
    ['passwd: letmein99', 'passwd: [REDACTED]'],
    ['passphrase = "open sesame"', 'passphrase = "[REDACTED]"'],
    ['  password: cGFzc3dvcmQxMjM=', '  password: [REDACTED]'],
    ['"Env": ["POSTGRES_PASSWORD=hunter22", "PGDATA=/data"]', '"Env": ["POSTGRES_PASSWORD=[REDACTED]", "PGDATA=/data"]'],
    ['Set GITHUB_TOKEN=abc123def456.', 'Set GITHUB_TOKEN=[REDACTED].'],
    ['password: sunshine', 'password: [REDACTED]'],
    ['Password: hunter2 # prod', 'Password: [REDACTED] # prod'],
    ['privateKey: "9f8e7d6c5b4a3f2e"', 'privateKey: "[REDACTED]"'],
    ['token: 123e4567-e89b-12d3-a456-426614174000', 'token: [REDACTED]'],
    ['session_key=Zm9vYmFyYmF6cXV4', 'session_key=[REDACTED]'],
    ['$password = "hunter22";', '$password = "[REDACTED]";'],
    ['TOKEN=ab12cd34ef56 ./deploy.sh', 'TOKEN=[REDACTED] ./deploy.sh'],
    ['Authorization: Bearer abc123xyz', 'Authorization: Bearer [REDACTED]'],
  ])('masks %j', (input, expected) => {
    expect(scrubSecrets(input)).toBe(expected);
  });

  // Each row: output that only looks like a credential, and why it reaches the model unchanged.
  it.each([
    ['max_tokens: 1024', '"tokens" is not "token"'],
    ['"max_tokens": 4096', '"tokens" is not "token"'],
    ['--max-tokens=1024', '"tokens" is not "token"'],
    ['token_count = 12', 'the identifier ends in "count"'],
    ['SELECT id, password_hash FROM users', 'the identifier ends in "hash", and nothing is assigned'],
    ['PASSWORD_MIN_LENGTH=12', 'the identifier ends in "length"'],
    ['the secret is out', 'no separator'],
    ['primary key (id)', 'no separator'],
    ['keyboard: us', '"keyboard" does not end in "key"'],
    ['author: Jane', '"author" is not "authorization"'],
    ['monkey=5', 'a word merely ending in "key"'],
    ['turkey: roast', 'a word merely ending in "key"'],
    ['tokenizer: cl100k_base', '"tokenizer" is not "token"'],
    ['keys: [a, b]', 'plural'],
    ['secrets: inherit', 'plural'],
    ['name: parlor-bot', 'an ordinary YAML key'],
    ['key: value', 'too short, and a word'],
    ['key: ArrowDown', 'a key label takes only a machine-made value'],
    ['token: IDENTIFIER', 'a key label takes only a machine-made value'],
    ['accessToken: AccessToken;', 'a type name'],
    ['token: null', 'a placeholder'],
    ['password: ""', 'empty'],
    ['secret = true', 'a flag'],
    ['password: ${DB_PASSWORD}', 'a reference'],
    ['password=$DB_PASSWORD', 'a reference'],
    ['secret: ${{ secrets.DEPLOY_KEY }}', 'a reference'],
    ['password: DB_PASSWORD', "an environment variable's name"],
    ['password: <your password>', 'a placeholder'],
    ['password: your_password_here', 'a placeholder'],
    ['password: ********', 'already masked'],
    ['password: xxxxxxxx', 'already masked'],
    ['password: changeme', 'a placeholder'],
    ['password: required', "a validator's word"],
    ['password: string;', 'a type'],
    ['apiKey = getApiKey(config)', 'code'],
    ['let token = Token::new(raw_bytes42)', 'code'],
    ['token = process.env.GITHUB_TOKEN', 'code'],
    ['key={item.id}', 'code'],
    ['if (token === expected42)', 'a comparison, not an assignment'],
    ['password != old_password1', 'a comparison, not an assignment'],
    ['cache_key: users:page:42', 'a cache key'],
    ['sort_key = created_at_2024', 'a database key'],
    ['public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxTz1', 'a public key'],
    ['"next_token": "AbC123xyz789"', 'a pagination cursor'],
    ['"eos_token": "</s>"', "a tokenizer's special token"],
    ['token_type: Bearer', 'the identifier ends in "type"'],
    ['secretName: db-credentials', 'the identifier ends in "name"'],
    ['pass: 12 fail: 0', '"pass" alone is a test count'],
    ['bypass=true', 'a word merely ending in "pass"'],
    ['PWD=/home/jane/project', 'the working directory'],
    ['SSL_KEY=/etc/ssl/private/server.key', 'a file'],
    ['ssh_key: ~/.ssh/id_ed25519', 'a file'],
    ['commit 3b95caf0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6 (HEAD -> main)', 'a git SHA'],
    ['request_id: 123e4567-e89b-12d3-a456-426614174000', 'a UUID under an ordinary label'],
    ['VGhpcyBpcyBqdXN0IHNvbWUgYmFzZTY0IHByb3NlLCBub3QgYSBrZXku', 'base64 prose'],
    ['Stripe test keys start with sk_test; use sk_test keys in CI.', 'sk_test in a sentence'],
    ['git clone https://deploy@github.com/org/repo.git', 'a URL without a password'],
    ['Use Bearer authentication: send the token in the Authorization header.', 'prose'],
    ['time=12:30:45', 'a time'],
    ['started_at: 2024-05-01T12:30:45Z', 'an ISO date and time'],
  ])('leaves %j unchanged (%s)', (input) => {
    expect(scrubSecrets(input)).toBe(input);
  });

  it('changes nothing when run over its own output', () => {
    const once = scrubSecrets('GITHUB_TOKEN=abc123def456\n"password": "hunter2!"\nAuthorization: Basic dXNlcjpwYXNz');
    expect(scrubSecrets(once)).toBe(once);
  });

  describe('in time linear in the text', () => {
    const megabyte = 1 << 20;
    const fill = (unit: string) => unit.repeat(Math.ceil(megabyte / unit.length)).slice(0, megabyte);
    // Shapes that made earlier patterns rescan the rest of the text from every position.
    it.each([
      ['a= repeated', fill('a=')],
      ['token= repeated', fill('token=')],
      ['password: repeated', fill('password: ')],
      ['an unclosed quote after a label', fill('key="x ')],
      ['base64 with + and /', fill('QUJDREVGR0hJSktMTU5P+UFFSU1RVVldYWVo0/')],
      ['URL-safe base64 starting eyJ', fill('eyJ-')],
      ['BEGIN lines with no END', fill('-----BEGIN PRIVATE KEY-----\n')],
      ['a mix of all of these', fill('a=token=eyJ-QUJD+RE/ab+cd://x:-----BEGIN PRIVATE KEY----- password: "')],
    ])('scrubs a megabyte of %s well under a second', (_shape, input) => {
      scrubSecrets(input.slice(0, 4096)); // compile the patterns first
      const started = performance.now();
      scrubSecrets(input, ['not-in-the-text-0123']);
      expect(performance.now() - started).toBeLessThan(1000);
    });
  });
});

describe('a secret as JSON carries it', () => {
  it('is masked with its quotes and backslashes escaped, and with & < > as Go writes them', () => {
    const secret = 'Sup3r&"quoted"\\path<x>';
    const asJson = JSON.stringify({ token: secret });
    expect(scrubSecrets(asJson, [secret])).toBe('{"token":"[REDACTED]"}');
    const goStyle = JSON.stringify(secret).slice(1, -1).replace(/&/g, '\\u0026').replace(/</g, '\\u003c').replace(/>/g, '\\u003e');
    expect(scrubSecrets(`value: "${goStyle}"`, [secret])).toBe('value: "[REDACTED]"');
  });
});
