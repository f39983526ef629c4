// The floor of the Telegram benchmark, as a process of its own like Parlor: a bare grammY bot echoing each text
// message, receiving by webhook. Started by telegram.ts with ECHO_TOKEN and ECHO_API_ROOT; sends it its port.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Bot, HttpError, webhookCallback } from 'grammy';

const bot = new Bot(process.env.ECHO_TOKEN!, {
  client: { apiRoot: process.env.ECHO_API_ROOT! },
  botInfo: { id: 1, is_bot: true, first_name: 'Echo', username: 'echo_bot' } as never,
});
// A call whose connection the emulator closed under load is made once more, as any bot's client would.
bot.api.config.use(async (prev, method, payload, signal) => {
  try {
    return await prev(method, payload, signal);
  } catch (err) {
    if (err instanceof HttpError) return prev(method, payload, signal);
    throw err;
  }
});
bot.on('message:text', (ctx) => ctx.reply(ctx.message.text));
const server = createServer(webhookCallback(bot, 'http'));
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
process.on('disconnect', () => process.exit(0));
