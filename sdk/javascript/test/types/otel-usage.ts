// Compiled by tsc --noEmit (test/types.test.js): otel.d.ts, as an application uses it.

import { trace, type Context } from '@opentelemetry/api';
import { API, type Request } from 'cumulo';
import * as cumuloOtel from 'cumulo/otel';

export async function traced(api: API): Promise<void> {
  const tracer = trace.getTracer('usage');
  await api.subscribe('stock/check', (req: Request, instance: API) =>
    tracer.startActiveSpan('work', {}, cumuloOtel.context(req), async (span) => {
      try {
        const info: Buffer = cumuloOtel.inject({ k: 'v' });
        const explicit: Buffer = cumuloOtel.inject(info, trace.setSpan(cumuloOtel.context(req), span));
        return (await instance.sendSync('/stock/get', '', { info: explicit })).response;
      } finally {
        span.end();
      }
    }));
  const parent: Context = cumuloOtel.context({ requestInfo: Buffer.alloc(0) });
  cumuloOtel.inject();
  cumuloOtel.inject(null, parent);
  // @ts-expect-error a context is not request_info
  cumuloOtel.inject(parent);
}
