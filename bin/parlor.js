#!/usr/bin/env node
// The `parlor` command: runs the TypeScript entry point through tsx's loader.
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
