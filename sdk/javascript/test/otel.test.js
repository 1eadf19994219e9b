// cumulo/otel: a handler's own OpenTelemetry span joins the request's trace,
// and the calls it makes inside that span are the span's children.

import { test as nodeTest, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { API, infoEncode, infoParse } from '../index.js';
import { FakeCore, coreTransId } from './fake-core.js';

// The OpenTelemetry packages are devDependencies: skipped, as the types
// check is, where npm could not install them.
let loaded;
try {
  loaded = await Promise.all([import('@opentelemetry/api'), import('@opentelemetry/context-async-hooks'),
    import('@opentelemetry/sdk-trace-base'), import('../otel.js')]);
} catch (err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' && !/@opentelemetry\/api/.test(err?.message)) throw err;
  loaded = null;
}
const skip = loaded === null ? 'the OpenTelemetry packages are not installed (run npm install)' : false;
const test = (name, options, fn) => nodeTest(name, { ...options, skip }, fn);
const [{ context: otelContext, trace, ROOT_CONTEXT }, { AsyncLocalStorageContextManager },
  { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor }, cumuloOtel] = loaded ?? [{}, {}, {}, {}];

const T = { timeout: 10_000 };
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;
const TRACESTATE = 'congo=t61rcWkgMzE';
const TRACED = infoEncode([['traceparent', TRACEPARENT], ['tracestate', TRACESTATE]]);

const exporter = skip ? null : new InMemorySpanExporter();
const provider = skip ? null : new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider?.getTracer('test');

// The active span follows the handler's awaits, as in an application's setup.
before(() => { if (!skip) otelContext.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()); });
after(async () => { if (!skip) { otelContext.disable(); await provider.shutdown(); } });

function request(requestInfo) {
  return {
    type: 'REQUEST', transId: coreTransId(1), timeout: 4000, priority: 0, flags: 0, source: 0n,
    name: '/svc/a', pattern: '/svc/a', requestInfo, request: Buffer.alloc(0),
  };
}

test('a span with the request\'s context is its child, and the parent of a call', T, () => {
  exporter.reset();
  const span = tracer.startSpan('work', {}, cumuloOtel.context(request(TRACED)));
  const sent = otelContext.with(trace.setSpan(otelContext.active(), span),
    () => cumuloOtel.inject([['k', 'v'], ['traceparent', 'old']]));
  span.end();

  const [finished] = exporter.getFinishedSpans();
  assert.equal(finished.spanContext().traceId, TRACE_ID, 'in the request\'s trace');
  assert.equal(finished.parentSpanContext?.spanId, PARENT_ID, 'the request\'s span is its parent');
  assert.equal(finished.parentSpanContext?.isRemote, true);
  const child = `00-${TRACE_ID}-${finished.spanContext().spanId}-01`;
  assert.deepEqual(infoParse(sent), [['k', 'v'], ['traceparent', child], ['tracestate', TRACESTATE]],
    'the span\'s own id, in place of the old traceparent');
});

test('without a span or a trace context nothing is added', T, () => {
  const kv = infoEncode([['k', 'v']]);
  assert.deepEqual(cumuloOtel.inject(kv), kv, 'no active span');
  assert.deepEqual(cumuloOtel.inject(), Buffer.alloc(0));
  const untraced = cumuloOtel.context(request(kv));
  assert.equal(untraced, ROOT_CONTEXT, 'a request without traceparent: the root context');
  assert.equal(trace.getSpanContext(untraced), undefined);
  assert.deepEqual(cumuloOtel.inject('', untraced), Buffer.alloc(0));
  for (const bad of ['nonsense', `00-${'0'.repeat(32)}-${PARENT_ID}-01`, `ff-${TRACE_ID}-${PARENT_ID}-01`,
    `${TRACEPARENT}-extra`]) {
    assert.equal(cumuloOtel.context(request(infoEncode({ traceparent: bad }))), ROOT_CONTEXT, bad);
  }
  assert.equal(cumuloOtel.context(request(Buffer.from('raw'))), ROOT_CONTEXT, 'not key/value encoded');

  // The request's own context, injected as it is, replaces an old pair.
  const traced = cumuloOtel.context(request(TRACED));
  assert.deepEqual(cumuloOtel.inject({ traceparent: 'old' }, traced), TRACED, 'replaced');
  assert.deepEqual(cumuloOtel.inject(Buffer.from('raw'), traced), Buffer.from('raw'), 'not key/value: as given');
});

test('through a session: a handler\'s call inside its span carries the span\'s id', T, async () => {
  exporter.reset();
  const core = await FakeCore.start();
  try {
    const connecting = API.connect({ socket: core.path, prefix: '/svc/' });
    const peer = await core.accept();
    await peer.handshake();
    const api = await connecting;
    const subscribed = api.subscribe('a', async (req, instance) => {
      await tracer.startActiveSpan('work', {}, cumuloOtel.context(req), async (span) => {
        try {
          await instance.sendAsync('/child', '', { info: cumuloOtel.inject({ k: 'v' }) });
        } finally {
          span.end();
        }
      });
      // Outside the span: the request's own context, as the SDK appends it.
      await instance.sendAsync('/after', '', { info: cumuloOtel.inject({ k: 'v' }) });
      return 'done';
    });
    const sub = await peer.expect('SUBSCRIBE');
    peer.send({ type: 'REPLY', reqId: sub.reqId, status: 0, value: 0, message: '' });
    await subscribed;
    const polling = api.poll();
    peer.send(request(TRACED));
    const child = await peer.expect('SEND_ASYNC');
    const afterSpan = await peer.expect('SEND_ASYNC');
    await peer.expect('RETURN');
    peer.send({ type: 'TERMINATE', timeout: 0 });
    assert.equal(await polling, false);
    await api.close();

    const spanId = exporter.getFinishedSpans()[0].spanContext().spanId;
    assert.equal(child.name, '/child');
    assert.deepEqual(infoParse(child.requestInfo),
      [['k', 'v'], ['traceparent', `00-${TRACE_ID}-${spanId}-01`], ['tracestate', TRACESTATE]]);
    assert.equal(afterSpan.name, '/after');
    assert.deepEqual(infoParse(afterSpan.requestInfo),
      [['k', 'v'], ['traceparent', TRACEPARENT], ['tracestate', TRACESTATE]]);
  } finally {
    await core.stop();
  }
});
