// The byte stream to the core: opening it, and writing frames in batches.

import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { CumuloError, Status } from './status.js';

function readPem(path, what) {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new CumuloError(Status.INVALID_ARGUMENT, `cannot read the TLS ${what[0]} ${path} (${what[1]}): ${err.message}`,
      { cause: err });
  }
}

/**
 * The TLS context of a connection to `address`, from the options `tlsCa`,
 * `tlsCert`, `tlsKey`, else CUMULO_TLS_CA, CUMULO_TLS_CERT, CUMULO_TLS_KEY;
 * null (no TLS) without a CA or for a Unix socket.
 */
export function tlsContext(address, options, env) {
  if (!address.startsWith('tcp://')) return null; // a local socket: TLS adds nothing
  const ca = options.tlsCa ?? env.CUMULO_TLS_CA;
  if (!ca) return null;
  const cert = options.tlsCert ?? env.CUMULO_TLS_CERT;
  const key = options.tlsKey ?? env.CUMULO_TLS_KEY;
  if (!cert !== !key) {
    throw new CumuloError(Status.INVALID_ARGUMENT, 'a client certificate needs both tlsCert (CUMULO_TLS_CERT) '
      + `and tlsKey (CUMULO_TLS_KEY); only the ${cert ? 'certificate' : 'key'} is set`);
  }
  // The CA given replaces Node's bundled roots: only it is trusted.
  const settings = { ca: readPem(ca, ['CA file', 'tlsCa, CUMULO_TLS_CA']), minVersion: 'TLSv1.2' };
  // Node skips what is not a certificate in `ca`: an empty trust would only fail later, less clearly.
  if (!settings.ca.includes('-----BEGIN CERTIFICATE-----')) {
    throw new CumuloError(Status.INVALID_ARGUMENT, `the TLS CA file ${ca} (tlsCa, CUMULO_TLS_CA) holds no PEM certificate`);
  }
  if (cert) {
    settings.cert = readPem(cert, ['client certificate', 'tlsCert, CUMULO_TLS_CERT']);
    settings.key = readPem(key, ['client key', 'tlsKey, CUMULO_TLS_KEY']);
  }
  try {
    // Built before connecting: a file that is not PEM fails here, with OpenSSL's reason.
    return tls.createSecureContext(settings);
  } catch (err) {
    throw new CumuloError(Status.INVALID_ARGUMENT, `cannot use the TLS files (CA ${ca}`
      + `${cert ? `, certificate ${cert}, key ${key}` : ''}): ${err.message}`, { cause: err });
  }
}

/**
 * Connects to a Unix socket path or `tcp://host:port`; over TLS when
 * `secureContext` (from tlsContext) is given, the core's certificate checked
 * against its CA and the host, the handshake bounded by `timeout` ms.
 */
export function openStream(address, secureContext = null, timeout = 0) {
  let options;
  if (address.startsWith('tcp://')) {
    let url;
    try {
      url = new URL(address);
    } catch {
      throw new CumuloError(Status.INVALID_ARGUMENT, `bad socket address ${address}`);
    }
    if (!url.port) throw new CumuloError(Status.INVALID_ARGUMENT, `socket address ${address} has no port`);
    options = { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port) };
  } else {
    options = { path: address };
  }
  if (secureContext !== null) {
    return new Promise((resolve, reject) => {
      // No servername: Node then sends SNI for a DNS name only and checks the
      // certificate against `host`, an IP address included.
      const socket = tls.connect({ ...options, secureContext });
      const timer = timeout > 0 ? setTimeout(() => socket.destroy(new CumuloError(Status.TIMEOUT,
        `no TLS handshake with the core within ${timeout} ms`)), timeout) : null;
      // A refused certificate rejects with Node's TLS error (err.code such as UNABLE_TO_GET_ISSUER_CERT_LOCALLY).
      const failed = (err) => { clearTimeout(timer); reject(err); };
      socket.once('error', failed);
      socket.once('secureConnect', () => {
        clearTimeout(timer);
        socket.off('error', failed);
        socket.setNoDelay(true);
        resolve(socket);
      });
    });
  }
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(options);
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject);
      if (options.port) socket.setNoDelay(true);
      resolve(socket);
    });
  });
}

/**
 * Writes frames corked until the event loop's check phase, so every frame
 * produced while handling one batch of input (handlers that answer in
 * microtasks included) leaves in a single writev.
 */
export class BatchedWriter {
  #stream;
  #corked = false;

  constructor(stream) {
    this.#stream = stream;
  }

  /** Queues a frame; false when the stream wants the writer to wait for 'drain'. */
  write(frame) {
    if (!this.#corked) {
      this.#corked = true;
      this.#stream.cork();
      setImmediate(() => {
        this.#corked = false;
        this.#stream.uncork();
      });
    }
    return this.#stream.write(frame);
  }
}
