// Persona to persona: a message to another persona is a turn job in its inbox conversation with the sender
// (`<target>:inbox:<source>`), answered under the target's own soul, tools and secrets. The reply goes back to the
// asker waiting for it (ask_persona), or else into the sender's inbox with the target (`<source>:inbox:<target>`)
// as a wake turn of the sender's. Who may write to whom is the target's choice (`personas` in connectors.jsonc).
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import { inboxConversationId, parseConversationId } from '#src/conversation-id.ts';
import { CHANNELS, listen, notify } from '#src/db/channels.ts';
import type { Database } from '#src/db/client.ts';
import { abandonPersonaAsk, answerPersonaAsk, insertPersonaAsk, personaAskReply } from '#src/db/persona-asks.ts';
import type { JobSystem } from '#src/jobs/boss.ts';
import type { PersonaMailApi } from '#src/tools/types.ts';
import type { TurnJobData } from '#src/turns.ts';

export interface PersonaMail {
  forTurn(turn: { persona: Persona; data: Pick<TurnJobData, 'chain'> }): PersonaMailApi;
  /** A message's turn ended in the target: its reply goes to the waiting asker, or into the sender's inbox. */
  answered(data: TurnJobData, reply: string | undefined): Promise<void>;
  stop(): Promise<void>;
}

export function createPersonaMail(deps: {
  database: Database;
  jobs: Pick<JobSystem, 'enqueueTurn'>;
  personas: () => readonly Persona[];
  log: Logger;
  /** How often a waiting asker looks for its reply besides the notification that it came (a missed one). */
  recheckMs?: number;
}): PersonaMail {
  const { db } = deps.database;
  const log = deps.log.child({ module: 'persona-mail' });
  const recheckMs = deps.recheckMs ?? 5_000;
  // Askers waiting in this process, woken by the notification that their reply is there.
  const waiters = new Map<string, () => void>();
  let listening: ReturnType<typeof listen> | undefined;
  const wakeAll = () => {
    for (const wake of waiters.values()) wake();
  };
  const startListening = () => (listening ??= listen(deps.database.sql, CHANNELS.personaAsk, (id) => waiters.get(id)?.(), wakeAll));

  /** Until the ask's reply is noticed, the recheck comes round, the deadline passes or the turn stops. */
  async function waitForWord(id: string, untilMs: number, signal: AbortSignal): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort = () => {};
    try {
      await new Promise<void>((resolve) => {
        waiters.set(id, resolve);
        timer = setTimeout(resolve, Math.max(0, Math.min(recheckMs, untilMs - Date.now())));
        onAbort = resolve;
        signal.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      waiters.delete(id);
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  function check(source: Persona, targetName: string, chain: readonly string[]): Persona | { error: string } {
    if (targetName === source.name) return { error: 'that is you; a persona cannot write to itself' };
    const target = deps.personas().find((p) => p.name === targetName);
    const known = deps.personas().map((p) => p.name).filter((n) => n !== source.name).sort();
    if (!target) return { error: `no persona named "${targetName}"${known.length ? ` (there are: ${known.join(', ')})` : ''}` };
    if (!target.personas.includes(source.name)) {
      return { error: `${targetName} does not take messages from ${source.name}; its connectors.jsonc would have to list "${source.name}" in "personas"` };
    }
    if (chain.includes(targetName)) return { error: `a loop: ${[...chain, source.name, targetName].join(' → ')}; answer without asking ${targetName} again` };
    return target;
  }

  async function post(source: Persona, target: Persona, text: string, chain: readonly string[], askId?: string) {
    await deps.jobs.enqueueTurn({
      conversationId: inboxConversationId(target.name, source.name),
      persona: target.name,
      kind: 'persona',
      prompt: `[message from persona ${source.name}]\n${text}`,
      chain: [...chain, source.name],
      ...(askId ? { askId } : {}),
    });
  }

  return {
    forTurn({ persona, data }) {
      const chain = data.chain ?? [];
      return {
        async send(targetName, text) {
          const target = check(persona, targetName, chain);
          if ('error' in target) return target;
          await post(persona, target, text, chain);
          log.info({ from: persona.name, to: target.name }, 'message to a persona sent');
          return { sent: true };
        },
        async ask(targetName, text, timeoutMs, signal) {
          const target = check(persona, targetName, chain);
          if ('error' in target) return target;
          const id = randomUUID();
          await startListening();
          await insertPersonaAsk(db, { id, source: persona.name, target: target.name });
          await post(persona, target, text, chain, id);
          const deadline = Date.now() + timeoutMs;
          while (Date.now() < deadline && !signal.aborted) {
            const reply = await personaAskReply(db, id);
            if (reply !== undefined) return { reply };
            await waitForWord(id, deadline, signal);
          }
          // Given up: the reply, when it comes, goes to the inbox instead (unless it came just now).
          const late = await abandonPersonaAsk(db, id);
          return late !== undefined ? { reply: late } : { pending: true };
        },
      };
    },

    async answered(data, reply) {
      const parts = parseConversationId(data.conversationId);
      if (parts?.kind !== 'inbox') return;
      const text = reply?.trim() || '(no reply)';
      // The asker still waits: it takes the reply as its tool's result.
      if (data.askId && (await answerPersonaAsk(db, data.askId, text))) {
        await notify(db, CHANNELS.personaAsk, data.askId);
        return;
      }
      await deps.jobs.enqueueTurn({
        conversationId: inboxConversationId(parts.other, parts.persona),
        persona: parts.other,
        kind: 'wake',
        prompt: `[reply from persona ${parts.persona}]\n${text}`,
        chain: data.chain,
      });
    },

    async stop() {
      wakeAll();
      await (await listening)?.unlisten();
    },
  };
}
