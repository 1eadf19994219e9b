// The users API in JavaScript: GET /v1/users through the HTTP gateway (the
// gateway names it /v1/users/get) answers a fixed JSON list of users, 36 bytes.

import { infoEncode, run } from '../../../sdk/javascript/index.js';

const USERS = '{"users":[{"id":1,"name":"alicia"}]}';
const RESPONSE_INFO = infoEncode([['content-type', 'application/json']]);

await run(async (api) => {
  await api.subscribe('users/get', () => ({ info: RESPONSE_INFO, response: USERS }));
});
