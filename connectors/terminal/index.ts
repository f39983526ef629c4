import { randomUUID } from 'node:crypto';
import os from 'node:os';
import readline from 'node:readline';
import type { Connector, InboundHandler, OutboundMessage, SentMessage } from '#src/connector.ts';
import { createTerminalRenderer } from './render.ts';

export interface TerminalOptions {
  persona: string;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** Where problems are reported (stdout carries only the conversation). */
  errors?: NodeJS.WritableStream;
  /** A person at a keyboard (prompts, labels, a "thinking…" line, Markdown drawn) rather than a script piping lines in. */
  interactive: boolean;
  /** Resolves when the conversation has nothing left to do (scripted mode waits for it between lines). */
  waitForIdle: (conversationId: string) => Promise<void>;
  /** Called once the input has ended and every reply is out. */
  onDone: () => void;
}

export interface TerminalConnector extends Connector {
  /** Stops the running turn, as `/stop` would (Ctrl-C). */
  interrupt(): Promise<void>;
  /** The conversation this terminal talks in, once it has sent a message. */
  conversationId(): string | undefined;
}

/**
 * `parlor chat`: the local owner talking to one persona. It goes through the same ingress, turn jobs and
 * delivery as any platform. Piped input is one message per line, each answered before the next is sent.
 */
export function createTerminalConnector(options: TerminalOptions): TerminalConnector {
  const { output, interactive } = options;
  // One chat per persona, so two terminals talking to different personas never see each other's replies.
  const chat = options.persona;
  let rl: readline.Interface | undefined;
  let stopped = false;
  let handler: InboundHandler | undefined;
  let conversationId: string | undefined;
  const user = os.userInfo().username;
  const render = interactive ? createTerminalRenderer() : (text: string) => text;
  /** "thinking…" is on screen (interactive only), to be replaced by whatever comes next. */
  let thinking = false;
  /** An answer is being written on screen as it comes. */
  let drafting = false;

  const clearThinking = () => {
    if (!thinking) return;
    thinking = false;
    output.write('\r\x1b[2K');
  };
  const prompt = () => {
    if (interactive && !stopped) output.write('you> ');
  };
  const write = (text: string) => {
    clearThinking();
    if (interactive) output.write(`\r\x1b[2K${options.persona}> ${text}\n`);
    else output.write(`${text}\n`);
    prompt();
  };

  const event = (text: string) => ({
    connector: 'terminal',
    externalId: randomUUID(),
    kind: 'message' as const,
    chat: { id: chat, type: 'dm' as const },
    sender: { id: 'owner', name: user },
    text,
    persona: options.persona,
    trusted: true,
  });

  return {
    id: 'terminal',
    local: true,
    chats: [chat],
    capabilities: {
      buttons: false,
      // The screen is written once; an "edit" adds the outcome line, and a streamed answer grows as it is written.
      edits: { perMinute: { dm: 6000, group: 6000 } },
      removeButtons: true,
      react: false,
      threads: false,
      typing: interactive,
      privateReplies: true,
      maxTextLength: 1_000_000,
    },

    async start(onInbound: InboundHandler) {
      handler = onInbound;
      rl = readline.createInterface({ input: options.input, terminal: false });
      const lines: string[] = [];
      let ended = false;
      let busy = false;
      const pump = async () => {
        if (busy) return;
        busy = true;
        while (lines.length && !stopped) {
          const text = lines.shift()!;
          // One failed line is reported and the rest still go through.
          try {
            const result = await onInbound(event(text));
            conversationId = result.conversationId ?? conversationId;
            // A script gets each answer before its next line is read; a person may type ahead.
            if (!interactive && result.conversationId) await options.waitForIdle(result.conversationId);
          } catch (err) {
            (options.errors ?? process.stderr).write(`parlor: could not send "${text.slice(0, 40)}": ${err instanceof Error ? err.message : String(err)}\n`);
          }
        }
        busy = false;
        if (ended && lines.length === 0 && !stopped) {
          // Input is over: leave once the last answer is out.
          if (conversationId) await options.waitForIdle(conversationId).catch(() => {});
          options.onDone();
        }
      };
      rl.on('line', (line) => {
        if (!line.trim()) return prompt();
        lines.push(line);
        void pump();
      });
      rl.on('close', () => {
        ended = true;
        void pump();
      });
      prompt();
    },

    async stop() {
      stopped = true;
      clearThinking();
      rl?.close();
    },

    async interrupt() {
      if (!handler) return;
      await handler(event('/stop'));
    },

    conversationId: () => conversationId,

    async send(message: OutboundMessage): Promise<SentMessage> {
      // No buttons here: choices are numbered, and typing a number (or the label) answers.
      const choices = (message.buttons ?? []).flat().map((b, i) => `  ${i + 1}) ${b.label}`);
      const hint = choices.length ? ['  (reply with a number)'] : [];
      // A question (its buttons, or the text of a long one, which opens with its 🔐 or ❓) is shown as written: what is
      // approved is exactly what is shown. Replies are drawn.
      const body = choices.length || /^(🔐|❓)/u.test(message.text) ? message.text : render(message.text);
      const text = [body, ...(message.files ?? []).map((f) => `[file: ${f}]`), ...choices, ...hint].join('\n');
      write(text);
      return { ids: [randomUUID()] };
    },

    async edit(_chat, _messageId, text) {
      // A question's outcome: its last line ("✅ Allowed once by you").
      write(`  ${text.slice(text.lastIndexOf('\n') + 1)}`);
    },

    // At a keyboard the answer is written as it comes; piped, each answer stays one block.
    ...(interactive
      ? {
          draft: () => {
            let printed = '';
            let started = false;
            const put = (text: string) => {
              if (!started) {
                clearThinking();
                output.write(`\r\x1b[2K${options.persona}> `);
                started = true;
                drafting = true;
              }
              // What a new model call writes replaces the text before a tool call: it starts on a line of its own.
              if (text.startsWith(printed)) output.write(text.slice(printed.length));
              else output.write(`\n${options.persona}> ${text}`);
              printed = text;
            };
            return {
              update: put,
              async finish(text: string) {
                put(text);
                drafting = false;
                output.write('\n');
                prompt();
                return { ids: [randomUUID()] };
              },
            };
          },
        }
      : {}),

    async typing() {
      // Shown while a turn works; the next message (or prompt) replaces it. An answer being written is sign enough.
      if (!interactive || thinking || stopped || drafting) return;
      thinking = true;
      output.write(`\r\x1b[2K${options.persona}> thinking…`);
    },
  };
}
