// The short fault run of `npm test` (`npm run faults` is the full one): real parlor start processes under load while
// they are killed with SIGKILL or a worker is stopped (SIGSTOP) until the other fences it, Postgres restarts, the model fails and the platforms rate-limit, drop connections and
// deliver twice. Every invariant must hold at the end.
import { describe, expect, it } from 'vitest';
import { formatReport, runFaults } from './scenario.ts';

describe('under faults', () => {
  it('loses nothing, sends nothing twice, leaves nothing stuck, runs no tool without approval and shows no internal text', async () => {
    const seed = Number(process.env.FAULTS_SEED ?? Date.now() % 100_000);
    const report = await runFaults({
      // Cycle 1 and 4 kill a process, 2 stops the worker, 3 restarts Postgres.
      cycles: 4,
      postgresEvery: 3,
      stopEvery: 4,
      cycleSeconds: [2, 3],
      workers: 1,
      seed,
      chats: { echo: 2, ask: 1, remind: 1 },
      modelFaultRate: 0.1,
      approvalTimeoutSeconds: 6,
      drainSeconds: 90,
      log: (line) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`),
    });
    const summary = `seed ${seed}\n${formatReport(report)}`;
    console.log(summary);
    expect(report.kills, summary).toBeGreaterThanOrEqual(2);
    // Stopped for longer than the others take to fence it, the worker exits when it runs again.
    expect(report.stops, summary).toBe(1);
    expect(report.fencedExits, summary).toBe(1);
    expect(report.postgresRestarts, summary).toBeGreaterThanOrEqual(process.env.TEST_DATABASE_URL || process.env.DATABASE_URL ? 0 : 1);
    expect(report.accepted, summary).toBeGreaterThan(20);
    // Every post was taken: Discord's, posted while no session of the bot was connected, are read back.
    expect(report.notAccepted, summary).toEqual({ telegram: 0, discord: 0, slack: 0 });
    // Telegram's at-least-once window (see FaultReport.resentAfterKill): at most one message per kill.
    expect(report.resentAfterKill.length, summary).toBeLessThanOrEqual(report.kills);
    expect(
      {
        lost: report.lost,
        duplicated: report.duplicated,
        stuck: report.stuck,
        outOfOrder: report.outOfOrder,
        unapprovedRuns: report.unapprovedRuns,
        internalText: report.internalText,
        unexpected: report.unexpected,
        crashes: report.crashTails,
        badStopExits: report.badStopExits,
      },
      summary,
    ).toEqual({ lost: [], duplicated: [], stuck: [], outOfOrder: [], unapprovedRuns: [], internalText: [], unexpected: [], crashes: [], badStopExits: [] });
  }, 420_000);
});
