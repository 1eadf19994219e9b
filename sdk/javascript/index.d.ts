// Type declarations of the cumulo SDK for Node.js.

/// <reference types="node" />

/** Status codes of the wire protocol (PROTOCOL.md section 2.3). */
export declare const Status: Readonly<{
  OK: 0;
  TIMEOUT: 1;
  NO_SERVICE: 2;
  QUEUE_FULL: 3;
  CRASHED: 4;
  MALFORMED: 5;
  SHUTTING_DOWN: 6;
  SERVICE_ERROR: 7;
  TOO_LARGE: 8;
  INVALID_ARGUMENT: 9;
  UNSUPPORTED_VERSION: 10;
  UNAUTHORIZED: 11;
  PROTOCOL: 12;
  UNAVAILABLE: 13;
}>;
export type StatusName = keyof typeof Status;

/** The name of a status code, or `UNKNOWN_<code>` for a code this SDK does not know. */
export declare function statusName(code: number): string;

/** What every failing call rejects with. */
export declare class CumuloError extends Error {
  constructor(status: number, message: string, extra?: object);
  readonly name: 'CumuloError';
  /** A code of `Status`, or one unknown to this SDK. */
  readonly status: number;
  readonly statusName: string;
  /** Set when a request failed: its trans_id. */
  readonly transId?: Buffer;
  /** Set when a request failed: the response_info that came with the error. */
  readonly info?: Buffer;
}

/** Metadata pairs in any of the shapes infoEncode accepts; bytes are taken as already encoded. */
export type InfoValue = string | number | bigint | Uint8Array;
export type Info =
  | Uint8Array
  | ReadonlyArray<readonly [InfoValue, InfoValue]>
  | ReadonlyMap<InfoValue, InfoValue>
  | Readonly<Record<string, InfoValue>>;

/** Encodes key/value metadata (PROTOCOL.md section 5). */
export declare function infoEncode(pairs?: Info | null): Buffer;
/** Parses key/value metadata; throws CumuloError MALFORMED on bad input. */
export declare function infoParse(bytes: Uint8Array): Array<[string, string]>;

/** A payload: bytes, or a string sent as UTF-8. */
export type Payload = string | Uint8Array;
/** A trans_id: 16 bytes, or 32 hex digits where one is accepted. */
export type TransId = Buffer;

/** A request delivered to a handler. */
export interface Request {
  readonly transId: TransId;
  /** Milliseconds left before the sender gets TIMEOUT. */
  readonly timeout: number;
  readonly priority: number;
  readonly flags: number;
  /** Sent with sendSync. */
  readonly sync: boolean;
  /** A multicast copy. */
  readonly mcast: boolean;
  /** The sender: `node_id << 32 | instance_id`, 0n for the core. */
  readonly source: bigint;
  readonly name: string;
  /** The full pattern (prefix included) that matched. */
  readonly pattern: string;
  readonly requestInfo: Buffer;
  readonly request: Buffer;
}

/** An answer: a payload, or metadata and a payload; nothing is an empty response. */
export type HandlerResult = Payload | { info?: Info | null; response?: Payload | null } | void | null | undefined;
export type Handler = (req: Request, api: API) => HandlerResult | Promise<HandlerResult>;

export interface SendOptions {
  /** Key/value metadata. */
  info?: Info | null;
  /** Milliseconds; 0 or absent: the service's default. */
  timeout?: number;
  /** -128..127, lower is more urgent; absent: the core's default. */
  priority?: number;
  /** Wait up to the timeout for a subscriber instead of failing with NO_SERVICE. */
  waitForService?: boolean;
}

export interface ForwardOptions extends SendOptions {
  /** The payload to pass on; absent: the original one. */
  request?: Payload;
}

/** A successful answer to a request. */
export interface Response {
  readonly transId: TransId;
  readonly info: Buffer;
  readonly response: Buffer;
}

export interface ConnectOptions {
  /** Unix socket path or `tcp://host:port`; default CUMULO_SOCKET. */
  socket?: string;
  /** Given: an unmanaged instance under this prefix (no token needed). */
  prefix?: string;
  /** Default: CUMULO_TOKEN for a managed instance, empty for an unmanaged one. */
  token?: string;
  /** Which of the process's connections this is; default 0. */
  threadIndex?: number;
  /** Most requests handled at once; default 1. */
  window?: number;
  /** Largest incoming frame accepted, bytes; default 8 MiB. */
  maxFrame?: number;
  /** Milliseconds to wait for WELCOME; default 10000. */
  connectTimeout?: number;
  /** Where CUMULO_* variables are read; default process.env. */
  env?: Record<string, string | undefined>;
  /**
   * PEM file of the CA(s) that sign the core's certificate; default
   * CUMULO_TLS_CA. Given with a `tcp://` socket, the connection is TLS;
   * empty: no TLS.
   */
  tlsCa?: string;
  /** PEM file of a client certificate (with `tlsKey`); default CUMULO_TLS_CERT. */
  tlsCert?: string;
  /** PEM file of the client certificate's key (PKCS#8); default CUMULO_TLS_KEY. */
  tlsKey?: string;
}

/** One instance: one connection to the core. */
export declare class API {
  private constructor();
  static connect(options?: ConnectOptions): Promise<API>;

  subscribe(pattern: string, handler: Handler): Promise<void>;
  unsubscribe(pattern: string): Promise<void>;
  subscribeCount(pattern: string): Promise<number>;

  sendSync(name: string, request?: Payload, options?: SendOptions): Promise<Response>;
  sendAsync(name: string, request?: Payload, options?: SendOptions): Promise<TransId>;
  mcastAsync(name: string, request?: Payload, options?: SendOptions): Promise<TransId[]>;
  /** Resolves null when nothing arrives within `timeout` ms (default timeoutAsync). */
  recvAsync(options?: { transId?: TransId | string | null; timeout?: number }): Promise<Response | null>;
  forward(req: Request, name: string, options?: ForwardOptions): Promise<void>;

  /** Resolves false after TERMINATE (once running handlers finish), true after `timeout` ms. */
  poll(options?: { timeout?: number | null }): Promise<boolean>;
  /** Sends GOODBYE and closes the connection. */
  close(): Promise<void>;

  readonly nodeId: number;
  readonly instanceId: number;
  readonly processIndex: number;
  readonly processCount: number;
  readonly threadCount: number;
  readonly threadIndex: number;
  readonly window: number;
  readonly maxFrame: number;
  readonly timeoutAsync: number;
  readonly timeoutSync: number;
  readonly timeoutTerminate: number;
  readonly priorityDefault: number;
  readonly keepalive: number;
  readonly prefix: string;
  readonly terminating: boolean;
}

/** Runs a service process: CUMULO_THREAD_COUNT instances, setup on each, serve until TERMINATE. */
export declare function run(
  setup: (api: API) => void | Promise<void>,
  options?: Omit<ConnectOptions, 'threadIndex'>,
): Promise<void>;

// ---- lower level: trans_ids and frames ----

export declare class TransIdGenerator {
  constructor(nodeId: number, instanceId: number);
  next(): TransId;
}
/** A trans_id as lower-case hex. */
export declare function transIdKey(transId: Uint8Array | string): string;
export declare function transIdParts(transId: Uint8Array | string): { time: bigint; nodeId: number; instanceId: number };

export declare const PROTOCOL_VERSION: 1;
export declare const DEFAULT_MAX_FRAME: number;
export declare const Type: Readonly<Record<MessageType, number>>;
export type MessageType =
  | 'HELLO' | 'SUBSCRIBE' | 'UNSUBSCRIBE' | 'SUBSCRIBE_COUNT' | 'SEND_ASYNC' | 'SEND_SYNC'
  | 'MCAST_ASYNC' | 'RETURN' | 'FORWARD' | 'PING' | 'PONG' | 'GOODBYE' | 'WELCOME' | 'REQUEST'
  | 'RESPONSE' | 'REPLY' | 'MCAST_SENT' | 'TERMINATE' | 'ERROR';
/** A frame as an object: `type` and the fields of PROTOCOL.md section 4 in camelCase. */
export interface Message {
  type: MessageType;
  [field: string]: unknown;
}
/** Encodes one frame, length prefix included; throws CumuloError. */
export declare function encode(msg: Message, maxFrame?: number): Buffer;
/** Decodes a buffer holding exactly one frame; throws CumuloError. */
export declare function decode(frame: Buffer, maxFrame?: number): Message;
/** Cuts frames out of a byte stream. */
export declare class FrameReader {
  constructor(maxFrame?: number);
  readonly maxFrame: number;
  readonly buffered: number;
  push(chunk: Buffer): void;
  /** The next message, or null until more bytes arrive; throws CumuloError. */
  next(): Message | null;
}
