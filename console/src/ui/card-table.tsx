/**
 * The table of both consoles: rows and columns on a wide screen, one card per row on a phone (styles.css, "tables that
 * become cards"), where each cell is introduced by its data-label.
 */
import type { ComponentChildren } from 'preact';

export interface Column<Row> {
  /** The header, and the cell's data-label unless `label` says otherwise. */
  header: string;
  /** The header is read by screen readers only (a column of buttons). */
  hiddenHeader?: boolean;
  /** The cell's data-label when it is not the header; null for none (the card shows the cell unlabelled). */
  label?: string | null;
  class?: string;
  cell: (row: Row) => ComponentChildren;
}

/** A row's key and the data attributes the tests and scripts find it by. */
export type RowAttributes = { key: string } & { [attribute: `data-${string}`]: string };

export function CardTable<Row>({
  label,
  testId,
  columns,
  rows,
  row,
}: {
  /** The table's accessible name. */
  label?: string;
  testId?: string;
  columns: Column<Row>[];
  rows: readonly Row[];
  row: (row: Row) => RowAttributes;
}) {
  return (
    <table class="cards" aria-label={label} data-testid={testId}>
      <thead>
        <tr>
          {columns.map((column) => (
            <th key={column.header} scope="col">
              {column.hiddenHeader ? <span class="visually-hidden">{column.header}</span> : column.header}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((item) => (
          <tr {...row(item)}>
            {columns.map((column) => (
              <td
                key={column.header}
                data-label={column.label === undefined ? column.header : (column.label ?? undefined)}
                class={column.class}
              >
                {column.cell(item)}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
