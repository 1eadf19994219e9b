// Joining an application's own OpenTelemetry spans (PROTOCOL.md 5.1; see
// README.md). The SDK passes a request's trace context on by itself (a
// handler's calls inherit it); an application that records spans of its own
// with the OpenTelemetry API makes them part of the same trace with two
// calls:
//
//   import * as cumuloOtel from 'cumulo/otel';
//
//   await api.subscribe('stock/check', (req, api) =>
//     tracer.startActiveSpan('work', {}, cumuloOtel.context(req), async (span) => {
//       try {
//         // this call is the span's child, not the request's
//         return (await api.sendSync('/stock/get', '', { info: cumuloOtel.inject() })).response;
//       } finally {
//         span.end();
//       }
//     }));
//
// @opentelemetry/api is an optional peer dependency: only this module, which
// index.js does not load, needs it, and it needs nothing else: the W3C
// format of the two keys is read and written here with the API's types, as
// @opentelemetry/core's W3CTraceContextPropagator does.

import { infoEncode, infoParse } from './info.js';

let otel;
try {
  const mod = await import('@opentelemetry/api');
  otel = mod.default ?? mod; // the package's CommonJS build: module.exports
} catch (err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
  throw new Error('cumulo/otel needs the OpenTelemetry API: npm install @opentelemetry/api', { cause: err });
}

const TRACEPARENT = 'traceparent';
const TRACESTATE = 'tracestate';
// version-traceid-parentid-flags; version ff and all-zero ids are invalid;
// a later version may add fields, version 00 may not.
const TRACEPARENT_RE = /^\s?((?!ff)[\da-f]{2})-((?![0]{32})[\da-f]{32})-((?![0]{16})[\da-f]{16})-([\da-f]{2})(-.*)?\s?$/;

function pairsOf(requestInfo) {
  try {
    return infoParse(requestInfo);
  } catch {
    return null; // not key/value encoded
  }
}

/**
 * The request's trace context, as an OpenTelemetry Context whose span
 * context is the request's remote one: the parent of the spans the handler
 * starts. The root context (no span) when the request has no valid
 * traceparent: a span started with it starts a trace.
 */
export function context(request) {
  const pairs = pairsOf(request.requestInfo) ?? [];
  // The first of a repeated key, as the SDK reads it.
  const parent = pairs.find(([key]) => key === TRACEPARENT)?.[1];
  const state = pairs.find(([key]) => key === TRACESTATE)?.[1];
  const match = parent === undefined ? null : TRACEPARENT_RE.exec(parent);
  if (match === null || (match[1] === '00' && match[5])) return otel.ROOT_CONTEXT;
  const spanContext = {
    traceId: match[2], spanId: match[3], traceFlags: parseInt(match[4], 16), isRemote: true,
  };
  if (state) spanContext.traceState = otel.createTraceState(state);
  return otel.trace.setSpanContext(otel.ROOT_CONTEXT, spanContext);
}

/**
 * requestInfo (anything infoEncode takes) encoded, with the traceparent and
 * tracestate of the active span (or of ctx's) in place of any it had, after
 * its other pairs. A call whose request_info names a traceparent is sent as
 * it is, so the span's context wins over the one the SDK would append.
 * Nothing changes when there is no valid span context, or when requestInfo
 * is bytes that are not key/value encoded.
 */
export function inject(requestInfo, ctx = otel.context.active()) {
  const encoded = infoEncode(requestInfo);
  const span = otel.trace.getSpanContext(ctx);
  if (!span || !otel.isSpanContextValid(span)) return encoded;
  const pairs = pairsOf(encoded);
  if (pairs === null) return encoded;
  const kept = pairs.filter(([key]) => key !== TRACEPARENT && key !== TRACESTATE);
  const flags = (span.traceFlags & 0xff).toString(16).padStart(2, '0');
  kept.push([TRACEPARENT, `00-${span.traceId}-${span.spanId}-${flags}`]);
  const state = span.traceState?.serialize();
  if (state) kept.push([TRACESTATE, state]);
  return infoEncode(kept);
}
