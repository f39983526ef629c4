import { ConfigError } from '#src/config/errors.ts';
import type { ConnectorEntry } from '#src/connector.ts';

export interface SlackSettings {
  botToken: string;
  appToken?: string;
  signingSecret?: string;
  apiUrl?: string;
}

/** Slack in the connector registry: its settings and doctor check (the connector itself is not built yet). */
export const slackEntry: ConnectorEntry<SlackSettings> = {
  id: 'slack',
  variables: ['SLACK_BOT_TOKEN', 'SLACK_APP_TOKEN', 'SLACK_SIGNING_SECRET', 'SLACK_API_URL'],
  parse(read) {
    const botToken = read.optional('SLACK_BOT_TOKEN');
    if (!botToken) return undefined;
    const appToken = read.optional('SLACK_APP_TOKEN');
    const signingSecret = read.optional('SLACK_SIGNING_SECRET');
    if (!appToken && !signingSecret) {
      throw new ConfigError('SLACK_BOT_TOKEN is set but neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (HTTP events) is');
    }
    return { botToken, appToken, signingSecret, apiUrl: read.url('SLACK_API_URL', ['http:', 'https:']) };
  },
  secrets: (s) => [s.botToken, s.appToken, s.signingSecret],
  async doctor(s, getJson) {
    const body = await getJson(`${s.apiUrl ?? 'https://slack.com/api'}/auth.test`, { authorization: `Bearer ${s.botToken}` }, 'SLACK_BOT_TOKEN');
    if (!body.ok) throw new Error(`token refused (${body.error}); reinstall the app and copy the Bot User OAuth Token into SLACK_BOT_TOKEN`);
    return `bot ${body.user} in ${body.team} (${s.appToken ? 'Socket Mode: one process' : 'HTTP events: several processes may serve it'})`;
  },
  // HTTP events can go to any process behind a load balancer; a Socket Mode connection is one process's.
  multiProcess: (s) => !s.appToken,
};
