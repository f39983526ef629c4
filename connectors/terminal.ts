import { randomUUID } from 'node:crypto';
import os from 'node:os';
import readline from 'node:readline';
import type { Connector, InboundHandler, OutboundMessage, SentMessage } from '#src/connector.ts';

export interface TerminalOptions {
  persona: string;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** Where problems are reported (stdout carries only the conversation). */
  errors?: NodeJS.WritableStream;
  /** A person at a keyboard (prompts and labels) rather than a script piping lines in. */
  interactive: boolean;
  /** Resolves when the conversation has nothing left to do (scripted mode waits for it between lines). */
  waitForIdle: (conversationId: string) => Promise<void>;
  /** Called once the input has ended and every reply is out. */
  onDone: () => void;
}


/**
 * `parlor chat`: the local owner talking to one persona. It goes through the same ingress, turn jobs and
 * delivery as any platform. Piped input is one message per line, each answered before the next is sent.
 */
export function createTerminalConnector(options: TerminalOptions): Connector {
  const { output, interactive } = options;
  // One chat per persona, so two terminals talking to different personas never see each other's replies.
  const chat = options.persona;
  let rl: readline.Interface | undefined;
  let stopped = false;
  const user = os.userInfo().username;

  const prompt = () => {
    if (interactive && !stopped) output.write('you> ');
  };
  const write = (text: string) => {
    if (interactive) output.write(`\r${options.persona}> ${text}\n`);
    else output.write(`${text}\n`);
    prompt();
  };

  return {
    id: 'terminal',
    chats: [chat],
    capabilities: { buttons: false, edit: true, react: false, threads: false, typing: false, maxTextLength: 1_000_000 },

    async start(onInbound: InboundHandler) {
      rl = readline.createInterface({ input: options.input, terminal: false });
      const lines: string[] = [];
      let ended = false;
      let busy = false;
      let conversationId: string | undefined;
      const pump = async () => {
        if (busy) return;
        busy = true;
        while (lines.length && !stopped) {
          const text = lines.shift()!;
          // One failed line is reported and the rest still go through.
          try {
            const result = await onInbound({
              connector: 'terminal',
              externalId: randomUUID(),
              kind: 'message',
              chat: { id: chat, type: 'dm' },
              sender: { id: 'owner', name: user },
              text,
              persona: options.persona,
              trusted: true,
            });
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
      rl?.close();
    },

    async send(message: OutboundMessage): Promise<SentMessage> {
      // No buttons here: choices are numbered, and typing a number (or the label) answers.
      const choices = (message.buttons ?? []).flat().map((b, i) => `  ${i + 1}) ${b.label}`);
      const hint = choices.length ? ['  (reply with a number)'] : [];
      const text = [message.text, ...(message.files ?? []).map((f) => `[file: ${f}]`), ...choices, ...hint].join('\n');
      write(text);
      return { ids: [randomUUID()] };
    },

    async edit(_chat, _messageId, text) {
      // A question's outcome: its last line ("✅ Allowed once by you").
      write(`  ${text.slice(text.lastIndexOf('\n') + 1)}`);
    },
  };
}
