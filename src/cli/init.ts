// `parlor init [name]`: a new persona folder (and, when there is none, a `.env`) from a few answers or flags.
// The platforms it offers, their questions, flags and checks come from the connector registry (ConnectorInit).
import fs from 'node:fs';
import path from 'node:path';
import { CONNECTORS, LOCAL_CONNECTORS } from '#connectors/registry.ts';
import { parseEnvText, parseSettings, type Settings } from '#src/config/env.ts';
import { ConfigError } from '#src/config/errors.ts';
import { loadPersona } from '#src/config/persona.ts';
import { askQuestions, existingPersonas, fromFlags, MODEL_FLAGS, OLLAMA, problems, type InitIo, type InitValues } from './init-answers.ts';
import { initPlatforms, platformFlags, type InitConnectorEntry, type InitPlatform } from './init-connector.ts';
import { connectorsText, envText, schedulesText, soulText, toolsText, type EnvAnswers, type PersonaAnswers } from './init-files.ts';

export type { InitIo, InitValues } from './init-answers.ts';

function shown(file: string, cwd: string): string {
  const rel = path.relative(cwd, file);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
}

/** The platforms being set up: configured in the environment, or given a token now. */
function platformsSetUp(settings: Settings, env: EnvAnswers | undefined, platforms: readonly InitPlatform[]): InitPlatform[] {
  return platforms.filter((p) => settings.connectors[p.id] !== undefined || env?.secrets?.[p.init.secrets[0].variable]);
}

/**
 * `parlor init`: returns the exit code; a mistake is a ConfigError (one line, exit 2) and nothing is written.
 * `connectors` are the registry's entries: those with an `init` description are offered.
 */
export async function init(settings: Settings, values: InitValues, io: InitIo = processIo(), connectors: readonly InitConnectorEntry[] = CONNECTORS): Promise<number> {
  const platforms = initPlatforms(connectors);
  const envFlags = [...MODEL_FLAGS, ...platforms.flatMap((p) => platformFlags(p).env)];
  const personaFlags = ['soul', ...platforms.flatMap((p) => platformFlags(p).persona)];
  const envFile = path.join(io.cwd, '.env');
  const envExists = fs.existsSync(envFile);
  const flagged = [...envFlags, ...personaFlags].some((f) => values[f] !== undefined);
  if (values.name !== undefined) checkFreeName(values.name, settings, io.cwd);
  const given = fromFlags(values, platforms);
  if (envExists && envFlags.some((f) => values[f] !== undefined)) {
    throw new ConfigError(
      `${shown(envFile, io.cwd)} already exists and parlor init never changes it: put those settings in it yourself, or leave out --${envFlags.filter((f) => values[f] !== undefined).join(', --')}`,
    );
  }

  let answers: { persona: PersonaAnswers; env?: EnvAnswers };
  if (io.interactive && !values.yes && !flagged) {
    const asked = await askQuestions(settings, values, io, envExists, platforms);
    if (!asked) {
      io.output.write('\nStopped; nothing was written.\n');
      return 130;
    }
    answers = asked;
  } else {
    const existing = existingPersonas(settings.personasDir);
    const name = values.name ?? (existing.length === 0 ? 'assistant' : undefined);
    if (!name) {
      throw new ConfigError(`name the new persona: parlor init <name> (${shown(settings.personasDir, io.cwd)} already has ${existing.join(', ')})`);
    }
    checkFreeName(name, settings, io.cwd);
    answers = { persona: { name, ...given.persona }, env: envExists ? undefined : given.env };
  }
  answers.persona.connectors = platformsSetUp(settings, answers.env, platforms).map((p) => p.id);

  const written = writeFiles(settings, io.cwd, answers.persona, answers.env, connectors);
  io.output.write(summary(settings, io.cwd, answers.persona, answers.env, written, platforms));
  return 0;
}

function processIo(): InitIo {
  return { cwd: process.cwd(), input: process.stdin, output: process.stdout, interactive: Boolean(process.stdin.isTTY && process.stdout.isTTY) };
}

function checkFreeName(name: string, settings: Settings, cwd: string): void {
  const problem = problems.name(name);
  if (problem) throw new ConfigError(problem);
  const dir = path.join(settings.personasDir, name);
  if (fs.existsSync(dir)) throw new ConfigError(`${shown(dir, cwd)} already exists and parlor init never overwrites a persona; pick another name`);
}

/** Writes the persona folder, checks it with the loader, then the `.env`; on any failure, removes what it wrote. */
function writeFiles(
  settings: Settings,
  cwd: string,
  persona: PersonaAnswers,
  env: EnvAnswers | undefined,
  connectors: readonly InitConnectorEntry[],
): { dir: string; envFile?: string } {
  const envContent = env ? envText(env, connectors) : undefined;
  // What `.env` says must start Parlor: checked by the same parser every command runs, before anything is written.
  if (envContent !== undefined) {
    try {
      parseSettings(parseEnvText(envContent), cwd, connectors);
    } catch (err) {
      if (err instanceof ConfigError) throw new ConfigError(`the .env these settings make would not load: ${err.message}`);
      throw err;
    }
  }
  const madeRoot = !fs.existsSync(settings.personasDir);
  const dir = path.join(settings.personasDir, persona.name);
  fs.mkdirSync(settings.personasDir, { recursive: true });
  try {
    // Not recursive: a folder that appeared since the check is refused, never written into.
    fs.mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new ConfigError(`${shown(dir, cwd)} already exists and parlor init never overwrites a persona; pick another name`);
    throw err;
  }
  const envFile = path.join(cwd, '.env');
  try {
    fs.writeFileSync(path.join(dir, 'SOUL.md'), soulText(persona));
    fs.writeFileSync(path.join(dir, 'connectors.jsonc'), connectorsText(persona, connectors));
    fs.writeFileSync(path.join(dir, 'tools.jsonc'), toolsText(persona));
    fs.writeFileSync(path.join(dir, 'schedules.jsonc'), schedulesText(persona, connectors));
    fs.mkdirSync(path.join(dir, 'workspace'));
    loadPersona(dir, { connectors: [...LOCAL_CONNECTORS, ...connectors.map((c) => c.id)] });
    if (envContent !== undefined) {
      try {
        fs.writeFileSync(envFile, envContent, { flag: 'wx', mode: 0o600 });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new ConfigError(`${shown(envFile, cwd)} already exists and parlor init never changes it`);
        throw err;
      }
    }
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    if (madeRoot) fs.rmSync(settings.personasDir, { recursive: true, force: true });
    throw err;
  }
  return { dir, envFile: envContent !== undefined ? envFile : undefined };
}

/** `a`, `a and b`, `a, b and c`. */
function listed(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

function summary(
  settings: Settings,
  cwd: string,
  persona: PersonaAnswers,
  env: EnvAnswers | undefined,
  written: { dir: string; envFile?: string },
  platforms: readonly InitPlatform[],
): string {
  const { name, owners = {} } = persona;
  const mine = platforms.filter((p) => owners[p.id]).map((p) => `${p.id}:${owners[p.id]}`);
  const who = mine.length ? ` (${mine[0]}, also its primary${mine.length > 1 ? `, and ${listed(mine.slice(1))}` : ''})` : '';
  const connectorsFile = path.join(shown(written.dir, cwd), 'connectors.jsonc');
  const lines = [
    `Wrote ${shown(written.dir, cwd)}/`,
    `  SOUL.md            who ${name} is and how it speaks: edit it freely`,
    `  connectors.jsonc   who may talk to it${who}, and where it lives`,
    '  tools.jsonc        which tools ask first (approve, allow, deny)',
    '  schedules.jsonc    heartbeat and cron entries (none yet; two examples in comments)',
    '  workspace/         its files: its file and shell tools stay inside',
  ];
  if (written.envFile) {
    const secrets = platforms.flatMap((p) => p.init.secrets.filter((s) => env?.secrets?.[s.variable]).map((s) => s.what));
    lines.push(`Wrote ${shown(written.envFile, cwd)} with ${listed([env?.model ? `the model (${env.model})` : 'model examples to fill in', ...secrets])}`);
  }
  const hasModel = Boolean(settings.llm || env?.model);
  const running = platformsSetUp(settings, env, platforms);
  lines.push('');
  if (!hasModel && written.envFile) {
    lines.push(
      'No model is set yet: in .env, remove the # in front of one of the examples and fill it in (for Ollama,',
      `LLM_BASE_URL=${OLLAMA} and LLM_MODEL=llama3.1); then \`npx parlor doctor\` checks that it answers.`,
      '',
    );
  } else if (!hasModel) {
    lines.push(
      'No model is set yet: add it to .env, each setting on a line of its own, e.g. for Ollama',
      `  LLM_PROVIDER=openai\n  LLM_BASE_URL=${OLLAMA}\n  LLM_MODEL=llama3.1`,
      'or for Anthropic LLM_PROVIDER=anthropic, LLM_API_KEY=sk-ant-... and LLM_MODEL=claude-sonnet-4-5;',
      'then `npx parlor doctor` checks that it answers.',
      '',
    );
  }
  const next: [string, string][] = [[`npx parlor chat --persona ${name}`, 'talk to it in this terminal']];
  const strangers = running.filter((p) => !owners[p.id]);
  if (running.length) {
    next.push(['npm start', `run it on ${listed(running.map((p) => p.init.label))}${strangers.length < running.length ? ', then message your bot' : ''}`]);
  }
  const width = Math.max(...next.map(([command]) => command.length)) + 4;
  lines.push(hasModel ? 'Next:' : 'Then:', ...next.map(([command, what]) => `  ${command.padEnd(width)}${what}`));
  if (strangers.length) {
    const where = strangers.length < running.length ? `On ${listed(strangers.map((p) => p.init.label))}, your bot` : 'Your bot';
    lines.push(`${where} answers strangers with their address: add yours to "users" in ${connectorsFile}.`);
  }
  for (const platform of platforms.filter((p) => owners[p.id] && !running.includes(p))) {
    lines.push(`To reach it on ${platform.init.label}, ${platform.init.setUp} and run npm start.`);
  }
  return `${lines.join('\n')}\n`;
}

