// Key/value metadata encoding for request_info and response_info (PROTOCOL.md section 5):
// key\0value\0key\0value\0 ... with repeated keys allowed and order kept.

import { CumuloError, Status } from './status.js';

function field(value, what) {
  let bytes;
  if (typeof value === 'string') bytes = Buffer.from(value, 'utf8');
  else if (typeof value === 'number' || typeof value === 'bigint') bytes = Buffer.from(String(value), 'utf8');
  else if (value instanceof Uint8Array) bytes = value;
  else throw new CumuloError(Status.INVALID_ARGUMENT, `info ${what} must be a string or bytes, not ${typeof value}`);
  if (bytes.includes(0)) throw new CumuloError(Status.INVALID_ARGUMENT, `info ${what} contains a NUL byte`);
  return bytes;
}

/**
 * Encodes pairs into the key/value format. Accepts an array of [key, value]
 * pairs, a Map, or a plain object; a byte array is taken as already encoded;
 * undefined and null give an empty buffer.
 */
export function infoEncode(pairs) {
  if (pairs === undefined || pairs === null) return Buffer.alloc(0);
  if (pairs instanceof Uint8Array) return Buffer.isBuffer(pairs) ? pairs : Buffer.from(pairs);
  const entries = Array.isArray(pairs) || pairs instanceof Map ? pairs : Object.entries(pairs);
  const parts = [];
  const nul = Buffer.alloc(1);
  for (const pair of entries) {
    if (!Array.isArray(pair) || pair.length !== 2) {
      throw new CumuloError(Status.INVALID_ARGUMENT, 'info pairs must be [key, value] arrays');
    }
    parts.push(field(pair[0], 'key'), nul, field(pair[1], 'value'), nul);
  }
  return Buffer.concat(parts);
}

/**
 * Parses key/value bytes into [key, value] string pairs, in order. Throws
 * CumuloError MALFORMED when the buffer does not end with NUL or holds an odd
 * number of fields; never reads past the buffer.
 */
export function infoParse(bytes) {
  const buf = Buffer.isBuffer(bytes) ? bytes
    : bytes instanceof Uint8Array ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      : null;
  if (buf === null) throw new CumuloError(Status.INVALID_ARGUMENT, 'info must be bytes');
  const pairs = [];
  if (buf.length === 0) return pairs;
  if (buf[buf.length - 1] !== 0) throw new CumuloError(Status.MALFORMED, 'info does not end with a NUL byte');
  let pos = 0;
  while (pos < buf.length) {
    const keyEnd = buf.indexOf(0, pos);
    if (keyEnd === buf.length - 1) {
      throw new CumuloError(Status.MALFORMED, 'info has a key without a value (odd number of fields)');
    }
    const valueEnd = buf.indexOf(0, keyEnd + 1);
    pairs.push([buf.toString('utf8', pos, keyEnd), buf.toString('utf8', keyEnd + 1, valueEnd)]);
    pos = valueEnd + 1;
  }
  return pairs;
}
