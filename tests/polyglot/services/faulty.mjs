// Faulty service: /tests/faulty/javascript/boom throws, /ok answers "ok".
import { run } from '../../../sdk/javascript/index.js';

class FaultyError extends Error {
  constructor(message) {
    super(message);
    this.name = 'FaultyError';
  }
}

await run(async (api) => {
  await api.subscribe('boom', async () => {
    throw new FaultyError('boom from javascript');
  });
  await api.subscribe('ok', () => 'ok');
});
