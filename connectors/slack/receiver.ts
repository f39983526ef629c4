// How Slack's events reach the Bolt App: over Socket Mode (Bolt's SocketModeReceiver, with its ping watchdog) or
// as signed HTTP requests to Parlor's own server. Either way an event is acknowledged once Parlor has stored it,
// not before its listeners run as Bolt does by itself.
import { SocketModeReceiver, verifySlackRequest, type App, type Receiver, type ReceiverEvent } from '@slack/bolt';
import type { Logger } from 'pino';

/** Where Slack posts events and interactions in HTTP mode (the app's Request URL, for both). */
export const EVENTS_PATH = '/slack/events';

/**
 * Bolt acknowledges an Events API event before any listener runs (it expects nothing back). Parlor's listeners call
 * `context.ackEvent()` once the core has stored the event; an event nobody takes is acknowledged when Bolt is done
 * with it. A listener that fails before acknowledging leaves the event unacknowledged, so Slack delivers it again.
 */
export async function processDeferringAck(app: App, event: ReceiverEvent): Promise<void> {
  if (event.body?.type !== 'event_callback') return app.processEvent(event);
  let acked = false;
  const ackEvent = async () => {
    if (acked) return;
    acked = true;
    await event.ack();
  };
  try {
    await app.processEvent({ ...event, ack: async () => undefined, customProperties: { ...event.customProperties, ackEvent } });
  } catch (err) {
    if (!acked) throw err;
    return;
  }
  await ackEvent();
}

export interface ParlorReceiverOptions {
  log: Logger;
  /** Socket Mode: Bolt's receiver on an app-level token. */
  socket?: SocketModeReceiver;
  /** HTTP mode: requests are checked against it. */
  signingSecret?: string;
}

/** A Bolt Receiver over Socket Mode or Parlor's HTTP server (`handle`), acknowledging after the commit. */
export class ParlorReceiver implements Receiver {
  private app?: App;

  constructor(private readonly options: ParlorReceiverOptions) {}

  init(app: App): void {
    this.app = app;
    // SocketModeReceiver hands each envelope to `processEvent` of what it was given: Parlor's deferring one.
    this.options.socket?.init({ processEvent: (event: ReceiverEvent) => processDeferringAck(app, event) } as unknown as App);
  }

  async start(): Promise<void> {
    await this.options.socket?.start();
  }

  async stop(): Promise<void> {
    await this.options.socket?.stop();
  }

  /**
   * HTTP mode: a request whose signature does not check out (or is older than five minutes) is 401 and goes no
   * further; `url_verification` is answered with its challenge; anything else is answered once it is stored.
   */
  async handle(request: Request): Promise<Response> {
    const raw = await request.text();
    const signature = request.headers.get('x-slack-signature');
    const timestamp = Number(request.headers.get('x-slack-request-timestamp'));
    if (!this.options.signingSecret || !signature || !Number.isFinite(timestamp)) return new Response('unauthorized', { status: 401 });
    try {
      verifySlackRequest({ signingSecret: this.options.signingSecret, body: raw, headers: { 'x-slack-signature': signature, 'x-slack-request-timestamp': timestamp } });
    } catch (err) {
      this.options.log.warn({ reason: err instanceof Error ? err.message : String(err) }, 'a request to the Slack endpoint failed its signature check');
      return new Response('unauthorized', { status: 401 });
    }
    const body = parseBody(raw, request.headers.get('content-type') ?? '');
    if (!body) return new Response('bad request', { status: 400 });
    if (body.type === 'url_verification') return Response.json({ challenge: body.challenge });
    if (body.ssl_check) return new Response(null, { status: 200 });
    const app = this.app;
    if (!app) return new Response('not ready', { status: 503 });
    const retry = request.headers.get('x-slack-retry-num');
    return new Promise<Response>((resolve) => {
      let answered = false;
      const answer = (response: Response) => {
        if (answered) return;
        answered = true;
        resolve(response);
      };
      const ack = async (payload?: unknown) => {
        if (payload === undefined || payload === '') answer(new Response(null, { status: 200 }));
        else answer(typeof payload === 'string' ? new Response(payload, { status: 200 }) : Response.json(payload));
      };
      processDeferringAck(app, { body, ack, retryNum: retry === null ? undefined : Number(retry), retryReason: request.headers.get('x-slack-retry-reason') ?? undefined })
        .then(() => answer(new Response(null, { status: 200 })))
        .catch((err: unknown) => {
          if (answered) this.options.log.warn({ err }, 'a Slack request failed after it was answered');
          else this.options.log.error({ err }, 'a Slack event could not be stored; Slack will deliver it again');
          answer(new Response('retry later', { status: 500 }));
        });
    });
  }
}

/** An Events API body (JSON), or an interaction (a form whose `payload` is JSON). */
function parseBody(raw: string, contentType: string): Record<string, any> | undefined {
  try {
    if (contentType.startsWith('application/json')) return JSON.parse(raw);
    const form = new URLSearchParams(raw);
    const payload = form.get('payload');
    return payload !== null ? JSON.parse(payload) : Object.fromEntries(form);
  } catch {
    return undefined;
  }
}
