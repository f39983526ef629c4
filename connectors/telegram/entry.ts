import { ConfigError } from '#src/config/errors.ts';
import type { ConnectorEntry } from '#src/connector.ts';

export interface TelegramSettings {
  token: string;
  apiRoot?: string;
  webhookUrl?: string;
}

/** Telegram in the connector registry: its variables, its checks, and how it is built. */
export const telegramEntry: ConnectorEntry<TelegramSettings> = {
  id: 'telegram',
  variables: ['TELEGRAM_BOT_TOKEN', 'TELEGRAM_API_ROOT', 'TELEGRAM_WEBHOOK_URL'],
  parse(read) {
    const token = read.optional('TELEGRAM_BOT_TOKEN');
    if (!token) return undefined;
    if (!/^\d+:[\w-]+$/.test(token)) throw new ConfigError('TELEGRAM_BOT_TOKEN does not look like a bot token (digits:letters); copy it from @BotFather');
    return { token, apiRoot: read.url('TELEGRAM_API_ROOT', ['http:', 'https:']), webhookUrl: read.url('TELEGRAM_WEBHOOK_URL', ['https:', 'http:']) };
  },
  secrets: (s) => [s.token],
  async doctor(s, getJson) {
    const body = await getJson(`${s.apiRoot ?? 'https://api.telegram.org'}/bot${s.token}/getMe`, {}, 'TELEGRAM_BOT_TOKEN');
    if (!body.ok) throw new Error(`token refused (${body.description ?? 'unauthorized'}); copy it again from @BotFather into TELEGRAM_BOT_TOKEN`);
    return `bot @${body.result.username} (${s.webhookUrl ? 'webhook: several processes may serve it' : 'long polling: one process per token'})`;
  },
  async create(s, { log }) {
    const { createTelegramConnector } = await import('./index.ts');
    return createTelegramConnector({ token: s.token, apiRoot: s.apiRoot, webhookUrl: s.webhookUrl, log });
  },
  multiProcess: (s) => Boolean(s.webhookUrl),
};
