// The floor of the Telegram benchmark, as a process of its own like Parlor: a bare grammY bot echoing each text
// message, receiving by webhook. Started by telegram.ts with ECHO_TOKEN and ECHO_API_ROOT; sends it its port.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Bot, webhookCallback } from 'grammy';

const bot = new Bot(process.env.ECHO_TOKEN!, {
  client: { apiRoot: process.env.ECHO_API_ROOT! },
  botInfo: { id: 1, is_bot: true, first_name: 'Echo', username: 'echo_bot' } as never,
});
bot.on('message:text', (ctx) => ctx.reply(ctx.message.text));
const server = createServer(webhookCallback(bot, 'http'));
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
process.on('disconnect', () => process.exit(0));
