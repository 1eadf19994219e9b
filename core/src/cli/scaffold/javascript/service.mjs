// {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
// answers "hello from {{name}}", with the request's `value` parameter when it
// has one.

import { infoEncode, infoParse, run } from '{{sdk}}/javascript/index.js';

const TEXT = infoEncode([['content-type', 'text/plain; charset=utf-8']]);

function get(req) {
  let value;
  try {
    value = infoParse(req.request).find(([key]) => key === 'value')?.[1];
  } catch {
    value = undefined; // malformed key/value bytes: as if there were no value
  }
  const response = value === undefined ? 'hello from {{name}}' : `hello from {{name}} (value ${value})`;
  return { info: TEXT, response };
}

await run(async (api) => {
  await api.subscribe('{{name}}/get', get);
});
