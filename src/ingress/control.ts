import type postgres from 'postgres';
import type { InboundEvent } from '#src/connector.ts';
import { isPersonaPerson, type Persona } from '#src/config/persona.ts';
import type { Queryable } from '#src/db/client.ts';
import { getConversation, resetConversationHistory, setConversationThinking, ensureConversation } from '#src/db/conversations.ts';
import { clearConversationSummary } from '#src/db/conversation-summaries.ts';
import { countMessages } from '#src/db/messages.ts';
import { conversationUsage, requestTurnCancel, runningTurn, setAsidePendingMessages } from '#src/db/turns.ts';
import { HELP_TEXT, SHARED_CONVERSATION_COMMANDS, type ControlCommand } from './commands.ts';
import { CHANNELS, notify } from '#src/db/channels.ts';

export interface CommandContext {
  persona: Persona;
  conversationId: string;
  event: InboundEvent;
}

/** A command's answer; `personal` when it concerns only the sender (shown to them alone where the platform can). */
export interface CommandReply {
  text: string;
  personal: boolean;
}

/** Commands whose answer concerns only whoever asked: the others change the conversation for everyone in it. */
const PERSONAL_COMMANDS: readonly ControlCommand['name'][] = ['status', 'help'];

export interface CommandHandler {
  run(command: ControlCommand, ctx: CommandContext): Promise<CommandReply>;
  /** What `/stop` does, without a reply: the running turn is stopped, or the waiting messages set aside. */
  stop(conversationId: string): Promise<'stopped' | { setAside: number } | 'idle'>;
}


/**
 * Whether the sender may change this conversation for everyone in it. In a DM the sender is always one of the
 * persona's users (routing lets no one else in) and the local terminal is its owner; in a group, other members
 * talk to the persona but do not get to wipe or reconfigure the conversation the group shares.
 */
function mayChangeConversation(persona: Persona, event: InboundEvent): boolean {
  return event.trusted === true || event.chat.type === 'dm' || isPersonaPerson(persona, `${event.connector}:${event.sender.id}`);
}

/** Runs control commands against the conversation's stored state; they never wait for a turn. */
export function createCommandHandler(deps: {
  db: Queryable;
  sql: postgres.Sql;
  defaultModel: string;
  /** Stops a turn running in this process at once; other processes hear it on the cancel channel. */
  cancelLocal: (turnId: string) => boolean;
  /** Cancels the background tasks a conversation started (its /stop stops them too); resolves with how many. */
  cancelTasks?: (conversationId: string) => Promise<number>;
}): CommandHandler {
  const { db } = deps;

  async function stopRunningTurn(conversationId: string): Promise<boolean> {
    const turn = await runningTurn(db, conversationId);
    if (!turn) return false;
    await requestTurnCancel(db, turn.id);
    if (!deps.cancelLocal(turn.id)) await notify(db, CHANNELS.cancel, turn.id);
    return true;
  }

  async function stop(conversationId: string): Promise<'stopped' | { setAside: number } | 'idle'> {
    if (await stopRunningTurn(conversationId)) return 'stopped';
    // Not started yet (its job is queued): set its messages aside, so the job finds nothing to do.
    const dropped = await setAsidePendingMessages(db, conversationId);
    if (dropped > 0) return { setAside: dropped };
    // It may have started in the meantime.
    return (await stopRunningTurn(conversationId)) ? 'stopped' : 'idle';
  }

  return {
    stop,
    async run(command, ctx) {
      if (SHARED_CONVERSATION_COMMANDS.includes(command.name) && !mayChangeConversation(ctx.persona, ctx.event)) {
        return { text: `Only the people I work for can use /${command.name} here.`, personal: true };
      }
      return { text: await answer(command, ctx), personal: PERSONAL_COMMANDS.includes(command.name) };
    },
  };

  async function answer(command: ControlCommand, { persona, conversationId, event }: CommandContext): Promise<string> {
    await ensureConversation(db, {
      id: conversationId,
      persona: persona.name,
      connector: event.connector,
      chat: event.chat.id,
      thread: event.chat.thread,
    });
    switch (command.name) {
      case 'stop': {
        const stopped = await stop(conversationId);
        const tasks = (await deps.cancelTasks?.(conversationId)) ?? 0;
        const alsoTasks = tasks ? ` ${tasks === 1 ? 'One background task is' : `${tasks} background tasks are`} cancelled too.` : '';
        if (stopped === 'stopped') return `Stopped.${alsoTasks}`;
        if (stopped === 'idle') return tasks ? `Cancelled ${tasks === 1 ? 'one background task' : `${tasks} background tasks`}.` : 'Nothing is running.';
        return (stopped.setAside === 1 ? 'Stopped: I will not answer that message.' : `Stopped: I will not answer those ${stopped.setAside} messages.`) + alsoTasks;
      }
      case 'new':
        await resetConversationHistory(db, conversationId);
        // The summary of the earlier messages goes with them; memories stay.
        await clearConversationSummary(db, conversationId);
        return 'Starting fresh: I will not see the earlier messages of this chat.';
      case 'think': {
        const conversation = await getConversation(db, conversationId);
        const on = command.on ?? !conversation?.thinking;
        await setConversationThinking(db, conversationId, on);
        return on ? 'Thinking harder on every answer in this chat.' : 'Back to normal thinking.';
      }
      case 'status': {
        const conversation = await getConversation(db, conversationId);
        const [turn, inContext, usage] = await Promise.all([
          runningTurn(db, conversationId),
          countMessages(db, conversationId, conversation?.historyAfterId ?? 0),
          conversationUsage(db, conversationId),
        ]);
        return [
          `Persona: ${persona.name} · model ${persona.tools.model ?? deps.defaultModel}`,
          `Conversation: ${conversationId}`,
          turn ? `Working on a ${turn.kind} turn since ${turn.startedAt.toISOString()}` : 'Idle',
          `Messages since the last /new: ${inContext} · turns: ${usage.turns} · tokens: ${usage.input} in${usage.cacheRead ? ` (${usage.cacheRead} from the prompt cache)` : ''}, ${usage.output} out`,
          `Thinking: ${conversation?.thinking || persona.tools.thinking ? 'on' : 'off'}`,
        ].join('\n');
      }
      case 'help':
        return HELP_TEXT;
    }
  }
}
