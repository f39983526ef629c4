import type { Connector, InboundEvent, InboundHandler, IngressResult, OutboundMessage } from '../../src/connector.ts';

export interface RecordingConnector extends Connector {
  sent: OutboundMessage[];
  /** Messages edited (a question's outcome), in order. */
  edits: { chat: string; messageId: string; text: string }[];
  waitForEdits(n: number, timeoutMs?: number): Promise<{ chat: string; messageId: string; text: string }[]>;
  /** Delivers an event as the platform would, resolving when the core has accepted it. */
  inject(event: Partial<InboundEvent> & { text: string }): Promise<IngressResult>;
  waitForSent(n: number, timeoutMs?: number): Promise<OutboundMessage[]>;
  /** Makes the next `count` sends fail with this error. */
  failNext(count: number, error: Error): void;
}

let seq = 0;

/** A connector that records what the core sends and lets a test play the platform. */
export function createRecordingConnector(id = 'chat', options: { typing?: boolean; buttons?: boolean } = {}): RecordingConnector {
  const edits: RecordingConnector['edits'] = [];
  let handler: InboundHandler | undefined;
  const sent: OutboundMessage[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  let failures: { count: number; error: Error } | undefined;
  return {
    id,
    capabilities: { buttons: options.buttons ?? false, edit: true, react: false, threads: true, typing: options.typing ?? false, maxTextLength: 4096 },
    sent,
    edits,
    async edit(chat, messageId, text) {
      edits.push({ chat, messageId, text });
    },
    async waitForEdits(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (edits.length < n) {
        if (Date.now() > deadline) throw new Error(`expected ${n} edits, got ${JSON.stringify(edits.map((e) => e.text))}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return edits;
    },
    async start(onInbound) {
      handler = onInbound;
    },
    async stop() {
      handler = undefined;
    },
    async send(message) {
      if (failures && failures.count > 0) {
        failures.count--;
        throw failures.error;
      }
      sent.push(message);
      for (const w of [...waiters]) if (sent.length >= w.n) w.resolve();
      return { ids: [`out-${sent.length}`] };
    },
    async inject(partial) {
      if (!handler) throw new Error('connector not started');
      seq++;
      return handler({
        connector: id,
        externalId: partial.externalId ?? `evt-${process.pid}-${seq}`,
        kind: 'message',
        chat: { id: 'u1', type: 'dm' },
        sender: { id: 'u1', name: 'Ana' },
        messageId: `m-${seq}`,
        ...partial,
      });
    },
    waitForSent(n, timeoutMs = 10_000) {
      if (sent.length >= n) return Promise.resolve(sent);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`expected ${n} sent messages, got ${sent.length}: ${JSON.stringify(sent.map((m) => m.text))}`)),
          timeoutMs,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve(sent);
          },
        });
      });
    },
    failNext(count, error) {
      failures = { count, error };
    },
  };
}
