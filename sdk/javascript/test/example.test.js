// The http_req example, run as its own process against the fake core.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { infoParse } from '../index.js';
import { FakeCore, coreTransId } from './fake-core.js';

const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..',
  'examples', 'http_req', 'javascript', 'http_req.mjs');

let core;
let child;
const peers = [];

before(async () => {
  core = await FakeCore.start();
  child = spawn(process.execPath, [EXAMPLE], {
    env: { ...process.env, CUMULO_SOCKET: core.path, CUMULO_TOKEN: 'example', CUMULO_THREAD_COUNT: '2',
      CUMULO_PROCESS_INDEX: '0', CUMULO_PROCESS_COUNT: '1', CUMULO_PREFIX: '/tests/http_req/' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  for (let i = 0; i < 2; i++) {
    const peer = await core.accept();
    const hello = await peer.handshake({ prefix: '/tests/http_req/', instanceId: 20 + i, threadCount: 2 });
    assert.equal(hello.token, 'example');
    peers.push(peer);
  }
  for (const peer of peers) {
    const sub = await peer.expect('SUBSCRIBE');
    assert.equal(sub.pattern, 'javascript.xml/get');
    peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  }
});

after(async () => {
  child.kill();
  await core.stop();
});

let n = 0;
async function ask(body, peer = peers[0]) {
  n++;
  peer.send({
    type: 'REQUEST', transId: coreTransId(n), timeout: 5000, priority: 0, flags: 1, source: 0n,
    name: '/tests/http_req/javascript.xml/get', pattern: '/tests/http_req/javascript.xml/get',
    requestInfo: Buffer.alloc(0), request: Buffer.from(body, 'latin1'),
  });
  const ret = await peer.expect('RETURN');
  assert.deepEqual(ret.transId, coreTransId(n));
  assert.equal(ret.status, 0);
  assert.deepEqual(infoParse(ret.responseInfo), [['content-type', 'text/xml; charset=utf-8']]);
  return ret.response.toString();
}

const value = (v) => `<http_test><value>${v}</value></http_test>`;
const NO_VALUE = '<http_test><error>no value specified</error></http_test>';

test('an integer value is echoed as parsed', { timeout: 10_000 }, async () => {
  assert.equal(await ask('value\x0042\x00'), value(42));
  assert.equal(await ask('value\x00+007\x00', peers[1]), value(7));
  assert.equal(await ask('value\x00-3\x00'), value(-3));
  assert.equal(await ask('a\x00b\x00value\x009223372036854775807\x00'), value('9223372036854775807'));
  assert.equal(await ask('value\x00-9223372036854775808\x00'), value('-9223372036854775808'));
});

test('anything else gets the error answer', { timeout: 10_000 }, async () => {
  for (const body of ['', 'other\x001\x00', 'value\x00abc\x00', 'value\x00\x00', 'value\x004 2\x00',
    'value\x001.5\x00', 'value\x009223372036854775808\x00', 'value\x0042', 'value\x00']) {
    assert.equal(await ask(body), NO_VALUE, JSON.stringify(body));
  }
});

test('the process leaves on TERMINATE', { timeout: 10_000 }, async () => {
  const exited = once(child, 'exit');
  for (const peer of peers) peer.send({ type: 'TERMINATE', timeout: 1000 });
  for (const peer of peers) await peer.expect('GOODBYE');
  const [code] = await exited;
  assert.equal(code, 0);
});
