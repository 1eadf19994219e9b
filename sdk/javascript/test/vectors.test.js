// Every vector of proto/vectors/*.json decoded and re-encoded; every invalid one rejected.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CumuloError, FrameReader, Status, decode, encode, infoEncode, infoParse } from '../index.js';

const VECTORS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'proto', 'vectors');
const TOO_LARGE_LIMIT = 1024; // PROTOCOL.md section 8

// JSON numbers past 2^53 (u64 nonces) lose precision in JSON.parse: quote them first.
function parseJson(text) {
  return JSON.parse(text.replace(/(?<=[:[,]\s*)(\d{16,})(?=\s*[,\]}])/g, '"$1"'));
}

function loadFamilies() {
  return readdirSync(VECTORS).filter((f) => f.endsWith('.json')).sort()
    .map((f) => ({ file: f, ...parseJson(readFileSync(join(VECTORS, f), 'utf8')) }));
}

const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const U64_FIELDS = new Set(['nonce', 'source']);
const HEX_FIELDS = new Set(['trans_id', 'request_info', 'request', 'response_info', 'response']);

// The message the codec should produce for a vector's JSON fields.
function expectedMessage(type, fields) {
  const msg = { type };
  for (const [name, value] of Object.entries(fields)) {
    let v = value;
    if (U64_FIELDS.has(name)) v = BigInt(value);
    else if (HEX_FIELDS.has(name)) v = Buffer.from(value, 'hex');
    else if (name === 'trans_ids') v = value.map((h) => Buffer.from(h, 'hex'));
    msg[camel(name)] = v;
  }
  return msg;
}

const families = loadFamilies();

test('vector files are present', () => {
  assert.ok(families.length >= 6, `found ${families.map((f) => f.file)}`);
});

for (const family of families.filter((f) => f.family !== 'kv')) {
  for (const vector of family.vectors) {
    test(`${family.family}: ${vector.name} decodes and re-encodes`, () => {
      const frame = Buffer.from(vector.hex, 'hex');
      const expected = expectedMessage(vector.type, vector.fields);
      assert.deepEqual(decode(frame), expected);
      assert.equal(encode(expected).toString('hex'), vector.hex);

      // Streamed byte by byte, the reader yields the same message exactly once.
      const reader = new FrameReader();
      const got = [];
      for (const byte of frame) {
        reader.push(Buffer.from([byte]));
        for (let msg; (msg = reader.next()) !== null;) got.push(msg);
      }
      assert.deepEqual(got, [expected]);
      assert.equal(reader.buffered, 0);
    });
  }
  for (const bad of family.invalid) {
    test(`${family.family}: invalid ${bad.name} is rejected with ${bad.error}`, () => {
      const frame = Buffer.from(bad.hex, 'hex');
      assert.throws(() => decode(frame, TOO_LARGE_LIMIT),
        (err) => err instanceof CumuloError && err.status === Status[bad.error]);
      // A streaming reader either rejects it or waits for bytes that never come;
      // it never yields a message.
      const reader = new FrameReader(TOO_LARGE_LIMIT);
      reader.push(frame);
      let result;
      try {
        result = reader.next();
      } catch (err) {
        assert.equal(err.status, Status[bad.error]);
        return;
      }
      assert.equal(result, null);
      assert.ok(frame.length < 4 || frame.length < 4 + frame.readUInt32LE(0), 'a complete frame must be rejected');
    });
  }
}

const kv = families.find((f) => f.family === 'kv');

for (const vector of kv.vectors) {
  test(`kv: ${vector.name} parses and re-encodes`, () => {
    assert.deepEqual(infoParse(Buffer.from(vector.hex, 'hex')), vector.pairs);
    assert.equal(infoEncode(vector.pairs).toString('hex'), vector.hex);
  });
}

for (const bad of kv.invalid) {
  test(`kv: invalid ${bad.name} is rejected`, () => {
    assert.throws(() => infoParse(Buffer.from(bad.hex, 'hex')),
      (err) => err instanceof CumuloError && err.status === Status[bad.error]);
  });
}
