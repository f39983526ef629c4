// Questions, approvals and remote methods as Block Kit: a section with the question, buttons carrying the payload.
import type { Button } from '#src/connector.ts';

/** A question: its text as a section, then its choices as buttons, one actions block per row. */
export function questionBlocks(mrkdwn: string, rows: Button[][]): Record<string, unknown>[] {
  return [
    { type: 'section', text: { type: 'mrkdwn', text: mrkdwn.trim() ? mrkdwn : ' ' } },
    ...rows.map((row, r) => ({
      type: 'actions',
      block_id: `choices-${r}`,
      elements: row.map((button, i) => {
        if (button.data.length > 2000) throw new Error(`button data "${button.data.slice(0, 40)}…" is over Slack's 2,000-character limit`);
        const label = button.label.length > 75 ? `${button.label.slice(0, 74)}…` : button.label;
        return { type: 'button', action_id: `choice-${r}-${i}`, text: { type: 'plain_text', text: label, emoji: true }, value: button.data };
      }),
    })),
  ];
}
