// Faulty service: /tests/faulty/javascript/boom throws, /ok answers "ok".
// The trace_* handlers call /echo/trace with an empty request_info and answer
// with the info the echo got: the trace context they inherit (PROTOCOL.md 5.1).
import { run } from '../../../sdk/javascript/index.js';

class FaultyError extends Error {
  constructor(message) {
    super(message);
    this.name = 'FaultyError';
  }
}

const ECHO = '/echo/trace';

// The response_info of an async response, which recvAsync gives as null on a timeout.
function echoed(answer) {
  if (answer === null) throw new FaultyError(`no answer from ${ECHO}`);
  return answer.info;
}

await run(async (api) => {
  await api.subscribe('boom', async () => {
    throw new FaultyError('boom from javascript');
  });
  await api.subscribe('ok', () => 'ok');
  await api.subscribe('trace_sync', async (req, instance) => (await instance.sendSync(ECHO, '')).info);
  await api.subscribe('trace_async', async (req, instance) => {
    const transId = await instance.sendAsync(ECHO, '');
    return echoed(await instance.recvAsync({ transId }));
  });
  await api.subscribe('trace_mcast', async (req, instance) => {
    const [transId] = await instance.mcastAsync(ECHO, '');
    if (transId === undefined) throw new FaultyError(`no copy of ${ECHO}`);
    return echoed(await instance.recvAsync({ transId }));
  });
  await api.subscribe('trace_forward', async (req, instance) => {
    await instance.forward(req, ECHO, { info: [] });
  });
});
