// The platforms Parlor has: one entry each (see ConnectorEntry, and ConnectorInit for what `parlor init` asks).
// Adding a platform is a folder and one line here.
import type { ConnectorEntry } from '#src/connector.ts';
import { discordEntry } from './discord/entry.ts';
import { slackEntry } from './slack/entry.ts';
import { telegramEntry } from './telegram/entry.ts';

export const CONNECTORS: readonly ConnectorEntry<any>[] = [telegramEntry, discordEntry, slackEntry];

/** Connectors that serve this machine's owner (`parlor chat`): always known, never configured by a token. */
export const LOCAL_CONNECTORS = ['terminal'] as const;

/** Every connector id a persona file may name. */
export const CONNECTOR_IDS: readonly string[] = [...LOCAL_CONNECTORS, ...CONNECTORS.map((c) => c.id)];
