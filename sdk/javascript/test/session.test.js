// Session logic against a fake core over a real Unix socket.

import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { API, CumuloError, Status, infoEncode, infoParse, run } from '../index.js';
import { FakeCore, coreTransId } from './fake-core.js';

const T = { timeout: 10_000 };
let core;

beforeEach(async () => { core = await FakeCore.start(); });
afterEach(async () => { await core.stop(); });

// Connects an unmanaged instance and completes the handshake.
async function connect(options = {}, welcome = {}) {
  const connecting = API.connect({ socket: core.path, prefix: '/svc/', ...options });
  const peer = await core.accept();
  const hello = await peer.handshake(welcome);
  return { api: await connecting, peer, hello };
}

function request(n, fields = {}) {
  return {
    type: 'REQUEST', transId: coreTransId(n), timeout: 4000, priority: 0, flags: 1, source: 0n,
    name: '/svc/item/get', pattern: '/svc/item/get', requestInfo: Buffer.alloc(0), request: Buffer.alloc(0),
    ...fields,
  };
}

function isStatus(status) {
  return (err) => err instanceof CumuloError && err.status === status;
}

test('handshake: HELLO carries the options, accessors come from WELCOME', T, async () => {
  const { api, peer, hello } = await connect({ window: 3, threadIndex: 2 }, {
    nodeId: 9, instanceId: 42, processIndex: 1, processCount: 2, threadCount: 3, maxFrame: 4096,
    timeoutAsync: 1500, timeoutSync: 2500, timeoutTerminate: 700, priorityDefault: -3, keepalive: 800,
  });
  assert.deepEqual(hello, { type: 'HELLO', version: 1, window: 3, threadIndex: 2, token: '', prefix: '/svc/' });
  assert.deepEqual(
    [api.nodeId, api.instanceId, api.processIndex, api.processCount, api.threadCount, api.window,
      api.maxFrame, api.timeoutAsync, api.timeoutSync, api.timeoutTerminate, api.priorityDefault,
      api.keepalive, api.prefix, api.threadIndex],
    [9, 42, 1, 2, 3, 3, 4096, 1500, 2500, 700, -3, 800, '/svc/', 2]);
  const polling = api.poll();
  const waiting = assert.rejects(api.recvAsync({ timeout: 5000 }), isStatus(Status.SHUTTING_DOWN));
  await api.close();
  await peer.expect('GOODBYE');
  await peer.closed;
  assert.equal(await polling, false);
  await waiting;
  await assert.rejects(api.sendAsync('/x', ''), isStatus(Status.SHUTTING_DOWN));
});

test('managed connect takes socket and token from the environment', T, async () => {
  const env = { CUMULO_SOCKET: core.path, CUMULO_TOKEN: 'c0ffee' };
  const connecting = API.connect({ env, threadIndex: 1 });
  const peer = await core.accept();
  const hello = await peer.handshake({ prefix: '/managed/' });
  assert.equal(hello.token, 'c0ffee');
  assert.equal(hello.prefix, '');
  assert.equal(hello.threadIndex, 1);
  const api = await connecting;
  assert.equal(api.prefix, '/managed/');
  await api.close();
  await assert.rejects(API.connect({ env: { CUMULO_SOCKET: core.path } }), isStatus(Status.INVALID_ARGUMENT));
});

test('connect rejects with the ERROR the core sends instead of WELCOME', T, async () => {
  const connecting = API.connect({ socket: core.path, prefix: '/svc/' });
  const peer = await core.accept();
  await peer.expect('HELLO');
  peer.send({ type: 'ERROR', status: Status.UNAUTHORIZED, message: 'unmanaged instances are refused' });
  await assert.rejects(connecting, (err) => isStatus(Status.UNAUTHORIZED)(err)
    && err.message === 'unmanaged instances are refused');
});

test('subscribe, subscribeCount and unsubscribe wait for their REPLY', T, async () => {
  const { api, peer } = await connect();
  const subscribing = api.subscribe('item/get', () => 'x');
  const sub = await peer.expect('SUBSCRIBE');
  assert.equal(sub.pattern, 'item/get');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;

  const counting = api.subscribeCount('item/get');
  const count = await peer.expect('SUBSCRIBE_COUNT');
  assert.notEqual(count.reqId, sub.reqId);
  peer.send({ type: 'REPLY', reqId: count.reqId, status: 0, value: 2, message: '' });
  assert.equal(await counting, 2);

  const unsubscribing = api.unsubscribe('nothing');
  const unsub = await peer.expect('UNSUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: unsub.reqId, status: Status.INVALID_ARGUMENT, value: 0, message: 'not subscribed' });
  await assert.rejects(unsubscribing, (err) => isStatus(Status.INVALID_ARGUMENT)(err) && err.message === 'not subscribed');
  await api.close();
});

test('a REQUEST is handled and RETURNed; an unknown pattern gets NO_SERVICE', T, async () => {
  const { api, peer } = await connect();
  let seen;
  const subscribing = api.subscribe('item/get', async (req, instance) => {
    seen = { ...req, same: instance === api };
    return { info: { 'content-type': 'text/plain' }, response: `got ${infoParse(req.request)[0][1]}` };
  });
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;
  const polling = api.poll();

  peer.send(request(1, { source: (1n << 32n) | 5n, priority: -1, timeout: 3000, requestInfo: infoEncode({ a: 'b' }),
    request: infoEncode([['value', '42']]) }));
  const ret = await peer.expect('RETURN');
  assert.deepEqual(ret.transId, coreTransId(1));
  assert.equal(ret.status, Status.OK);
  assert.deepEqual(infoParse(ret.responseInfo), [['content-type', 'text/plain']]);
  assert.equal(ret.response.toString(), 'got 42');
  assert.equal(seen.name, '/svc/item/get');
  assert.equal(seen.pattern, '/svc/item/get');
  assert.equal(seen.source, (1n << 32n) | 5n);
  assert.equal(seen.priority, -1);
  assert.equal(seen.timeout, 3000);
  assert.equal(seen.sync, true);
  assert.equal(seen.mcast, false);
  assert.deepEqual(infoParse(seen.requestInfo), [['a', 'b']]);
  assert.ok(seen.same);

  peer.send(request(2, { pattern: '/svc/other', flags: 2 }));
  const refused = await peer.expect('RETURN');
  assert.deepEqual(refused.transId, coreTransId(2));
  assert.equal(refused.status, Status.NO_SERVICE);

  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  await api.close();
});

test('sendSync answers PING, keeps an unrelated RESPONSE and queues a REQUEST meanwhile', T, async () => {
  const { api, peer } = await connect({}, { nodeId: 3, instanceId: 11 });
  let served = false;
  const subscribing = api.subscribe('item/get', () => { served = true; return 'served'; });
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;

  const before = Date.now();
  const sending = api.sendSync('/other/echo', 'ping?', { info: { k: 'v' }, timeout: 1234, priority: -2 });
  const send = await peer.expect('SEND_SYNC');
  assert.equal(send.name, '/other/echo');
  assert.equal(send.request.toString(), 'ping?');
  assert.deepEqual(infoParse(send.requestInfo), [['k', 'v']]);
  assert.equal(send.timeout, 1234);
  assert.equal(send.priority, -2);
  assert.equal(send.flags, 0);
  assert.equal(send.transId.readUInt32BE(8), 3);
  assert.equal(send.transId.readUInt32BE(12), 11);
  const nanos = send.transId.readBigUInt64BE(0);
  assert.ok(nanos >= BigInt(before - 1000) * 1_000_000n && nanos <= BigInt(Date.now() + 1000) * 1_000_000n,
    'trans_id time is nanoseconds since the epoch');

  const nonce = (1n << 63n) + 12345n;
  peer.send({ type: 'PING', nonce });
  assert.deepEqual(await peer.expect('PONG'), { type: 'PONG', nonce });

  const unrelated = coreTransId(77);
  peer.send({ type: 'RESPONSE', transId: unrelated, status: 0, responseInfo: Buffer.alloc(0), response: Buffer.from('late') });
  peer.send(request(5));
  peer.send({ type: 'RESPONSE', transId: send.transId, status: 0, responseInfo: infoEncode({ r: '1' }),
    response: Buffer.from('pong!') });

  const answer = await sending;
  assert.equal(answer.response.toString(), 'pong!');
  assert.deepEqual(infoParse(answer.info), [['r', '1']]);
  assert.deepEqual(answer.transId, send.transId);
  assert.equal(served, false, 'a REQUEST waits for poll');
  assert.equal(peer.pending, 0, 'nothing was RETURNed before poll');

  const kept = await api.recvAsync({ transId: unrelated, timeout: 100 });
  assert.equal(kept.response.toString(), 'late');

  const polling = api.poll({ timeout: 5000 });
  const ret = await peer.expect('RETURN');
  assert.deepEqual(ret.transId, coreTransId(5));
  assert.equal(ret.response.toString(), 'served');
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  await api.close();
});

test('sendSync rejects with the status and message of an error RESPONSE', T, async () => {
  const { api, peer } = await connect();
  const sending = api.sendSync('/nowhere', '', { waitForService: true });
  const send = await peer.expect('SEND_SYNC');
  assert.equal(send.flags, 1);
  peer.send({ type: 'RESPONSE', transId: send.transId, status: Status.TIMEOUT, responseInfo: Buffer.alloc(0),
    response: Buffer.from('timeout after 5000 ms') });
  await assert.rejects(sending, (err) => isStatus(Status.TIMEOUT)(err) && err.statusName === 'TIMEOUT'
    && err.message === 'timeout after 5000 ms' && err.transId.equals(send.transId));
  await api.close();
});

test('recvAsync collects async responses by trans_id or in arrival order', T, async () => {
  const { api, peer } = await connect({}, { timeoutAsync: 100 });
  const first = await api.sendAsync('/a', 'one');
  const second = await api.sendAsync('/b', 'two');
  const third = await api.sendAsync('/c', 'three');
  const sends = [await peer.expect('SEND_ASYNC'), await peer.expect('SEND_ASYNC'), await peer.expect('SEND_ASYNC')];
  assert.deepEqual(sends.map((s) => s.transId), [first, second, third]);
  assert.ok(Buffer.compare(first, second) < 0 && Buffer.compare(second, third) < 0, 'trans_ids increase');

  const waitingForThird = api.recvAsync({ transId: third.toString('hex') });
  peer.send({ type: 'RESPONSE', transId: second, status: 0, responseInfo: Buffer.alloc(0), response: Buffer.from('2') });
  peer.send({ type: 'RESPONSE', transId: first, status: Status.NO_SERVICE, responseInfo: Buffer.alloc(0),
    response: Buffer.from('no service subscribes /a') });
  peer.send({ type: 'RESPONSE', transId: third, status: 0, responseInfo: Buffer.alloc(0), response: Buffer.from('3') });

  assert.equal((await waitingForThird).response.toString(), '3');
  await assert.rejects(api.recvAsync({ transId: first }), isStatus(Status.NO_SERVICE));
  const next = await api.recvAsync();
  assert.deepEqual(next.transId, second);
  assert.equal(next.response.toString(), '2');
  assert.equal(await api.recvAsync({ timeout: 30 }), null);
  assert.equal(await api.recvAsync(), null, 'the default wait is timeout_async');
  await api.close();
});

test('mcastAsync returns the copies; their responses come through recvAsync', T, async () => {
  const { api, peer } = await connect();
  const casting = api.mcastAsync('/svc/*', 'hi all', { priority: 4 });
  const mcast = await peer.expect('MCAST_ASYNC');
  assert.equal(mcast.name, '/svc/*');
  assert.equal(mcast.priority, 4);
  const copies = [coreTransId(10), coreTransId(11)];
  peer.send({ type: 'MCAST_SENT', transId: mcast.transId, transIds: copies });
  const ids = await casting;
  assert.deepEqual(ids, copies);
  peer.send({ type: 'RESPONSE', transId: copies[1], status: 0, responseInfo: Buffer.alloc(0), response: Buffer.from('b') });
  peer.send({ type: 'RESPONSE', transId: copies[0], status: 0, responseInfo: Buffer.alloc(0), response: Buffer.from('a') });
  const got = await Promise.all(ids.map((transId) => api.recvAsync({ transId })));
  assert.deepEqual(got.map((r) => r.response.toString()), ['a', 'b']);
  await api.close();
});

test('a handler that throws gives SERVICE_ERROR and the instance keeps serving', T, async () => {
  const { api, peer } = await connect();
  const subscribing = api.subscribe('item/get', (req) => {
    if (req.request.toString() === 'bad') throw new RangeError('bad input');
    return 'fine';
  });
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;
  const polling = api.poll();

  peer.send(request(1, { request: Buffer.from('bad') }));
  const failed = await peer.expect('RETURN');
  assert.equal(failed.status, Status.SERVICE_ERROR);
  assert.match(failed.response.toString(), /RangeError: bad input/);

  peer.send(request(2, { request: Buffer.from('good') }));
  const ok = await peer.expect('RETURN');
  assert.deepEqual(ok.transId, coreTransId(2));
  assert.equal(ok.status, Status.OK);
  assert.equal(ok.response.toString(), 'fine');
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  await api.close();
});

test('window 4: four requests are handled at once', T, async () => {
  const { api, peer, hello } = await connect({ window: 4 });
  assert.equal(hello.window, 4);
  let running = 0;
  let most = 0;
  let release;
  const allIn = new Promise((resolve) => { release = resolve; });
  const subscribing = api.subscribe('item/get', async (req) => {
    running++;
    most = Math.max(most, running);
    if (running === 4) release();
    await allIn; // only resolves once all four handlers have started
    running--;
    return req.request;
  });
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;
  const polling = api.poll();
  for (let n = 1; n <= 4; n++) peer.send(request(n, { request: Buffer.from(`r${n}`) }));
  const returns = [];
  for (let n = 1; n <= 4; n++) returns.push(await peer.expect('RETURN'));
  assert.equal(most, 4);
  assert.deepEqual(returns.map((r) => r.response.toString()).sort(), ['r1', 'r2', 'r3', 'r4']);
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  await api.close();
});

test('a frame over max_frame is not sent; the instance stays usable', T, async () => {
  const { api, peer } = await connect({}, { maxFrame: 1024 });
  await assert.rejects(api.sendAsync('/big', Buffer.alloc(2000)), isStatus(Status.TOO_LARGE));
  await assert.rejects(api.sendSync('/big', Buffer.alloc(2000)), isStatus(Status.TOO_LARGE));
  const small = await api.sendAsync('/small', 'ok');
  const send = await peer.expect('SEND_ASYNC');
  assert.deepEqual(send.transId, small);
  assert.equal(send.name, '/small');
  await api.close();
});

test('an incoming frame over the limit is refused and the connection closed', T, async () => {
  const { api, peer } = await connect({ maxFrame: 4096 });
  const polling = api.poll();
  const waiting = api.sendSync('/x', '');
  await peer.expect('SEND_SYNC');
  const header = Buffer.alloc(5);
  header.writeUInt32LE(4097, 0);
  header[4] = 0x83;
  peer.sendRaw(header); // the body is never sent: the limit is checked on the length alone
  await assert.rejects(polling, isStatus(Status.TOO_LARGE));
  await assert.rejects(waiting, isStatus(Status.TOO_LARGE));
  await peer.closed;
});

test('a malformed frame from the core ends the session with MALFORMED', T, async () => {
  const { api, peer } = await connect();
  const waiting = api.sendSync('/x', '');
  await peer.expect('SEND_SYNC');
  peer.sendRaw(Buffer.from('0300000083aabb', 'hex')); // RESPONSE cut short
  await assert.rejects(waiting, isStatus(Status.MALFORMED));
  await peer.closed;
  await assert.rejects(api.poll(), isStatus(Status.MALFORMED));
});

test('a core that goes away fails pending calls', T, async () => {
  const { api, peer } = await connect();
  const waiting = api.sendSync('/x', '');
  const polling = api.poll();
  await peer.expect('SEND_SYNC');
  peer.socket.destroy();
  await assert.rejects(waiting, isStatus(Status.CRASHED));
  await assert.rejects(polling, isStatus(Status.CRASHED));
});

test('poll times out with true; TERMINATE waits for running handlers, then false', T, async () => {
  const { api, peer } = await connect();
  assert.equal(await api.poll({ timeout: 20 }), true);
  let finished = false;
  const subscribing = api.subscribe('item/get', async () => {
    await sleep(100);
    finished = true;
    return 'done';
  });
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;
  const polling = api.poll();
  peer.send(request(1));
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  assert.ok(finished, 'poll resolved only after the handler finished');
  assert.equal((await peer.expect('RETURN')).response.toString(), 'done');
  assert.equal(api.terminating, true);
  await api.close();
});

test('forward passes the request on and sends no RETURN for it', T, async () => {
  const { api, peer } = await connect();
  const subscribing = api.subscribe('item/get', async (req, instance) => {
    if (req.request.toString() === 'pass') {
      await instance.forward(req, '/elsewhere/get', { timeout: 250 });
      return 'ignored';
    }
    return 'mine';
  });
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;
  const polling = api.poll();
  peer.send(request(1, { request: Buffer.from('pass'), priority: 6, requestInfo: infoEncode({ t: 'x' }) }));
  const fwd = await peer.expect('FORWARD');
  assert.deepEqual(fwd.transId, coreTransId(1));
  assert.equal(fwd.name, '/elsewhere/get');
  assert.equal(fwd.timeout, 250);
  assert.equal(fwd.priority, 6);
  assert.equal(fwd.request.toString(), 'pass');
  assert.deepEqual(infoParse(fwd.requestInfo), [['t', 'x']]);
  peer.send(request(2, { request: Buffer.from('keep') }));
  const ret = await peer.expect('RETURN');
  assert.deepEqual(ret.transId, coreTransId(2), 'no RETURN for the forwarded request');
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  await api.close();
});

test('run opens CUMULO_THREAD_COUNT instances, serves, and closes on TERMINATE', T, async () => {
  const env = { CUMULO_SOCKET: core.path, CUMULO_TOKEN: 'tok', CUMULO_THREAD_COUNT: '2' };
  const running = run(async (api) => {
    await api.subscribe('item/get', (req, instance) => `thread ${instance.instanceId}`);
  }, { env, window: 2 });
  const peers = [await core.accept(), await core.accept()];
  const hellos = [];
  for (const [i, peer] of peers.entries()) {
    const hello = await peer.handshake({ instanceId: 100 + i, prefix: '/svc/', threadCount: 2 });
    hellos.push(hello);
    assert.equal(hello.window, 2);
  }
  for (const peer of peers) {
    const sub = await peer.expect('SUBSCRIBE');
    peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  }
  assert.deepEqual(hellos.map((h) => h.threadIndex).sort(), [0, 1]);
  for (const [i, peer] of peers.entries()) {
    peer.send(request(i));
    assert.equal((await peer.expect('RETURN')).response.toString(), `thread ${100 + i}`);
    peer.send({ type: 'TERMINATE', timeout: 1000 });
  }
  await running;
  for (const peer of peers) {
    await peer.expect('GOODBYE');
    await peer.closed;
  }
});

test('bad connect options are refused without leaving a connection open', T, async () => {
  await assert.rejects(API.connect({ socket: core.path, prefix: '/svc/', window: 0 }), isStatus(Status.INVALID_ARGUMENT));
  const connecting = API.connect({ socket: core.path, prefix: 'x'.repeat(70_000) });
  await assert.rejects(connecting, isStatus(Status.INVALID_ARGUMENT));
  const peer = await core.accept();
  await peer.closed;
  await assert.rejects(API.connect({ socket: `${core.path}.missing`, prefix: '/svc/' }), { code: 'ENOENT' });
});

// ---- trace context (PROTOCOL.md 5.1) ----

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TRACESTATE = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';
const OWN_TRACEPARENT = '00-11111111111111111111111111111111-2222222222222222-00';

// A handler that calls sendSync with {k: 'v'}, sendAsync with its own
// traceparent, mcastAsync with no info, then forwards with an empty info.
async function subscribeTraceHandler(api, peer) {
  const subscribing = api.subscribe('item/get', async (req, instance) => {
    await instance.sendSync('/sync', '', { info: { k: 'v' } });
    await instance.sendAsync('/async', '', { info: [['traceparent', OWN_TRACEPARENT]] });
    await instance.mcastAsync('/mcast', '');
    await instance.forward(req, '/forward', { info: {} });
  });
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;
}

// Answers the calls of that handler; returns the request_info pairs of each.
async function traceCalls(peer) {
  const sync = await peer.expect('SEND_SYNC');
  peer.send({ type: 'RESPONSE', transId: sync.transId, status: 0, responseInfo: Buffer.alloc(0), response: Buffer.alloc(0) });
  const async = await peer.expect('SEND_ASYNC');
  const mcast = await peer.expect('MCAST_ASYNC');
  peer.send({ type: 'MCAST_SENT', transId: mcast.transId, transIds: [] });
  const fwd = await peer.expect('FORWARD');
  return [sync, async, mcast, fwd].map((msg) => infoParse(msg.requestInfo));
}

test('a handler\'s sendSync, sendAsync, mcastAsync and forward inherit its request\'s trace context', T, async () => {
  const { api, peer } = await connect();
  await subscribeTraceHandler(api, peer);
  const polling = api.poll();
  const trace = [['traceparent', TRACEPARENT], ['tracestate', TRACESTATE]];
  peer.send(request(1, { requestInfo: infoEncode([['x', '1'], ...trace]) }));
  const [sync, async, mcast, fwd] = await traceCalls(peer);
  assert.deepEqual(sync, [['k', 'v'], ...trace], 'after the pairs the handler gave');
  assert.deepEqual(async, [['traceparent', OWN_TRACEPARENT]], 'a handler-given traceparent is kept');
  assert.deepEqual(mcast, trace);
  assert.deepEqual(fwd, trace);

  // traceparent without tracestate: traceparent only.
  peer.send(request(2, { requestInfo: infoEncode([['traceparent', TRACEPARENT]]) }));
  const [sync2, , mcast2] = await traceCalls(peer);
  assert.deepEqual(sync2, [['k', 'v'], ['traceparent', TRACEPARENT]]);
  assert.deepEqual(mcast2, [['traceparent', TRACEPARENT]]);

  // Outside any handler, after those ran: nothing added.
  await api.sendAsync('/client', '', { info: { k: 'v' } });
  assert.deepEqual(infoParse((await peer.expect('SEND_ASYNC')).requestInfo), [['k', 'v']]);
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  await api.close();
});

test('a request without traceparent adds nothing to the handler\'s calls', T, async () => {
  const { api, peer } = await connect();
  await subscribeTraceHandler(api, peer);
  const polling = api.poll();
  for (const [n, info] of [[1, Buffer.alloc(0)], [2, infoEncode({ tracestate: TRACESTATE })]]) {
    peer.send(request(n, { requestInfo: info }));
    const [sync, , mcast, fwd] = await traceCalls(peer);
    assert.deepEqual([sync, mcast, fwd], [[['k', 'v']], [], []]);
  }
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  await api.close();
});

test('window 2: interleaved handlers each keep their own trace context; none is left after', T, async () => {
  const { api, peer } = await connect({ window: 2 }, { window: 2 });
  let late = null;
  const subscribing = api.subscribe('item/get', async (req, instance) => {
    const name = req.request.toString();
    await instance.sendSync(`/to/${name}`, '');
    // A call the handler leaves behind, made after it returned.
    if (name === 'a') late = sleep(50).then(() => instance.sendAsync('/late', ''));
  });
  const sub = await peer.expect('SUBSCRIBE');
  peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
  await subscribing;
  const polling = api.poll();
  for (const [n, name] of [[1, 'a'], [2, 'b']]) {
    peer.send(request(n, { request: Buffer.from(name), requestInfo: infoEncode({ traceparent: name }) }));
  }
  const sends = [await peer.expect('SEND_SYNC'), await peer.expect('SEND_SYNC')]; // both handlers wait
  for (const send of sends) {
    assert.deepEqual(infoParse(send.requestInfo), [['traceparent', send.name.slice('/to/'.length)]]);
    peer.send({ type: 'RESPONSE', transId: send.transId, status: 0, responseInfo: Buffer.alloc(0), response: Buffer.alloc(0) });
  }
  await peer.expect('RETURN');
  await peer.expect('RETURN');
  await late;
  assert.equal((await peer.expect('SEND_ASYNC')).requestInfo.length, 0, 'the late call adds nothing');
  peer.send({ type: 'TERMINATE', timeout: 1000 });
  assert.equal(await polling, false);
  await api.close();
});
