/**
 * Runs in every test file before its own code (vitest `setupFiles`). Its afterAll is registered first, so it
 * runs last, once the file's own afterAll hooks have stopped the servers and processes using the file's temp
 * directories: then those go. (A file whose tests are all skipped runs no hooks: create directories in
 * beforeAll or in a test, not while the file is collected.)
 */
import { afterAll } from 'vitest';
import { removeTempDirs } from './tmp.js';

afterAll(removeTempDirs);
