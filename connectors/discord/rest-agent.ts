// The dispatcher discord.js's REST sends with.
import { createRequire } from 'node:module';
import type { RESTOptions } from '@discordjs/rest';

type Dispatcher = NonNullable<RESTOptions['agent']>;

/**
 * A dispatcher of the undici discord.js builds its requests with. Without one, discord.js sends on the process's
 * default dispatcher, which whichever undici loads first sets for every version in the process: one of another
 * version (Slack's Socket Mode brings undici 7) cannot write the multipart bodies discord.js's own builds, and every
 * upload fails with "action is not a function".
 */
export function discordRestAgent(): Dispatcher {
  // The REST discord.js uses, and the undici that one uses.
  const fromDiscord = createRequire(createRequire(import.meta.url).resolve('discord.js'));
  const fromDiscordRest = createRequire(fromDiscord.resolve('@discordjs/rest'));
  const { Agent } = fromDiscordRest('undici') as { Agent: new () => Dispatcher };
  return new Agent();
}
