// Frame encoding and decoding, PROTOCOL.md sections 2 and 4.
// Messages are plain objects: {type: 'REQUEST', transId, timeout, ...} with the
// field names of PROTOCOL.md in camelCase. Decoded `bytes` and `tid` fields are
// views into the received frame, not copies.

import { isUtf8 } from 'node:buffer';
import { CumuloError, Status } from './status.js';

export const PROTOCOL_VERSION = 1;
export const DEFAULT_MAX_FRAME = 8 * 1024 * 1024;
/** Bytes of the length prefix; the frame `length` counts what follows it. */
export const HEADER_SIZE = 4;

/** SEND_* flags bit 0. */
export const WAIT_FOR_SERVICE = 0x01;
/** REQUEST flags. */
export const REQUEST_SYNC = 0x01;
export const REQUEST_MCAST = 0x02;

const SEND = [['transId', 'tid'], ['timeout', 'u32'], ['priority', 'i8'], ['flags', 'u8'],
  ['name', 'str'], ['requestInfo', 'bytes'], ['request', 'bytes']];
const CONTROL = [['reqId', 'u32'], ['pattern', 'str']];
const ANSWER = [['transId', 'tid'], ['status', 'u16'], ['responseInfo', 'bytes'], ['response', 'bytes']];
const NONCE = [['nonce', 'u64']];

const LAYOUTS = {
  HELLO: [0x01, [['version', 'u16'], ['window', 'u32'], ['threadIndex', 'u32'],
    ['token', 'str'], ['prefix', 'str']]],
  SUBSCRIBE: [0x02, CONTROL],
  UNSUBSCRIBE: [0x03, CONTROL],
  SUBSCRIBE_COUNT: [0x04, CONTROL],
  SEND_ASYNC: [0x10, SEND],
  SEND_SYNC: [0x11, SEND],
  MCAST_ASYNC: [0x12, SEND],
  RETURN: [0x20, ANSWER],
  FORWARD: [0x21, SEND],
  PING: [0x30, NONCE],
  PONG: [0x31, NONCE],
  GOODBYE: [0x32, []],
  WELCOME: [0x81, [['version', 'u16'], ['nodeId', 'u32'], ['instanceId', 'u32'],
    ['processIndex', 'u32'], ['processCount', 'u32'], ['threadCount', 'u32'],
    ['window', 'u32'], ['maxFrame', 'u32'], ['timeoutAsync', 'u32'], ['timeoutSync', 'u32'],
    ['timeoutTerminate', 'u32'], ['priorityDefault', 'i8'], ['keepalive', 'u32'], ['prefix', 'str']]],
  REQUEST: [0x82, [['transId', 'tid'], ['timeout', 'u32'], ['priority', 'i8'], ['flags', 'u8'],
    ['source', 'u64'], ['name', 'str'], ['pattern', 'str'], ['requestInfo', 'bytes'], ['request', 'bytes']]],
  RESPONSE: [0x83, ANSWER],
  REPLY: [0x84, [['reqId', 'u32'], ['status', 'u16'], ['value', 'u32'], ['message', 'str']]],
  MCAST_SENT: [0x85, [['transId', 'tid'], ['transIds', 'tids']]],
  TERMINATE: [0x86, [['timeout', 'u32']]],
  ERROR: [0x87, [['status', 'u16'], ['message', 'str']]],
};

/** Type codes by name, e.g. Type.REQUEST === 0x82. */
export const Type = Object.freeze(Object.fromEntries(
  Object.entries(LAYOUTS).map(([name, [code]]) => [name, code])));

const BY_CODE = new Map(Object.entries(LAYOUTS).map(([name, [code, fields]]) => [code, { name, fields }]));

function malformed(message) {
  return new CumuloError(Status.MALFORMED, message);
}

function invalid(message) {
  return new CumuloError(Status.INVALID_ARGUMENT, message);
}

/** A string (UTF-8) or byte array as a Buffer, without copying byte arrays. */
export function toBuffer(value, what = 'value') {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value === undefined || value === null) return Buffer.alloc(0);
  throw invalid(`${what} must be a string, Buffer or Uint8Array, not ${typeof value}`);
}

// ---- decoding ----

class Cursor {
  constructor(buf, pos, end, type) {
    this.buf = buf;
    this.pos = pos;
    this.end = end;
    this.type = type;
  }

  need(n, field) {
    if (this.end - this.pos < n) {
      throw malformed(`${this.type}: field ${field} runs past the end of the frame`);
    }
  }

  u8(field) { this.need(1, field); return this.buf[this.pos++]; }
  i8(field) { this.need(1, field); return this.buf.readInt8(this.pos++); }
  u16(field) { this.need(2, field); const v = this.buf.readUInt16LE(this.pos); this.pos += 2; return v; }
  u32(field) { this.need(4, field); const v = this.buf.readUInt32LE(this.pos); this.pos += 4; return v; }
  u64(field) { this.need(8, field); const v = this.buf.readBigUInt64LE(this.pos); this.pos += 8; return v; }

  view(n, field) {
    this.need(n, field);
    const v = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return v;
  }

  tid(field) { return this.view(16, field); }
  bytes(field) { return this.view(this.u32(field), field); }

  str(field) {
    const raw = this.view(this.u16(field), field);
    if (!isUtf8(raw)) throw malformed(`${this.type}: field ${field} is not valid UTF-8`);
    return raw.toString('utf8');
  }

  tids(field) {
    const count = this.u32(field);
    // Checked before allocating, so a lying count cannot make us allocate.
    this.need(count * 16, field);
    const ids = new Array(count);
    for (let i = 0; i < count; i++) ids[i] = this.tid(field);
    return ids;
  }
}

/**
 * The size of the whole frame starting at buf[0] (length prefix included), or -1
 * while fewer than HEADER_SIZE bytes are there. Throws TOO_LARGE for a length
 * over maxFrame (before the body is read) and MALFORMED for a zero length.
 */
export function frameSize(buf, maxFrame = DEFAULT_MAX_FRAME) {
  if (buf.length < HEADER_SIZE) return -1;
  const length = buf.readUInt32LE(0);
  if (length === 0) throw malformed('frame length 0: a frame holds at least its type byte');
  if (length > maxFrame) {
    throw new CumuloError(Status.TOO_LARGE, `frame of ${length} bytes is over the limit of ${maxFrame}`);
  }
  return HEADER_SIZE + length;
}

/** Decodes frame buf[start..end) (without its length prefix) into a message. */
export function decodeBody(buf, start, end) {
  const layout = BY_CODE.get(buf[start]);
  if (layout === undefined) throw malformed(`unknown frame type 0x${buf[start].toString(16)}`);
  const cursor = new Cursor(buf, start + 1, end, layout.name);
  const msg = { type: layout.name };
  for (const [field, kind] of layout.fields) msg[field] = cursor[kind](field);
  if (cursor.pos !== end) throw malformed(`${layout.name}: ${end - cursor.pos} trailing bytes`);
  return msg;
}

/** Decodes a buffer that holds exactly one whole frame. */
export function decode(buf, maxFrame = DEFAULT_MAX_FRAME) {
  const size = frameSize(buf, maxFrame);
  if (size < 0 || buf.length < size) throw malformed('truncated frame');
  if (buf.length > size) throw malformed(`${buf.length - size} bytes after the frame`);
  return decodeBody(buf, HEADER_SIZE, size);
}

/**
 * Cuts frames out of a byte stream. Chunks are kept as received and joined only
 * when a frame spans several of them, so a big frame costs one copy at most.
 */
export class FrameReader {
  #chunks = [];
  #buffered = 0;

  constructor(maxFrame = DEFAULT_MAX_FRAME) {
    this.maxFrame = maxFrame;
  }

  get buffered() { return this.#buffered; }

  push(chunk) {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
  }

  /** The next decoded message, or null until more bytes arrive. Throws CumuloError. */
  next() {
    if (this.#buffered < HEADER_SIZE) return null;
    while (this.#chunks[0].length < HEADER_SIZE) {
      this.#chunks.splice(0, 2, Buffer.concat([this.#chunks[0], this.#chunks[1]]));
    }
    const size = frameSize(this.#chunks[0], this.maxFrame);
    if (this.#buffered < size) return null;
    return decodeBody(this.#take(size), HEADER_SIZE, size);
  }

  #take(size) {
    this.#buffered -= size;
    const first = this.#chunks[0];
    if (first.length >= size) {
      if (first.length === size) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(size);
      return first.subarray(0, size);
    }
    const frame = Buffer.allocUnsafe(size);
    let filled = 0;
    while (filled < size) {
      const chunk = this.#chunks[0];
      const used = Math.min(chunk.length, size - filled);
      chunk.copy(frame, filled, 0, used);
      filled += used;
      if (used === chunk.length) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(used);
    }
    return frame;
  }
}

// ---- encoding ----

const INT_RANGES = {
  u8: [0, 0xff], i8: [-128, 127], u16: [0, 0xffff], u32: [0, 0xffffffff],
};
const U64_MAX = (1n << 64n) - 1n;

function checkInt(kind, field, value) {
  const [min, max] = INT_RANGES[kind];
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalid(`field ${field} must be an integer in ${min}..${max}, not ${value}`);
  }
  return value;
}

// Turns a field value into what is written, and its encoded size.
function prepare(kind, field, value) {
  switch (kind) {
    case 'u8': case 'i8': return [checkInt(kind, field, value), 1];
    case 'u16': return [checkInt(kind, field, value), 2];
    case 'u32': return [checkInt(kind, field, value), 4];
    case 'u64': {
      const v = typeof value === 'bigint' ? value : Number.isSafeInteger(value) ? BigInt(value) : -1n;
      if (v < 0n || v > U64_MAX) throw invalid(`field ${field} must be an integer in 0..2^64-1, not ${value}`);
      return [v, 8];
    }
    case 'tid': {
      if (!(value instanceof Uint8Array) || value.length !== 16) {
        throw invalid(`field ${field} must be 16 bytes`);
      }
      return [value, 16];
    }
    case 'str': {
      if (typeof value !== 'string') throw invalid(`field ${field} must be a string`);
      const bytes = Buffer.from(value, 'utf8');
      if (bytes.length > 0xffff) throw invalid(`field ${field} is ${bytes.length} bytes, over 65535`);
      return [bytes, 2 + bytes.length];
    }
    case 'bytes': {
      const bytes = toBuffer(value, `field ${field}`);
      if (bytes.length > 0xffffffff) throw new CumuloError(Status.TOO_LARGE, `field ${field} is over 4 GiB`);
      return [bytes, 4 + bytes.length];
    }
    case 'tids': {
      if (!Array.isArray(value)) throw invalid(`field ${field} must be an array of 16-byte ids`);
      for (const id of value) prepare('tid', field, id);
      return [value, 4 + 16 * value.length];
    }
    default: throw new Error(`unknown field kind ${kind}`);
  }
}

function write(buf, pos, kind, value) {
  switch (kind) {
    case 'u8': buf[pos] = value; return pos + 1;
    case 'i8': buf.writeInt8(value, pos); return pos + 1;
    case 'u16': buf.writeUInt16LE(value, pos); return pos + 2;
    case 'u32': buf.writeUInt32LE(value, pos); return pos + 4;
    case 'u64': buf.writeBigUInt64LE(value, pos); return pos + 8;
    case 'tid': buf.set(value, pos); return pos + 16;
    case 'str':
      buf.writeUInt16LE(value.length, pos);
      buf.set(value, pos + 2);
      return pos + 2 + value.length;
    case 'bytes':
      buf.writeUInt32LE(value.length, pos);
      buf.set(value, pos + 4);
      return pos + 4 + value.length;
    case 'tids':
      buf.writeUInt32LE(value.length, pos);
      pos += 4;
      for (const id of value) { buf.set(id, pos); pos += 16; }
      return pos;
    default: throw new Error(`unknown field kind ${kind}`);
  }
}

/**
 * Encodes a message into one frame, length prefix included. Throws
 * INVALID_ARGUMENT for a missing or out-of-range field, and TOO_LARGE (before
 * allocating) when the frame's length would exceed maxFrame.
 */
export function encode(msg, maxFrame = Infinity) {
  const layout = LAYOUTS[msg.type];
  if (layout === undefined) throw invalid(`unknown message type ${msg.type}`);
  const [code, fields] = layout;
  const values = new Array(fields.length);
  let length = 1;
  for (let i = 0; i < fields.length; i++) {
    const [field, kind] = fields[i];
    const [value, size] = prepare(kind, field, msg[field]);
    values[i] = value;
    length += size;
  }
  if (length > maxFrame) {
    throw new CumuloError(Status.TOO_LARGE, `${msg.type} frame of ${length} bytes is over the limit of ${maxFrame}`);
  }
  const buf = Buffer.allocUnsafe(HEADER_SIZE + length);
  buf.writeUInt32LE(length, 0);
  buf[HEADER_SIZE] = code;
  let pos = HEADER_SIZE + 1;
  for (let i = 0; i < fields.length; i++) pos = write(buf, pos, fields[i][1], values[i]);
  return buf;
}
