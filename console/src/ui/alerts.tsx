/** How both consoles say what went wrong (an alert) and what an action did (a status). */

/** An error as an alert: an Error's message, anything else as text; nothing when there is none. */
export function Failure({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error instanceof Error ? error.message : String(error)}
    </p>
  );
}

/** What an action did, announced politely; nothing when empty. */
export function Notice({ text }: { text: string | null | undefined }) {
  if (!text) return null;
  return (
    <p class="success" role="status">
      {text}
    </p>
  );
}
