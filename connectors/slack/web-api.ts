// Bolt's Web API client as Parlor uses it: its logger, its retries, and its errors as Parlor's.
import { LogLevel, webApi, type Logger as BoltLogger } from '@slack/bolt';
import type { Logger } from 'pino';
import { PlatformError } from '#src/connector.ts';
import { ConfigError } from '#src/config/errors.ts';

/** Web API errors that mean the token itself is wrong, not the network. */
const TOKEN_ERRORS = new Set(['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired', 'not_allowed_token_type']);
/**
 * Few, short retries: web-api's default retries for about 30 minutes, long after the outbound ledger has given up
 * on the call and may have sent it again. The ledger, not the client, is the guard against a double post.
 */
export const DEFAULT_RETRIES = { retries: 2, minTimeout: 500, maxTimeout: 3000 };

/** pino behind the Logger Bolt, socket-mode and web-api share; their `info` lines are chatter, so debug. */
export function boltLogger(log: Logger): BoltLogger {
  const line = (level: 'debug' | 'warn' | 'error') => (...msg: unknown[]) => log[level](msg.map((m) => (m instanceof Error ? m.message : String(m))).join(' '));
  return { debug: line('debug'), info: line('debug'), warn: line('warn'), error: line('error'), setLevel: () => undefined, getLevel: () => LogLevel.DEBUG, setName: () => undefined };
}


export function slackErrorCode(err: unknown): string | undefined {
  const data = (err as { data?: { error?: unknown } })?.data;
  return typeof data?.error === 'string' ? data.error : undefined;
}

export function isTokenError(err: unknown): boolean {
  const code = slackErrorCode(err);
  return code !== undefined && TOKEN_ERRORS.has(code);
}

export function tokenRefused(variable: string, err: unknown, what: string): ConfigError {
  return new ConfigError(`${variable} was refused by Slack (${slackErrorCode(err)}); set it to ${what} from your app's settings at api.slack.com/apps`);
}

/** web-api's errors as Parlor's: 429 with its Retry-After, 5xx and network errors retryable unless part went out. */
export function toPlatformError(err: unknown, method: string, partlySent: boolean): PlatformError {
  if (err instanceof PlatformError) return err;
  const e = err as { code?: string; data?: any; statusCode?: number; retryAfter?: number; message?: string };
  switch (e.code) {
    case webApi.ErrorCode.RateLimitedError:
      return new PlatformError({ platform: 'slack', method, status: 429, retryAfterMs: (e.retryAfter ?? 1) * 1000, retryable: !partlySent, message: 'rate limited' }, { cause: err });
    case webApi.ErrorCode.PlatformError: {
      const code = String(e.data?.error ?? 'error');
      const transient = ['ratelimited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout'].includes(code);
      const retryAfter = e.data?.response_metadata?.retryAfter;
      return new PlatformError(
        { platform: 'slack', method, status: code === 'ratelimited' ? 429 : 400, retryAfterMs: typeof retryAfter === 'number' ? retryAfter * 1000 : undefined, retryable: transient && !partlySent, message: code },
        { cause: err },
      );
    }
    case webApi.ErrorCode.HTTPError:
      return new PlatformError({ platform: 'slack', method, status: e.statusCode, retryable: !partlySent && (e.statusCode ?? 500) >= 500, message: `HTTP ${e.statusCode}` }, { cause: err });
    default:
      return new PlatformError({ platform: 'slack', method, retryable: !partlySent, message: describe(err) }, { cause: err });
  }
}

export function describe(err: unknown): string {
  const code = slackErrorCode(err);
  if (code) return code;
  return err instanceof Error ? err.message : String(err);
}
