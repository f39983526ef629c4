// Credential-looking strings are masked before tool output reaches the model or a chat. Each pattern is shaped so
// that its look-alikes survive: a git SHA, a UUID, base64 prose, `sk_test` in a sentence, a URL without a password.
const REDACTED = '[redacted]';

const PATTERNS: { pattern: RegExp; replace?: (match: string, ...groups: string[]) => string }[] = [
  { pattern: /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}/g }, // OpenAI / Anthropic keys
  { pattern: /\bxox[abeoprs]-[A-Za-z0-9-]{10,}/g }, // Slack tokens
  { pattern: /\bxapp-[A-Za-z0-9-]{10,}/g }, // Slack app tokens
  { pattern: /https:\/\/hooks\.slack\.com\/(services|workflows|triggers)\/T[A-Z0-9]+\/[A-Za-z0-9/]+/g, replace: (_m, kind) => `https://hooks.slack.com/${kind}/${REDACTED}` },
  { pattern: /\b\d{6,12}:AA[A-Za-z0-9_-]{30,}/g }, // Telegram bot tokens
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
  { pattern: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g }, // JWTs, wherever they appear
  // A bearer token: at least 16 characters with a digit or a token character, so "Bearer authentication" survives.
  {
    pattern: /\b(Bearer\s+)(?=[A-Za-z0-9._~+/-]*[0-9._~+/-])[A-Za-z0-9._~+/-]{16,}=*/g,
    replace: (_m, prefix) => `${prefix}${REDACTED}`,
  },
  { pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g },
  // `scheme://user:password@` for any scheme; the password runs to the last `@` before the host.
  {
    pattern: /\b([a-z][a-z0-9+.-]*):\/\/([^:/\s@]*):([^\s/]+)@/gi,
    replace: (_m, scheme, user) => `${scheme}://${user}:${REDACTED}@`,
  },
];

/**
 * Masks credential patterns and the given secret values. The values are also masked in the encodings a command
 * can produce without thinking (`| base64`, `| xxd -p`, URL encoding), so `echo $TOKEN | base64` hides the token too.
 */
export function scrubSecrets(text: string, extraSecrets: string[] = []): string {
  let out = text;
  for (const { pattern, replace } of PATTERNS) {
    out = out.replace(pattern, replace ?? (() => REDACTED));
  }
  for (const secret of extraSecrets) {
    if (secret.length < 6) continue;
    out = out.split(secret).join(REDACTED);
    for (const encoded of encodingsOf(secret)) out = out.replace(encoded, REDACTED);
  }
  return out;
}

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
