// The byte stream to the core: opening it, and writing frames in batches.

import net from 'node:net';
import { CumuloError, Status } from './status.js';

/** Connects to a Unix socket path or `tcp://host:port`. */
export function openStream(address) {
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
