// Buttons as Discord message components: action rows of at most 5 buttons, at most 5 rows; a longer list of choices
// becomes select menus (25 options each). A click carries the button's payload back as its custom_id (or, from a
// menu, as the chosen value).
import type { Button } from '#src/connector.ts';

/** Discord's limits on components. */
export const MAX_CUSTOM_ID = 100;
const PER_ROW = 5;
const MAX_ROWS = 5;
const PER_MENU = 25;
const MAX_LABEL = 80;
/** The custom_id of a menu of choices; what it carries is the chosen option's value. */
export const MENU_PREFIX = 'menu:';

const ComponentType = { ActionRow: 1, Button: 2, StringSelect: 3 } as const;
const ButtonStyle = { Primary: 1, Secondary: 2 } as const;

export interface ActionRow {
  type: 1;
  components: Record<string, unknown>[];
}

function checked(data: string): string {
  if ([...data].length > MAX_CUSTOM_ID) throw new Error(`button data "${data}" is over Discord's ${MAX_CUSTOM_ID}-character custom_id limit`);
  return data;
}

const label = (text: string) => ([...text].length > MAX_LABEL ? `${[...text].slice(0, MAX_LABEL - 1).join('')}…` : text);

/** The action rows for `rows` of buttons: rows longer than 5 are wrapped; more than 25 buttons become menus. */
export function componentsFor(rows: Button[][]): ActionRow[] {
  const buttons = rows.flat();
  if (buttons.length === 0) return [];
  const wrapped = rows.flatMap((row) => Array.from({ length: Math.ceil(row.length / PER_ROW) }, (_, i) => row.slice(i * PER_ROW, (i + 1) * PER_ROW)));
  if (wrapped.length <= MAX_ROWS) {
    let first = true;
    return wrapped.map((row) => ({
      type: ComponentType.ActionRow,
      components: row.map((button) => {
        const style = first ? ButtonStyle.Primary : ButtonStyle.Secondary;
        first = false;
        return { type: ComponentType.Button, style, label: label(button.label), custom_id: checked(button.data) };
      }),
    }));
  }
  if (buttons.length > PER_MENU * MAX_ROWS) throw new Error(`${buttons.length} choices are more than Discord can show on one message (${PER_MENU * MAX_ROWS})`);
  return Array.from({ length: Math.ceil(buttons.length / PER_MENU) }, (_, i) => {
    const options = buttons.slice(i * PER_MENU, (i + 1) * PER_MENU);
    return {
      type: ComponentType.ActionRow,
      components: [
        {
          type: ComponentType.StringSelect,
          custom_id: `${MENU_PREFIX}${i}`,
          placeholder: i === 0 ? 'Choose…' : 'More choices…',
          min_values: 1,
          max_values: 1,
          options: options.map((button) => ({ label: label(button.label), value: checked(button.data) })),
        },
      ],
    };
  });
}
