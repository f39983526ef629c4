import type { Persona } from '#src/config/persona.ts';
import type { Origin, TurnKind } from '#src/turns.ts';

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
}

const formats = new Map<string, Intl.DateTimeFormat>();

/** One formatter per time zone: making one costs more than the rest of the prompt. */
function dateFormat(timezone: string): Intl.DateTimeFormat {
  let format = formats.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-GB', { timeZone: timezone, dateStyle: 'full', timeStyle: 'short' });
    formats.set(timezone, format);
  }
  return format;
}

/** The system prompt: the persona's soul, then what the persona needs to know about this turn. */
export function buildSystemPrompt(ctx: PromptContext): string {
  const now = ctx.now ?? new Date();
  const when = dateFormat(ctx.timezone).format(now);
  const lines: string[] = [ctx.persona.soul, '', '## This turn', `- You are "${ctx.persona.name}". It is ${when} (${ctx.timezone}).`];

  const background = ctx.kind !== 'user';
  if (!background) {
    const where = ctx.origin
      ? `${ctx.origin.chatType === 'group' ? 'a group chat' : 'a direct chat'} on ${ctx.origin.connector}`
      : 'a chat';
    lines.push(`- You are talking in ${where}. Your final message is sent there as your reply.`);
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
  if (ctx.toolNames.includes('think_harder')) {
    lines.push('- For a hard problem, call think_harder before answering.');
  }
  if (ctx.persona.skills.length) {
    lines.push('', '## Skills', 'Read a skill file when a task matches it:');
    for (const s of ctx.persona.skills) lines.push(`- ${s.name}: ${s.description} (${s.file})`);
  }
  return lines.join('\n');
}
