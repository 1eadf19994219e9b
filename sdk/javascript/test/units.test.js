// Codec, key/value, trans_id and writer details that the shared vectors do not cover.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { setImmediate as nextLoop } from 'node:timers/promises';
import {
  CumuloError, FrameReader, Status, TransIdGenerator, decode, encode, infoEncode, infoParse,
  statusName, transIdKey, transIdParts,
} from '../index.js';
import { BatchedWriter } from '../transport.js';

const isStatus = (status) => (err) => err instanceof CumuloError && err.status === status;
const ping = (nonce) => encode({ type: 'PING', nonce });

test('encode refuses missing and out-of-range fields', () => {
  const send = {
    type: 'SEND_ASYNC', transId: Buffer.alloc(16), timeout: 0, priority: 0, flags: 0,
    name: '/a', requestInfo: '', request: '',
  };
  assert.equal(decode(encode(send)).name, '/a');
  assert.throws(() => encode({ ...send, priority: 128 }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ ...send, timeout: -1 }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ ...send, timeout: 1.5 }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ ...send, transId: Buffer.alloc(15) }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ ...send, name: undefined }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ ...send, name: 'x'.repeat(65536) }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ ...send, request: 42 }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ type: 'PING', nonce: -1n }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ type: 'PING', nonce: 1n << 64n }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => encode({ type: 'NOPE' }), isStatus(Status.INVALID_ARGUMENT));
});

test('encode refuses a frame over the limit before building it', () => {
  const msg = { type: 'ERROR', status: 1, message: 'x'.repeat(100) };
  assert.equal(encode(msg, 105).length, 109); // length 1 + 2 + 2 + 100 = 105
  assert.throws(() => encode(msg, 104), isStatus(Status.TOO_LARGE));
});

test('FrameReader splits several frames in one chunk and joins one split over chunks', () => {
  const reader = new FrameReader();
  const body = Buffer.alloc(3000, 7);
  const response = encode({ type: 'RESPONSE', transId: Buffer.alloc(16, 1), status: 0, responseInfo: '', response: body });
  const stream = Buffer.concat([ping(1), ping(2), response, ping(3)]);
  const got = [];
  for (let at = 0; at < stream.length; at += 1000) {
    reader.push(stream.subarray(at, at + 1000));
    for (let msg; (msg = reader.next()) !== null;) got.push(msg);
  }
  assert.deepEqual(got.map((m) => m.type), ['PING', 'PING', 'RESPONSE', 'PING']);
  assert.deepEqual(got.map((m) => m.nonce).filter((n) => n !== undefined), [1n, 2n, 3n]);
  assert.ok(got[2].response.equals(body));
  assert.equal(reader.buffered, 0);
});

test('decoded bytes fields are views of the frame, not copies', () => {
  const frame = encode({ type: 'RETURN', transId: Buffer.alloc(16), status: 0, responseInfo: '', response: 'abc' });
  const msg = decode(frame);
  assert.equal(msg.response.buffer, frame.buffer);
});

test('decode rejects frames from the wrong stream positions', () => {
  assert.throws(() => decode(Buffer.concat([ping(1), Buffer.from([0])])), isStatus(Status.MALFORMED));
  assert.throws(() => decode(ping(1).subarray(0, 10)), isStatus(Status.MALFORMED));
  // MCAST_SENT claiming 2^32-1 ids in a short frame: refused without allocating them.
  const lying = Buffer.from('1500000085' + '00'.repeat(16) + 'ffffffff', 'hex');
  assert.throws(() => decode(lying), isStatus(Status.MALFORMED));
});

test('infoEncode takes pairs, Maps and objects, and refuses NUL', () => {
  const expected = Buffer.from('a\x001\x00b\x002\x00', 'latin1');
  assert.ok(infoEncode([['a', '1'], ['b', 2]]).equals(expected));
  assert.ok(infoEncode(new Map([['a', '1'], ['b', '2']])).equals(expected));
  assert.ok(infoEncode({ a: '1', b: 2n }).equals(expected));
  assert.ok(infoEncode(expected) === expected, 'bytes are taken as already encoded');
  assert.equal(infoEncode(undefined).length, 0);
  assert.throws(() => infoEncode([['a\x00b', 'c']]), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => infoEncode({ a: Buffer.from([0]) }), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => infoEncode([['lonely']]), isStatus(Status.INVALID_ARGUMENT));
  assert.throws(() => infoEncode({ a: {} }), isStatus(Status.INVALID_ARGUMENT));
});

test('infoParse keeps order and repeats, and stops at the buffer end', () => {
  assert.deepEqual(infoParse(Buffer.from('k\x00\x00k\x00v\x00', 'latin1')), [['k', ''], ['k', 'v']]);
  assert.deepEqual(infoParse(new Uint8Array([0, 0])), [['', '']]);
  // A view into a larger buffer whose next byte would complete the pair.
  const backing = Buffer.from('key\x00value\x00', 'latin1');
  assert.throws(() => infoParse(backing.subarray(0, 4)), isStatus(Status.MALFORMED));
  assert.throws(() => infoParse('key\x00value\x00'), isStatus(Status.INVALID_ARGUMENT));
});

test('trans_ids increase strictly and name their instance', () => {
  const ids = new TransIdGenerator(0xfffffffe, 9);
  const made = Array.from({ length: 1000 }, () => ids.next());
  for (let i = 1; i < made.length; i++) assert.ok(Buffer.compare(made[i - 1], made[i]) < 0);
  const parts = transIdParts(made[0]);
  assert.equal(parts.nodeId, 0xfffffffe);
  assert.equal(parts.instanceId, 9);
  const ms = Number(parts.time / 1_000_000n);
  assert.ok(Math.abs(ms - Date.now()) < 5000, 'the time is nanoseconds since the epoch');
  assert.equal(transIdKey(made[0]), made[0].toString('hex'));
  assert.equal(transIdKey(made[0].toString('hex').toUpperCase()), made[0].toString('hex'));
  assert.throws(() => transIdKey('abc'), TypeError);
});

test('statusName names known codes and tolerates unknown ones', () => {
  assert.equal(statusName(Status.QUEUE_FULL), 'QUEUE_FULL');
  assert.equal(Status.UNAVAILABLE, 13);
  assert.equal(statusName(13), 'UNAVAILABLE');
  assert.equal(statusName(14), 'UNKNOWN_14');
  assert.equal(statusName(300), 'UNKNOWN_300');
  assert.equal(new CumuloError(300, 'x').statusName, 'UNKNOWN_300');
});

test('BatchedWriter sends the frames of one loop turn in a single writev', async () => {
  const batches = [];
  const sink = new Writable({
    writev(chunks, done) { batches.push(chunks.length); done(); },
    write(chunk, encoding, done) { batches.push(1); done(); },
  });
  const writer = new BatchedWriter(sink);
  writer.write(ping(1));
  writer.write(ping(2));
  await Promise.resolve();
  writer.write(ping(3)); // from a microtask, e.g. a handler that just resolved
  await nextLoop();
  writer.write(ping(4));
  await nextLoop();
  assert.deepEqual(batches, [3, 1]);
});
