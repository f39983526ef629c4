// Conversation ids, built and read in one place: `<persona>:<connector>:<chat>[:<thread>]` for chats,
// `<persona>:heartbeat`, `<persona>:cron:<name>` (and `<persona>:cron:<name>:<stamp>` for a fresh run), and
// `<persona>:sub:<handle>` for a background task, `<persona>:inbox:<other persona>` for messages between personas.

export type ConversationIdParts =
  | { kind: 'chat'; persona: string; connector: string; chat: string; thread?: string }
  | { kind: 'heartbeat'; persona: string }
  | { kind: 'cron'; persona: string; name: string; run?: string }
  | { kind: 'subagent'; persona: string; handle: string }
  | { kind: 'inbox'; persona: string; other: string };

/** A fresh cron run's stamp: the minute it started and a random part (`202612010900-1a2b3c4d`). */
const FRESH_STAMP = /^[0-9]{12}-[0-9a-f]{8}$/;

/** The id of the conversation a chat (or one of its threads) has with a persona. */
export function chatConversationId(persona: string, connector: string, chat: string, thread?: string): string {
  return [persona, connector, chat, ...(thread ? [thread] : [])].join(':');
}

/** The conversation a background task (spawn_subagent) runs in. */
export function subagentConversationId(persona: string, handle: string): string {
  return `${persona}:sub:${handle}`;
}

/** Where `persona` reads what `other` (another persona) writes to it, and answers. */
export function inboxConversationId(persona: string, other: string): string {
  return `${persona}:inbox:${other}`;
}

export function heartbeatConversationId(persona: string): string {
  return `${persona}:heartbeat`;
}

/** A cron entry's conversation; with `fresh`, a new throwaway one for this run. */
export function cronConversationId(persona: string, name: string, fresh?: { at: Date; random: string }): string {
  if (!fresh) return `${persona}:cron:${name}`;
  const stamp = `${fresh.at.toISOString().slice(0, 16).replace(/[-:T]/g, '')}-${fresh.random.slice(0, 8)}`;
  return `${persona}:cron:${name}:${stamp}`;
}

/** A Postgres regular expression matching the throwaway conversations of fresh cron runs. */
export const FRESH_CRON_PATTERN = '^[^:]+:cron:[^:]+:[0-9]{12}-[0-9a-f]{8}$';

/** What an id says. Chat ids are read by their first three parts (persona and connector names hold no `:`). */
export function parseConversationId(id: string): ConversationIdParts | undefined {
  const [persona, second, ...rest] = id.split(':');
  if (!persona || !second) return undefined;
  if (second === 'heartbeat' && rest.length === 0) return { kind: 'heartbeat', persona };
  if (second === 'sub' && rest.length === 1 && rest[0]) return { kind: 'subagent', persona, handle: rest[0] };
  if (second === 'inbox' && rest.length === 1 && rest[0]) return { kind: 'inbox', persona, other: rest[0] };
  if (second === 'cron' && rest.length >= 1) {
    const [name, run] = rest;
    if (rest.length === 1) return { kind: 'cron', persona, name };
    if (rest.length === 2 && FRESH_STAMP.test(run)) return { kind: 'cron', persona, name, run };
  }
  if (rest.length === 0) return undefined;
  const [chat, ...thread] = rest;
  return { kind: 'chat', persona, connector: second, chat, ...(thread.length ? { thread: thread.join(':') } : {}) };
}
