// One cumulo instance: a connection to the core and the calls of SDK_GUIDE.md.

import { AsyncLocalStorage } from 'node:async_hooks';
import {
  DEFAULT_MAX_FRAME, FrameReader, PROTOCOL_VERSION, REQUEST_MCAST, REQUEST_SYNC,
  WAIT_FOR_SERVICE, encode, toBuffer,
} from './codec.js';
import { infoEncode, infoParse } from './info.js';
import { CumuloError, Status } from './status.js';
import { TransIdGenerator, transIdKey } from './transid.js';
import { BatchedWriter, openStream, tlsContext } from './transport.js';

const INTERNAL = Symbol('cumulo.internal');
const DEFAULT_CONNECT_TIMEOUT = 10_000;
// Frames the core must never send to an instance.
const INSTANCE_TO_CORE = new Set(['HELLO', 'SUBSCRIBE', 'UNSUBSCRIBE', 'SUBSCRIBE_COUNT',
  'SEND_ASYNC', 'SEND_SYNC', 'MCAST_ASYNC', 'RETURN', 'FORWARD', 'GOODBYE']);

function checkCount(value, what, min) {
  if (!Number.isInteger(value) || value < min || value > 0xffffffff) {
    throw new CumuloError(Status.INVALID_ARGUMENT, `${what} must be an integer in ${min}..4294967295, not ${value}`);
  }
  return value;
}

function errorOfResponse(msg) {
  return new CumuloError(msg.status, msg.response.toString('utf8'),
    { transId: msg.transId, info: msg.responseInfo });
}

function describeThrown(err) {
  if (err instanceof Error) return `handler threw ${err.name}: ${err.message}`;
  return `handler threw ${String(err)}`;
}

// The sender gets the message; the stack goes to stderr, in one write so
// that the core logs it as one record.
function logThrown(req, err) {
  const stack = err instanceof Error && typeof err.stack === 'string' ? `\n${err.stack}` : '';
  const what = describeThrown(err).slice('handler '.length);
  process.stderr.write(`cumulo: handler for ${req.name} ${what}${stack}\n`);
}

// What a handler returned, as RETURN fields: bytes or a string are the
// response; {info, response} sets both; nothing is an empty response.
function answerOf(result) {
  if (result === undefined || result === null) return { responseInfo: Buffer.alloc(0), response: Buffer.alloc(0) };
  if (typeof result === 'string' || result instanceof Uint8Array) {
    return { responseInfo: Buffer.alloc(0), response: toBuffer(result) };
  }
  if (typeof result === 'object' && !Array.isArray(result)) {
    return { responseInfo: infoEncode(result.info), response: toBuffer(result.response, 'response') };
  }
  throw new TypeError(`handler returned ${Array.isArray(result) ? 'an array' : typeof result}; `
    + 'return a string, bytes, or {info, response}');
}

// Trace context (PROTOCOL.md section 5.1): R's traceparent and tracestate
// pairs, encoded, or null when R has no traceparent (or an info that is not
// key/value encoded).
const TRACEPARENT_KEY = Buffer.from('traceparent\0');

function traceOf(requestInfo) {
  let pairs;
  try {
    pairs = infoParse(requestInfo);
  } catch {
    return null;
  }
  const parent = pairs.find(([key]) => key === 'traceparent');
  if (parent === undefined) return null;
  const state = pairs.find(([key]) => key === 'tracestate');
  return infoEncode(state === undefined ? [parent] : [parent, state]);
}

export class API {
  #socket;
  #writer;
  #reader;
  #welcome = null;
  #welcomeWaiter = null;
  #transIds = null;
  #handlers = new Map(); // full pattern -> {handler, count}
  #forwarded = new WeakSet();
  #controls = new Map(); // req_id -> waiter
  #nextReqId = 1;
  #syncWaiters = new Map(); // trans_id hex -> waiter
  #mcastWaiters = new Map(); // trans_id hex -> waiter
  #responses = new Map(); // unclaimed RESPONSEs by trans_id hex, oldest first
  #recvWaiters = []; // {key (null: any), resolve, reject, timer}
  #queued = []; // REQUESTs that arrived while nobody polled
  #pollers = [];
  #active = 0; // handlers running
  #terminating = false;
  #threadIndex = 0;
  #failure = null; // the CumuloError that ended the connection
  #closing = null;
  // The trace context of the handler running (PROTOCOL.md 5.1), task-local:
  // handlers of a window above 1 run interleaved on the event loop, so a
  // field of the instance would hand one handler's context to another's
  // calls; an AsyncLocalStorage follows each handler's own awaits. Its store
  // is {trace}, emptied when the handler ends, so a timer or promise it left
  // behind adds nothing after.
  #traceScope = new AsyncLocalStorage();

  /** Use API.connect(). */
  constructor(key, socket, maxFrame) {
    if (key !== INTERNAL) throw new TypeError('create instances with API.connect()');
    this.#socket = socket;
    this.#writer = new BatchedWriter(socket);
    this.#reader = new FrameReader(maxFrame);
    socket.on('data', (chunk) => this.#onData(chunk));
    socket.on('error', (err) => this.#fail(new CumuloError(Status.CRASHED,
      `connection to the core failed: ${err.message}`, { cause: err })));
    socket.on('close', () => this.#fail(new CumuloError(Status.CRASHED, 'connection to the core closed')));
  }

  /**
   * Opens one instance. Managed (started by the core): everything comes from
   * the environment. Unmanaged: pass `socket` and `prefix`.
   */
  static async connect(options = {}) {
    const env = options.env ?? process.env;
    const unmanaged = options.prefix !== undefined;
    const address = options.socket ?? env.CUMULO_SOCKET;
    if (!address) throw new CumuloError(Status.INVALID_ARGUMENT, 'no socket: pass {socket} or set CUMULO_SOCKET');
    const token = options.token ?? (unmanaged ? '' : env.CUMULO_TOKEN);
    if (!unmanaged && !token) {
      throw new CumuloError(Status.INVALID_ARGUMENT,
        'CUMULO_TOKEN is not set: pass {socket, prefix} to connect an unmanaged instance');
    }
    const hello = {
      type: 'HELLO',
      version: PROTOCOL_VERSION,
      window: checkCount(options.window ?? 1, 'window', 1),
      threadIndex: checkCount(options.threadIndex ?? 0, 'threadIndex', 0),
      token,
      prefix: unmanaged ? options.prefix : '',
    };
    const maxFrame = checkCount(options.maxFrame ?? DEFAULT_MAX_FRAME, 'maxFrame', 1);
    const connectTimeout = options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT;
    const socket = await openStream(address, tlsContext(address, options, env), connectTimeout);
    const api = new API(INTERNAL, socket, maxFrame);
    api.#threadIndex = hello.threadIndex;
    await api.#handshake(hello, connectTimeout);
    return api;
  }

  #handshake(hello, timeout) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.#fail(new CumuloError(Status.TIMEOUT,
        `no WELCOME from the core within ${timeout} ms`)), timeout);
      this.#welcomeWaiter = {
        resolve: () => { clearTimeout(timer); resolve(); },
        reject: (err) => { clearTimeout(timer); reject(err); },
      };
      try {
        this.#write(hello);
      } catch (err) {
        this.#fail(err);
      }
    });
  }

  // ---- accessors (valid once connected) ----
  get nodeId() { return this.#welcome.nodeId; }
  get instanceId() { return this.#welcome.instanceId; }
  get processIndex() { return this.#welcome.processIndex; }
  get processCount() { return this.#welcome.processCount; }
  get threadCount() { return this.#welcome.threadCount; }
  /** Which of its process's instances this is (HELLO's threadIndex). */
  get threadIndex() { return this.#threadIndex; }
  get window() { return this.#welcome.window; }
  get maxFrame() { return this.#welcome.maxFrame; }
  get timeoutAsync() { return this.#welcome.timeoutAsync; }
  get timeoutSync() { return this.#welcome.timeoutSync; }
  get timeoutTerminate() { return this.#welcome.timeoutTerminate; }
  get priorityDefault() { return this.#welcome.priorityDefault; }
  get keepalive() { return this.#welcome.keepalive; }
  get prefix() { return this.#welcome.prefix; }
  /** True once the core has sent TERMINATE. */
  get terminating() { return this.#terminating; }

  // ---- subscriptions ----

  async subscribe(pattern, handler) {
    if (typeof handler !== 'function') throw new TypeError('subscribe needs a handler function');
    const full = this.prefix + pattern;
    let entry = this.#handlers.get(full);
    const previous = entry?.handler;
    // Registered before the REPLY so a REQUEST racing it finds its handler.
    if (entry) entry.handler = handler;
    else this.#handlers.set(full, entry = { handler, count: 0 });
    try {
      await this.#control('SUBSCRIBE', pattern);
      entry.count++;
    } catch (err) {
      if (entry.count === 0) this.#handlers.delete(full);
      else entry.handler = previous;
      throw err;
    }
  }

  async unsubscribe(pattern) {
    await this.#control('UNSUBSCRIBE', pattern);
    const full = this.prefix + pattern;
    const entry = this.#handlers.get(full);
    if (entry && --entry.count <= 0) this.#handlers.delete(full);
  }

  subscribeCount(pattern) {
    return this.#control('SUBSCRIBE_COUNT', pattern);
  }

  #control(type, pattern) {
    const reqId = this.#nextReqId;
    this.#nextReqId = (reqId + 1) >>> 0 || 1;
    return this.#request(this.#controls, reqId, { type, reqId, pattern });
  }

  // Sends msg and returns a promise settled by the frame that answers `key`.
  #request(waiters, key, msg) {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      waiters.set(key, { resolve, reject });
      try {
        this.#write(msg);
      } catch (err) {
        waiters.delete(key);
        reject(err);
      }
    });
  }

  // ---- sending ----

  #sendFrame(type, name, request, options = {}) {
    const transId = this.#transIds.next();
    return {
      transId,
      timeout: options.timeout ?? 0, // 0: the core applies the service's default
      priority: options.priority ?? this.priorityDefault,
      flags: options.waitForService ? WAIT_FOR_SERVICE : 0,
      name,
      requestInfo: this.#withTrace(infoEncode(options.info)),
      request: toBuffer(request, 'request'),
      type,
    };
  }

  // requestInfo with the running handler's trace context appended, unless it
  // has a traceparent already (or is not key/value encoded: sent as given).
  #withTrace(requestInfo) {
    const trace = this.#traceScope.getStore()?.trace;
    if (!trace) return requestInfo;
    let pairs;
    try {
      pairs = infoParse(requestInfo);
    } catch {
      return requestInfo;
    }
    if (pairs.some(([key]) => key === 'traceparent')) return requestInfo;
    return Buffer.concat([requestInfo, trace]);
  }

  /** Sends a request and waits for its answer: {transId, info, response}. */
  async sendSync(name, request, options) {
    const msg = this.#sendFrame('SEND_SYNC', name, request, options);
    const response = await this.#request(this.#syncWaiters, msg.transId.toString('hex'), msg);
    return { transId: response.transId, info: response.responseInfo, response: response.response };
  }

  /** Sends a request; its answer is collected later with recvAsync. Returns the trans_id. */
  async sendAsync(name, request, options) {
    const msg = this.#sendFrame('SEND_ASYNC', name, request, options);
    if (!this.#write(msg)) await this.#drained();
    return msg.transId;
  }

  /** Sends a copy to every subscriber of a matching pattern; returns the copies' trans_ids. */
  async mcastAsync(name, request, options) {
    const msg = this.#sendFrame('MCAST_ASYNC', name, request, options);
    const sent = await this.#request(this.#mcastWaiters, msg.transId.toString('hex'), msg);
    return sent.transIds;
  }

  /**
   * The RESPONSE of an asynchronous send: of `transId`, or the oldest unclaimed
   * one. Resolves null when none arrives within `timeout` ms (default: the
   * core's timeout_async); rejects with CumuloError for an error status.
   */
  recvAsync({ transId, timeout } = {}) {
    if (this.#failure) return Promise.reject(this.#failure);
    const key = transId === undefined || transId === null ? null : transIdKey(transId);
    const stored = key === null ? this.#responses.keys().next().value : key;
    const msg = stored === undefined ? undefined : this.#responses.get(stored);
    if (msg !== undefined) {
      this.#responses.delete(stored);
      return msg.status === Status.OK ? Promise.resolve(this.#received(msg)) : Promise.reject(errorOfResponse(msg));
    }
    return new Promise((resolve, reject) => {
      const waiter = { key, resolve, reject, timer: null };
      waiter.timer = setTimeout(() => {
        this.#recvWaiters.splice(this.#recvWaiters.indexOf(waiter), 1);
        resolve(null);
      }, timeout ?? this.timeoutAsync);
      this.#recvWaiters.push(waiter);
    });
  }

  #received(msg) {
    return { transId: msg.transId, info: msg.responseInfo, response: msg.response };
  }

  /**
   * Passes a request being handled to another name; the handler's return
   * value is then ignored (no RETURN is sent for it).
   */
  async forward(req, name, options = {}) {
    this.#forwarded.add(req);
    try {
      const ok = this.#write({
        type: 'FORWARD',
        transId: req.transId,
        timeout: options.timeout ?? req.timeout,
        priority: options.priority ?? req.priority,
        flags: options.waitForService ? WAIT_FOR_SERVICE : 0,
        name,
        requestInfo: options.info === undefined ? req.requestInfo : this.#withTrace(infoEncode(options.info)),
        request: options.request === undefined ? req.request : toBuffer(options.request, 'request'),
      });
      if (!ok) await this.#drained();
    } catch (err) {
      this.#forwarded.delete(req);
      throw err;
    }
  }

  // ---- serving ----

  /**
   * Serves requests until TERMINATE arrives (resolves false, once the
   * handlers running then have finished) or `timeout` ms pass (resolves true).
   * Requests arriving while nobody polls wait for the next poll.
   */
  poll({ timeout } = {}) {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      const poller = { resolve, reject, timer: null };
      if (timeout !== undefined && timeout !== null) {
        poller.timer = setTimeout(() => {
          this.#pollers.splice(this.#pollers.indexOf(poller), 1);
          resolve(true);
        }, timeout);
      }
      this.#pollers.push(poller);
      for (const req of this.#queued.splice(0)) this.#serve(req);
      this.#checkTerminated();
    });
  }

  async #serve(req) {
    this.#active++;
    let answer = null;
    try {
      const entry = this.#handlers.get(req.pattern);
      if (entry === undefined) {
        answer = { status: Status.NO_SERVICE, responseInfo: Buffer.alloc(0),
          response: Buffer.from(`no handler for pattern ${req.pattern}`) };
      } else {
        const result = await this.#runHandler(entry.handler, req);
        if (!this.#forwarded.has(req)) answer = { status: Status.OK, ...answerOf(result) };
      }
    } catch (err) {
      answer = { status: Status.SERVICE_ERROR, responseInfo: Buffer.alloc(0), response: Buffer.from(describeThrown(err)) };
      logThrown(req, err);
    }
    if (answer !== null && !this.#failure) {
      try {
        this.#write({ type: 'RETURN', transId: req.transId, ...answer });
      } catch (err) {
        // The answer itself could not be sent (too large, bad info): say why instead.
        try {
          this.#write({ type: 'RETURN', transId: req.transId, status: err.status ?? Status.SERVICE_ERROR,
            responseInfo: Buffer.alloc(0), response: Buffer.from(`cannot return the answer: ${err.message}`) });
        } catch { /* the connection is gone; the core fails the request with CRASHED */ }
      }
    }
    this.#active--;
    this.#checkTerminated();
  }

  // Runs the handler in the trace context of req (PROTOCOL.md 5.1). A request
  // without one runs outside any, so an untraced service never enables the
  // AsyncLocalStorage (a cost on every promise in Node 20).
  async #runHandler(handler, req) {
    // The common case, a request without one, is found without parsing.
    const trace = req.requestInfo.includes(TRACEPARENT_KEY) ? traceOf(req.requestInfo) : null;
    if (trace === null && this.#traceScope.getStore() === undefined) return handler(req, this);
    const scope = { trace };
    try {
      return await this.#traceScope.run(scope, () => handler(req, this));
    } finally {
      scope.trace = null;
    }
  }

  #checkTerminated() {
    if (!this.#terminating || this.#active > 0 || this.#queued.length > 0) return;
    for (const poller of this.#pollers.splice(0)) {
      clearTimeout(poller.timer);
      poller.resolve(false);
    }
  }

  // ---- closing ----

  /**
   * Says GOODBYE and closes the connection. Pending polls resolve false; calls
   * waiting for an answer fail with SHUTTING_DOWN.
   */
  close() {
    if (this.#closing) return this.#closing;
    this.#closing = new Promise((resolve) => {
      if (this.#socket.destroyed || this.#socket.closed) return resolve();
      this.#socket.once('close', () => resolve());
      if (!this.#failure) {
        try { this.#write({ type: 'GOODBYE' }); } catch { /* closing anyway */ }
      }
      // Closing ends serving the way TERMINATE does; only calls awaiting an answer fail.
      for (const poller of this.#pollers.splice(0)) {
        clearTimeout(poller.timer);
        poller.resolve(false);
      }
      this.#fail(new CumuloError(Status.SHUTTING_DOWN, 'instance closed'), false);
      this.#socket.end();
      // A core that never closes its side must not keep the process alive.
      setTimeout(() => this.#socket.destroy(), 1000).unref();
    });
    return this.#closing;
  }

  // ---- input ----

  #onData(chunk) {
    if (this.#failure) return;
    this.#reader.push(chunk);
    try {
      let msg;
      while (!this.#failure && (msg = this.#reader.next()) !== null) this.#dispatch(msg);
    } catch (err) {
      this.#fail(err instanceof CumuloError ? err : new CumuloError(Status.MALFORMED, String(err)));
    }
  }

  #dispatch(msg) {
    if (this.#welcome === null) {
      if (msg.type === 'WELCOME') return this.#onWelcome(msg);
      if (msg.type === 'ERROR') return this.#fail(new CumuloError(msg.status, msg.message));
      if (msg.type !== 'PING') {
        return this.#fail(new CumuloError(Status.PROTOCOL, `expected WELCOME, got ${msg.type}`));
      }
    }
    switch (msg.type) {
      case 'REQUEST':
        msg.sync = (msg.flags & REQUEST_SYNC) !== 0;
        msg.mcast = (msg.flags & REQUEST_MCAST) !== 0;
        if (this.#pollers.length > 0) this.#serve(msg);
        else this.#queued.push(msg);
        return undefined;
      case 'RESPONSE': return this.#onResponse(msg);
      case 'REPLY': return this.#settle(this.#controls, msg.reqId, msg, () => msg.value,
        () => new CumuloError(msg.status, msg.message));
      case 'MCAST_SENT': return this.#settle(this.#mcastWaiters, msg.transId.toString('hex'), msg, () => msg);
      case 'PING': return this.#write({ type: 'PONG', nonce: msg.nonce });
      case 'PONG': return undefined;
      case 'TERMINATE':
        this.#terminating = true;
        return this.#checkTerminated();
      case 'ERROR': return this.#fail(new CumuloError(msg.status, msg.message));
      default:
        return this.#fail(new CumuloError(Status.PROTOCOL,
          INSTANCE_TO_CORE.has(msg.type) ? `the core sent ${msg.type}, a frame of the instance`
            : `unexpected ${msg.type} after WELCOME`));
    }
  }

  #onWelcome(msg) {
    this.#welcome = msg;
    this.#transIds = new TransIdGenerator(msg.nodeId, msg.instanceId);
    this.#welcomeWaiter.resolve();
    this.#welcomeWaiter = null;
  }

  #settle(waiters, key, msg, value, error = null) {
    const waiter = waiters.get(key);
    if (waiter === undefined) return; // answer to a call already failed locally
    waiters.delete(key);
    if (error !== null && msg.status !== Status.OK) waiter.reject(error());
    else waiter.resolve(value());
  }

  #onResponse(msg) {
    const key = msg.transId.toString('hex');
    if (this.#syncWaiters.has(key)) {
      return this.#settle(this.#syncWaiters, key, msg, () => msg, () => errorOfResponse(msg));
    }
    let index = this.#recvWaiters.findIndex((w) => w.key === key);
    if (index < 0) index = this.#recvWaiters.findIndex((w) => w.key === null);
    if (index < 0) {
      this.#responses.set(key, msg);
      return undefined;
    }
    const [waiter] = this.#recvWaiters.splice(index, 1);
    clearTimeout(waiter.timer);
    if (msg.status === Status.OK) waiter.resolve(this.#received(msg));
    else waiter.reject(errorOfResponse(msg));
    return undefined;
  }

  // ---- output and failure ----

  #write(msg) {
    if (this.#failure) throw this.#failure;
    const limit = this.#welcome === null ? Infinity : this.#welcome.maxFrame;
    return this.#writer.write(encode(msg, limit));
  }

  #drained() {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      const done = () => {
        this.#socket.off('drain', done);
        this.#socket.off('close', done);
        if (this.#failure) reject(this.#failure);
        else resolve();
      };
      this.#socket.on('drain', done);
      this.#socket.on('close', done);
    });
  }

  // Ends the connection: every pending call fails with err.
  #fail(err, destroy = true) {
    if (this.#failure) return;
    this.#failure = err;
    if (destroy) this.#socket.destroy();
    this.#welcomeWaiter?.reject(err);
    this.#welcomeWaiter = null;
    for (const waiters of [this.#controls, this.#syncWaiters, this.#mcastWaiters]) {
      for (const waiter of waiters.values()) waiter.reject(err);
      waiters.clear();
    }
    for (const waiter of [...this.#recvWaiters.splice(0), ...this.#pollers.splice(0)]) {
      clearTimeout(waiter.timer);
      waiter.reject(err);
    }
    this.#queued.length = 0;
  }
}

/**
 * Runs a whole service process: opens CUMULO_THREAD_COUNT instances (Node has
 * no threads for this, so they share the process and its event loop), awaits
 * setup(api) on each, then serves until TERMINATE and closes them.
 */
export async function run(setup, options = {}) {
  const env = options.env ?? process.env;
  const count = Number(env.CUMULO_THREAD_COUNT ?? 1);
  checkCount(count, 'CUMULO_THREAD_COUNT', 1);
  const connecting = await Promise.allSettled(
    Array.from({ length: count }, (_, threadIndex) => API.connect({ ...options, threadIndex })));
  const apis = connecting.filter((r) => r.status === 'fulfilled').map((r) => r.value);
  try {
    const failed = connecting.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    await Promise.all(apis.map(async (api) => {
      await setup(api);
      await api.poll();
    }));
  } finally {
    await Promise.all(apis.map((api) => api.close()));
  }
}
