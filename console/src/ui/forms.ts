/** What both consoles' form handlers read from an input, a select or a text area's event. */

type Field = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

/** The field's value (text, number as typed, the chosen option). */
export const valueOf = (event: Event): string => (event.target as Field).value;

/** Whether the checkbox is checked. */
export const checkedOf = (event: Event): boolean => (event.target as HTMLInputElement).checked;
