// `parlor conversations` and `parlor log`: what happened, without psql.
import type { Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { getConversation, listConversations } from '#src/db/conversations.ts';
import { transcript } from '#src/db/messages.ts';
import type { ChatMessage } from '#src/llm/types.ts';
import { openDatabase } from './database.ts';

export async function conversations(settings: Settings, values: { persona?: string; limit?: string }, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const limit = count(values.limit, 50, '--limit');
  const { database, close } = await openDatabase(settings);
  try {
    const rows = await listConversations(database.db, { persona: values.persona, limit });
    if (rows.length === 0) {
      out.write(values.persona ? `no conversations of ${values.persona} yet\n` : 'no conversations yet\n');
      return 0;
    }
    const width = Math.max(...rows.map((r) => r.id.length));
    out.write(`${'conversation'.padEnd(width)}  persona       connector  last activity             messages  turns\n`);
    for (const r of rows) {
      out.write(
        `${r.id.padEnd(width)}  ${r.persona.padEnd(12)}  ${(r.connector ?? '-').padEnd(9)}  ${r.lastActivityAt.toISOString().replace('T', ' ').slice(0, 19)} UTC  ${String(r.messages).padStart(8)}  ${String(r.turns).padStart(5)}\n`,
      );
    }
    return 0;
  } finally {
    await close();
  }
}

export async function log(settings: Settings, values: { conversation?: string; limit?: string; full?: boolean }, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  if (!values.conversation) throw new ConfigError('parlor log needs a conversation id; parlor conversations lists them');
  const limit = count(values.limit, 100, '--limit');
  const { database, close } = await openDatabase(settings);
  try {
    if (!(await getConversation(database.db, values.conversation))) {
      throw new ConfigError(`there is no conversation "${values.conversation}"; parlor conversations lists them`);
    }
    for (const row of await transcript(database.db, values.conversation, limit)) {
      out.write(`${describeMessage(row.message, row.sender, row.createdAt, values.full ?? false)}\n`);
    }
    return 0;
  } finally {
    await close();
  }
}

/** One message of a transcript: who, when and what; tool calls and results folded to a line unless `full`. */
export function describeMessage(message: ChatMessage, sender: string | null, at: Date, full: boolean): string {
  const time = at.toISOString().slice(11, 19);
  const fold = (text: string) => {
    if (full) return text;
    const lines = text.split('\n');
    const first = lines[0].length > 160 ? `${lines[0].slice(0, 160)}…` : lines[0];
    return lines.length > 1 ? `${first} (+${lines.length - 1} lines)` : first;
  };
  switch (message.role) {
    case 'user':
      return `${time} ${sender && sender !== 'question' ? sender : 'user'}: ${message.content}`;
    case 'assistant': {
      const calls = (message.toolCalls ?? []).map((c) => `\n${time}   → ${c.name} ${fold(c.arguments)}`).join('');
      return `${time} assistant: ${message.content || (calls ? '(tool calls)' : '')}${calls}`;
    }
    case 'tool':
      return `${time}   ← ${message.name}: ${fold(message.content)}`;
  }
}

function count(text: string | undefined, fallback: number, option: string): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new ConfigError(`${option} ${text} is not a positive whole number`);
  return Number(text);
}
