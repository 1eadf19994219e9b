// TLS to the core's TCP listener, against a fake core that speaks TLS.
// Certificates come from tests/tls/make_certs.sh (the openssl CLI).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { API, CumuloError, Status } from '../index.js';
import { FakeCore, coreTransId } from './fake-core.js';

const MAKE_CERTS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'tests', 'tls', 'make_certs.sh');
const T = { timeout: 10_000 };
let openssl = true;
try {
  execFileSync('openssl', ['version'], { stdio: 'ignore' });
} catch {
  openssl = false;
}
const TLS = { ...T, skip: openssl ? false : 'the openssl CLI is needed to make the test certificates' };

// A server certificate from the same CA for another name: elsewhere.pem, elsewhere.key.
const ELSEWHERE = `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out elsewhere.key 2>/dev/null
openssl req -new -key elsewhere.key -subj /CN=elsewhere.example -out elsewhere.csr
printf "subjectAltName=DNS:elsewhere.example\\nextendedKeyUsage=serverAuth\\n" >elsewhere.ext
openssl x509 -req -in elsewhere.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile elsewhere.ext -out elsewhere.pem 2>/dev/null`;

let dir;
const file = (name) => join(dir, name);
const pem = (name) => readFileSync(file(name));

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'cumulo-js-certs-'));
  if (!openssl) return;
  execFileSync('bash', [MAKE_CERTS, dir], { stdio: 'ignore' });
  execFileSync('bash', ['-euc', ELSEWHERE], { cwd: dir, stdio: 'ignore' });
});
after(() => rmSync(dir, { recursive: true, force: true }));

function serverOptions(clientCa = false) {
  const options = { cert: pem('server.pem'), key: pem('server.key') };
  if (clientCa) Object.assign(options, { ca: pem('ca.pem'), requestCert: true, rejectUnauthorized: true });
  return options;
}

function isStatus(status) {
  return (err) => err instanceof CumuloError && err.status === status;
}

// A subscription, one large request served, then a sendSync answered: all over TLS.
async function exercise(core, connecting) {
  const peer = await core.accept();
  await peer.handshake();
  const api = await connecting;
  const subscribing = api.subscribe('item/get', (req) => `got ${req.request.length}`);
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;
  const polling = api.poll({ timeout: 5000 });
  const body = Buffer.alloc(1 << 20, 7); // many TLS records
  peer.send({
    type: 'REQUEST', transId: coreTransId(1), timeout: 4000, priority: 0, flags: 1, source: 0n,
    name: '/svc/item/get', pattern: '/svc/item/get', requestInfo: Buffer.alloc(0), request: body,
  });
  const ret = await peer.expect('RETURN');
  assert.equal(ret.response.toString(), `got ${1 << 20}`);
  const sending = api.sendSync('/x', 'hi');
  const send = await peer.expect('SEND_SYNC');
  peer.send({ type: 'RESPONSE', transId: send.transId, status: 0, responseInfo: Buffer.alloc(0), response: Buffer.from('over tls') });
  assert.equal((await sending).response.toString(), 'over tls');
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  return { api, peer };
}

for (const host of ['127.0.0.1', 'localhost']) {
  test(`TLS from the environment, the core reached as ${host}`, TLS, async () => {
    const core = await FakeCore.start(serverOptions());
    try {
      const env = { CUMULO_TLS_CA: file('ca.pem') };
      const { api } = await exercise(core, API.connect({ socket: core.path.replace('127.0.0.1', host), prefix: '/svc/', env }));
      await api.close();
    } finally {
      await core.stop();
    }
  });
}

test('a client certificate from the options, where the core requires one', TLS, async () => {
  const core = await FakeCore.start(serverOptions(true));
  try {
    const { api, peer } = await exercise(core, API.connect({
      socket: core.path, prefix: '/svc/', env: {},
      tlsCa: file('ca.pem'), tlsCert: file('client.pem'), tlsKey: file('client.key'),
    }));
    assert.equal(peer.socket.getPeerCertificate().subject.CN, 'cumulo test instance');
    await api.close();
  } finally {
    await core.stop();
  }
});

test('the options win over the environment; an empty tlsCert drops CUMULO_TLS_CERT', TLS, async () => {
  const core = await FakeCore.start(serverOptions());
  try {
    const env = { CUMULO_TLS_CA: file('other-ca.pem'), CUMULO_TLS_CERT: file('client.pem') };
    const { api } = await exercise(core, API.connect({ socket: core.path, prefix: '/svc/', env, tlsCa: file('ca.pem'), tlsCert: '' }));
    await api.close();
  } finally {
    await core.stop();
  }
});

test('a core whose certificate another CA signed is refused with the TLS reason', TLS, async () => {
  const core = await FakeCore.start(serverOptions());
  try {
    await assert.rejects(API.connect({ socket: core.path, prefix: '/svc/', env: { CUMULO_TLS_CA: file('other-ca.pem') } }),
      (err) => !(err instanceof CumuloError) && /verify|certificate/.test(err.message) && typeof err.code === 'string');
  } finally {
    await core.stop();
  }
});

test('a certificate that does not name the host is refused', TLS, async () => {
  const core = await FakeCore.start({ cert: pem('elsewhere.pem'), key: pem('elsewhere.key') });
  try {
    await assert.rejects(API.connect({ socket: core.path, prefix: '/svc/', env: { CUMULO_TLS_CA: file('ca.pem') } }),
      (err) => err.code === 'ERR_TLS_CERT_ALTNAME_INVALID' && /127\.0\.0\.1/.test(err.message));
  } finally {
    await core.stop();
  }
});

test('no client certificate where the core requires one: connect fails', TLS, async () => {
  const core = await FakeCore.start(serverOptions(true));
  try {
    // TLS 1.3: the refusal can come after the instance's side of the handshake, while it waits for WELCOME.
    await assert.rejects(API.connect({ socket: core.path, prefix: '/svc/', env: { CUMULO_TLS_CA: file('ca.pem') } }),
      (err) => /certificate/i.test(err.message));
    assert.ok(core.tlsErrors.length > 0);
  } finally {
    await core.stop();
  }
});

for (const only of ['CUMULO_TLS_CERT', 'CUMULO_TLS_KEY']) {
  test(`${only} without the other is refused before connecting`, TLS, async () => {
    const env = { CUMULO_TLS_CA: file('ca.pem'), [only]: file(only.endsWith('CERT') ? 'client.pem' : 'client.key') };
    await assert.rejects(API.connect({ socket: 'tcp://127.0.0.1:1', prefix: '/svc/', env }),
      (err) => isStatus(Status.INVALID_ARGUMENT)(err) && /needs both/.test(err.message));
  });
}

test('a missing CA file is a clear error', T, async () => {
  const missing = join(tmpdir(), 'cumulo-no-such-ca.pem');
  await assert.rejects(API.connect({ socket: 'tcp://127.0.0.1:1', prefix: '/svc/', env: {}, tlsCa: missing }),
    (err) => isStatus(Status.INVALID_ARGUMENT)(err) && err.message.includes(missing) && /ENOENT/.test(err.message));
});

test('a CA file without a certificate is a clear error', TLS, async () => {
  await assert.rejects(API.connect({ socket: 'tcp://127.0.0.1:1', prefix: '/svc/', env: {}, tlsCa: file('ca.key') }),
    (err) => isStatus(Status.INVALID_ARGUMENT)(err) && /no PEM certificate/.test(err.message));
});

test('a Unix socket ignores the TLS settings', TLS, async () => {
  const core = await FakeCore.start();
  try {
    const env = { CUMULO_TLS_CA: file('other-ca.pem'), CUMULO_TLS_CERT: file('client.pem') };
    const connecting = API.connect({ socket: core.path, prefix: '/svc/', env });
    await (await core.accept()).handshake();
    await (await connecting).close();
  } finally {
    await core.stop();
  }
});
