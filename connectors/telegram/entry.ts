import { ConfigError } from '#src/config/errors.ts';
import type { ConnectorInit } from '#src/cli/init-connector.ts';
import type { ConnectorEntry } from '#src/connector.ts';

export interface TelegramSettings {
  token: string;
  apiRoot?: string;
  webhookUrl?: string;
}

const TOKEN = /^\d+:[\w-]+$/;
const NOT_A_TOKEN = 'does not look like a bot token (digits:letters); copy it from @BotFather';

/** What `parlor init` asks for Telegram and writes. */
const init: ConnectorInit = {
  label: 'Telegram',
  secrets: [
    {
      variable: 'TELEGRAM_BOT_TOKEN',
      flag: 'token',
      what: 'the Telegram bot token',
      help: 'the bot token from @BotFather',
      prompt: 'Telegram bot token from @BotFather (blank to skip)',
      example: '123456789:AA...',
      check: (v) => (TOKEN.test(v) ? undefined : `that ${NOT_A_TOKEN}`),
    },
  ],
  owner: {
    prompt: 'Your Telegram user id, so the bot answers you (blank: the bot tells you when you message it)',
    help: 'your Telegram user id: you may DM the persona, and its proactive messages go to you',
    example: '123456789',
    check: (v) => (/^\d+$/.test(v) ? undefined : `${v} is not a Telegram user id (digits, e.g. 123456789); the bot tells you yours when you message it`),
  },
  envNotes: ['Telegram: a bot token from @BotFather (/newbot). Parlor runs the bot while this is set.'],
  exampleChat: '-1001234567890',
  primaryNote: 'On Telegram your DM with the bot has your user id as its chat id.',
  setUp: 'set TELEGRAM_BOT_TOKEN in .env (a bot token from @BotFather)',
};

/** Telegram in the connector registry: its variables, its checks, what `parlor init` asks, and how it is built. */
export const telegramEntry: ConnectorEntry<TelegramSettings> = {
  id: 'telegram',
  variables: ['TELEGRAM_BOT_TOKEN', 'TELEGRAM_API_ROOT', 'TELEGRAM_WEBHOOK_URL'],
  parse(read) {
    const token = read.optional('TELEGRAM_BOT_TOKEN');
    if (!token) return undefined;
    if (!TOKEN.test(token)) throw new ConfigError(`TELEGRAM_BOT_TOKEN ${NOT_A_TOKEN}`);
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
  init,
};
