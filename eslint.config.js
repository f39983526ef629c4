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

export default tseslint.config(
  { ignores: ['node_modules/**', 'migrations/**', '.parlor/**', 'dist/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/app.ts', 'src/main.ts', 'src/cli/**'],
    rules: { 'no-restricted-imports': ['error', forbiddenInCore] },
  },
);
