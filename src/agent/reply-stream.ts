import type { Connector, DraftTarget, ReplyDraft, SentMessage } from '#src/connector.ts';
import { stripInternalText } from './visible-text.ts';

/** What a draft may show of a reply being written: never reasoning, markers, or the start of a tag not yet closed. */
export function visibleDraft(text: string): string {
  // `<thi` at the very end may be the start of a reasoning block: held back until it is clear what it is.
  return stripInternalText(text.replace(/<[a-z]{0,9}$/i, ''));
}

export interface ReplyStream {
  /** A model call starts: what it writes replaces what the previous one wrote (text before a tool call). */
  startCall(): void;
  /** More text from the model. */
  append(delta: string): void;
  /** Whether anything was shown (a draft message exists). */
  shown(): boolean;
  /**
   * The draft takes the final reply (or, when the turn ends without one, what it showed is kept as finished, with
   * `suffix`); resolves with the draft's messages, or undefined when nothing was ever shown.
   */
  finish(reply: string | undefined, suffix?: string): Promise<SentMessage | undefined>;
}

/**
 * A user turn's answer as one message that grows while the model writes it. The core decides what may be shown
 * (internal text never is); the connector's draft paces the edits to the platform's limits. `beforeWrite` goes to the
 * draft, which awaits it before each write: a process back from a long stop, whose turn others took over meanwhile,
 * writes nothing into the chat (a turn's messages and reactions go through the ledger, which waits as well).
 */
export function createReplyStream(
  connector: Required<Pick<Connector, 'draft'>>,
  target: DraftTarget,
  beforeWrite?: () => Promise<void>,
): ReplyStream {
  let draft: ReplyDraft | undefined;
  let written = '';
  let lastShown = '';
  const open = () => (draft ??= connector.draft(beforeWrite ? { ...target, beforeWrite } : target));
  return {
    startCall() {
      written = '';
    },
    append(delta) {
      written += delta;
      const visible = visibleDraft(written);
      if (!visible || visible === lastShown) return;
      lastShown = visible;
      open().update(visible);
    },
    // A draft a crashed run of the turn left is on screen already: whatever this run ends with goes into it.
    shown: () => draft !== undefined || target.resume !== undefined,
    async finish(reply, suffix = '') {
      if (!draft && target.resume === undefined) return undefined;
      const text = reply ?? (lastShown ? `${lastShown}${suffix}` : suffix.trim() || '…');
      return open().finish(text);
    },
  };
}
