/** What the owner console's pages say about a failure they caught. */
import { ApiError } from './api.js';

/** An API error's message, anything else as text. */
export const caughtText = (caught: unknown): string => (caught instanceof ApiError ? caught.message : String(caught));

/** An API error's message and what to do about it (its resolution), anything else as text. */
export const caughtAdvice = (caught: unknown): string =>
  caught instanceof ApiError ? `${caught.message} ${caught.resolution}` : String(caught);

/** caughtAdvice, with an Error's own message rather than its name (a failure thrown while unlocking the vault). */
export const unlockFailureText = (caught: unknown): string =>
  caught instanceof ApiError || !(caught instanceof Error) ? caughtAdvice(caught) : caught.message;
