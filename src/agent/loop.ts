import { addUsage, ModelError, type ChatMessage, type ModelClient, type ToolCall, type Usage } from '#src/llm/types.ts';
import type { ToolOutput } from '#src/tools/types.ts';
import { DEFAULT_HISTORY_BUDGET, type HistoryBudget } from './history.ts';
import { fitRequestToBudget } from './request-budget.ts';
import { stripInternalText } from './visible-text.ts';

export type TurnStatus = 'ok' | 'skipped' | 'failed' | 'cancelled';

export type LoopEvent =
  | { type: 'turn_start' }
  | { type: 'model_start'; iteration: number }
  | { type: 'model_end'; iteration: number; usage: Usage; ms: number }
  | { type: 'text_delta'; delta: string }
  /** A message added to the turn; `fromInbox` when it is a user message that arrived (and was stored) mid-turn. */
  | { type: 'message'; message: ChatMessage; fromInbox?: boolean }
  | { type: 'tool_start'; call: ToolCall }
  | { type: 'tool_end'; call: ToolCall; output: ToolOutput; ms: number }
  | { type: 'turn_end'; result: LoopResult };

export interface LoopTool {
  name: string;
  allowRepeat?: boolean;
}

export interface LoopOptions {
  model: ModelClient;
  modelName: string;
  system: string;
  /** The history window, ending with whatever started the turn. */
  messages: ChatMessage[];
  tools: { specs: import('#src/llm/types.ts').ToolSpec[]; list: readonly LoopTool[]; execute(call: ToolCall): Promise<ToolOutput> };
  /** Background turns must classify themselves with end_task and never speak in plain text. */
  background: boolean;
  thinking?: boolean;
  maxIterations?: number;
  /** Epoch ms after which the loop stops at the next boundary. */
  deadline?: number;
  signal?: AbortSignal;
  /** Messages that arrived while the turn ran; read before every model call after the first. */
  drainInbox?: () => Promise<ChatMessage[]>;
  /** What one model request may hold; all the turn's messages are still kept (and emitted). Default: the history's. */
  budget?: HistoryBudget;
  onEvent?: (event: LoopEvent) => void | Promise<void>;
}

export interface LoopResult {
  status: TurnStatus;
  /** What the user should see at the end of a user turn (already stripped of internal text). */
  reply?: string;
  summary?: string;
  /** The whole error, for the log and the turn's record. */
  error?: string;
  /** A few words people may see (a background turn's warning): never a provider's raw error. */
  reason?: string;
  /** The model call that ended the turn, when one did: for the log (status, kind and the provider's message). */
  modelError?: { status?: number; kind: string; message: string };
  usage: Usage;
  modelCalls: number;
}

export const DEFAULT_MAX_ITERATIONS = 24;
const END_TASK = 'end_task';

/** Runs one turn: model call, tools (concurrently, results in order), repeat until an answer or an end. */
export async function runAgentLoop(options: LoopOptions): Promise<LoopResult> {
  const messages = options.messages;
  // The turn opens with the user messages at the end of its history window; what arrives later is told apart.
  const openingEnd = messages.findLastIndex((m) => m.role === 'user') + 1;
  let openingStart = Math.max(0, openingEnd - 1);
  while (openingStart > 0 && messages[openingStart - 1].role === 'user') openingStart--;
  const arrived = new Set<ChatMessage>();
  const budget = options.budget ?? DEFAULT_HISTORY_BUDGET;
  const usage: Usage = { input: 0, output: 0 };
  let modelCalls = 0;
  let thinking = options.thinking ?? false;
  let forcedEnd = false;
  let lastCallKey: string | undefined;
  let repeats = 0;
  // What the previous request began with: the history, for the turn's first call.
  let previous: readonly ChatMessage[] = messages.slice(0, openingStart);
  const maxIterations = options.maxIterations ?? DEFAULT_MAX_ITERATIONS;
  const emit = async (event: LoopEvent) => {
    await options.onEvent?.(event);
  };
  const append = async (message: ChatMessage, fromInbox = false) => {
    messages.push(message);
    if (fromInbox) arrived.add(message);
    await emit({ type: 'message', message, fromInbox });
  };
  const finish = async (result: Omit<LoopResult, 'usage' | 'modelCalls'>): Promise<LoopResult> => {
    const full = { ...result, usage, modelCalls };
    await emit({ type: 'turn_end', result: full });
    return full;
  };
  const canEnd = options.tools.list.some((t) => t.name === END_TASK);

  await emit({ type: 'turn_start' });
  for (let iteration = 0; ; iteration++) {
    if (options.signal?.aborted) return finish({ status: 'cancelled' });
    // The turn has just read what was waiting when it began; later arrivals are read before each next call.
    if (iteration > 0) for (const incoming of (await options.drainInbox?.()) ?? []) await append(incoming, true);
    if (iteration >= maxIterations) {
      return finish({
        status: 'failed',
        error: `stopped after ${maxIterations} steps`,
        reply: options.background ? undefined : `I stopped after ${maxIterations} steps without finishing. Say "continue" if you want me to go on.`,
      });
    }
    if (options.deadline && Date.now() > options.deadline) {
      return finish({
        status: 'failed',
        error: 'turn time budget exhausted',
        reply: options.background ? undefined : 'I ran out of time for this request. Say "continue" if you want me to go on.',
      });
    }

    await emit({ type: 'model_start', iteration });
    const callStarted = Date.now();
    // The SDKs add a listener to the signal they are given; a signal per call keeps the turn's from piling up.
    const call = new AbortController();
    const abortCall = () => call.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', abortCall, { once: true });
    let response;
    try {
      modelCalls++;
      // Mid-turn arrivals and tool results would otherwise grow the request without bound.
      const sent = fitRequestToBudget({ messages, opening: { start: openingStart, end: openingEnd }, inbox: arrived }, budget);
      const stablePrefix = sharedPrefix(previous, sent);
      previous = sent;
      response = await options.model.complete(
        {
          model: options.modelName,
          system: options.system,
          messages: sent,
          ...(stablePrefix ? { stablePrefix } : {}),
          tools: options.tools.specs,
          toolChoice: forcedEnd ? { name: END_TASK } : 'auto',
          thinking,
          signal: call.signal,
        },
        (delta) => void emit({ type: 'text_delta', delta }),
      );
    } catch (err) {
      if (options.signal?.aborted) return finish({ status: 'cancelled' });
      const error = err instanceof ModelError ? err : new ModelError({ message: String(err), kind: 'request' }, { cause: err });
      return finish({
        status: 'failed',
        error: `model: ${error.message}`,
        reason: shortReason(error),
        modelError: { status: error.status, kind: error.kind, message: error.message },
        reply: options.background ? undefined : apology(error),
      });
    } finally {
      options.signal?.removeEventListener('abort', abortCall);
    }
    // A stream cut short by /stop may end without an error: what it holds is not an answer.
    if (options.signal?.aborted) return finish({ status: 'cancelled' });
    await emit({ type: 'model_end', iteration, usage: response.usage, ms: Date.now() - callStarted });
    addUsage(usage, response.usage);
    const text = response.text;
    await append({ role: 'assistant', content: text, ...(response.toolCalls.length ? { toolCalls: response.toolCalls } : {}), usage: response.usage });

    if (response.toolCalls.length === 0) {
      if (options.background && canEnd) {
        if (!forcedEnd) {
          // A background turn that ends in plain text gets one forced chance to classify itself.
          forcedEnd = true;
          await append({
            role: 'user',
            content: '[Parlor] This is a background turn and plain text reaches no one. Call end_task now: ok, skipped (nothing worth saying) or failed.',
          });
          continue;
        }
        return finish({ status: 'ok', summary: 'ended without end_task' });
      }
      return finish({ status: 'ok', reply: options.background ? undefined : stripInternalText(text) });
    }

    const outputs = await Promise.all(
      response.toolCalls.map(async (call) => {
        const key = `${call.name}\u0000${canonicalArgs(call.arguments)}`;
        const tool = options.tools.list.find((t) => t.name === call.name);
        repeats = key === lastCallKey ? repeats + 1 : 1;
        lastCallKey = key;
        let guardNote = '';
        if (!tool?.allowRepeat && repeats >= 3) {
          return {
            call,
            output: { content: `blocked: this is the third identical ${call.name} call in a row; it was not run. Use the result you already have or try something different.` },
            ms: 0,
          };
        }
        if (!tool?.allowRepeat && repeats === 2) {
          thinking = true;
          guardNote = `\n[Parlor] You made this exact ${call.name} call twice in a row. Think about why the result is not what you need before calling it again.`;
        }
        await emit({ type: 'tool_start', call });
        const started = Date.now();
        const output = await options.tools.execute(call);
        return { call, output: { ...output, content: output.content + guardNote }, ms: Date.now() - started };
      }),
    );

    let endTurn: ToolOutput['endTurn'];
    for (const { call, output, ms } of outputs) {
      await emit({ type: 'tool_end', call, output, ms });
      await append({ role: 'tool', toolCallId: call.id, name: call.name, content: output.content });
      if (output.thinking) thinking = true;
      if (output.endTurn && !endTurn) endTurn = output.endTurn;
    }
    if (options.signal?.aborted) return finish({ status: 'cancelled' });
    if (endTurn) {
      return finish({
        status: endTurn.status,
        summary: endTurn.summary,
        reply: options.background ? undefined : stripInternalText(text) || undefined,
      });
    }
  }
}

/** How many leading messages two requests share (the same objects: what fitting to the budget changed is new). */
function sharedPrefix(before: readonly ChatMessage[], after: readonly ChatMessage[]): number {
  let n = 0;
  while (n < before.length && n < after.length && before[n] === after[n]) n++;
  return n;
}

function canonicalArgs(text: string): string {
  try {
    return JSON.stringify(sortKeys(JSON.parse(text || '{}')));
  } catch {
    return text;
  }
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]));
  }
  return value;
}

function shortReason(error: ModelError): string {
  switch (error.kind) {
    case 'rate_limited':
      return 'the model was rate-limiting';
    case 'auth':
      return 'the model API key was refused';
    case 'network':
      return 'the model could not be reached';
    case 'server':
      return 'the model service failed';
    default:
      return 'the model rejected the request';
  }
}

function apology(error: ModelError): string {
  switch (error.kind) {
    case 'rate_limited':
      return 'Sorry, the model is rate-limiting me right now. Please try again in a minute.';
    case 'auth':
      return "Sorry, I can't reach the model: its API key was refused. The owner needs to check LLM_API_KEY.";
    case 'network':
    case 'server':
      return "Sorry, I couldn't reach the model just now. Please try again in a moment.";
    default:
      return 'Sorry, the model rejected that request, so I could not answer.';
  }
}
