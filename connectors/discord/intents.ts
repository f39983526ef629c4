// What Parlor asks Discord's gateway for, and what to do when Discord refuses a privileged intent. Kept apart from
// discord.js so that the registry entry (settings, doctor) loads without it.

/** Gateway intent bits (Discord's values): no voice, no presences, no member list. */
export const INTENT_BITS = {
  Guilds: 1 << 0,
  GuildMessages: 1 << 9,
  GuildMessageReactions: 1 << 10,
  DirectMessages: 1 << 12,
  DirectMessageReactions: 1 << 13,
  MessageContent: 1 << 15,
} as const;

/** Application flags saying the Message Content intent is enabled (verified apps, and apps in under 100 servers). */
const MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19);

export function intentBits(messageContent: boolean): number {
  const { MessageContent, ...always } = INTENT_BITS;
  return Object.values(always).reduce((bits, bit) => bits | bit, 0) | (messageContent ? MessageContent : 0);
}

/** Whether the application's flags (GET /applications/@me) allow the Message Content intent. */
export function messageContentAllowed(applicationFlags: number): boolean {
  return (applicationFlags & MESSAGE_CONTENT_FLAGS) !== 0;
}

/** What to do when the gateway refuses the Message Content intent (close code 4014): `parlor doctor` says the same. */
export const MESSAGE_CONTENT_REFUSED =
  'Discord refused the privileged Message Content intent (gateway close 4014, "Disallowed intent(s)"). ' +
  'In the Developer Portal (https://discord.com/developers/applications) open the application → Bot → Privileged Gateway Intents, ' +
  'turn on "Message Content Intent" and save; or set DISCORD_MESSAGE_CONTENT=false (mentions, replies to the bot and DMs still work without it)';
