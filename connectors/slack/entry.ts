import { ConfigError } from '#src/config/errors.ts';
import type { ConnectorEntry } from '#src/connector.ts';

export interface SlackSettings {
  botToken: string;
  appToken?: string;
  signingSecret?: string;
  apiUrl?: string;
}

/**
 * The bot scopes Parlor uses (the same as connectors/slack/manifest.json): DMs, mentions and threads read and
 * answered, reactions both ways, files both ways, people's names.
 */
export const BOT_SCOPES = [
  'app_mentions:read',
  'chat:write',
  'channels:history',
  'groups:history',
  'im:history',
  'mpim:history',
  'im:read',
  'im:write',
  'reactions:read',
  'reactions:write',
  'files:read',
  'files:write',
  'users:read',
] as const;

const DOCTOR_TIMEOUT_MS = 10_000;

/** Slack in the connector registry: its settings, its doctor check (token, mode, scopes), and how it is built. */
export const slackEntry: ConnectorEntry<SlackSettings> = {
  id: 'slack',
  variables: ['SLACK_BOT_TOKEN', 'SLACK_APP_TOKEN', 'SLACK_SIGNING_SECRET', 'SLACK_API_URL'],
  parse(read) {
    const botToken = read.optional('SLACK_BOT_TOKEN');
    if (!botToken) return undefined;
    if (!botToken.startsWith('xoxb-')) {
      throw new ConfigError('SLACK_BOT_TOKEN should be the Bot User OAuth Token (xoxb-…, under OAuth & Permissions in the app settings)');
    }
    const appToken = read.optional('SLACK_APP_TOKEN');
    const signingSecret = read.optional('SLACK_SIGNING_SECRET');
    if (!appToken && !signingSecret) {
      throw new ConfigError('SLACK_BOT_TOKEN is set but neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (HTTP events) is');
    }
    if (appToken && !appToken.startsWith('xapp-')) {
      throw new ConfigError('SLACK_APP_TOKEN should be an app-level token (xapp-…, Basic Information → App-Level Tokens, with connections:write)');
    }
    return { botToken, appToken, signingSecret, apiUrl: read.url('SLACK_API_URL', ['http:', 'https:']) };
  },
  secrets: (s) => [s.botToken, s.appToken, s.signingSecret],
  async doctor(s, getJson) {
    const base = s.apiUrl ?? 'https://slack.com/api';
    // auth.test by hand: the token's scopes come in a response header (x-oauth-scopes), not the body.
    const response = await fetch(`${base}/auth.test`, { method: 'POST', headers: { authorization: `Bearer ${s.botToken}` }, signal: AbortSignal.timeout(DOCTOR_TIMEOUT_MS) }).catch(
      (err: unknown) => {
        throw new ConfigError(`cannot reach ${new URL(base).origin} (${err instanceof Error ? err.message : String(err)}); check SLACK_API_URL and the network`);
      },
    );
    const body: any = await response.json().catch(() => ({}));
    if (!body.ok) throw new Error(`token refused (${body.error ?? `HTTP ${response.status}`}); reinstall the app and copy the Bot User OAuth Token into SLACK_BOT_TOKEN`);
    const granted = response.headers.get('x-oauth-scopes');
    const missing = granted === null ? [] : BOT_SCOPES.filter((scope) => !granted.split(',').map((g) => g.trim()).includes(scope));
    if (missing.length) {
      throw new Error(`the bot token lacks ${missing.join(', ')}; add them under OAuth & Permissions (or create the app from connectors/slack/manifest.json) and reinstall the app`);
    }
    let mode = 'HTTP events at /slack/events: several processes may serve it; set the Request URL of Event Subscriptions and Interactivity to <your public URL>/slack/events';
    if (s.appToken) {
      const open = await getJson(`${base}/apps.connections.open`, { authorization: `Bearer ${s.appToken}` }, 'SLACK_APP_TOKEN');
      if (!open.ok) throw new Error(`SLACK_APP_TOKEN refused for Socket Mode (${open.error}); turn Socket Mode on and copy an app-level token with connections:write`);
      mode = 'Socket Mode: one process';
    }
    const scopes = granted === null ? 'scopes not reported' : 'all scopes granted';
    return `bot ${body.user} in ${body.team} (${mode}; ${scopes})`;
  },
  async create(s, { log }) {
    const { createSlackConnector } = await import('./index.ts');
    return createSlackConnector({ botToken: s.botToken, appToken: s.appToken, signingSecret: s.signingSecret, apiUrl: s.apiUrl, log });
  },
  // HTTP events can go to any process behind a load balancer; a Socket Mode connection is one process's.
  multiProcess: (s) => !s.appToken,
};
