// What was posted while no gateway session of this bot was connected: Discord keeps no events for a session that
// ended (a process killed, stopped or restarted; a session it would not let resume), so a new session begins with
// nothing of the gap. When a session starts (READY, not a resume), the chats the personas hear (a recent conversation,
// configured, a person's DM, and the threads under them posted in meanwhile, archived since or not) are read back
// through REST from a little before the newest event the database stored, and what people posted there is stored in
// order, before what the new session brings of the same chat (the core drops what it has already).
import { Events, SnowflakeUtil, type Channel, type Client, type Message } from 'discord.js';
import type { Logger } from 'pino';
import type { InboundEvent, InboundHistory, IngressResult } from '#src/connector.ts';
import { settledWithin, sleep, STALLED } from '#src/retry.ts';
import { normalizeMessage, type BotIdentity } from './normalize.ts';
import type { storeInOrder } from './store.ts';

/** How far back a session looks for what it missed at most: as long as Telegram keeps an update for a bot. */
const CATCH_UP_WINDOW_MS = 24 * 3600_000;
/** Before the newest stored event: when the connection was really lost is not known, only that it was after it. */
const CATCH_UP_MARGIN_MS = 60_000;
/**
 * The chats looked at: those with a conversation active within a week (the most recent first, this many at most),
 * the personas' channels, and the DMs of the people who may write to them (this many at most).
 */
const CHATS_ACTIVE_MS = 7 * 24 * 3600_000;
const CHATS_AT_MOST = 100;
const PEOPLE_AT_MOST = 25;
/** How long a person's DM channel is waited for (within LIST_WAIT_MS). */
const DMS_WAIT_MS = 3000;
/** How long one chat is read back for at most: its own events wait behind it. */
const READ_WAIT_MS = 30_000;
/** Pages of messages read per chat at most (Discord gives 100 a page). */
const PAGES_AT_MOST = 5;
const PAGE = 100;
/** How long the chats read back wait for the session's guilds at most (discord.js waits 15 s for them). */
const GUILDS_WAIT_MS = 20_000;
/** How long what the new session brings waits for the list of chats (a database that does not answer). */
const LIST_WAIT_MS = 5000;
/** Threads read back at most (the most recently posted in). */
const THREADS_AT_MOST = 50;
/**
 * Discord archives a thread after an hour without a message at the least: after a shorter gap, only a thread someone
 * archived by hand can be archived again, and archived threads are not asked for. Otherwise each channel's archived
 * ones are listed back to the gap's start (ARCHIVED_PAGES_AT_MOST pages of ARCHIVED_PAGE), ARCHIVED_AT_ONCE channels at
 * a time, each within ARCHIVED_WAIT_MS, all within ARCHIVED_ALL_WAIT_MS.
 */
const ARCHIVED_AFTER_MS = 3600_000;
const ARCHIVED_PAGE = 50;
const ARCHIVED_PAGES_AT_MOST = 4;
const ARCHIVED_AT_ONCE = 5;
const ARCHIVED_WAIT_MS = 5000;
/** How long all the channels' archived threads are listed for at most (what the new session brings waits for them). */
const ARCHIVED_ALL_WAIT_MS = 10_000;
const LIST_RETRY_MS = 500;

export function createCatchUp(deps: {
  client: () => Client | undefined;
  history: () => InboundHistory | undefined;
  queue: ReturnType<typeof storeInOrder>;
  handle: (event: InboundEvent) => Promise<IngressResult>;
  /** A channel whose events are stored (a send to it needs no lookup). */
  seen: (channelId: string) => void;
  /** The connector is stopping. */
  stopped: () => boolean;
  log: Logger;
}) {
  const { queue, log } = deps;

  /** `attempt`, or undefined when it fails or takes over `ms` (logged with `about`: as `failed`, or as `late`). */
  async function within<T>(attempt: Promise<T>, ms: number, about: Record<string, unknown>, failed: string, late: string): Promise<T | undefined> {
    const outcome = await settledWithin(attempt, ms).catch((err: unknown) => {
      log.warn({ err, ...about }, failed);
      return undefined;
    });
    if (outcome === STALLED) log.warn(about, late);
    return outcome === STALLED ? undefined : outcome;
  }

  /**
   * Reads back the messages of one channel posted after `after` (a snowflake), oldest first; not the bot's own. Read
   * from the newest back: when more was posted than is read, what is left out is the oldest.
   */
  async function missedIn(client: Client, channelId: string, after: string, bot: BotIdentity): Promise<InboundEvent[]> {
    const channel = await client.channels.fetch(channelId);
    if (!channel?.isTextBased()) return [];
    const found: Message[] = [];
    let before: string | undefined;
    for (let page = 1; ; page++) {
      const batch = [...(await channel.messages.fetch({ limit: PAGE, cache: false, ...(before ? { before } : {}) })).values()];
      const newer = batch.filter((m) => BigInt(m.id) > BigInt(after));
      found.push(...newer);
      if (batch.length < PAGE || newer.length < batch.length) break;
      if (page === PAGES_AT_MOST) {
        log.warn({ channel: channelId, read: found.length }, 'more was posted in a Discord chat while disconnected than is read back; the oldest of it is not answered');
        break;
      }
      before = batch.reduce((oldest, m) => (BigInt(m.id) < BigInt(oldest.id) ? m : oldest)).id;
    }
    found.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
    return found.filter((m) => m.author.id !== bot.id).flatMap((m) => normalizeMessage(m, bot, 'message') ?? []);
  }

  /**
   * The threads among `candidates` under the channels of `chats` (a listed thread's parent too; not those among them)
   * with a message after `after`, the most recently posted in first (THREADS_AT_MOST of them).
   */
  function threadsPostedIn(candidates: Iterable<Channel>, chats: readonly { chat: string; thread?: string }[], after: string): { chat: string; thread: string }[] {
    const listed = new Set(chats.map((c) => c.thread ?? c.chat));
    const parents = new Set(chats.map((c) => c.chat));
    const found = new Map<string, { id: string; parent: string; last: bigint }>();
    for (const c of candidates) {
      if (!c.isThread() || !c.parentId || !c.lastMessageId) continue;
      const last = BigInt(c.lastMessageId);
      if (parents.has(c.parentId) && !listed.has(c.id) && last > BigInt(after)) found.set(c.id, { id: c.id, parent: c.parentId, last });
    }
    const newest = [...found.values()].sort((a, b) => (a.last > b.last ? -1 : 1));
    if (newest.length > THREADS_AT_MOST) log.warn({ threads: newest.length, read: THREADS_AT_MOST }, 'more Discord threads were posted in while disconnected than are read back; the least recent are not');
    return newest.slice(0, THREADS_AT_MOST).map((t) => ({ chat: t.parent, thread: t.id }));
  }

  /**
   * The public threads Discord archived since `since` under the channels of `chats` (it archives a thread after an
   * hour without a message at the least, or when someone archives it): each channel's, the most recently archived
   * first, page by page back to `since` (one archived before then had no message after it), a few channels at a time
   * (see ARCHIVED_AFTER_MS). Cached, so that a thread this client knew from before has its last message brought up to
   * date.
   */
  async function archivedSince(client: Client, chats: readonly { chat: string }[], since: Date): Promise<Channel[]> {
    const channels = [...new Set(chats.map((c) => c.chat))].flatMap((id) => {
      const channel = client.channels.cache.get(id);
      return channel && 'threads' in channel ? [channel] : [];
    });
    const until = Date.now() + ARCHIVED_ALL_WAIT_MS;
    const late = () => Date.now() > until || deps.stopped();
    const listOne = async (channel: (typeof channels)[number]) => {
      const found: Channel[] = [];
      let before: Date | undefined;
      // A listing given up (past its bound) stops at its next page.
      for (let page = 1; !late(); page++) {
        const fetched = await channel.threads.fetchArchived({ type: 'public', limit: ARCHIVED_PAGE, ...(before ? { before } : {}) });
        const threads = [...fetched.threads.values()];
        found.push(...threads);
        const oldest = threads.reduce<Date | undefined>((at, t) => (t.archivedAt && (!at || t.archivedAt < at) ? t.archivedAt : at), undefined);
        if (!fetched.hasMore || !oldest || oldest < since) break;
        if (page === ARCHIVED_PAGES_AT_MOST) {
          log.warn({ channel: channel.id, listed: found.length }, 'more Discord threads were archived while disconnected than are looked at; the earliest archived are not read back');
          break;
        }
        before = oldest;
      }
      return found;
    };
    const lists: Channel[][] = [];
    for (let i = 0; i < channels.length; i += ARCHIVED_AT_ONCE) {
      if (late()) {
        log.warn({ channels: channels.length - i }, 'not every Discord channel\'s archived threads were listed in time; threads posted in while disconnected and archived since, in the rest, are not read back');
        break;
      }
      lists.push(
        ...(await Promise.all(
          channels.slice(i, i + ARCHIVED_AT_ONCE).map(async (channel) => {
            const found = await within(
              listOne(channel),
              Math.max(0, Math.min(ARCHIVED_WAIT_MS, until - Date.now())),
              { channel: channel.id },
              'the archived threads of a Discord channel could not be listed; those posted in while disconnected are not read back',
              'the archived threads of a Discord channel were not listed in time; those posted in while disconnected are not read back',
            );
            return found ?? [];
          }),
        )),
      );
    }
    return lists.flat();
  }

  /**
   * A new session is starting (its READY, before discord.js hands over anything it brings): what it brings waits
   * until the chats to read back are queued ahead of it; they are read once discord.js has the session's guilds.
   */
  return function sessionStarted(bot: BotIdentity): void {
    const client = deps.client();
    const history = deps.history();
    if (!history || !client) return;
    const pause = queue.pause();
    // The session's guilds are in discord.js's cache (a guild channel is fetched through it); a session that resumed
    // before they all came, or never gets them, does not hold its chats up for longer than discord.js would wait.
    const ready = new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        client.off(Events.ShardReady, done);
        client.off(Events.ShardResume, done);
        resolve();
      };
      const timer = setTimeout(done, GUILDS_WAIT_MS).unref();
      client.once(Events.ShardReady, done);
      client.once(Events.ShardResume, done);
    });
    const plan = async () => {
      const last = await history.lastStoredAt();
      // Nothing ever stored: a new bot, with nothing to have missed.
      if (!last) return undefined;
      const since = new Date(Math.max(last.getTime() - CATCH_UP_MARGIN_MS, Date.now() - CATCH_UP_WINDOW_MS));
      const { chats: configured, people } = history.configured();
      // The DMs of the people who may write, conversation or not (a first DM sent meanwhile): their channels asked of
      // Discord (the same channel every time), each left out when Discord does not say it in time.
      const opening = Promise.all(
        people.slice(0, PEOPLE_AT_MOST).map(async (id) => {
          const channel = await within(
            client.users.createDM(id),
            DMS_WAIT_MS,
            { user: id },
            'the DM of a person who may write could not be opened to read it back',
            'the DM of a person who may write was not opened in time; it is not read back',
          );
          return channel && { chat: channel.id };
        }),
      );
      const [recent, opened] = await Promise.all([history.recentChats(new Date(Date.now() - CHATS_ACTIVE_MS), CHATS_AT_MOST), opening]);
      const chats = new Map<string, { chat: string; thread?: string }>();
      const all: { chat: string; thread?: string }[] = [...recent, ...configured, ...opened.filter((d) => d !== undefined)];
      for (const c of all) if (!chats.has(c.thread ?? c.chat)) chats.set(c.thread ?? c.chat, c);
      return { since, chats: [...chats.values()] };
    };
    // Tried again while the database does not answer (a restart takes a second or two), within the pause's bound.
    const planning = async (deadline: number) => {
      for (;;) {
        try {
          return await plan();
        } catch (err) {
          if (Date.now() + LIST_RETRY_MS >= deadline) throw err;
          log.debug({ err }, 'the chats to read back could not be listed yet; trying again');
          await sleep(LIST_RETRY_MS);
        }
      }
    };
    void (async () => {
      try {
        const planned = await settledWithin(planning(Date.now() + LIST_WAIT_MS), LIST_WAIT_MS);
        if (planned === STALLED) {
          log.warn('the chats to read back for what was missed while disconnected could not be listed in time; nothing is read back');
          return;
        }
        if (!planned || planned.chats.length === 0) return;
        // Stopping meanwhile let what the pause held go (see drain): a chat or thread read back behind it would be out of
        // order. So nothing is queued once stopping (here, after waiting for the guilds and after listing archived threads).
        if (deps.stopped()) return;
        const after = SnowflakeUtil.generate({ timestamp: planned.since }).toString();
        log.info({ chats: planned.chats.length, since: planned.since.toISOString() }, 'reading back what Discord chats got while disconnected');
        const readBack = ({ chat, thread }: { chat: string; thread?: string }) => {
          const channelId = thread ?? chat;
          deps.seen(channelId);
          pause.ahead(
            channelId,
            async () => {
              await ready;
              // Bounded: the chat's own events wait behind it (discord.js's REST tries a request for up to a minute).
              const events = await within(
                missedIn(client, channelId, after, bot),
                READ_WAIT_MS,
                { channel: channelId },
                'a Discord chat could not be read back for what was missed while disconnected',
                'a Discord chat was not read back in time for what was missed while disconnected',
              );
              return events ?? [];
            },
            async (event) => {
              const result = await deps.handle(event);
              if (result.status !== 'duplicate' && result.status !== 'ignored') log.info({ channel: channelId, event: event.externalId }, 'a message posted while disconnected, read back');
              return result;
            },
          );
        };
        for (const chat of planned.chats) readBack(chat);
        // Threads of those chats posted in meanwhile (one started meanwhile among them): known once the session's
        // guilds are in (each guild's active threads come with it), so what the session brings waits for them too.
        // Waiting costs a new process little: discord.js hands its first session's events over only once its guilds are in.
        await ready;
        if (deps.stopped()) return;
        try {
          const away = client.guilds.cache.filter((g) => !g.available).map((g) => g.id);
          if (away.length) log.warn({ guilds: away }, 'Discord guilds still unavailable: their threads posted in while disconnected are not read back');
          // Archived again before now only when the gap began over an hour ago.
          const archived = planned.since.getTime() < Date.now() - ARCHIVED_AFTER_MS ? await archivedSince(client, planned.chats, planned.since) : [];
          if (deps.stopped()) return;
          for (const thread of threadsPostedIn([...client.channels.cache.values(), ...archived], planned.chats, after)) readBack(thread);
        } catch (err) {
          log.warn({ err }, 'the Discord threads posted in while disconnected could not be listed; they are not read back');
        }
      } catch (err) {
        log.warn({ err }, 'the chats to read back for what was missed while disconnected could not be listed; nothing is read back');
      } finally {
        pause.resume();
      }
    })();
  };
}
