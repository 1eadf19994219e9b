// Status codes of PROTOCOL.md section 2.3, and the error every failing call raises.

export const Status = Object.freeze({
  OK: 0,
  TIMEOUT: 1,
  NO_SERVICE: 2,
  QUEUE_FULL: 3,
  CRASHED: 4,
  MALFORMED: 5,
  SHUTTING_DOWN: 6,
  SERVICE_ERROR: 7,
  TOO_LARGE: 8,
  INVALID_ARGUMENT: 9,
  UNSUPPORTED_VERSION: 10,
  UNAUTHORIZED: 11,
  PROTOCOL: 12,
  UNAVAILABLE: 13,
});

const NAMES = new Map(Object.entries(Status).map(([name, code]) => [code, name]));

/** The name of a status code; codes this SDK does not know are still errors. */
export function statusName(code) {
  return NAMES.get(code) ?? `UNKNOWN_${code}`;
}

export class CumuloError extends Error {
  /**
   * @param {number} status a code of Status (or one unknown to this SDK)
   * @param {string} message the core's explanation, or the SDK's
   * @param {object} [extra] e.g. {transId} for a failed request
   */
  constructor(status, message, extra = undefined) {
    super(message);
    this.name = 'CumuloError';
    this.status = status;
    this.statusName = statusName(status);
    if (extra) Object.assign(this, extra);
  }
}
