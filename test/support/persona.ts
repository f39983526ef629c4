// Test builders: a Persona with safe defaults, and a ToolContext whose deliver() records every call.
import pino from 'pino';
import { SUBAGENT_DEFAULTS, type Persona } from '#src/config/persona.ts';
import type { ToolContext } from '#src/tools/types.ts';
import type { DeliveryResult, DeliveryTarget, Origin, TurnKind } from '../../src/turns.ts';

export type PersonaOverrides = Partial<Omit<Persona, 'tools'>> & { tools?: Partial<Persona['tools']> };

export function makePersona(overrides: PersonaOverrides = {}): Persona {
  const { tools, ...rest } = overrides;
  return {
    name: 'tester',
    dir: '/tmp/parlor-test/personas/tester',
    soul: 'You are a persona used in tests.',
    isDefault: true,
    users: [],
    approvers: [],
    channels: [],
    personas: [],
    schedules: [],
    secrets: {},
    workspace: '/tmp/parlor-test/personas/tester/workspace',
    skills: [],
    ...rest,
    tools: { deny: [], approve: [], allow: [], activate: [], thinking: false, stream: false, shell: 'sandboxed', subagents: SUBAGENT_DEFAULTS, web: { allowHosts: [] }, processes: { max: 4 }, ...tools },
  };
}

export interface DeliveryCall {
  target: DeliveryTarget;
  text: string;
  options?: { dedupe?: string; files?: string[] };
}

export interface TestToolContext extends ToolContext {
  deliveries: DeliveryCall[];
  reactions: { emoji: string; messageId?: string }[];
  questions: { type: 'remote' | 'ask'; request: unknown }[];
}

export function makeToolContext(
  options: {
    persona?: Persona;
    kind?: TurnKind;
    origin?: Origin;
    signal?: AbortSignal;
    connectors?: string[];
    deliverResult?: DeliveryResult;
    /** What ctx.remoteMethod resolves with (an Error: rejects with it). */
    remoteAnswer?: unknown;
  } = {},
): TestToolContext {
  const deliveries: DeliveryCall[] = [];
  const reactions: { emoji: string; messageId?: string }[] = [];
  const questions: TestToolContext['questions'] = [];
  return {
    persona: options.persona ?? makePersona(),
    conversationId: 'conv-test',
    turnId: 'turn-test',
    kind: options.kind ?? 'user',
    origin: options.origin,
    signal: options.signal ?? new AbortController().signal,
    log: pino({ level: 'silent' }),
    deliveries,
    async deliver(target, text, deliverOptions) {
      deliveries.push({ target, text, options: deliverOptions });
      return options.deliverResult ?? { status: 'sent' };
    },
    connectorIds: () => options.connectors ?? ['telegram', 'discord', 'terminal'],
    questions,
    async remoteMethod(request) {
      questions.push({ type: 'remote', request });
      if (options.remoteAnswer instanceof Error) throw options.remoteAnswer;
      return options.remoteAnswer;
    },
    async askUser(request) {
      questions.push({ type: 'ask', request });
      return { id: 'question-id-1', short: 'questi' };
    },
    reactions,
    async react(emoji, messageId) {
      reactions.push({ emoji, messageId });
      return 'done' as const;
    },
  };
}
