/**
 * What both consoles' HTTP clients share: a map of the routes a page calls, each "METHOD /path" (with `:parameters`)
 * to its request body (if any) and its response body, so that a call names its route and gets the body types.
 */

/** The names of a path's `:parameters`. */
type PathParameters<Path extends string> = Path extends `${string}:${infer Name}/${infer Rest}`
  ? Name | PathParameters<Rest>
  : Path extends `${string}:${infer Name}`
    ? Name
    : never;

/** A call's options: the client's own, and the route's path parameters and request body when it has them. */
type CallOptions<Route extends string, Entry, Options> = Options &
  ([PathParameters<Route>] extends [never] ? unknown : { params: Record<PathParameters<Route>, string> }) &
  (Entry extends { request: infer Body } ? { body: Body } : unknown);

/** A call's options argument: required when the route has parameters or a body. */
export type CallArguments<Route extends string, Entry, Options> =
  Partial<CallOptions<Route, Entry, Options>> extends CallOptions<Route, Entry, Options>
    ? [options?: CallOptions<Route, Entry, Options>]
    : [options: CallOptions<Route, Entry, Options>];

/** What a call's options hold, once its route's types have been checked. */
export type Call<Options> = Options & { params?: Record<string, string>; body?: unknown };

/** A call's method, and its path with the parameters URL-encoded into it. */
export function resolveRoute(route: string, params: Record<string, string> = {}): { method: string; path: string } {
  const [method, template] = route.split(' ') as [string, string];
  return { method, path: template.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(params[name]!)) };
}
