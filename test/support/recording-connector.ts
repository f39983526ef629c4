import type { Connector, ConnectorCapabilities, InboundEvent, InboundHandler, IngressResult, OutboundMessage } from '../../src/connector.ts';

export interface RecordingConnector extends Connector {
  sent: OutboundMessage[];
  /** Reactions set, and "typing…" shown, in order. */
  reactions: { chat: string; messageId: string; emoji: string }[];
  typings: { chat: string; thread?: string }[];
  /** Messages edited (a question's outcome), in order. */
  edits: { chat: string; messageId: string; text: string }[];
  waitForEdits(n: number, timeoutMs?: number): Promise<{ chat: string; messageId: string; text: string }[]>;
  /** Delivers an event as the platform would, resolving when the core has accepted it. */
  inject(event: Partial<InboundEvent> & { text: string }): Promise<IngressResult>;
  waitForSent(n: number, timeoutMs?: number): Promise<OutboundMessage[]>;
  /** Makes the next `count` sends fail with this error. */
  failNext(count: number, error: Error): void;
  /** Runs once the platform has a message, before the send returns (a database that goes away at that moment). */
  afterSend?: (message: OutboundMessage) => Promise<void>;
}

let seq = 0;

/** A connector that records what the core sends and lets a test play the platform. */
export interface RecordingOptions {
  typing?: boolean;
  buttons?: boolean;
  capabilities?: Partial<ConnectorCapabilities>;
  /** Like Slack: a reply to a group message outside a thread opens a thread on that message (named after it). */
  opensThreads?: boolean;
  /** Each send takes this long, as a slow platform's would (`sending` counts the sends under way). */
  sendDelayMs?: number;
}

export function createRecordingConnector(id = 'chat', options: RecordingOptions = {}): RecordingConnector {
  const edits: RecordingConnector['edits'] = [];
  const reactions: RecordingConnector['reactions'] = [];
  const typings: RecordingConnector['typings'] = [];
  let handler: InboundHandler | undefined;
  const sent: OutboundMessage[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  let failures: { count: number; error: Error } | undefined;
  const connector: RecordingConnector = {
    id,
    capabilities: {
      buttons: options.buttons ?? false,
      edits: { perMinute: { dm: 60, group: 20 } },
      removeButtons: true,
      react: false,
      threads: true,
      typing: options.typing ?? false,
      privateReplies: false,
      maxTextLength: 4096,
      ...options.capabilities,
    },
    sent,
    edits,
    reactions,
    typings,
    async react(chat, messageId, emoji) {
      reactions.push({ chat, messageId, emoji });
    },
    async typing(chat, thread) {
      typings.push({ chat, ...(thread ? { thread } : {}) });
    },
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
      if (options.sendDelayMs) await new Promise((r) => setTimeout(r, options.sendDelayMs));
      if (failures && failures.count > 0) {
        failures.count--;
        throw failures.error;
      }
      const opened = options.opensThreads && !message.thread && message.replyTo && message.chat.startsWith('g') ? `t-${message.replyTo}` : undefined;
      sent.push(opened ? { ...message, thread: opened } : message);
      for (const w of [...waiters]) if (sent.length >= w.n) w.resolve();
      const ids = [`out-${sent.length}`];
      await connector.afterSend?.(message);
      return { ids, ...(opened ? { thread: opened } : {}) };
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
  return connector;
}
