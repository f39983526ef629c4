// What the conformance scenarios are written against: one platform, seen from the people using it. Each connector
// supplies a driver over its fake platform, running the real connector inside the real app (test database, fake
// model). Scenarios name people and chats, never platform ids.
import type { FakeLlm } from '../support/fake-llm.ts';

/** The persona's owner (a user and its approver), another of its users (not an approver), and someone unknown. */
export type Person = 'owner' | 'helper' | 'stranger';

/**
 * Where a message is posted: a person's DM with the bot; `team`, a group the persona answers in when mentioned;
 * `unlisted`, a group no persona owns.
 */
export type ChatName = `dm:${Person}` | 'team' | 'unlisted';

export interface DriverCapabilities {
  /** Choices are buttons a person clicks (elsewhere they are numbered, and typing the number answers). */
  buttons: boolean;
  /** Group chats where the bot answers when mentioned. */
  groups: boolean;
  /** Threads (or topics) inside a group, each answered in place. */
  threads: boolean;
  /** A mention outside a thread is answered in a thread opened on the mentioned message (Slack). */
  mentionOpensThread?: boolean;
  /** The bot updates a message in place (a question's outcome replaces its buttons). */
  edits: boolean;
  /** People other than the owner can write to the bot (strangers, other users). */
  otherPeople: boolean;
  /** The platform has an "everyone" or role mention, which is not a mention of the bot. */
  mentionEveryone: boolean;
  /** Replies are sent as markup the platform parses, and may reject. */
  markup: boolean;
  /** A group answer quotes the message it answers. */
  replyReferences: boolean;
  /** A message in a group can be shown to one person alone. */
  privateReplies: boolean;
  /** Longest message the platform shows. */
  maxTextLength: number;
  /** A post can fail on the platform's side (a long answer goes out in several). */
  failingPosts: boolean;
  /** A post the platform made before its answer was lost is found again by a retry, not made twice (it takes a key). */
  idempotentPosts: boolean;
  /** How soon the platform needs an event (a click above all) acknowledged. */
  ackDeadlineMs: number;
}

/** A message a person posted, as the platform delivered it to the bot. */
export interface PostedMessage {
  /** The platform's id of the message (what a reply quotes). */
  id: string;
  chat: ChatName;
  /** The thread it was posted in. */
  thread?: string;
  /** Opaque: the platform event, for `redeliver`. */
  event: unknown;
}

/** A message the bot sent, as the chat shows it now (edits applied). */
export interface BotMessage {
  id: string;
  /** The text a person reads (markup rendered away; the numbered choices of a terminal left out). */
  text: string;
  /** The choices offered under it, in order: buttons, or numbered lines where there are none. */
  choices: string[];
  /** Whether it went out with the platform's markup. */
  formatted: boolean;
  /** The id of the message it quotes. */
  replyTo?: string;
  /** The thread it is in. */
  thread?: string;
  /** Shown to this person alone (a private reply in a group). */
  visibleTo?: Person;
  /** How many times it was written: 1, plus each edit (or each piece of a streamed answer written in place). */
  revisions: number;
}

export interface PostOptions {
  /** Mentions the bot by name. */
  mention?: boolean;
  /** Mentions someone else by name (the bot is not addressed). */
  mentionOther?: boolean;
  /** Mentions everyone (or a role): not a mention of the bot. */
  mentionEveryone?: boolean;
  /** Replies to this message of the bot's. */
  replyTo?: BotMessage;
  /** Posts in a thread of the group (the same thread every time). */
  thread?: boolean;
  from?: Person;
}

export interface ClickResult {
  /** What the clicker was told. */
  notice?: string;
  /** The notice was shown to the clicker alone. */
  private: boolean;
  /** How long the click waited for its acknowledgement. */
  ms: number;
}

export interface AckTiming {
  kind: 'message' | 'click';
  ms: number;
}

export interface PlatformDriver {
  name: string;
  capabilities: DriverCapabilities;
  /** The fake model the persona talks to (scripted per scenario; it echoes by default). */
  model: FakeLlm;
  /** Runs of the tools the conformance persona has besides the built-in ones. */
  tools: ConformanceTools;
  /** Starts the fake platform, the app (with this connector, the fake model and a test database) and the connector. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Between scenarios: waits for the app to settle, closes what is left open, forgets what was sent. */
  reset(): Promise<void>;
  /** A person's address as a persona file names it (`telegram:1001`). */
  address(person: Person): string;
  /** Sends a DM to the bot; resolves once the platform has its acknowledgement. */
  dm(from: Person, text: string): Promise<PostedMessage>;
  /** Posts in a group; resolves once the platform has its acknowledgement. */
  post(chat: 'team' | 'unlisted', text: string, options?: PostOptions): Promise<PostedMessage>;
  /** Clicks a choice of a bot message (drivers with buttons only); resolves with the acknowledgement. */
  click(message: BotMessage, label: string, as?: Person): Promise<ClickResult>;
  /** Delivers the same platform event again; resolves once it is acknowledged again. */
  redeliver(message: PostedMessage): Promise<void>;
  /** What the bot sent to a chat since the last reset, oldest first, edits applied. */
  sent(chat: ChatName): BotMessage[];
  /** How long each event delivered since the last reset waited for its acknowledgement. */
  ackTimings(): AckTiming[];
  /** The platform rejects the markup of the bot's next message (drivers with `markup` only). */
  rejectNextMarkup(): void;
  /**
   * The bot's next post, once `after` more have gone out, fails as the platform (or the network to it) fails, past the
   * retries of the platform's client library (drivers with `failingPosts`). `applied`: the platform made the message
   * before its answer was lost (drivers with `idempotentPosts`).
   */
  failPost(options: { after: number; applied?: boolean }): void;
  /** Turns `"stream": true` (tools.jsonc) on or off for the persona, as loading its files with it would. */
  setStreaming(on: boolean): void;
  /** Resolves when the chat's conversation has nothing running or waiting. */
  idle(chat: ChatName, options?: { thread?: boolean }): Promise<void>;
}

/** Tools the conformance persona has besides the built-in ones; they record what they did. */
export interface ConformanceTools {
  /** Notes passed to `record_step`, a tool that needs approval, in the order it ran. */
  runs: string[];
  /** Resolves when `slow_step` starts its next run. */
  nextSlowStart(): Promise<void>;
}
