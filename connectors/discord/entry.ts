import type { ConnectorEntry } from '#src/connector.ts';

export interface DiscordSettings {
  token: string;
  apiUrl?: string;
}

/** Discord in the connector registry: its settings and doctor check (the connector itself is not built yet). */
export const discordEntry: ConnectorEntry<DiscordSettings> = {
  id: 'discord',
  variables: ['DISCORD_BOT_TOKEN', 'DISCORD_API_URL'],
  parse(read) {
    const token = read.optional('DISCORD_BOT_TOKEN');
    return token ? { token, apiUrl: read.url('DISCORD_API_URL', ['http:', 'https:']) } : undefined;
  },
  secrets: (s) => [s.token],
  async doctor(s, getJson) {
    const body = await getJson(`${s.apiUrl ?? 'https://discord.com/api/v10'}/users/@me`, { authorization: `Bot ${s.token}` }, 'DISCORD_BOT_TOKEN');
    if (!body.id) throw new Error('token refused; reset it in the Developer Portal (Bot → Reset Token) and set DISCORD_BOT_TOKEN');
    return `bot ${body.username}`;
  },
  // One gateway connection per token (sharding is not used).
  multiProcess: () => false,
};
