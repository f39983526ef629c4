import { ConfigError } from '#src/config/errors.ts';
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

/** Discord in the connector registry: its variables, its checks, and how it is built. */
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
};
