import { ConfigError } from '#src/config/errors.ts';
import type { ConnectorInit } from '#src/cli/init-connector.ts';
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

const BOT_TOKEN_WHERE = 'the Bot User OAuth Token (xoxb-…, under OAuth & Permissions in the app settings)';
const APP_TOKEN_WHERE = 'an app-level token (xapp-…, Basic Information → App-Level Tokens, with connections:write)';

/** What `parlor init` asks for Slack and writes: the bot token, and an app token or a signing secret. */
const init: ConnectorInit = {
  label: 'Slack',
  secrets: [
    {
      variable: 'SLACK_BOT_TOKEN',
      flag: 'token',
      what: 'the Slack bot token',
      help: 'the Bot User OAuth Token (xoxb-…) from your app\'s OAuth & Permissions',
      prompt: 'Slack bot token, xoxb-… from your app\'s OAuth & Permissions (blank to skip)',
      example: 'xoxb-...',
      check: (v) => (v.startsWith('xoxb-') ? undefined : `that is not a bot token; Slack's is ${BOT_TOKEN_WHERE}`),
    },
    {
      variable: 'SLACK_APP_TOKEN',
      flag: 'app-token',
      what: 'the Slack app token',
      help: 'an app-level token (xapp-…) for Socket Mode: Basic Information → App-Level Tokens',
      prompt: 'Slack app-level token for Socket Mode, xapp-… from Basic Information → App-Level Tokens (blank: HTTP events instead)',
      example: 'xapp-...',
      check: (v) => (v.startsWith('xapp-') ? undefined : `that is not an app-level token; Socket Mode needs ${APP_TOKEN_WHERE}`),
      mode: 'Socket Mode',
    },
    {
      variable: 'SLACK_SIGNING_SECRET',
      flag: 'signing-secret',
      what: 'the Slack signing secret',
      help: 'the signing secret for HTTP events: Basic Information → App Credentials',
      prompt: 'Slack signing secret for HTTP events, from Basic Information → App Credentials',
      example: '...',
      check: (v) =>
        /^xox|^xapp-/.test(v)
          ? 'that is a token, not the signing secret; copy the Signing Secret from Basic Information → App Credentials'
          : /^\S{16,}$/.test(v)
            ? undefined
            : 'that does not look like a signing secret (one word of letters and digits); copy it from Basic Information → App Credentials',
      mode: 'HTTP events',
    },
  ],
  owner: {
    prompt: 'Your Slack member id, so the bot answers you (your profile → ⋮ → Copy member ID; blank: the bot tells you when you message it)',
    help: 'your Slack member id (U…): you may DM the persona, and its proactive messages go to you',
    example: 'U024BE7LH',
    check: (v) =>
      /^[UW][A-Z0-9]{2,}$/.test(v)
        ? undefined
        : `${v} is not a Slack member id (U or W, then capital letters and digits, e.g. U024BE7LH); in Slack open your profile → ⋮ → Copy member ID`,
  },
  envNotes: [
    'Slack: create the app from connectors/slack/manifest.json and install it. Parlor runs it while SLACK_BOT_TOKEN is',
    'set, with SLACK_APP_TOKEN for Socket Mode, or SLACK_SIGNING_SECRET for HTTP events at <your public URL>/slack/events.',
  ],
  exampleChat: 'C0123ABCD',
  primaryNote: 'On Slack a member id (U…) here is your DM with the bot.',
  setUp: 'set SLACK_BOT_TOKEN and SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP events) in .env, from your app\'s settings',
};

/** Slack in the connector registry: its settings, its doctor check (token, mode, scopes), what `parlor init` asks, and how it is built. */
export const slackEntry: ConnectorEntry<SlackSettings> = {
  id: 'slack',
  variables: ['SLACK_BOT_TOKEN', 'SLACK_APP_TOKEN', 'SLACK_SIGNING_SECRET', 'SLACK_API_URL'],
  parse(read) {
    const botToken = read.optional('SLACK_BOT_TOKEN');
    if (!botToken) return undefined;
    if (!botToken.startsWith('xoxb-')) {
      throw new ConfigError(`SLACK_BOT_TOKEN should be ${BOT_TOKEN_WHERE}`);
    }
    const appToken = read.optional('SLACK_APP_TOKEN');
    const signingSecret = read.optional('SLACK_SIGNING_SECRET');
    if (!appToken && !signingSecret) {
      throw new ConfigError('SLACK_BOT_TOKEN is set but neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (HTTP events) is');
    }
    if (appToken && !appToken.startsWith('xapp-')) {
      throw new ConfigError(`SLACK_APP_TOKEN should be ${APP_TOKEN_WHERE}`);
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
  init,
};
