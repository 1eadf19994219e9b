// A scripted stand-in for the cumulo core, listening on a real Unix socket.
// Tests drive it frame by frame to check the SDK's side of the session.

import net from 'node:net';
import tls from 'node:tls';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FrameReader, encode } from '../codec.js';

const WAIT_MS = 2000;

export class Peer {
  #reader = new FrameReader();
  #frames = [];
  #waiters = [];

  constructor(socket) {
    this.socket = socket;
    this.closed = new Promise((resolve) => socket.on('close', resolve));
    socket.on('error', () => {}); // an SDK that drops the connection is what some tests expect
    socket.on('data', (chunk) => {
      this.#reader.push(chunk);
      for (let msg; (msg = this.#reader.next()) !== null;) {
        const waiter = this.#waiters.shift();
        if (waiter) waiter(msg);
        else this.#frames.push(msg);
      }
    });
  }

  /** The next frame from the instance; fails the test if none comes in time. */
  next(timeout = WAIT_MS) {
    if (this.#frames.length > 0) return Promise.resolve(this.#frames.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(new Error(`no frame from the instance within ${timeout} ms`));
      }, timeout);
      const waiter = (msg) => { clearTimeout(timer); resolve(msg); };
      this.#waiters.push(waiter);
    });
  }

  /** The next frame, which must be of `type`. */
  async expect(type) {
    const msg = await this.next();
    if (msg.type !== type) throw new Error(`expected ${type}, got ${msg.type}`);
    return msg;
  }

  /** Frames received but not yet taken with next(). */
  get pending() { return this.#frames.length; }

  send(msg) { this.socket.write(encode(msg)); }
  sendRaw(bytes) { this.socket.write(bytes); }

  /** Reads HELLO and answers WELCOME; returns the HELLO. */
  async handshake(welcome = {}) {
    const hello = await this.expect('HELLO');
    this.send({
      type: 'WELCOME', version: 1, nodeId: 1, instanceId: 7, processIndex: 0, processCount: 1,
      threadCount: 1, window: hello.window, maxFrame: 1 << 20, timeoutAsync: 5000, timeoutSync: 5000,
      timeoutTerminate: 2000, priorityDefault: 0, keepalive: 5000, prefix: hello.prefix || '/svc/',
      ...welcome,
    });
    return hello;
  }
}

export class FakeCore {
  #peers = [];
  #waiters = [];

  /**
   * Listens on a Unix socket; with `tls` (tls.createServer's options), on
   * 127.0.0.1 over TLS instead: `path` is then `tcp://127.0.0.1:PORT` and
   * failed handshakes are collected in `tlsErrors`.
   */
  static async start(tlsOptions = null) {
    const core = new FakeCore();
    core.dir = mkdtempSync(join(tmpdir(), 'cumulo-js-'));
    core.sockets = new Set();
    core.tlsErrors = [];
    const onConnection = (socket) => {
      core.sockets.add(socket);
      socket.on('close', () => core.sockets.delete(socket));
      const peer = new Peer(socket);
      const waiter = core.#waiters.shift();
      if (waiter) waiter(peer);
      else core.#peers.push(peer);
    };
    if (tlsOptions === null) {
      core.path = join(core.dir, 'core.sock');
      core.server = net.createServer(onConnection);
      await new Promise((resolve) => core.server.listen(core.path, resolve));
    } else {
      core.server = tls.createServer(tlsOptions, onConnection);
      core.server.on('tlsClientError', (err, socket) => { core.tlsErrors.push(err); socket.destroy(); });
      core.server.on('connection', (socket) => {
        core.sockets.add(socket);
        socket.on('close', () => core.sockets.delete(socket));
      });
      await new Promise((resolve) => core.server.listen(0, '127.0.0.1', resolve));
      core.path = `tcp://127.0.0.1:${core.server.address().port}`;
    }
    return core;
  }

  /** The next connection from an instance. */
  accept() {
    if (this.#peers.length > 0) return Promise.resolve(this.#peers.shift());
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  async stop() {
    await new Promise((resolve) => {
      this.server.close(resolve);
      for (const socket of this.sockets) socket.destroy();
    });
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A trans_id as the core makes them for its own requests (instance_id 0). */
export function coreTransId(n) {
  const id = Buffer.alloc(16);
  id.writeBigUInt64BE(1_700_000_000_000_000_000n + BigInt(n), 0);
  id.writeUInt32BE(1, 8);
  return id;
}
