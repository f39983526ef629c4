// The shapes Slack sends and checks, for the fake in fake-slack.ts: message timestamps, event and interaction
// payloads, Block Kit limits, request bodies, and HTTP-mode request signing.
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** The workspace the fake plays: its ids, tokens and the bot's identity. */
export interface SlackIdentity {
  botToken: string;
  appToken: string;
  teamId: string;
  teamDomain: string;
  botUserId: string;
  botId: string;
  appId: string;
}

/** Message timestamps as Slack writes them (`1700000000.000100`): from the clock, unique and increasing. */
export function createTsClock(): () => string {
  let last = 0;
  return () => {
    last = Math.max(last + 100, Date.now() * 1000);
    return `${Math.floor(last / 1e6)}.${String(last % 1e6).padStart(6, '0')}`;
  };
}

/** An id of Slack's shape: a prefix letter, then upper-case letters and digits. */
export function slackId(prefix: string, length = 10): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  return prefix + Array.from(randomBytes(length), (b) => alphabet[b % alphabet.length]).join('');
}

export type ChannelType = 'channel' | 'group' | 'im' | 'mpim';

/** What a channel id says about its kind, as message events report it in `channel_type`. */
export function channelTypeOf(channel: string): ChannelType {
  if (channel.startsWith('D')) return 'im';
  if (channel.startsWith('G')) return 'group';
  return 'channel';
}

export const isChannelId = (id: unknown): id is string => typeof id === 'string' && /^[CDG][A-Z0-9]+$/.test(id);
export const isUserId = (id: unknown): id is string => typeof id === 'string' && /^[UW][A-Z0-9]+$/.test(id);

/** The DM channel Slack keeps for the bot and these users (one user: an IM, several: an MPIM). */
export function imChannelFor(users: string[]): string {
  if (users.length === 1) return `D${users[0].slice(1)}`;
  return `G${createHash('sha1').update([...users].sort().join(',')).digest('hex').slice(0, 10).toUpperCase()}`;
}

/** The `rich_text` block Slack's clients attach to what a person types, user mentions split out. */
export function richTextBlocks(text: string): unknown[] {
  const elements = text
    .split(/(<@[UW][A-Z0-9]+>)/)
    .filter(Boolean)
    .map((part) => {
      const user = /^<@([UW][A-Z0-9]+)>$/.exec(part)?.[1];
      return user ? { type: 'user', user_id: user } : { type: 'text', text: part };
    });
  return [{ type: 'rich_text', block_id: slackId('', 5).toLowerCase(), elements: [{ type: 'rich_text_section', elements }] }];
}

/** The Events API wrapper (`event_callback`) around one event, as Socket Mode and HTTP mode both carry it. */
export function eventCallback(id: SlackIdentity, event: Record<string, any>, eventId = slackId('Ev'), eventTime = Math.floor(Date.now() / 1000)) {
  return {
    token: 'fake-verification-token',
    team_id: id.teamId,
    context_team_id: id.teamId,
    context_enterprise_id: null,
    api_app_id: id.appId,
    event,
    type: 'event_callback',
    event_id: eventId,
    event_time: eventTime,
    authorizations: [{ enterprise_id: null, team_id: id.teamId, user_id: id.botUserId, is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
    event_context: `4-${randomBytes(12).toString('base64url')}`,
  };
}

/** The form body an interaction arrives as in HTTP mode (`payload=<json>`). */
export function interactionForm(payload: unknown): string {
  return new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
}

export interface SignedRequest {
  body: string;
  headers: Record<string, string>;
}

/**
 * Headers Slack sends with an HTTP-mode request: `x-slack-signature` (`v0=` HMAC-SHA256 of `v0:<ts>:<body>`) and
 * `x-slack-request-timestamp`; with `retryNum`, the retry headers of a redelivery.
 */
export function signedRequest(
  body: string | object,
  signingSecret: string,
  options: { timestamp?: number; badSignature?: boolean; retryNum?: number; retryReason?: string } = {},
): SignedRequest {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  let signature = `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${raw}`).digest('hex')}`;
  // Same shape, one hex digit off: what a forged or tampered request looks like.
  if (options.badSignature) signature = signature.slice(0, -1) + (signature.endsWith('0') ? '1' : '0');
  const headers: Record<string, string> = {
    'content-type': raw.trimStart().startsWith('{') ? 'application/json' : 'application/x-www-form-urlencoded',
    'x-slack-request-timestamp': String(timestamp),
    'x-slack-signature': signature,
  };
  if (options.retryNum !== undefined) {
    headers['x-slack-retry-num'] = String(options.retryNum);
    headers['x-slack-retry-reason'] = options.retryReason ?? 'http_timeout';
  }
  return { body: raw, headers };
}

/** A button or other interactive element of a message, found by action id or by its label. */
export function findElement(blocks: any[] | undefined, match: { actionId?: string; label?: string }): { block_id: string; element: any } | undefined {
  for (const block of blocks ?? []) {
    for (const element of [...(block.elements ?? []), ...(block.accessory ? [block.accessory] : [])]) {
      if (!element?.action_id) continue;
      if (match.actionId !== undefined ? element.action_id === match.actionId : element.text?.text === match.label) {
        return { block_id: block.block_id ?? slackId('', 5).toLowerCase(), element };
      }
    }
  }
  return undefined;
}

/** Why Slack would answer `invalid_blocks` (its messages name a JSON pointer), or nothing when the blocks pass. */
export function blockProblems(blocks: unknown): string[] {
  if (!Array.isArray(blocks)) return ['must provide an array [json-pointer:/blocks]'];
  const problems: string[] = [];
  if (blocks.length > 50) problems.push('no more than 50 items allowed [json-pointer:/blocks]');
  const tooLong = (value: unknown, max: number, pointer: string) => {
    if (typeof value === 'string' && value.length > max) problems.push(`must be less than ${max + 1} characters [json-pointer:${pointer}]`);
  };
  const blockIds = new Set<string>();
  blocks.forEach((block: any, i) => {
    const at = `/blocks/${i}`;
    if (!block || typeof block.type !== 'string') return void problems.push(`missing required field: type [json-pointer:${at}]`);
    if (block.block_id !== undefined) {
      tooLong(block.block_id, 255, `${at}/block_id`);
      if (blockIds.has(block.block_id)) problems.push(`duplicate block_id [json-pointer:${at}/block_id]`);
      blockIds.add(block.block_id);
    }
    if (block.type === 'section') {
      if (!block.text && !block.fields) problems.push(`must provide text or fields [json-pointer:${at}]`);
      tooLong(block.text?.text, 3000, `${at}/text/text`);
      if ((block.fields ?? []).length > 10) problems.push(`no more than 10 items allowed [json-pointer:${at}/fields]`);
    }
    if (block.type === 'header') tooLong(block.text?.text, 150, `${at}/text/text`);
    if (block.type === 'actions' && (block.elements ?? []).length > 25) problems.push(`no more than 25 items allowed [json-pointer:${at}/elements]`);
    const actionIds = new Set<string>();
    const elements: [any, string][] = [
      ...(block.type === 'actions' ? (block.elements ?? []).map((e: any, j: number) => [e, `${at}/elements/${j}`] as [any, string]) : []),
      ...(block.accessory ? [[block.accessory, `${at}/accessory`] as [any, string]] : []),
    ];
    for (const [element, pointer] of elements) {
      if (element?.type === 'button') {
        if (!element.text?.text) problems.push(`missing required field: text [json-pointer:${pointer}]`);
        tooLong(element.text?.text, 75, `${pointer}/text/text`);
        tooLong(element.value, 2000, `${pointer}/value`);
      }
      if (element?.action_id !== undefined) {
        tooLong(element.action_id, 255, `${pointer}/action_id`);
        if (actionIds.has(element.action_id)) problems.push(`duplicate action_id [json-pointer:${pointer}/action_id]`);
        actionIds.add(element.action_id);
      }
    }
  });
  return problems;
}

/** Form fields that @slack/web-api sends JSON-encoded (it stringifies every object argument). */
const JSON_FIELDS = new Set(['blocks', 'attachments', 'metadata', 'files', 'user_auth_blocks', 'view']);

/** A Web API request body: JSON, a form (JSON fields decoded), or multipart (files as `{ name, size, bytes }`). */
export async function readRequestBody(req: IncomingMessage): Promise<{ body: Record<string, any>; raw: Buffer }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const type = req.headers['content-type'] ?? '';
  if (type.startsWith('multipart/form-data')) return { body: parseMultipart(raw, type), raw };
  const text = raw.toString('utf8');
  if (!text) return { body: {}, raw };
  if (type.startsWith('application/json')) {
    try {
      return { body: JSON.parse(text), raw };
    } catch {
      return { body: { invalid_json: text }, raw };
    }
  }
  const body: Record<string, any> = Object.fromEntries(new URLSearchParams(text));
  for (const key of Object.keys(body)) {
    if (!JSON_FIELDS.has(key)) continue;
    try {
      body[key] = JSON.parse(body[key]);
    } catch {
      // Left as sent: the method answers it is not valid JSON.
    }
  }
  return { body, raw };
}

function parseMultipart(raw: Buffer, type: string): Record<string, any> {
  const boundary = /boundary="?([^";]+)"?/.exec(type)?.[1];
  const body: Record<string, any> = {};
  if (!boundary) return body;
  for (const part of raw.toString('latin1').split(`--${boundary}`)) {
    const split = part.indexOf('\r\n\r\n');
    if (split < 0) continue;
    const headers = part.slice(0, split);
    const content = Buffer.from(part.slice(split + 4).replace(/\r\n$/, ''), 'latin1');
    const name = /name="([^"]*)"/.exec(headers)?.[1];
    if (!name) continue;
    const filename = /filename="([^"]*)"/.exec(headers)?.[1];
    body[name] = filename !== undefined ? { name: filename, size: content.length, bytes: content } : content.toString('utf8');
  }
  return body;
}
