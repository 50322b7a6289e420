/**
 * Imported first by the client commands' entry (client-main.ts), for its effect: the WebAssembly that a client
 * command runs stays on V8's baseline compiler (Liftoff) instead of being compiled again by its optimizing tier.
 *
 * The one WebAssembly there is the HTTP parser of Node's fetch (undici's llhttp). Once it has parsed a few
 * responses, V8 recompiles it with TurboFan on a background thread, and that compilation of one large state-machine
 * function takes a compiler zone of about 15 MiB (heaptrack: Zone::Expand under ExecuteTurboshaftWasmCompilation),
 * at the very moment a backup starts its pipeline: most of the gap between a backup's peak RSS and P9's 100 MiB
 * (BENCHMARKS.md, P9), and about 20 ms of CPU, for a command that parses a handful of responses (a restore's
 * download only hands the body's bytes on, which the baseline code does as well). The tiering budget is how much
 * a function must run before it is tiered up; the largest value keeps everything on Liftoff. `--liftoff-only` would
 * say the same but is read only when the process starts on Node 24.
 *
 * Only on the V8 versions this was measured on (Node 20, 22 and 24: V8 11 to 13): V8 prints "unrecognized flag" on
 * stderr for a flag it does not know, which a later V8 could drop. `coffer serve` does not load this module.
 */
import v8 from 'node:v8';

const v8Major = Number(process.versions.v8.split('.')[0]);
if (v8Major >= 11 && v8Major <= 13) v8.setFlagsFromString('--wasm-tiering-budget=2000000000');
