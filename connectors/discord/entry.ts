import { ConfigError } from '#src/config/errors.ts';
import type { ConnectorInit } from '#src/cli/init-connector.ts';
import type { ConnectorEntry } from '#src/connector.ts';
import { MESSAGE_CONTENT_REFUSED, messageContentAllowed } from './intents.ts';

export interface DiscordSettings {
  token: string;
  /** The REST base handed to discord.js as `rest.api` (without `/v10`); Discord's own when absent. */
  apiUrl?: string;
  /** DISCORD_MESSAGE_CONTENT=true: the privileged Message Content intent is asked for. */
  messageContent?: true;
}

const DEFAULT_API = 'https://discord.com/api';

const PORTAL = 'the Developer Portal: your application → Bot → Reset Token';

/** What `parlor init` asks for Discord and writes. */
const init: ConnectorInit = {
  label: 'Discord',
  secrets: [
    {
      variable: 'DISCORD_BOT_TOKEN',
      flag: 'token',
      what: 'the Discord bot token',
      help: `the bot token from ${PORTAL}`,
      prompt: 'Discord bot token from the Developer Portal, your application → Bot → Reset Token (blank to skip)',
      example: '...',
      // A token is three parts joined by dots (its user id, a time, a signature); "Bot " in front is taken off.
      check: (v) => (/^(Bot\s+)?[\w-]+\.[\w-]+\.[\w-]+$/i.test(v) ? undefined : `that does not look like a bot token (three parts joined by dots); copy it from ${PORTAL}`),
    },
  ],
  owner: {
    prompt: 'Your Discord user id, so the bot answers you (Developer Mode on, right-click your name → Copy User ID; blank: the bot tells you when you message it)',
    help: 'your Discord user id: you may DM the persona, and its proactive messages go to you',
    example: '80351110224678912',
    check: (v) =>
      /^\d{17,20}$/.test(v)
        ? undefined
        : `${v} is not a Discord user id (17 to 20 digits, e.g. 80351110224678912); turn on Developer Mode (User Settings → Advanced), then right-click your name → Copy User ID`,
  },
  envNotes: ['Discord: a bot token from the Developer Portal (your application → Bot → Reset Token).', 'Parlor runs the bot while this is set.'],
  envExtras: [
    'To answer every message in a channel with "mention": false, turn on Message Content Intent (Bot → Privileged',
    'Gateway Intents) and set:',
    'DISCORD_MESSAGE_CONTENT=true',
  ],
  exampleChat: '1100000000000000001',
  primaryNote: 'On Discord a user id here is your DM with the bot: Parlor opens it itself.',
  setUp: `set DISCORD_BOT_TOKEN in .env (a bot token from ${PORTAL})`,
};

/** Discord in the connector registry: its variables, its checks, what `parlor init` asks, and how it is built. */
export const discordEntry: ConnectorEntry<DiscordSettings> = {
  id: 'discord',
  variables: ['DISCORD_BOT_TOKEN', 'DISCORD_API_URL', 'DISCORD_MESSAGE_CONTENT'],
  parse(read) {
    const token = read.optional('DISCORD_BOT_TOKEN');
    if (!token) return undefined;
    const flag = (read.optional('DISCORD_MESSAGE_CONTENT') ?? 'false').toLowerCase();
    if (!['true', 'false', '1', '0', 'yes', 'no'].includes(flag)) throw new ConfigError(`DISCORD_MESSAGE_CONTENT=${flag} is not true or false`);
    // discord.js adds the version itself; a URL given with it (as Discord's docs write it) is taken without.
    const apiUrl = read.url('DISCORD_API_URL', ['http:', 'https:'])?.replace(/\/v\d+$/, '');
    return { token: token.replace(/^Bot\s+/i, ''), apiUrl, messageContent: ['true', '1', 'yes'].includes(flag) || undefined };
  },
  secrets: (s) => [s.token],
  async doctor(s, getJson) {
    const api = `${s.apiUrl ?? DEFAULT_API}/v10`;
    const headers = { authorization: `Bot ${s.token}` };
    const me = await getJson(`${api}/users/@me`, headers, 'DISCORD_BOT_TOKEN');
    if (!me.id) throw new Error('token refused; in the Developer Portal open the application → Bot → Reset Token, and set DISCORD_BOT_TOKEN to the new token');
    if (s.messageContent) {
      const application = await getJson(`${api}/applications/@me`, headers, 'DISCORD_BOT_TOKEN');
      if (typeof application.flags === 'number' && !messageContentAllowed(application.flags)) throw new Error(MESSAGE_CONTENT_REFUSED);
    }
    return `bot ${me.username} (${s.messageContent ? 'with the Message Content intent' : 'mentions, replies and DMs only: DISCORD_MESSAGE_CONTENT is not set'})`;
  },
  async create(s, { log }) {
    const { createDiscordConnector } = await import('./index.ts');
    return createDiscordConnector({ token: s.token, apiUrl: s.apiUrl, messageContent: s.messageContent, log });
  },
  // One gateway connection per token (sharding is not used).
  multiProcess: () => false,
  init,
};
