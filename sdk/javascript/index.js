// cumulo SDK for Node.js: see README.md.
export { API, run } from './api.js';
export { CumuloError, Status, statusName } from './status.js';
export { infoEncode, infoParse } from './info.js';
export { TransIdGenerator, transIdKey, transIdParts } from './transid.js';
export {
  DEFAULT_MAX_FRAME, FrameReader, PROTOCOL_VERSION, Type, decode, encode,
} from './codec.js';
