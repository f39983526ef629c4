// `npm run faults`: the full fault run (100 cycles: kill -9 in most, a Postgres restart every 10th, a process stopped
// past the hung period every 10th, a worker and the one with the connectors in turn), its figures printed; exits 1
// when an invariant does not hold. FAULTS_CYCLES, FAULTS_SEED and FAULTS_WORKERS change the run.
import { formatReport, runFaults } from './scenario.ts';

const seed = Number(process.env.FAULTS_SEED ?? Date.now() % 100_000);
console.log(`seed ${seed} (FAULTS_SEED=${seed} runs it again)`);
const report = await runFaults({
  cycles: Number(process.env.FAULTS_CYCLES ?? 100),
  postgresEvery: Number(process.env.FAULTS_POSTGRES_EVERY ?? 10),
  stopEvery: Number(process.env.FAULTS_STOP_EVERY ?? 10),
  cycleSeconds: [3, 8],
  workers: Number(process.env.FAULTS_WORKERS ?? 1),
  seed,
  chats: { echo: 6, ask: 2, remind: 2 },
  modelFaultRate: 0.1,
  approvalTimeoutSeconds: 20,
  drainSeconds: 180,
  log: (line) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`),
});
console.log(formatReport(report));
const broken =
  report.lost.length +
  report.duplicated.length +
  report.stuck.length +
  report.outOfOrder.length +
  report.unapprovedRuns.length +
  report.internalText.length +
  report.badStopExits.length +
  report.notAccepted.telegram +
  report.notAccepted.discord +
  report.notAccepted.slack;
process.exit(broken ? 1 : 0);
