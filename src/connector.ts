// The contract between the core and a platform adapter (connectors/). Capabilities are data, not hooks.

/**
 * What only one process may receive with at a time (a bot token's long polling, a gateway session, a socket): two
 * would split or duplicate the platform's events. The core holds a lock on it across the deployment while the
 * connector runs, and refuses to start a second one. Absent where several processes may receive (webhooks, HTTP).
 */
export interface ExclusiveReceiver {
  /** Unique per token and way of receiving (`telegram-polling:<hash of the token>`); never the token itself. */
  key: string;
  /** How the refusal names it: "Telegram long polling for @parlor_bot". */
  describe: string;
}

export interface ConnectorCapabilities {
  buttons: boolean;
  /** The bot may edit its own messages (a streamed reply, a question's outcome); absent: it cannot. */
  edits?: EditLimits;
  /** An edit can take a message's buttons off (a question's outcome replaces them). */
  removeButtons: boolean;
  /** Reactions, written as Unicode emoji in the core (the connector maps them to its platform's names). */
  react: boolean;
  threads: boolean;
  /**
   * A thread the bot posts in becomes the persona's: what people post there afterwards continues the conversation
   * without a new mention (Slack, where a mention is answered in a thread on it). Recorded before the message goes,
   * so a quick answer in the thread is never taken for chatter. Threads a send reports are recorded too.
   */
  ownsReplyThreads?: boolean;
  typing: boolean;
  /** `send` with `privateTo` in a group shows the message to that person alone (elsewhere it is sent to the chat). */
  privateReplies: boolean;
  /** Longest message the platform accepts; the connector splits longer text itself. */
  maxTextLength: number;
  /**
   * How soon the platform wants an event acknowledged (Discord and Slack: 3 s); the connector answers by then even
   * when the core is still storing it (a redelivery is deduplicated).
   */
  ackDeadlineMs?: number;
}

/** What the platform allows of edits to one of the bot's messages. */
export interface EditLimits {
  /** How long after sending a message it can still be edited; no limit when absent. */
  windowMs?: number;
  /** Edits of one message a minute the platform tolerates: in a DM, and in a group. */
  perMinute: { dm: number; group: number };
}

/** The connector among those running here that serves this chat (a terminal serves only its own), if one does. */
export function connectorForChat(connectors: ReadonlyMap<string, Connector>, id: string, chat: string): Connector | undefined {
  const connector = connectors.get(id);
  return connector && (!connector.chats || connector.chats.includes(chat)) ? connector : undefined;
}

/** Whether a message sent at `sentAt` can still be edited (the capability's window). */
export function canEdit(capabilities: ConnectorCapabilities, sentAt: Date | undefined, now = Date.now()): boolean {
  const { edits } = capabilities;
  if (!edits) return false;
  return edits.windowMs === undefined || sentAt === undefined || now - sentAt.getTime() < edits.windowMs;
}

export interface ChatRef {
  id: string;
  type: 'dm' | 'group';
  thread?: string;
  title?: string;
}

export interface Sender {
  id: string;
  name?: string;
  username?: string;
  isBot?: boolean;
}

export interface Attachment {
  type: 'photo' | 'document' | 'voice' | 'audio' | 'video' | 'sticker' | 'other';
  name?: string;
  size?: number;
  mimeType?: string;
  fileId?: string;
  /** Where the file was saved in the persona's workspace, when it was downloaded. */
  path?: string;
}

/** One platform event, normalized. */
export interface InboundEvent {
  connector: string;
  /** Unique per connector; a redelivery carries the same id and is dropped. */
  externalId: string;
  /** `reaction`: someone reacted to a message (`messageId`) with the emoji in `text`, as Unicode (never a platform's name for it). */
  kind: 'message' | 'edit' | 'click' | 'reaction';
  chat: ChatRef;
  sender: Sender;
  text: string;
  messageId?: string;
  /** The bot was mentioned by name (not by @everyone or a role). */
  mentioned?: boolean;
  /** The message replies to one of the bot's own messages. */
  replyToBot?: boolean;
  attachments?: Attachment[];
  /** Honoured only from a `local` connector: the persona to talk to, and that the sender is the owner. */
  persona?: string;
  trusted?: boolean;
  /** Button payload for `kind: 'click'`. */
  data?: string;
}

export type IngressStatus = 'queued' | 'duplicate' | 'ignored' | 'refused' | 'command' | 'click';

export interface IngressResult {
  status: IngressStatus;
  conversationId?: string;
  /** Text the connector should show privately to the sender (a click acknowledgement, say). */
  notice?: string;
}

/** The core's entry point for inbound events. A connector acknowledges the platform after it resolves. */
export type InboundHandler = (event: InboundEvent) => Promise<IngressResult>;

/**
 * Keeps an event on this machine's disk, synced, for a connector that must acknowledge it before the core has stored
 * it (a platform deadline): the next start stores it if this process dies first. `release` once the core has it.
 */
export interface EventKeeper {
  keep(event: InboundEvent): Promise<() => Promise<void>>;
}

/**
 * What the database knows of a connector's past events, for one whose platform does not deliver again what was sent
 * while no process of it was connected (Discord's gateway): it looks, when it connects, for what it missed.
 */
export interface InboundHistory {
  /** When an event of this connector was last stored, by any process; undefined when none is on record. */
  lastStoredAt(): Promise<Date | undefined>;
  /** The chats (and threads) of this connector with a conversation active since `since`, the most recent first. */
  recentChats(since: Date, limit: number): Promise<{ chat: string; thread?: string }[]>;
  /**
   * Where the personas are configured to hear people on this connector, conversation or not: their chats, and the
   * platform ids of the people who may write to them directly.
   */
  configured(): { chats: { chat: string; thread?: string }[]; people: string[] };
}

export interface Button {
  label: string;
  /** The payload a click carries back (`q:<question id>:<choice id>`); connectors enforce their platform's limit. */
  data: string;
}

export interface OutboundMessage {
  chat: string;
  thread?: string;
  text: string;
  replyTo?: string;
  /** Rows of buttons under the message (on its last part when the text is split). */
  buttons?: Button[][];
  /** Absolute paths of files to send; the text is their caption (what does not fit follows as messages). */
  files?: string[];
  /**
   * The platform id of the one person this concerns (a /status, a refusal): where the connector has
   * `privateReplies`, only they see it. The core sets it only in groups of connectors that can.
   */
  privateTo?: string;
  /**
   * The same for every attempt at this message, a crash's resend by another process included (the ledger's row):
   * where the platform takes an idempotency key, a message it created before the answer was lost is not created again.
   */
  key?: string;
  /**
   * An earlier attempt at this message may have reached the platform: a retry after an answer that never came, or a
   * process that died while sending it. Where the platform can be asked (by `key`), what it has is not sent again.
   */
  resend?: boolean;
}

export interface SentMessage {
  /** Platform ids of the message parts, in order (long text is split). */
  ids: string[];
  /**
   * The thread the message landed in, where the platform answers in threads (a mention answered in a thread on it,
   * or in the thread it came from): that thread becomes the persona's, and what people post in it belongs to the
   * conversation the message came from, without a new mention. Telegram's topics are not reported: there a mention
   * is still needed.
   */
  thread?: string;
}

export interface Connector {
  id: string;
  /**
   * Serves the owner at this machine (the terminal): its events may name their persona and vouch for their sender
   * (`persona`, `trusted`). A platform connector never sets this, and the core drops those fields from its events.
   */
  local?: boolean;
  /** When set, this instance serves only these chats (a terminal serves its own persona's chat). */
  chats?: readonly string[];
  capabilities: ConnectorCapabilities;
  /** An HTTP endpoint on Parlor's server for platforms that push events (web-standard Request/Response). */
  webhook?: { path: string; handle(request: Request): Promise<Response> };
  /** Set when only one process at a time may receive this connector's events (see ExclusiveReceiver). */
  exclusive?: ExclusiveReceiver;
  /**
   * `keeper`: for events acknowledged before `onInbound` resolves (see EventKeeper). `history`: for a connector that
   * looks for what it missed while disconnected (see InboundHistory).
   */
  start(onInbound: InboundHandler, keeper?: EventKeeper, history?: InboundHistory): Promise<void>;
  stop(): Promise<void>;
  send(message: OutboundMessage): Promise<SentMessage>;
  /**
   * Replaces a sent message's text and removes its buttons (a question once it is answered or expired). `thread` is
   * the thread the message was sent in, for platforms whose threads keep their messages apart (Discord).
   */
  edit?(chat: string, messageId: string, text: string, thread?: string): Promise<void>;
  /**
   * Sets the bot's reaction on a message. `emoji` is Unicode (`👍`); the connector maps it to its platform's form and
   * throws a PlatformError naming what is wrong (an emoji the platform does not allow...). `thread`: as for `edit`.
   */
  react?(chat: string, messageId: string, emoji: string, thread?: string): Promise<void>;
  /** Saves an inbound attachment into `directory`, a folder of Parlor's own (the core moves it into the workspace); returns the file's path, directly in `directory`. */
  download?(attachment: Attachment, directory: string): Promise<string>;
  typing?(chat: string, thread?: string): Promise<void>;
  /**
   * A reply that grows as the model writes it (streaming), where the platform lets the bot edit its message. The
   * connector paces the updates to the platform's limits.
   */
  draft?(message: DraftTarget): ReplyDraft;
  /** Whether it can reach its platform now (`/healthz` reports it); always up when absent. */
  status?(): ConnectorStatus;
}

/** Where a streamed reply goes, and how it carries on after a crash. */
export interface DraftTarget {
  chat: string;
  thread?: string;
  replyTo?: string;
  /** The message a previous run of the turn left half-written (it died mid-stream): the draft continues in it. */
  resume?: string;
  /** Called once with the platform id of the draft's message, when it first shows. */
  onShown?(messageId: string): void;
  /**
   * Awaited before each write to the chat (every frame, and the final text): at once while this process may act,
   * never once it was fenced (it exits then; see ProcessBeat.beforeAct).
   */
  beforeWrite?(): Promise<void>;
}

/** A message being written: shown at once, updated as it grows, then finished with the final text. */
export interface ReplyDraft {
  /** The text so far; updates that come faster than the platform allows are merged into the next one. */
  update(text: string): void;
  /** Replaces the draft with the final text (continuing in new messages past the platform's limit). */
  finish(text: string): Promise<SentMessage>;
}

export interface ConnectorStatus {
  state: 'starting' | 'up' | 'down';
  /** Why it is not up: the last error, and when it tries again. */
  detail?: string;
}

/** A failed platform call. `retryable` covers 429, 5xx and network errors. */
export class PlatformError extends Error {
  override name = 'PlatformError';
  readonly platform: string;
  readonly method: string;
  readonly status?: number;
  readonly retryAfterMs?: number;
  readonly retryable: boolean;

  constructor(
    fields: { platform: string; method: string; status?: number; retryAfterMs?: number; retryable?: boolean; message: string },
    options?: { cause?: unknown },
  ) {
    super(`${fields.platform} ${fields.method}: ${fields.message}`, options);
    this.platform = fields.platform;
    this.method = fields.method;
    this.status = fields.status;
    this.retryAfterMs = fields.retryAfterMs;
    this.retryable = fields.retryable ?? (fields.status === undefined || fields.status === 429 || fields.status >= 500);
  }
}

/** Reads a connector's settings from the environment: trimmed values, and URLs checked as the core checks its own. */
export interface SettingsReader {
  optional(name: string): string | undefined;
  /** The value as a URL with one of these protocols (`'https:'`), without a trailing slash; a ConfigError otherwise. */
  url(name: string, protocols: string[]): string | undefined;
}

/**
 * A platform as the composition root sees it: one entry in the connector registry. Adding a platform is a folder
 * under connectors/ and one entry; nothing in the core names it.
 */
export interface ConnectorEntry<S = unknown> {
  id: string;
  /** The environment variables it reads. */
  variables: readonly string[];
  /** Its settings: undefined when it is not configured (no token); throws a ConfigError naming the variable. */
  parse(read: SettingsReader): S | undefined;
  /** Values to mask in tool output. */
  secrets(settings: S): (string | undefined)[];
  /** `parlor doctor`'s check against the platform: what is fine, or throws what to fix. */
  doctor(settings: S, getJson: (url: string, headers: Record<string, string>, variable: string) => Promise<any>): Promise<string>;
  /** Builds the connector (its SDK is imported here, so it loads only when the platform is configured). */
  create(settings: S, context: { log: import('pino').Logger }): Connector | Promise<Connector>;
  /** Whether several processes may receive for one token at once (a webhook, HTTP events) with these settings. */
  multiProcess(settings: S): boolean;
  /** What `parlor init` asks and writes for it; without it, init does not offer it. */
  init?: import('#src/cli/init-connector.ts').ConnectorInit;
}
