// The files `parlor init` writes: a starter persona whose comments explain every setting, and a `.env`.
// Each commented example is a valid line once its `// ` is removed, so a user can switch one on by uncommenting it.
// What a platform adds to them comes from its registry entry (ConnectorInit): nothing here names one.
import { parseEnvText } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { initPlatforms, type InitConnectorEntry, type InitPlatform } from './init-connector.ts';

export interface PersonaAnswers {
  name: string;
  /** Who the persona is, in the user's words (usually one line). */
  soul?: string;
  /**
   * The owner's user id on each platform given, by connector id: allowed to DM the persona; the first (in registry
   * order) is its primary, where proactive messages go.
   */
  owners?: Readonly<Record<string, string>>;
  /** The connectors it is being set up for (a token given or set): their examples are the ones the files show. */
  connectors?: readonly string[];
}

export interface EnvAnswers {
  provider: 'openai' | 'anthropic';
  baseUrl?: string;
  model?: string;
  apiKey?: string;
  /** The platforms' values, by the variable each secret names. */
  secrets?: Readonly<Record<string, string>>;
}

/** The platform whose examples the comments show: the owner's first, else the first set up, else the registry's first. */
function examplePlatform(answers: PersonaAnswers, platforms: readonly InitPlatform[]): InitPlatform | undefined {
  return platforms.find((p) => answers.owners?.[p.id]) ?? platforms.find((p) => answers.connectors?.includes(p.id)) ?? platforms[0];
}

export const DEFAULT_SOUL = 'a capable, friendly helper who lives in the chats of the person who runs you';

/** `my-bot` → `My bot`: how the persona is named in its own soul. */
function displayName(name: string): string {
  const words = name.replace(/[-_]+/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function soulText({ name, soul }: PersonaAnswers): string {
  let who = (soul ?? '').trim() || DEFAULT_SOUL;
  if (!/^(you are|you're)\b/i.test(who)) {
    // "A terse sysadmin" reads as "You are Ops, a terse sysadmin"; "Linux expert" keeps its capital.
    who = who.replace(/^(A|An|The|My|Your)\b/, (word) => word.toLowerCase());
    who = `You are ${displayName(name)}, ${who}`;
  }
  if (!/[.!?]$/.test(who)) who += '.';
  return `${who}

How you talk:
- Lead with the answer, then the detail that matters. Short paragraphs; lists only when they help.
- Plain, warm and direct: no filler, no apologies for being an AI, no sign-offs.
- Match the language the person writes in.
- When a request is ambiguous and a wrong guess would waste their time, ask one short question; otherwise make a sensible assumption and say which.

How you work:
- Use your tools when they give a better answer than memory, and say plainly when something did not work.
- Never invent facts, links, numbers or quotes. If you do not know, say so and suggest how to find out.
- Keep secrets secret: never repeat tokens, keys or passwords, even if they show up in a tool result.
`;
}

export function connectorsText(answers: PersonaAnswers, connectors: readonly InitConnectorEntry[]): string {
  const { name, owners = {} } = answers;
  const platforms = initPlatforms(connectors);
  const example = examplePlatform(answers, platforms);
  const address = (p: InitPlatform, id: string) => JSON.stringify(`${p.id}:${id}`);
  // The owner's addresses, and an example for each platform being set up without one (or for the example platform).
  const users = platforms.flatMap((p) =>
    owners[p.id] ? [`    ${address(p, owners[p.id])},`] : answers.connectors?.includes(p.id) ? [`    // ${address(p, p.init.owner.example)},`] : [],
  );
  if (!users.length && example) users.push(`    // ${address(example, example.init.owner.example)},`);
  const mine = platforms.find((p) => owners[p.id]);
  const primary = mine
    ? `  "primary": { "connector": ${JSON.stringify(mine.id)}, "to": ${JSON.stringify(owners[mine.id])} },`
    : example
      ? `  // "primary": { "connector": ${JSON.stringify(example.id)}, "to": ${JSON.stringify(example.init.owner.example)} },`
      : '';
  const primaryNote = (mine ?? example)?.init.primaryNote;
  return `// Who ${name} talks to and where it lives. Comments and trailing commas are fine here; Parlor checks this
// file at start-up and names the line that is wrong. To switch an example on, remove the // in front of it.
{
  // Wins when several personas list the same person, and is the one \`parlor chat\` picks without --persona.
  // "default": true,

  // People who may DM ${name}, as "<connector>:<user id>". The terminal (\`parlor chat\`) is always allowed.
  // Someone not listed who writes gets one short reply naming their address, so you can add it here.
  "users": [
${users.map((line) => `${line}\n`).join('')}  ],

  // Who may answer its approval buttons (Allow once / Always allow / Deny). Default: everyone in "users".
${example ? `  // "approvers": [${address(example, example.init.owner.example)}],\n` : ''}
  // Where reminders, schedules and heartbeats send what names no chat.${primaryNote ? `\n  // ${primaryNote}` : ''}
${primary}

  // Group chats and channels it answers in. With "mention": true (the default) it answers only when it is
  // @mentioned or replied to; with false, every message it can see.
  "channels": [
${example ? `    // { "connector": ${JSON.stringify(example.id)}, "chat": ${JSON.stringify(example.init.exampleChat)}, "mention": true },\n` : ''}  ],
}
`;
}

export function toolsText({ name }: PersonaAnswers): string {
  return `// Which tools ${name} gets, and which ones ask a person first. A name here that is not a tool stops
// start-up with the nearest tool named, so a typo never turns "ask first" into "run unasked".
{
  // Tools that need a person's click before they run: Allow once, Always allow (remembered for this persona)
  // or Deny. An approval nobody answers counts as Deny. Any tool may be listed, e.g. ["send_message"].
  "approve": [],

  // Tools that act on the machine, like shell_exec, ask first even when they are not under "approve". Listed
  // here, they run without asking: leave this empty unless you trust every command the model might run.
  "allow": [],

  // Tools it never gets, e.g. ["shell_exec"] for a persona that only talks.
  "deny": [],

  // "approvalTimeoutSeconds": 300, // how long an approval waits before it counts as Deny (1-7200)
  // "thinking": false, // deeper reasoning on every answer; /think switches it per chat
  // "model": "gpt-4.1-mini", // this persona's model instead of LLM_MODEL
  // "web": { "allowHosts": ["nas.home"] }, // hosts on your own network web_fetch may read (public sites need nothing)
  // "processes": { "max": 4 }, // commands shell_exec may leave running in the background at once; 0 turns that off
}
`;
}

export function schedulesText(answers: PersonaAnswers, connectors: readonly InitConnectorEntry[]): string {
  const { name } = answers;
  const example = examplePlatform(answers, initPlatforms(connectors));
  const cron = example
    ? `

  // A cron job: a short plan every weekday at 8, sent to a ${example.init.label} chat.
  // { "name": "morning-briefing", "type": "cron", "cron": "0 8 * * 1-5", "prompt": "Send me a short plan for today.", "deliver": { "connector": ${JSON.stringify(example.id)}, "to": ${JSON.stringify(answers.owners?.[example.id] ?? example.init.owner.example)} } },`
    : '';
  return `// When ${name} speaks first: heartbeat and cron entries, in PARLOR_TIMEZONE (default UTC). Each entry has a
// name, a type (heartbeat or cron), a cron expression (minute hour day-of-month month day-of-week) and a prompt;
// optionally fresh (a new conversation each time), enabled and deliver. Edits take effect within seconds, without
// a restart. To switch an example on, remove the // in front of it.
[
  // A heartbeat: every hour from 8 to 20 it goes through HEARTBEAT.md (write that file beside this one) and
  // messages "primary" (see connectors.jsonc) only when something needs you.
  // { "name": "hourly-check", "type": "heartbeat", "cron": "0 8-20 * * *", "prompt": "Go through your checklist." },${cron}
]
`;
}

/** A `.env` value, quoted only when it needs to be; the caller checks that it reads back unchanged. */
function envValue(value: string): string {
  if (/^[\w./:@+=~,-]*$/.test(value)) return value;
  if (!value.includes("'")) return `'${value}'`;
  return `"${value}"`;
}

export function envText(answers: EnvAnswers, connectors: readonly InitConnectorEntry[]): string {
  const lines = [
    '# Parlor\'s settings, written by `parlor init`. A variable set in the environment wins over this file.',
    '# Keep this file private: it holds keys and tokens.',
    '',
  ];
  const values: Record<string, string> = {};
  const set = (key: string, value: string) => {
    values[key] = value;
    lines.push(`${key}=${envValue(value)}`);
  };
  if (answers.model) {
    lines.push('# The model (`npx parlor doctor` checks that it answers).');
    set('LLM_PROVIDER', answers.provider);
    if (answers.baseUrl) set('LLM_BASE_URL', answers.baseUrl);
    set('LLM_MODEL', answers.model);
    if (answers.apiKey) set('LLM_API_KEY', answers.apiKey);
    else lines.push('# LLM_API_KEY=...');
  } else {
    lines.push(
      '# The model: remove the # in front of one block and fill it in (`npx parlor doctor` checks that it answers).',
      '# Ollama, vLLM, llama.cpp, OpenRouter or any other OpenAI-compatible server:',
      '# LLM_PROVIDER=openai',
      '# LLM_BASE_URL=http://localhost:11434/v1',
      '# LLM_MODEL=llama3.1',
      '#',
      '# OpenAI:',
      '# LLM_PROVIDER=openai',
      '# LLM_API_KEY=sk-...',
      '# LLM_MODEL=gpt-4.1-mini',
      '#',
      '# Anthropic:',
      '# LLM_PROVIDER=anthropic',
      '# LLM_API_KEY=sk-ant-...',
      '# LLM_MODEL=claude-sonnet-4-5',
    );
  }
  for (const { init } of initPlatforms(connectors)) {
    lines.push('', ...init.envNotes.map((line) => `# ${line}`));
    for (const secret of init.secrets) {
      const value = answers.secrets?.[secret.variable];
      if (value) set(secret.variable, value);
      else lines.push(`# ${secret.variable}=${secret.example}`);
    }
    if (init.envExtras) lines.push(...init.envExtras.map((line) => `# ${line}`));
  }
  const text = `${lines.join('\n')}\n`;

  // A value that would not read back as given (a quote and a newline in one key) is refused, never written wrong.
  const back = parseEnvText(text);
  for (const [key, value] of Object.entries(values)) {
    if (back[key] !== value) throw new ConfigError(`${key} cannot be written to .env as given (quotes or line breaks in it); put it there yourself`);
  }
  return text;
}
