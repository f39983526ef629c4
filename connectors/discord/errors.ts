// Discord's errors as Parlor's: PlatformError for the delivery path (what may be retried), ConfigError for what the
// operator must fix before Parlor can connect.
import { DiscordAPIError, HTTPError, RateLimitError } from 'discord.js';
import { ConfigError } from '#src/config/errors.ts';
import { PlatformError } from '#src/connector.ts';
import { MESSAGE_CONTENT_REFUSED } from './intents.ts';

/** Invalid Form Body naming the content: what Discord says of text it will not take. */
export function refusesContent(err: unknown): boolean {
  if (!(err instanceof DiscordAPIError) || err.code !== 50035) return false;
  const errors = (err.rawError as { errors?: Record<string, unknown> }).errors;
  return !errors || 'content' in errors;
}

/** Once part of a message is out, retrying the whole send would repeat it: such a failure is final. */
export function toPlatformError(err: unknown, method: string, partlySent: boolean): PlatformError {
  if (err instanceof PlatformError) return err;
  if (err instanceof DiscordAPIError) {
    return new PlatformError(
      { platform: 'discord', method, status: err.status, retryable: !partlySent && (err.status === 429 || err.status >= 500), message: `${err.message} (${err.code})` },
      { cause: err },
    );
  }
  if (err instanceof RateLimitError) {
    return new PlatformError({ platform: 'discord', method, status: 429, retryAfterMs: err.retryAfter, retryable: !partlySent, message: err.message }, { cause: err });
  }
  if (err instanceof HTTPError) {
    return new PlatformError({ platform: 'discord', method, status: err.status, retryable: !partlySent && err.status >= 500, message: err.message }, { cause: err });
  }
  // Network errors (discord.js has retried them already).
  return new PlatformError({ platform: 'discord', method, retryable: !partlySent, message: describe(err) }, { cause: err });
}

export function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A refused token or intent is the operator's to fix: start-up stops with what to do. */
export function startError(err: unknown): unknown {
  if (err instanceof ConfigError) return err;
  const code = (err as { code?: unknown }).code;
  if (code === 'TokenInvalid' || (err instanceof DiscordAPIError && err.status === 401)) {
    return new ConfigError(
      'DISCORD_BOT_TOKEN was refused by Discord (401 Unauthorized); in the Developer Portal open the application → Bot → Reset Token, and set DISCORD_BOT_TOKEN to the new token',
    );
  }
  if (err instanceof Error && /disallowed intents/i.test(err.message)) return new ConfigError(MESSAGE_CONTENT_REFUSED);
  return err;
}
