// trans_id generation (PROTOCOL.md section 2.2): 8 bytes of big-endian
// nanoseconds since the epoch, then node_id and instance_id, big-endian.

// The wall clock only has millisecond resolution; anchoring the monotonic
// nanosecond clock to it once gives ids that are both epoch-based and fine-grained.
const EPOCH_OFFSET = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();

export function epochNanos() {
  return EPOCH_OFFSET + process.hrtime.bigint();
}

export class TransIdGenerator {
  #last = 0n;
  #nodeId;
  #instanceId;

  constructor(nodeId, instanceId) {
    this.#nodeId = nodeId;
    this.#instanceId = instanceId;
  }

  /** A new 16-byte trans_id, strictly greater than the previous one. */
  next() {
    let now = epochNanos();
    if (now <= this.#last) now = this.#last + 1n;
    this.#last = now;
    const id = Buffer.allocUnsafe(16);
    id.writeBigUInt64BE(now, 0);
    id.writeUInt32BE(this.#nodeId, 8);
    id.writeUInt32BE(this.#instanceId, 12);
    return id;
  }
}

/** A trans_id given as 16 bytes or 32 hex digits, as lower-case hex (a Map key). */
export function transIdKey(transId) {
  if (typeof transId === 'string' && /^[0-9a-fA-F]{32}$/.test(transId)) return transId.toLowerCase();
  if (transId instanceof Uint8Array && transId.length === 16) return Buffer.from(transId.buffer, transId.byteOffset, 16).toString('hex');
  throw new TypeError('a trans_id is 16 bytes or 32 hex digits');
}

/** The parts of a trans_id: {time: nanoseconds since the epoch, nodeId, instanceId}. */
export function transIdParts(transId) {
  const id = Buffer.from(transIdKey(transId), 'hex');
  return { time: id.readBigUInt64BE(0), nodeId: id.readUInt32BE(8), instanceId: id.readUInt32BE(12) };
}
