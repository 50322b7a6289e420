/** Types of build-stamp.mjs, for the tests' TypeScript (test/helpers/built.ts). */
export declare const ROOT: string;
export declare const BUILD_INPUTS: readonly string[];
export declare function staleBuild(root?: string): string | null;
