import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import { setConversationActiveTools } from '#src/db/conversations.ts';
import type { TurnTools } from '#src/tools/catalog.ts';
import { originTarget, turnChat } from '#src/tools/targets.ts';
import type { ToolContext } from '#src/tools/types.ts';
import type { Origin, TurnJobData } from '#src/turns.ts';
import type { TurnRunnerDeps } from './turn-runner.ts';

/**
 * What a turn's tools see of it: who it is for and acts as, where it speaks, and the services they may use. `origin`
 * is read whenever a tool asks: a message read mid-turn from someone less trusted makes the turn act as them.
 */
export function turnToolContext(
  deps: TurnRunnerDeps,
  turn: {
    data: TurnJobData;
    turnId: string;
    /** Whom the turn speaks as (a task's persona has no secrets). */
    persona: Persona;
    /** The persona whose secrets are masked in what the tools return. */
    owner: Persona;
    origin: () => Origin | undefined;
    signal: AbortSignal;
    log: Logger;
    tools: TurnTools;
    deliver: ToolContext['deliver'];
  },
): ToolContext {
  const { data, turnId, persona, tools } = turn;
  const ctx: ToolContext = {
    persona,
    conversationId: data.conversationId,
    turnId,
    kind: data.kind,
    get origin() {
      return turn.origin();
    },
    signal: turn.signal,
    log: turn.log,
    maskSecrets: Object.values(turn.owner.secrets),
    deliver: turn.deliver,
    connectorIds: deps.knownConnectors,
    remoteMethod: (request) => {
      if (!deps.questions) throw new Error('asking a person is not available here');
      const destination = turnChat(data.kind, data.origin, persona);
      return deps.questions.remoteMethod({ ...ctx, signal: request.signal ?? ctx.signal }, request, destination);
    },
    askUser: (request) => {
      if (!deps.questions) throw new Error('asking a person is not available here');
      return deps.questions.ask(ctx, request);
    },
    get scheduling() {
      return deps.scheduler?.forTurn({ persona, conversationId: data.conversationId, origin: turn.origin() });
    },
    get personaMail() {
      return deps.personaMail?.forTurn({ persona, data });
    },
    get subagents() {
      return deps.subagents?.forTurn({ persona, conversationId: data.conversationId, turnId, kind: data.kind, origin: turn.origin() });
    },
    tiers: {
      search: (query, limit) => tools.search(query, limit),
      count: () => tools.listed().length,
      activate: async (name) => {
        const result = tools.activate(name);
        if (!('error' in result) && !result.already) await setConversationActiveTools(deps.database.db, data.conversationId, tools.activeNames());
        return result;
      },
    },
    replyTarget: data.deliver ?? (data.origin && originTarget(data.origin)),
    react: async (emoji, messageId) => {
      const origin = data.origin;
      const target = messageId ?? origin?.messageId;
      if (!origin || !target) throw new Error('there is no message to react to in this turn');
      const connector = deps.connectors.get(origin.connector);
      if (connector && (!connector.react || !connector.capabilities.react)) throw new Error(`${origin.connector} does not support reactions`);
      // Through the ledger, like a message: set once, by this process or by the one that runs the connector.
      const result = await deps.delivery.deliver({
        dedupeKey: `react:${turnId}:${target}:${emoji}`,
        kind: 'reaction',
        turnId,
        conversationId: data.conversationId,
        connector: origin.connector,
        chat: origin.chat,
        thread: origin.thread,
        replyTo: target,
        text: emoji,
      });
      if (result.status === 'failed') throw new Error(result.error ?? 'the reaction could not be set');
      return result.status === 'queued' ? 'queued' : 'done';
    },
  };
  return ctx;
}
