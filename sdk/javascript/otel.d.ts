// Types of cumulo/otel (otel.js): a handler's own OpenTelemetry spans join
// the request's trace. Needs the optional peer dependency @opentelemetry/api.
import type { Context } from '@opentelemetry/api';
import type { Info, Request } from './index.js';

/**
 * The request's trace context: the parent for the handler's own spans. The
 * root context when the request has no valid traceparent.
 */
export declare function context(request: Pick<Request, 'requestInfo'>): Context;

/**
 * requestInfo, encoded, carrying the traceparent and tracestate of the
 * active span (or of ctx's) in place of any it had; unchanged when there is
 * no valid span context.
 */
export declare function inject(requestInfo?: Info | null, ctx?: Context): Buffer;
