// Runs the fake LLM server standalone (for trying Parlor by hand): prints its OpenAI base URL.
import { startFakeLlm } from './fake-llm.ts';

const fake = await startFakeLlm();
process.stdout.write(`${fake.openaiBaseUrl}\n`);
process.on('SIGTERM', () => void fake.close().then(() => process.exit(0)));
