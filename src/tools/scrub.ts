// Credential-looking strings are masked before tool output reaches the model or a chat.
const PATTERNS: RegExp[] = [
  /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}/g, // OpenAI / Anthropic keys
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g, // Slack tokens
  /\bxapp-[A-Za-z0-9-]{10,}/g, // Slack app tokens
  /\b\d{6,12}:AA[A-Za-z0-9_-]{30,}/g, // Telegram bot tokens
  /\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,40}/g, // Discord bot tokens
  /\bgh[pousr]_[A-Za-z0-9]{30,}/g, // GitHub tokens
  /\bAKIA[0-9A-Z]{16}\b/g, // AWS access key ids
  /\bAIza[0-9A-Za-z_-]{35}\b/g, // Google API keys
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  /\b(postgres(?:ql)?|mysql|mongodb(?:\+srv)?|redis|amqp):\/\/([^:/\s]+):([^@\s]+)@/g,
];

export function scrubSecrets(text: string, extraSecrets: string[] = []): string {
  let out = text;
  for (const pattern of PATTERNS) {
    out = out.replace(pattern, (match, scheme?: string, user?: string) =>
      typeof scheme === 'string' && typeof user === 'string' && match.includes('://') ? `${scheme}://${user}:[redacted]@` : '[redacted]',
    );
  }
  for (const secret of extraSecrets) {
    if (secret.length >= 6) out = out.split(secret).join('[redacted]');
  }
  return out;
}
