package dev.cumulo;

import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Joining an application's own OpenTelemetry spans (PROTOCOL.md 5.1).
 *
 * <p>The SDK passes a request's trace context on by itself: a handler's calls inherit it. An
 * application that records spans of its own with the OpenTelemetry API makes them part of the same
 * trace with two calls:
 *
 * <pre>{@code
 * api.subscribe("stock/check", (api, request) -> {
 *     Span span = tracer.spanBuilder("work").setParent(Otel.context(request)).startSpan();
 *     try (Scope scope = span.makeCurrent()) {
 *         // this call is the span's child, not the request's
 *         api.sendSync("/stock/get", new byte[0], Otel.inject(new byte[0]));
 *     } finally {
 *         span.end();
 *     }
 *     return null;
 * });
 * }</pre>
 *
 * <p>The API ({@code io.opentelemetry:opentelemetry-api}) is an optional dependency of the SDK:
 * only this class needs it, and an application that uses it has it already.
 */
public final class Otel {
    private Otel() {
    }

    static {
        // Without the API, say so here rather than with the name of a class it lacks. (The fields
        // and signatures below are resolved only when used, so this runs first.)
        try {
            Class.forName("io.opentelemetry.context.Context", false, Otel.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            throw new NoClassDefFoundError(
                    "dev.cumulo.Otel needs the OpenTelemetry API: add io.opentelemetry:opentelemetry-api");
        }
    }

    /** The W3C format, whatever propagator the application set globally: it is the keys' format. */
    private static final W3CTraceContextPropagator PROPAGATOR = W3CTraceContextPropagator.getInstance();

    private static final String TRACEPARENT = "traceparent";
    private static final String TRACESTATE = "tracestate";

    private static final TextMapGetter<Map<String, String>> GETTER =
            (carrier, key) -> carrier == null ? null : carrier.get(key);

    /**
     * The request's trace context, the parent of the spans the handler starts: a context whose span
     * context is the request's remote one; the root context (no valid span context) when the request
     * has no valid traceparent, and a span started with it starts a trace.
     */
    public static Context context(Request request) {
        Map<String, String> carrier = new LinkedHashMap<>();
        try {
            for (Map.Entry<String, String> pair : Info.parse(request.requestInfo())) {
                String key = pair.getKey();
                if (key.equals(TRACEPARENT) || key.equals(TRACESTATE)) {
                    carrier.putIfAbsent(key, pair.getValue()); // the first of a repeated key, as the SDK reads it
                }
            }
        } catch (CumuloException malformed) {
            carrier.clear(); // not key/value encoded: no trace context
        }
        // From the root context, not the current one: the request's is the parent.
        return PROPAGATOR.extract(Context.root(), carrier, GETTER);
    }

    /** {@link #inject(byte[], Context)} with the current context (the current span's). */
    public static byte[] inject(byte[] requestInfo) {
        return inject(requestInfo, Context.current());
    }

    /**
     * {@code requestInfo} with the traceparent and tracestate of {@code context}'s span context in
     * place of any it had, after its other pairs. A call whose request_info names a traceparent is
     * sent as it is, so the span's context wins over the one the SDK would append. {@code requestInfo}
     * itself is returned when the context has no valid span context, or when it is not key/value
     * encoded.
     */
    public static byte[] inject(byte[] requestInfo, Context context) {
        Map<String, String> carrier = new LinkedHashMap<>();
        PROPAGATOR.inject(context, carrier, Map::put);
        String parent = carrier.get(TRACEPARENT);
        if (parent == null) {
            return requestInfo;
        }
        List<Map.Entry<String, String>> pairs;
        try {
            pairs = new ArrayList<>(Info.parse(requestInfo)); // UTF-8 by convention, as Info keeps them
        } catch (CumuloException malformed) {
            return requestInfo;
        }
        pairs.removeIf(p -> p.getKey().equals(TRACEPARENT) || p.getKey().equals(TRACESTATE));
        pairs.add(Map.entry(TRACEPARENT, parent));
        String state = carrier.get(TRACESTATE);
        if (state != null && !state.isEmpty()) {
            pairs.add(Map.entry(TRACESTATE, state));
        }
        return Info.encode(pairs);
    }
}
