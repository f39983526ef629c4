// What `parlor init` asks and writes for one platform. Each connector's registry entry describes itself (its
// secrets, how its owner's user id looks, its examples and hints), so init goes through the registry and names no
// platform: a platform added to the registry is offered by init with no change here.
import type { ConnectorEntry } from '#src/connector.ts';

/** A value of the connector's that init asks for and writes to `.env`: a token, a secret. */
export interface InitSecret {
  /** The environment variable it goes into. */
  variable: string;
  /** Its option is `--<connector id>-<flag>`: `token` makes `--<connector id>-token`. */
  flag: string;
  /** How the summary names it once written: "the <platform> bot token". */
  what: string;
  /** Its line under `parlor init --help`. */
  help: string;
  /** The question at a terminal. */
  prompt: string;
  /** The placeholder on its commented line in `.env` when it is not given. */
  example: string;
  /** What is wrong with a value (without repeating it: it is a secret), or undefined when it looks right. */
  check(value: string): string | undefined;
  /** The way of receiving it picks ("Socket Mode"): when some secrets name one, the token needs one of them. */
  mode?: string;
}

/** The owner's user id on the platform: one of the persona's `users`, and where its proactive messages go. */
export interface InitOwner {
  /** The question at a terminal (asked once the platform has a token). */
  prompt: string;
  /** Its line under `parlor init --help`. */
  help: string;
  /** An id of the right shape, for the commented examples. */
  example: string;
  /** What is wrong with an id (naming it and the right shape), or undefined when it is one. */
  check(value: string): string | undefined;
}

/** A connector's part in `parlor init`. */
export interface ConnectorInit {
  /** How a person names the platform, capitalised as the platform does. */
  label: string;
  /** The first turns the connector on (its token: `--<id>-token`); the others go with it. */
  secrets: readonly [InitSecret, ...InitSecret[]];
  owner: InitOwner;
  /** The comment above its block in `.env`, a line each (without the `# `). */
  envNotes: readonly string[];
  /** Settings it may also take, written after its secrets as commented lines (without the `# `). */
  envExtras?: readonly string[];
  /** A group chat or channel id of the right shape, for the commented "channels" entry. */
  exampleChat: string;
  /** What `"to"` in "primary" names on this platform, in one comment line. */
  primaryNote: string;
  /** What to do to run it, when only the owner's id was given: "set <its token's variable> in .env (…)". */
  setUp: string;
}

/** A registry entry as init sees it; one without `init` is not offered. */
export type InitConnectorEntry = Pick<ConnectorEntry, 'id' | 'parse' | 'init'>;

/** A registry entry init offers. */
export interface InitPlatform {
  id: string;
  init: ConnectorInit;
}

/** The entries init offers, in registry order. */
export function initPlatforms(connectors: readonly InitConnectorEntry[]): InitPlatform[] {
  return connectors.flatMap((c) => (c.init ? [{ id: c.id, init: c.init }] : []));
}

export const secretFlag = (platform: InitPlatform, secret: InitSecret): string => `${platform.id}-${secret.flag}`;
export const ownerFlag = (platform: InitPlatform): string => `${platform.id}-user`;

/** The options a platform adds to `parlor init`: its secrets' (`.env`) and its owner's (the persona). */
export function platformFlags(platform: InitPlatform): { env: string[]; persona: string[] } {
  return { env: platform.init.secrets.map((s) => secretFlag(platform, s)), persona: [ownerFlag(platform)] };
}

/** `parseArgs` options for every platform's flags. */
export function initOptions(connectors: readonly InitConnectorEntry[]): Record<string, { type: 'string' }> {
  const flags = initPlatforms(connectors).flatMap((p) => [...platformFlags(p).env, ...platformFlags(p).persona]);
  return Object.fromEntries(flags.map((flag) => [flag, { type: 'string' as const }]));
}

/** The platforms' lines for `parlor init --help`: help text from column `width`, under an option too long for that. */
export function initOptionsHelp(connectors: readonly InitConnectorEntry[], width = 26): string {
  const lines = initPlatforms(connectors).flatMap((p) => [
    ...p.init.secrets.map((s) => [`--${secretFlag(p, s)} ${s.flag.split('-').pop()!.toUpperCase()}`, s.help]),
    [`--${ownerFlag(p)} ID`, p.init.owner.help],
  ]);
  return lines.map(([option, help]) => (option.length > width - 4 ? `  ${option}\n${' '.repeat(width)}${help}\n` : `  ${option.padEnd(width - 4)}  ${help}\n`)).join('');
}
