// undici's Agent and its request, without the rest of undici. Parlor calls the model and the Telegram Bot API with
// these two alone, while `import ... from 'undici'` loads all of it (fetch, WebSocket, EventSource, caches, mocks):
// about 3-3.5 MB more of V8's heap in use, and 8 MB more of it held, in every process. undici's index puts these
// same modules together (its `request` is this one, called on the dispatcher it is given). The version is pinned, and
// the model client's and the Telegram connector's tests call through them.
import { createRequire } from 'node:module';
import type { Agent as UndiciAgent, Dispatcher } from 'undici';

const require = createRequire(import.meta.url);

export const Agent = require('undici/lib/dispatcher/agent.js') as typeof UndiciAgent;
export type Agent = UndiciAgent;
const dispatcherRequest = require('undici/lib/api/api-request.js') as (this: Dispatcher, options: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>;

export type RequestOptions = Omit<Dispatcher.RequestOptions, 'origin' | 'path'> & { dispatcher: Dispatcher };
export type ResponseData = Dispatcher.ResponseData;

/** undici's `request(url, options)`, on `options.dispatcher`. */
export function request(url: string, { dispatcher, ...options }: RequestOptions): Promise<ResponseData> {
  const { origin, pathname, search } = new URL(url);
  return dispatcherRequest.call(dispatcher, { ...options, origin, path: `${pathname}${search}` });
}
