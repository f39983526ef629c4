import tseslint from 'typescript-eslint';

// The core (src/) never imports a platform SDK or the adapter folders; the composition root wires them in.
const forbiddenInCore = {
  patterns: [
    { group: ['grammy', 'grammy/*', '@grammyjs/*'], message: 'src/ must not import a platform SDK (DESIGN §1).' },
    { group: ['discord.js', 'discord.js/*', '@discordjs/*'], message: 'src/ must not import a platform SDK (DESIGN §1).' },
    { group: ['@slack/*'], message: 'src/ must not import a platform SDK (DESIGN §1).' },
    // Inside src/, other folders are reached through the `#src/*` import map, so a relative `../` import can only
    // be a way out of the core (to connectors/ or tools/).
    { regex: '^\\.\\./', message: 'src/ must not import connectors/ or tools/ (DESIGN §1); use #src/... for core modules.' },
    { regex: '^#(connectors|tools)/', message: 'only the composition root (src/app.ts, src/main.ts, src/cli/) wires in connectors/ and tools/ (DESIGN §1).' },
  ],
};

// A string that is a platform's name, or starts with one as an address (`telegram:42`).
const PLATFORM_NAMES = String.raw`/^(telegram|terminal|discord|slack)(:|$)/i`;
const PLATFORM_NAME_MESSAGE = 'src/ must not name a platform (DESIGN §1): pass it as data on the event or as a connector capability.';

// Node 20 holds a timeout signal inside AbortSignal.any only weakly: a collection loses it, and the request never
// times out. src/abort.ts's deadline() is the combination that holds.
const TIMEOUT_INSIDE_ANY = {
  selector: "CallExpression[callee.object.name='AbortSignal'][callee.property.name='any'] CallExpression[callee.object.name='AbortSignal'][callee.property.name='timeout']",
  message: "AbortSignal.timeout inside AbortSignal.any can be garbage-collected before it fires on Node 20: use deadline() from src/abort.ts.",
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'migrations/**', '.parlor/**', 'dist/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', TIMEOUT_INSIDE_ANY],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/app.ts', 'src/main.ts', 'src/cli/**'],
    rules: {
      'no-restricted-imports': ['error', forbiddenInCore],
      // Platform facts reach the core as data on events and connector capabilities, never as a platform's name.
      'no-restricted-syntax': [
        'error',
        TIMEOUT_INSIDE_ANY,
        { selector: `Literal[value=${PLATFORM_NAMES}]`, message: PLATFORM_NAME_MESSAGE },
        { selector: `TemplateElement[value.raw=${PLATFORM_NAMES}]`, message: PLATFORM_NAME_MESSAGE },
      ],
    },
  },
);
