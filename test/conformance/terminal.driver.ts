// The terminal for the conformance suite: the real connector as a person at the keyboard uses it (interactive: they
// may type while the persona works), reading lines from an in-memory stream and writing the screen to another. The
// driver watches the connector's boundary only to tell which part of the screen each message is, and to hand the
// core an event a second time.
import { PassThrough, Writable } from 'node:stream';
import { createTerminalConnector } from '../../connectors/terminal/index.ts';
import type { Connector, InboundEvent, InboundHandler } from '../../src/connector.ts';
import { chatConversationId } from '../../src/conversation-id.ts';
import { until } from '../support/until.ts';
import { PERSONA, setStreaming, settle, startConformanceApp, type ConformanceApp } from './app.ts';
import type { AckTiming, BotMessage, PlatformDriver, PostedMessage } from './driver.ts';

interface Handed {
  event: InboundEvent;
  ms?: number;
}

interface Shown {
  id: string;
  /** What the connector wrote for the message, and for each edit of it since. */
  screen: string;
  edits: string[];
  /** For a streamed answer: each piece written in place. */
  pieces?: number;
}

/** One write of the connector without its terminal furniture: cursor controls, the persona's label, the prompt. */
function cleanScreen(raw: string): string {
  return raw
    .replace(/\x1b\[[0-9;]*[A-Za-z]/g, '')
    .replace(/\r/g, '')
    .replace(/you> $/, '')
    .replace(/\n$/, '')
    .replace(new RegExp(`^${PERSONA}> `), '');
}

/** A message as the person reads it: its numbered choices apart from its text; an edit adds its outcome line. */
function readMessage(shown: Shown): BotMessage {
  const lines = cleanScreen(shown.screen).split('\n');
  const choices: string[] = [];
  const text: string[] = [];
  for (const line of lines) {
    const choice = /^ {2}\d+\) (.*)$/.exec(line);
    if (choice) choices.push(choice[1]);
    else if (line !== '  (reply with a number)') text.push(line);
  }
  const outcomes = shown.edits.map((edit) => cleanScreen(edit).trim());
  return {
    id: shown.id,
    text: [text.join('\n'), ...outcomes].join('\n\n'),
    // Once the outcome is shown, the numbers answer nothing.
    choices: outcomes.length ? [] : choices,
    formatted: false,
    revisions: (shown.pieces ?? 1) + shown.edits.length,
  };
}

export function createTerminalDriver(): PlatformDriver {
  let running: ConformanceApp;
  const input = new PassThrough();
  let screen = '';
  const output = new Writable({
    write(chunk, _encoding, done) {
      screen += String(chunk);
      done();
    },
  });
  let onInbound: InboundHandler | undefined;
  let handed: Handed[] = [];
  let shown: Shown[] = [];
  const conversation = chatConversationId(PERSONA, 'terminal', PERSONA);

  /** The terminal, with its inbound events timed and its screen output told apart per message. */
  function watched(terminal: Connector): Connector {
    return {
      ...terminal,
      async start(handler) {
        onInbound = handler;
        await terminal.start(async (event) => {
          const entry: Handed = { event };
          handed.push(entry);
          const started = Date.now();
          const result = await handler(event);
          entry.ms = Date.now() - started;
          return result;
        });
      },
      async send(message) {
        const from = screen.length;
        const sent = await terminal.send(message);
        shown.push({ id: sent.ids[0], screen: screen.slice(from), edits: [] });
        return sent;
      },
      // A streamed answer is one message on the screen, however many pieces it was written in.
      ...(terminal.draft
        ? {
            draft(target) {
              const inner = terminal.draft!(target);
              const from = screen.length;
              // On the screen from its first piece; the driver's own id, since the connector names it only at the end.
              const entry: Shown = { id: `draft-${shown.length}`, screen: '', edits: [], pieces: 0 };
              const written = () => {
                entry.pieces!++;
                entry.screen = screen.slice(from);
                if (!shown.includes(entry)) shown.push(entry);
              };
              return {
                update(text) {
                  inner.update(text);
                  written();
                },
                async finish(text) {
                  const sent = await inner.finish(text);
                  written();
                  return sent;
                },
              };
            },
          }
        : {}),
      async edit(chat, messageId, text) {
        const from = screen.length;
        await terminal.edit!(chat, messageId, text);
        shown.find((m) => m.id === messageId)?.edits.push(screen.slice(from));
      },
    };
  }

  const driver: PlatformDriver = {
    name: 'terminal',
    capabilities: {
      buttons: false,
      groups: false,
      threads: false,
      edits: true,
      otherPeople: false,
      mentionEveryone: false,
      markup: false,
      replyReferences: false,
      privateReplies: false,
      maxTextLength: 1_000_000,
      failingPosts: false,
      idempotentPosts: false,
      ackDeadlineMs: 3000,
    },
    get model() {
      return running.model;
    },
    get tools() {
      return running.tools;
    },

    async start() {
      running = await startConformanceApp({
        places: { connector: 'terminal', users: [], approvers: [], primaryChat: PERSONA },
        connectors: (app) => [
          watched(
            createTerminalConnector({
              persona: PERSONA,
              input,
              output,
              interactive: true,
              waitForIdle: (id) => app().waitForIdle(id, undefined, { orQuestion: true }),
              onDone: () => {},
            }),
          ),
        ],
      });
    },

    async stop() {
      await running?.stop();
      input.end();
    },

    async reset() {
      await settle(running.app, [conversation]);
      setStreaming(running.app, false);
      running.model.reset();
      running.tools.runs.length = 0;
      handed = [];
      shown = [];
    },

    address: () => 'terminal:owner',

    async dm(from, text) {
      if (from !== 'owner') throw new Error('only the owner types at the terminal');
      const index = handed.length;
      input.write(`${text}\n`);
      const entry = await until(() => (handed[index]?.ms !== undefined ? handed[index] : undefined), `the terminal to hand "${text}" to the core`);
      return { id: entry.event.externalId, chat: 'dm:owner', event: entry.event };
    },

    async post() {
      throw new Error('the terminal has no groups');
    },

    async click() {
      throw new Error('the terminal has no buttons');
    },

    async redeliver(message: PostedMessage) {
      if (!onInbound) throw new Error('the terminal is not started');
      const entry: Handed = { event: message.event as InboundEvent };
      handed.push(entry);
      const started = Date.now();
      await onInbound(entry.event);
      entry.ms = Date.now() - started;
    },

    sent(chat) {
      return chat === 'dm:owner' ? shown.map(readMessage) : [];
    },

    ackTimings(): AckTiming[] {
      return handed.flatMap((h) => (h.ms === undefined ? [] : [{ kind: 'message' as const, ms: h.ms }]));
    },

    rejectNextMarkup() {
      throw new Error('the terminal parses no markup');
    },

    failPost() {
      throw new Error('the terminal cannot fail a post');
    },

    setStreaming(on) {
      setStreaming(running.app, on);
    },

    idle() {
      return running.app.waitForIdle(conversation, 15_000);
    },
  };
  return driver;
}
