// Checks index.d.ts with the TypeScript compiler (a devDependency).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

test('index.d.ts type-checks against its usage with tsc --noEmit', {
  skip: existsSync(TSC) ? false : 'typescript is not installed (run npm install)',
  timeout: 90_000,
}, () => {
  const result = spawnSync(process.execPath, [TSC, '--noEmit', '-p', join(ROOT, 'tsconfig.json')],
    { cwd: ROOT, encoding: 'utf8' });
  assert.equal(result.status, 0, `tsc failed:\n${result.stdout}${result.stderr}`);
});
