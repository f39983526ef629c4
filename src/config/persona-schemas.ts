// JSON Schemas of the persona files. Unknown keys are errors so that a typo is caught, not ignored.

const address = { type: 'string', pattern: '^[a-z][a-z0-9_-]*:.+$' } as const;
const connectorId = { type: 'string', pattern: '^[a-z][a-z0-9_-]*$' } as const;

export const connectorsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    $schema: { type: 'string' },
    default: { type: 'boolean' },
    users: { type: 'array', items: address, uniqueItems: true },
    approvers: { type: 'array', items: address, uniqueItems: true },
    primary: {
      type: 'object',
      additionalProperties: false,
      required: ['connector', 'to'],
      properties: { connector: connectorId, to: { type: 'string', minLength: 1 }, thread: { type: 'string' } },
    },
    // Other personas that may write to this one (send_to_persona, ask_persona); none by default.
    personas: { type: 'array', items: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]*$' }, uniqueItems: true },
    channels: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['connector', 'chat'],
        properties: {
          connector: connectorId,
          chat: { type: 'string', minLength: 1 },
          thread: { type: 'string' },
          mention: { type: 'boolean' },
        },
      },
    },
  },
} as const;

export const toolsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    $schema: { type: 'string' },
    deny: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
    approve: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
    // Tools that act on the machine or the world ask first by default; listed here, they run without asking.
    allow: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
    // Custom and MCP tools callable from the first model call of every turn, without tool_activate.
    activate: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
    thinking: { type: 'boolean' },
    // Answers appear as one message that grows as the model writes (where the connector can edit).
    stream: { type: 'boolean' },
    model: { type: 'string', minLength: 1 },
    maxIterations: { type: 'integer', minimum: 1, maximum: 200 },
    // Below the turn job's expiry (3 h), so pg-boss never takes back a turn that is still within its budget.
    turnTimeoutSeconds: { type: 'integer', minimum: 5, maximum: 7200 },
    // How long an approval question waits for a click before it counts as a deny.
    approvalTimeoutSeconds: { type: 'integer', minimum: 1, maximum: 7200 },
    // Commands run in a sandbox (bubblewrap); "unsandboxed" is the owner's explicit choice where none is available.
    shell: { enum: ['sandboxed', 'unsandboxed'] },
    // Background tasks (spawn_subagent): how deep they nest, how many a turn starts and run at once, each one's budget.
    subagents: {
      type: 'object',
      additionalProperties: false,
      properties: {
        maxDepth: { type: 'integer', minimum: 0, maximum: 3 },
        perTurn: { type: 'integer', minimum: 1, maximum: 20 },
        running: { type: 'integer', minimum: 1, maximum: 16 },
        maxIterations: { type: 'integer', minimum: 1, maximum: 200 },
        timeoutSeconds: { type: 'integer', minimum: 10, maximum: 7200 },
      },
    },
    // web_fetch refuses private, loopback and link-local addresses; hosts listed here (a home server) it may reach.
    web: {
      type: 'object',
      additionalProperties: false,
      properties: {
        allowHosts: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
      },
    },
    // Commands left running in the background (shell_exec past yield_ms): how many at once.
    processes: {
      type: 'object',
      additionalProperties: false,
      properties: {
        max: { type: 'integer', minimum: 0, maximum: 32 },
      },
    },
  },
} as const;

/** The fields of one `schedules.jsonc` entry (the `remind` tool takes them too). */
export const scheduleEntryProperties = {
  name: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]*$' },
  type: { enum: ['heartbeat', 'cron'] },
  cron: { type: 'string', minLength: 1 },
  prompt: { type: 'string', minLength: 1 },
  fresh: { type: 'boolean' },
  enabled: { type: 'boolean' },
  deliver: {
    type: 'object',
    additionalProperties: false,
    required: ['connector', 'to'],
    properties: { connector: connectorId, to: { type: 'string', minLength: 1 }, thread: { type: 'string' } },
  },
} as const;

export const schedulesSchema = {
  type: 'array',
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['name', 'type', 'cron', 'prompt'],
    properties: scheduleEntryProperties,
  },
} as const;
