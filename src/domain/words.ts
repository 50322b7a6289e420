/** Words shown to people, one rule for the console and the CLI: a count with its noun ("1 file", "2 files"). */
export const plural = (count: number, one: string, many = `${one}s`): string => `${count} ${count === 1 ? one : many}`;
