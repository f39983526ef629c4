// Credential-looking strings are masked before tool output reaches the model or a chat: provider tokens by their
// shape, anything else by its label (`DB_PASSWORD=…`). Each rule is shaped so that its look-alikes survive: a git
// SHA, a UUID, base64 prose, `sk_test` in a sentence, a URL without a password, `max_tokens: 1024`, `${DB_PASSWORD}`.
// Tool output can be hostile, so every rule runs in time linear in the text: a pattern starts only where a run of its
// characters starts (a lookbehind), or its repetitions before a literal are bounded, so no run is rescanned from each
// of its positions.
const REDACTED = '[REDACTED]';

const PATTERNS: { pattern: RegExp; replace?: (match: string, ...groups: string[]) => string }[] = [
  { pattern: /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}/g }, // OpenAI / Anthropic keys
  { pattern: /\bxox[abeoprs]-[A-Za-z0-9-]{10,}/g }, // Slack tokens
  { pattern: /\bxapp-[A-Za-z0-9-]{10,}/g }, // Slack app tokens
  { pattern: /https:\/\/hooks\.slack\.com\/(services|workflows|triggers)\/T[A-Z0-9]+\/[A-Za-z0-9/]+/g, replace: (_m, kind) => `https://hooks.slack.com/${kind}/${REDACTED}` },
  // Telegram bot tokens, also inside the Bot API's URLs (`/bot123456789:AA…/getMe`), where no word boundary precedes.
  { pattern: /(?<![0-9])\d{6,12}:AA[A-Za-z0-9_-]{30,}/g },
  { pattern: /\b[MNO][A-Za-z\d_-]{23,27}\.[\w-]{6,7}\.[\w-]{27,40}/g }, // Discord bot tokens (the user id in base64)
  { pattern: /\bgh[pousr]_[A-Za-z0-9]{30,}/g }, // GitHub tokens
  { pattern: /\bgithub_pat_[A-Za-z0-9_]{30,}/g }, // GitHub fine-grained tokens
  { pattern: /\bglpat-[A-Za-z0-9_-]{20,}/g }, // GitLab tokens
  { pattern: /\bnpm_[A-Za-z0-9]{36}\b/g }, // npm tokens
  { pattern: /\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b/g }, // AWS access key ids (long-lived and session)
  // AWS secret access keys are 40 characters that look like any base64; only their label tells them apart
  // (`AWS_SECRET_ACCESS_KEY=`, `aws_secret_access_key = `, `"SecretAccessKey": "` in the CLI's JSON).
  {
    pattern: /((?:aws_?)?secret_?access_?key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])/gi,
    replace: (_m, label) => `${label}${REDACTED}`,
  },
  { pattern: /\b(?:sk|rk)_live_[A-Za-z0-9]{16,}/g }, // Stripe live secret and restricted keys
  { pattern: /\bwhsec_[A-Za-z0-9]{24,}/g }, // Stripe webhook secrets
  { pattern: /\bAIza[0-9A-Za-z_-]{35}\b/g }, // Google API keys
  // JWTs, wherever they appear. Only from the start of a run: `\b` would also match after every `-` in the run.
  { pattern: /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  // A bearer token: at least 16 characters with a digit or a token character, so "Bearer authentication" survives.
  {
    pattern: /\b(Bearer\s+)(?=[A-Za-z0-9._~+/-]*[0-9._~+/-])[A-Za-z0-9._~+/-]{16,}=*/g,
    replace: (_m, prefix) => `${prefix}${REDACTED}`,
  },
  // `scheme://user:password@` for any scheme; the password runs to the last `@` before the host. The scheme is
  // bounded: unbounded, it rescans a long `a+b+c…` run from every letter.
  {
    pattern: /(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,31}):\/\/([^:/\s@]*):([^\s/]+)@/gi,
    replace: (_m, scheme, user) => `${scheme}://${user}:${REDACTED}@`,
  },
];

/**
 * Masks credential patterns and the given secret values. The values are also masked in the encodings a command
 * can produce without thinking (`| base64`, `| xxd -p`, URL encoding), so `echo $TOKEN | base64` hides the token too.
 */
export function scrubSecrets(text: string, extraSecrets: string[] = []): string {
  let out = maskPrivateKeys(text);
  for (const { pattern, replace } of PATTERNS) {
    out = out.replace(pattern, replace ?? (() => REDACTED));
  }
  out = maskLabelledValues(out);
  for (const secret of extraSecrets) {
    if (secret.length < 6) continue;
    out = out.split(secret).join(REDACTED);
    for (const encoded of encodingsOf(secret)) out = out.replace(encoded, REDACTED);
  }
  return out;
}

const PEM_BEGIN = /-----BEGIN ((?:[A-Z0-9]+ ){0,3})PRIVATE KEY( BLOCK)?-----/g;
// What follows BEGIN in a key cut short (`head -c`, a truncated log): base64 lines and `Proc-Type: …` headers,
// with real or JSON-escaped line breaks.
const PEM_BODY = /(?:(?:\r?\n|\\r?\\n)?(?:[A-Za-z][A-Za-z-]{0,30}: [^\r\n\\]{0,200}|[A-Za-z0-9+/=]{1,128}))*/y;

/** Masks a PEM private key from BEGIN to END, or to the end of its body when the END line never comes. */
function maskPrivateKeys(text: string): string {
  let out = '';
  let copied = 0;
  const missing = new Set<string>(); // END lines already looked for to the end of the text
  const begins = new RegExp(PEM_BEGIN.source, 'g');
  for (let m = begins.exec(text); m; m = begins.exec(text)) {
    const endLine = `-----END ${m[1]}PRIVATE KEY${m[2] ?? ''}-----`;
    const found = missing.has(endLine) ? -1 : text.indexOf(endLine, begins.lastIndex);
    let end: number;
    if (found >= 0) {
      end = found + endLine.length;
    } else {
      missing.add(endLine);
      PEM_BODY.lastIndex = begins.lastIndex;
      PEM_BODY.exec(text);
      end = PEM_BODY.lastIndex;
    }
    out += text.slice(copied, m.index) + REDACTED;
    copied = end;
    begins.lastIndex = end;
  }
  return out + text.slice(copied);
}

// ---- Labelled values: `GITHUB_TOKEN=abc123def456`, `"password": "hunter2!"`, `Authorization: Basic dXNlcjpwYXNz`.

/**
 * An identifier ending in a credential word, then `:`, `=`, `:=` or `=>` (not `==` or `::`), with the quotes and
 * spaces around them. It starts only where an identifier starts, and the identifier is bounded, so a run is read once.
 * Whether the identifier really ends in the word (`secretKey`, `X-Api-Key`, not `monkey`) is decided in code.
 */
const LABEL = /(?<![\w.-])([\w.-]{0,120}?(?:key|token|secret|passw(?:or)?d|passphrase|pass|bearer|authorization))(\\?["']?[ \t]*(?::=|=>|:(?![:=])|=(?!=))[ \t]*)/gi;

/**
 * `password` words take any value that is not a placeholder, since people choose passwords; `key` words take only
 * values that look made by a machine, since keys and tokens are also names, types and keyboard keys.
 */
type LabelKind = 'password' | 'key';
// Longer words first, so that `dbpassword` ends in `password` before it ends in `pass`.
const LABEL_WORDS = new Map<string, LabelKind>([
  ['authorization', 'key'], ['passphrase', 'password'], ['password', 'password'], ['passwd', 'password'],
  ['bearer', 'key'], ['secret', 'password'], ['token', 'key'], ['pass', 'password'], ['key', 'key'],
]);
// Written as one word with the credential word: `apikey`, `AUTHTOKEN`, `clientsecret`, `dbpassword`.
const COMPOUND_PREFIXES = new Set([
  'access', 'admin', 'api', 'app', 'auth', 'bot', 'client', 'db', 'encryption', 'master', 'private', 'refresh', 'root',
  'secret', 'service', 'session', 'signing', 'user',
]);
// The word before the credential word that makes it something else: a database key, a page token, a public key.
const NOT_CREDENTIALS: Partial<Record<string, Set<string>>> = {
  key: new Set([
    'cache', 'cluster', 'column', 'composite', 'dedup', 'dedupe', 'dict', 'field', 'foreign', 'group', 'hash', 'hot',
    'i18n', 'idempotency', 'index', 'lock', 'lookup', 'map', 'message', 'object', 'order', 'partition', 'primary',
    'public', 'publishable', 'range', 'routing', 'row', 'shard', 'shortcut', 'sort', 'translation', 'unique',
  ]),
  // Pagination cursors (`NextToken`) and a tokenizer's special tokens (`eos_token`) are not credentials.
  token: new Set([
    'bos', 'cancel', 'cancellation', 'cls', 'continuation', 'design', 'end', 'eos', 'mask', 'max', 'next', 'pad',
    'page', 'pagination', 'resume', 'sep', 'special', 'start', 'stop', 'sync', 'unk',
  ]),
};

// Placeholders, flags and words a template or an error message puts where the value goes.
const PLACEHOLDER_WORDS = new Set([
  'absent', 'any', 'blank', 'bool', 'boolean', 'bytes', 'change-me', 'change_me', 'changeit', 'changeme', 'default',
  'disabled', 'dummy', 'empty', 'enabled', 'example', 'expired', 'false', 'fixme', 'hidden', 'incorrect', 'int',
  'integer', 'invalid', 'masked', 'missing', 'nil', 'none', 'null', 'number', 'object', 'optional', 'passphrase',
  'passwd', 'password', 'placeholder', 'present', 'provided', 'required', 'revoked', 'sample', 'secret', 'str',
  'string', 'tbd', 'todo', 'token', 'true', 'undefined', 'unknown', 'unset',
]);

const SCHEME = /(?:Basic|Bearer|Bot|Digest|Negotiate|NTLM|OAuth|Token)[ \t]+(?=[^\s"'`])/iy;
const UNQUOTED = /[^\s"'`,;&)\]}<>\\]{0,1024}/y;
// Up to the closing quote on the same line: plain quotes, and JSON-escaped ones (`{\"password\":\"…\"}`).
const QUOTED: Record<string, RegExp> = {
  '"': /[^"\n]{0,1024}(?=")/y,
  "'": /[^'\n]{0,1024}(?=')/y,
  '`': /[^`\n]{0,1024}(?=`)/y,
  '\\"': /[^"\\\n]{0,1024}(?=\\")/y,
  "\\'": /[^'\\\n]{0,1024}(?=\\')/y,
};

/** Masks the value after a credential label, keeping the label, the separator, the quotes and an auth scheme. */
function maskLabelledValues(text: string): string {
  let out = '';
  let copied = 0;
  const labels = new RegExp(LABEL.source, 'gi');
  const kinds = new Map<string, LabelKind | undefined>(); // output repeats its labels: an env dump, a log
  for (let m = labels.exec(text); m; m = labels.exec(text)) {
    const label = m[1]!;
    if (!kinds.has(label)) kinds.set(label, labelKind(label));
    const kind = kinds.get(label);
    if (!kind) continue;
    const value = readValue(text, labels.lastIndex);
    // A value that is not masked is still passed over, so each character is read as a value at most once.
    labels.lastIndex = Math.max(labels.lastIndex, value.end);
    if (!isSecretValue(value.text, kind)) continue;
    out += text.slice(copied, value.start) + REDACTED;
    copied = value.end;
  }
  return out + text.slice(copied);
}

/** Whether `label` ends in a credential word, and which kind; undefined for `monkey`, `max_tokens`, `primary_key`. */
function labelKind(label: string): LabelKind | undefined {
  const words = label
    .split(/[_.-]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])/)
    .filter(Boolean)
    .map((word) => word.toLowerCase());
  const last = words.at(-1) ?? '';
  const previous = words.at(-2);
  let word: string | undefined = LABEL_WORDS.has(last) ? last : undefined;
  if (!word) {
    word = [...LABEL_WORDS.keys()].find((w) => last.endsWith(w) && COMPOUND_PREFIXES.has(last.slice(0, -w.length)));
    if (!word) return undefined;
  } else if (previous && NOT_CREDENTIALS[word]?.has(previous)) {
    return undefined;
  } else if (word === 'pass' && !previous) {
    return undefined; // `pass: 12` in a test summary; `DB_PASS=` and `smtpPass:` are passwords
  }
  return LABEL_WORDS.get(word);
}

/** The value starting at `at`: inside its quotes if it is quoted, after an auth scheme if it has one. */
function readValue(text: string, at: number): { start: number; end: number; text: string } {
  const quote = text.startsWith('\\', at) ? text.slice(at, at + 2) : text.charAt(at);
  const quoted = QUOTED[quote];
  let start = quoted ? at + quote.length : at;
  SCHEME.lastIndex = start;
  if (SCHEME.test(text)) start = SCHEME.lastIndex;
  const body = quoted ?? UNQUOTED;
  body.lastIndex = start;
  let match = body.exec(text);
  if (!match && quoted) {
    // No closing quote on the line: read on as if unquoted.
    UNQUOTED.lastIndex = start;
    match = UNQUOTED.exec(text);
  }
  let end = start + (match?.[0].length ?? 0);
  if (!quoted) while (end > start && text.charCodeAt(end - 1) === 46) end--; // the full stop ending a sentence
  return { start, end, text: text.slice(start, end) };
}

/** Whether a labelled value is a secret rather than a placeholder, a reference, a name or a flag. */
function isSecretValue(value: string, kind: LabelKind): boolean {
  if (value.length < 6) return false;
  if (kind === 'key' && !looksMachineMade(value)) return false;
  return !PLACEHOLDER_WORDS.has(value.toLowerCase()) && !PLACEHOLDER.test(value) && !REFERENCE.test(value);
}

/** Letters and digits mixed, or a long run of both cases (base64, such as a Basic credential), with no spaces. */
function looksMachineMade(value: string): boolean {
  if (/\s/.test(value)) return false;
  let digits = 0;
  let upper = 0;
  let lower = 0;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code >= 48 && code <= 57) digits++;
    else if (code >= 65 && code <= 90) upper++;
    else if (code >= 97 && code <= 122) lower++;
  }
  return (digits >= 2 && upper + lower >= 2) || (value.length >= 12 && upper > 0 && lower > 0);
}

// `********`, `xxxx-xxxx`, `[REDACTED]`, `<your password>`, `${DB_PASSWORD}`, `$DB_PASSWORD`, `%DB_PASSWORD%`,
// `{{ .Values.password }}`, `your_token_here`.
const PLACEHOLDER = new RegExp(
  [
    String.raw`^(.)\1*$`,
    String.raw`^[*•xX#._-]+$`,
    String.raw`redacted`,
    String.raw`^[<[{%]`,
    String.raw`^\$(?:[{(]|[A-Za-z_])`,
    String.raw`^(?:your|insert|enter|replace)[-_ ]`,
    String.raw`[-_ ]here$`,
  ].join('|'),
  'i',
);

// A value that names where the secret is rather than being it: code (`getApiKey(config)`, `Token::new(raw)`,
// `process.env.TOKEN`, `passwordFromEnv`, `AccessToken`), an environment variable's name (`DB_PASSWORD`), a URL or a
// file. An absolute path needs a `.`, `_` or `-` somewhere, which standard base64 (the other thing with `/`) never has.
const REFERENCE = new RegExp(
  [
    String.raw`^[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*[([]`,
    String.raw`^[A-Za-z_$]+(?:\.[A-Za-z_$]+)+$`,
    String.raw`^[a-z]+(?:[A-Z][a-z]+)+$`,
    String.raw`^(?:[A-Z][a-z]+){2,}$`,
    String.raw`^[A-Z]+(?:_[A-Z]+)+$`,
    String.raw`^[A-Za-z][A-Za-z0-9+.-]*:\/\/`,
    String.raw`^(?:~|\.\.?)\/`,
    String.raw`^(?=[^+=]*$)(?=.*[._-])\/[^/]+\/.`,
  ].join('|'),
);

/** Patterns for a secret's base64 (standard and URL-safe, at each of the three byte alignments), hex and URL encodings. */
function encodingsOf(secret: string): RegExp[] {
  const bytes = Buffer.from(secret, 'utf8');
  const cores = new Set<string>();
  for (const offset of [0, 1, 2]) {
    const core = base64Core(bytes, offset);
    if (core.length >= 8) {
      cores.add(core);
      cores.add(core.replace(/\+/g, '-').replace(/\//g, '_'));
    }
  }
  const hex = bytes.toString('hex');
  const patterns = [...cores].map((core) => wrappable(core, ''));
  patterns.push(wrappable(hex, 'i'));
  const uri = encodeURIComponent(secret);
  if (uri !== secret) patterns.push(new RegExp(escapeRegExp(uri), 'gi'));
  // As a JSON string carries it: quotes and backslashes escaped, and (Go's encoder) & < > as \u0026 \u003c \u003e.
  const json = JSON.stringify(secret).slice(1, -1);
  if (json !== secret) patterns.push(new RegExp(escapeRegExp(json), 'g'));
  const goJson = json.replace(/[&<>]/g, (ch) => `\\u00${ch.charCodeAt(0).toString(16)}`);
  if (goJson !== json) patterns.push(new RegExp(escapeRegExp(goJson), 'gi'));
  return patterns;
}

/**
 * The base64 characters that depend on the secret alone when it starts `offset` bytes into a 3-byte group: the
 * characters mixing in unknown bytes before or after it (a prefix, echo's newline) are left off.
 */
function base64Core(bytes: Buffer, offset: number): string {
  const padded = Buffer.concat([Buffer.alloc(offset), bytes]);
  const encoded = padded.toString('base64').replace(/=+$/, '');
  const skip = [0, 2, 3][offset]!;
  const whole = Math.floor(padded.length / 3) * 4;
  const tail = [0, 1, 2][padded.length % 3]!;
  return encoded.slice(skip, whole + tail);
}

/** Matches `text` even when a tool wrapped it over lines (base64 at 76 columns, `xxd -p` at 60). */
function wrappable(text: string, flags: string): RegExp {
  return new RegExp([...text].map(escapeRegExp).join('(?:\\r?\\n)?'), `g${flags}`);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
