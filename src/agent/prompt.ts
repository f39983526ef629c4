import { parseConversationId } from '#src/conversation-id.ts';
import type { Persona } from '#src/config/persona.ts';
import type { UserModelEntry } from '#src/memory/store.ts';
import { answersInText, type Origin, type TurnKind } from '#src/turns.ts';

export interface PromptContext {
  persona: Persona;
  kind: TurnKind;
  conversationId: string;
  origin?: Origin;
  timezone: string;
  now?: Date;
  /** Name of the cron entry, for cron turns. */
  scheduleName?: string;
  toolNames: string[];
  /** Custom and MCP tools (the search tier): listed by name and first line, callable after tool_activate. */
  moreTools?: readonly { name: string; description: string }[];
  /** What the persona knows of the person this turn is with (`user` is `connector:user id`). */
  userModel?: { user: string; entries: readonly UserModelEntry[] };
}

/** The share of the prompt that lists the search-tier tools, at most, however many there are. */
export const MORE_TOOLS_PROMPT_MAX_CHARS = 1000;
/** Each listed tool's description is cut to its first sentence, and to this. */
const MORE_TOOL_LINE_CHARS = 70;

/** The user model's share of the prompt, at most: the most confident and newest aspects first, the rest left out. */
export const USER_MODEL_PROMPT_MAX_CHARS = 1500;

const formats = new Map<string, Intl.DateTimeFormat>();

/** One formatter per time zone and style: making one costs more than the rest of the prompt. */
function dateFormat(timezone: string, withTime: boolean): Intl.DateTimeFormat {
  const key = `${timezone}\u0000${withTime}`;
  let format = formats.get(key);
  if (!format) {
    format = new Intl.DateTimeFormat('en-GB', { timeZone: timezone, dateStyle: 'full', ...(withTime ? { timeStyle: 'short' as const } : {}) });
    formats.set(key, format);
  }
  return format;
}

/**
 * When the turn is, coarse enough that the prompt stays byte-identical all day (the provider's prompt cache keeps
 * working): the date, and the exact time from the clock tool; without the tool, the hour it is in.
 */
function nowLine(ctx: PromptContext, now: Date): string {
  // The same for a quarter of an hour in every time zone (their offsets are whole quarters): formatted once in it.
  const clock = ctx.toolNames.includes('clock');
  const key = `${ctx.timezone}\u0000${clock}`;
  const quarter = Math.floor(now.getTime() / 900_000);
  const known = nowLines.get(key);
  if (known?.quarter === quarter) return known.line;
  const line = formatNowLine(ctx.timezone, clock, now);
  nowLines.set(key, { quarter, line });
  return line;
}
const nowLines = new Map<string, { quarter: number; line: string }>();

function formatNowLine(timezone: string, clock: boolean, now: Date): string {
  const day = dateFormat(timezone, false).format(now);
  if (clock) return `- Today is ${day} (${timezone}). For the exact time, call clock.`;
  const hour = new Date(Math.floor(now.getTime() / 3_600_000) * 3_600_000);
  const next = new Date(hour.getTime() + 3_600_000);
  const hhmm = (d: Date) => dateFormat(timezone, true).format(d).split(' ').at(-1);
  return `- Today is ${day} (${timezone}); the time is between ${hhmm(hour)} and ${hhmm(next)}.`;
}

/**
 * The system prompt: the persona's soul, then what the persona needs to know about this turn. What changes least comes
 * first: the date comes after the instructions and skills, and the user model (which changes with the person a group
 * turn is for) comes last, so consecutive turns of a conversation send the same prompt and the same prefix.
 */
export function buildSystemPrompt(ctx: PromptContext): string {
  const now = ctx.now ?? new Date();
  // A task starts afresh: a short brief of its own, never the persona's soul or its chats. It is one turn, so it
  // has nothing to keep stable and is told the exact time.
  if (ctx.kind === 'task') return taskPrompt(ctx, dateFormat(ctx.timezone, true).format(now));
  const lines: string[] = [ctx.persona.soul, '', '## This turn', `- You are "${ctx.persona.name}".`];

  // The results of tasks started from a chat are answered there, like a message.
  const background = !answersInText(ctx.kind, ctx.origin);
  const from = ctx.kind === 'persona' ? parseConversationId(ctx.conversationId) : undefined;
  if (from?.kind === 'inbox') {
    lines.push(
      `- This is a message from the persona "${from.other}", not from a person. Your final message is your reply to it; nobody else reads it.`,
      '- Answer what it asks with your own knowledge and tools. When a tool reports an error, say so in your reply.',
    );
  } else if (!background) {
    const where = ctx.origin
      ? `${ctx.origin.chatType === 'group' ? 'a group chat' : 'a direct chat'} on ${ctx.origin.connector}`
      : 'a chat';
    lines.push(`- You are talking in ${where}. Your final message is sent there as your reply.`);
    if (ctx.kind === 'subagent') {
      lines.push('- This turn brings the results of background tasks you started for this chat: tell the person what they found, in your own words.');
    }
    if (ctx.origin?.chatType === 'group') lines.push('- Group messages are prefixed with the sender in brackets; answer the person who addressed you.');
    lines.push(
      '- Reply in plain prose or simple Markdown. Do not narrate tool calls or your plan; say the result.',
      '- When a tool reports an error (timeout, invalid_arguments, denied ...), read it and adapt or explain briefly.',
    );
  } else {
    const what =
      ctx.kind === 'heartbeat'
        ? 'a heartbeat: a periodic check you run on your own'
        : ctx.kind === 'cron'
          ? `the scheduled job "${ctx.scheduleName ?? 'cron'}"`
          : ctx.kind === 'subagent'
            ? 'a subagent task'
            : 'a wake-up you scheduled earlier';
    lines.push(
      `- This is ${what}. Nobody reads your text here.`,
      ctx.toolNames.includes('reply_to_origin')
        ? '- To tell the person this is for, call reply_to_origin once with your message; send_message reaches other chats. Speak only when it is worth their attention.'
        : '- To tell someone something, call send_message. Speak only when it is worth their attention.',
      '- Finish by calling end_task: "ok" when you did the work, "skipped" when there was nothing worth doing or saying, "failed" when you could not do it.',
    );
    if (ctx.kind === 'heartbeat' && ctx.persona.heartbeat) lines.push('', '## Heartbeat checklist (HEARTBEAT.md)', ctx.persona.heartbeat);
  }
  if (ctx.toolNames.includes('file_read')) {
    lines.push('- Your files are in your workspace: file tools and shell commands take paths relative to it, and files people send are saved under uploads/.');
  }
  if (ctx.toolNames.includes('think_harder')) {
    lines.push('- For a hard problem, call think_harder before answering.');
  }
  if (ctx.persona.skills.length) {
    // The instructions are loaded when needed; without load_skill, the file is named so another tool can read it.
    const load = ctx.toolNames.includes('load_skill');
    lines.push('', '## Skills', load ? 'When a task matches a skill, call load_skill with its name and follow what it says:' : 'Read a skill file when a task matches it:');
    for (const s of ctx.persona.skills) lines.push(`- ${s.name}: ${s.description}${load ? '' : ` (${s.file})`}`);
  }
  if (ctx.moreTools?.length) lines.push('', ...moreToolsSection(ctx.moreTools));
  lines.push('', '## Now', nowLine(ctx, now));
  // Last: it changes when the persona learns something (and with the sender in a group), and what comes before it stays the same.
  if (ctx.userModel?.entries.length) lines.push('', ...userModelSection(ctx.userModel.user, ctx.userModel.entries));
  return lines.join('\n');
}

/**
 * The search-tier tools by name and first line, in the order given, within a bound; the rest are counted. The list
 * does not say which are active (the tools the call carries say that), so it stays the same as tools are activated.
 */
function moreToolsSection(tools: readonly { name: string; description: string }[]): string[] {
  const lines = ['## More tools', 'tool_activate makes one callable; tool_search shows parameters and finds more:'];
  let room = MORE_TOOLS_PROMPT_MAX_CHARS - lines.join('\n').length - 40;
  let shown = 0;
  for (const tool of tools) {
    const first = tool.description.replace(/\s+/g, ' ').trim().split(/(?<=[.!?])\s/)[0] ?? '';
    const line = `- ${tool.name}: ${first.length > MORE_TOOL_LINE_CHARS ? `${first.slice(0, MORE_TOOL_LINE_CHARS - 1)}…` : first}`;
    if (line.length + 1 > room) break;
    lines.push(line);
    room -= line.length + 1;
    shown++;
  }
  if (shown < tools.length) lines.push(`- (${tools.length - shown} more: tool_search finds them)`);
  return lines;
}

function userModelSection(user: string, entries: readonly UserModelEntry[]): string[] {
  const lines = [`## What you know of ${user}`, 'Your notes from earlier conversations (user_model_write keeps them up to date):'];
  // Room for the line that says how many were left out.
  let room = USER_MODEL_PROMPT_MAX_CHARS - lines.join('\n').length - 30;
  let shown = 0;
  for (const e of entries) {
    let line = `- ${e.dimension}: ${e.content.replace(/\s+/g, ' ').trim()}${e.confidence < 0.5 ? ' (unsure)' : ''}`;
    // The most confident aspect is shown even when it alone is too long, cut to fit.
    if (shown === 0 && line.length + 1 > room) line = `${line.slice(0, room - 2)}…`;
    if (line.length + 1 > room) break;
    lines.push(line);
    room -= line.length + 1;
    shown++;
  }
  if (shown < entries.length) lines.push(`- (${entries.length - shown} more not shown)`);
  return lines;
}

/** A background task's brief: what it is, that its last message is its report, and that nobody can be asked. */
function taskPrompt(ctx: PromptContext, when: string): string {
  return [
    `You are a background task started by "${ctx.persona.name}". It is ${when} (${ctx.timezone}).`,
    '- Do the task in the first message with the tools you have. You have no chat history, and nobody can answer questions: decide for yourself.',
    `- Your final message is your report; it goes back to ${ctx.persona.name}, not to a person. Make it complete and concise: what you found or did, and anything that failed.`,
    '- When a tool reports an error (timeout, invalid_arguments, denied ...), adapt or say so in your report.',
    ...(ctx.moreTools?.length ? ['', ...moreToolsSection(ctx.moreTools)] : []),
  ].join('\n');
}
