// The fake Discord's gateway: HELLO → IDENTIFY → READY (+ one GUILD_CREATE a guild), heartbeats, RESUME with the
// missed events replayed, and the close codes Discord uses. JSON text frames only: `compress=zlib-stream` and
// `encoding=etf` are recorded but not honoured (discord.js reads text frames as JSON either way).
import type { Server } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { KNOWN_INTENTS, PRIVILEGED_INTENTS, Intent, type World } from './fake-discord-state.ts';

export const GatewayOp = { Dispatch: 0, Heartbeat: 1, Identify: 2, PresenceUpdate: 3, Resume: 6, Reconnect: 7, InvalidSession: 9, Hello: 10, HeartbeatAck: 11 } as const;

/** Close codes after which Discord forgets the session (a new IDENTIFY is needed). */
const SESSION_ENDING_CODES = new Set([1000, 1001, 4004, 4007, 4009, 4010, 4011, 4012, 4013, 4014]);

export interface GatewayFrame {
  /** What a client sent (`in`) or the fake sent (`out`). */
  direction: 'in' | 'out';
  op: number;
  t?: string | null;
  s?: number | null;
  d: any;
  at: number;
  connection: number;
}

export interface GatewayConnection {
  id: number;
  /** The URL the client connected to, with its query (`?v=10&encoding=json`). */
  url: string;
  openedAt: number;
  closedAt?: number;
  /** Who closed it and with what code (1006: dropped without a close frame). */
  closed?: { by: 'client' | 'server'; code: number };
  session?: GatewaySession;
}

export interface GatewaySession {
  id: string;
  intents: number;
  identify: Record<string, any>;
  /** The last sequence number dispatched on this session. */
  seq: number;
  resumes: number;
  /** Whether a socket is attached right now. */
  connected: boolean;
}

interface SessionState extends GatewaySession {
  socket?: WebSocket;
  history: { op: 0; t: string; s: number; d: unknown }[];
}

export interface GatewayOptions {
  server: Server;
  world: World;
  token: string;
  application: { id: string; flags: number };
  urls: () => { gateway: string; resume: string };
  heartbeatIntervalMs: number;
  /** Privileged intent bits the application is not allowed (requesting one closes with 4014). */
  refuseIntents: number;
  /** How long after READY the guilds come (GUILD_CREATE); at once by default. */
  guildsAfterMs?: number;
}

/** A dispatch as one session sees it; `undefined` when its intents keep the event from it. */
export type ForSession = (session: GatewaySession) => unknown;

export function startGateway(options: GatewayOptions) {
  const wss = new WebSocketServer({ server: options.server });
  const frames: GatewayFrame[] = [];
  const connections: GatewayConnection[] = [];
  const sessions = new Map<string, SessionState>();
  const sockets = new Map<WebSocket, GatewayConnection>();

  const send = (socket: WebSocket, connection: GatewayConnection, payload: { op: number; d: unknown; s?: number | null; t?: string | null }) => {
    const frame = { op: payload.op, d: payload.d, s: payload.s ?? null, t: payload.t ?? null };
    frames.push({ direction: 'out', ...frame, at: Date.now(), connection: connection.id });
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(frame));
  };

  const closeSocket = (socket: WebSocket, code: number, reason = '') => {
    const connection = sockets.get(socket);
    if (connection && !connection.closed) connection.closed = { by: 'server', code };
    if (connection?.session && SESSION_ENDING_CODES.has(code)) sessions.delete(connection.session.id);
    socket.close(code, reason);
  };

  const dispatchTo = (session: SessionState, t: string, d: unknown) => {
    const payload = { op: 0 as const, t, s: ++session.seq, d };
    session.history.push(payload);
    if (session.history.length > 1000) session.history.shift();
    const connection = session.socket && sockets.get(session.socket);
    if (session.socket && connection) send(session.socket, connection, payload);
  };

  const identify = (socket: WebSocket, connection: GatewayConnection, d: any) => {
    if (connection.session) return closeSocket(socket, 4005, 'Already authenticated.');
    if (d?.token !== options.token) return closeSocket(socket, 4004, 'Authentication failed.');
    const intents = Number(d.intents ?? 0);
    if ((intents & ~KNOWN_INTENTS) !== 0) return closeSocket(socket, 4013, 'Invalid intent(s).');
    if (intents & options.refuseIntents & PRIVILEGED_INTENTS) return closeSocket(socket, 4014, 'Disallowed intent(s).');
    if (Array.isArray(d.shard) && (d.shard[1] !== 1 || d.shard[0] !== 0)) return closeSocket(socket, 4010, 'Invalid shard.');
    const session: SessionState = { id: randomHex(16), intents, identify: d, seq: 0, resumes: 0, connected: true, socket, history: [] };
    sessions.set(session.id, session);
    connection.session = session;
    const guilds = [...options.world.guilds.values()];
    dispatchTo(session, 'READY', {
      v: 10,
      user_settings: {},
      user: { ...options.world.bot, verified: true, mfa_enabled: false, flags: 0, email: null },
      guilds: guilds.map((g) => ({ id: g.id, unavailable: true })),
      session_id: session.id,
      resume_gateway_url: options.urls().resume,
      session_type: 'normal',
      shard: [0, 1],
      application: options.application,
      private_channels: [],
      presences: [],
      relationships: [],
      guild_join_requests: [],
      geo_ordered_rtc_regions: ['fake'],
      auth: {},
      _trace: ['["fake-discord",{}]'],
    });
    // Without the Guilds intent Discord sends no GUILD_CREATE; discord.js then stops waiting at once.
    const guildsCreated = () => {
      if (intents & Intent.Guilds) for (const guild of guilds) dispatchTo(session, 'GUILD_CREATE', options.world.guildCreate(guild));
    };
    if (options.guildsAfterMs) setTimeout(guildsCreated, options.guildsAfterMs);
    else guildsCreated();
  };

  const resume = (socket: WebSocket, connection: GatewayConnection, d: any) => {
    const session = sessions.get(d?.session_id);
    if (d?.token !== options.token) return closeSocket(socket, 4004, 'Authentication failed.');
    if (!session) return send(socket, connection, { op: GatewayOp.InvalidSession, d: false });
    if (session.socket && session.socket !== socket) session.socket.terminate();
    session.socket = socket;
    session.connected = true;
    session.resumes++;
    connection.session = session;
    for (const missed of session.history.filter((p) => p.s > Number(d.seq ?? 0))) send(socket, connection, missed);
    dispatchTo(session, 'RESUMED', { _trace: ['["fake-discord",{}]'] });
  };

  wss.on('connection', (socket, req) => {
    const connection: GatewayConnection = { id: connections.length + 1, url: req.url ?? '/', openedAt: Date.now() };
    connections.push(connection);
    sockets.set(socket, connection);
    const query = new URL(req.url ?? '/', 'ws://fake').searchParams;
    socket.on('message', (raw) => {
      let payload: any;
      try {
        payload = JSON.parse(String(raw));
      } catch {
        return closeSocket(socket, 4002, 'Error while decoding payload.');
      }
      frames.push({ direction: 'in', op: payload?.op, d: payload?.d, at: Date.now(), connection: connection.id });
      switch (payload?.op) {
        case GatewayOp.Heartbeat:
          return send(socket, connection, { op: GatewayOp.HeartbeatAck, d: null });
        case GatewayOp.Identify:
          return identify(socket, connection, payload.d);
        case GatewayOp.Resume:
          return resume(socket, connection, payload.d);
        case GatewayOp.PresenceUpdate:
        case 4:
        case 8:
          if (!connection.session) return closeSocket(socket, 4003, 'Not authenticated.');
          return;
        default:
          return closeSocket(socket, 4001, 'Unknown opcode.');
      }
    });
    socket.on('close', (code) => {
      connection.closedAt = Date.now();
      connection.closed ??= { by: 'client', code };
      const session = connection.session && sessions.get(connection.session.id);
      if (session?.socket === socket) {
        session.socket = undefined;
        session.connected = false;
        // A client that closes with 1000/1001 ends its session; any other code (discord.js resumes with 4200) keeps it.
        if (connection.closed.by === 'client' && (code === 1000 || code === 1001)) sessions.delete(session.id);
      }
    });
    if (query.get('v') !== '10') return closeSocket(socket, 4012, 'Invalid API version.');
    send(socket, connection, { op: GatewayOp.Hello, d: { heartbeat_interval: options.heartbeatIntervalMs, _trace: ['["fake-discord",{}]'] } });
  });

  const live = () => [...sessions.values()];
  const attached = () => live().filter((s) => s.socket);

  return {
    frames,
    connections,
    sessions: (): GatewaySession[] => live().map(({ id, intents, identify: d, seq, resumes, connected }) => ({ id, intents, identify: d, seq, resumes, connected })),
    /** Sends `t` to every session Discord still holds (buffered for a disconnected one, replayed on RESUME). */
    dispatch(t: string, d: unknown | ForSession): number {
      let delivered = 0;
      for (const session of live()) {
        const data = typeof d === 'function' ? (d as ForSession)(session) : d;
        if (data === undefined) continue;
        dispatchTo(session, t, data);
        delivered++;
      }
      return delivered;
    },
    /** Drops every connection without a close frame (the client sees 1006 and resumes). */
    disconnect() {
      for (const session of attached()) {
        const connection = sockets.get(session.socket!)!;
        connection.closed = { by: 'server', code: 1006 };
        session.socket!.terminate();
      }
    },
    /**
     * Drops every connection, as `disconnect` does, and lets every session go (Discord held it too long): what it held
     * for them is gone, and a resume is refused (op 9), so the client identifies again.
     */
    dropSessions() {
      for (const session of live()) {
        if (session.socket) {
          sockets.get(session.socket)!.closed = { by: 'server', code: 1006 };
          session.socket.terminate();
        }
        sessions.delete(session.id);
      }
    },
    closeWith(code: number, reason?: string) {
      for (const session of attached()) closeSocket(session.socket!, code, reason);
    },
    /** Op 7: Discord asks the client to reconnect and resume. */
    requestReconnect() {
      for (const session of attached()) send(session.socket!, sockets.get(session.socket!)!, { op: GatewayOp.Reconnect, d: null });
    },
    /** Op 9: `resumable: false` forgets the session, so the client must identify again. */
    invalidateSession(resumable: boolean) {
      for (const session of attached()) {
        send(session.socket!, sockets.get(session.socket!)!, { op: GatewayOp.InvalidSession, d: resumable });
        if (!resumable) sessions.delete(session.id);
      }
    },
    async close() {
      for (const socket of wss.clients) socket.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

export type FakeGateway = ReturnType<typeof startGateway>;

function randomHex(bytes: number): string {
  return Array.from({ length: bytes }, () => Math.floor(Math.random() * 256).toString(16).padStart(2, '0')).join('');
}
