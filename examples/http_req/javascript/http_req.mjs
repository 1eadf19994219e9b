// The http_req example (docs/SDK_GUIDE.md): answers the integer given as
// `value` in the key/value request body, as XML.

import { infoEncode, infoParse, run } from '../../../sdk/javascript/index.js';

const RESPONSE_INFO = infoEncode([['content-type', 'text/xml; charset=utf-8']]);
const INTEGER = /^[+-]?[0-9]+$/;
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

// The integer in `value`, as a string without sign noise or leading zeros; null if there is none.
function valueOf(body) {
  let pairs;
  try {
    pairs = infoParse(body);
  } catch {
    return null; // malformed key/value bytes
  }
  const value = pairs.find(([key]) => key === 'value')?.[1];
  if (value === undefined || !INTEGER.test(value)) return null;
  const n = BigInt(value);
  return n >= I64_MIN && n <= I64_MAX ? n.toString() : null;
}

function answer(req) {
  const value = valueOf(req.request);
  const response = value === null
    ? '<http_test><error>no value specified</error></http_test>'
    : `<http_test><value>${value}</value></http_test>`;
  return { info: RESPONSE_INFO, response };
}

// HTTP_REQ_WINDOW: requests the core may deliver at once (default 1); with
// more, one Node process works on several while others wait on I/O.
// Anything but a positive integer stops the process.
const windowText = process.env.HTTP_REQ_WINDOW || '1';
const window = Number(windowText);
if (!/^[0-9]+$/.test(windowText) || window < 1 || window > 0xffffffff) {
  console.error(`http_req: HTTP_REQ_WINDOW='${windowText}' is not a positive integer`);
  process.exit(2);
}
await run(async (api) => {
  await api.subscribe('javascript.xml/get', answer);
}, { window });
