// Run before each test file (vitest's setupFiles). Its afterAll runs after the file's own (vitest runs after-hooks
// in reverse order), once the file has stopped whatever used its scratch folders.
import { afterAll } from 'vitest';
import { removeTempDirs } from './temp-dirs.ts';

afterAll(removeTempDirs);
