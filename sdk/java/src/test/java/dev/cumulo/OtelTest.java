package dev.cumulo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Otel: a handler's own OpenTelemetry span joins the request's trace, and the calls it makes
 * inside that span are the span's children.
 */
@Timeout(20)
class OtelTest {
    private static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
    private static final String PARENT_ID = "00f067aa0ba902b7";
    private static final String TRACEPARENT = "00-" + TRACE_ID + "-" + PARENT_ID + "-01";
    private static final String TRACESTATE = "congo=t61rcWkgMzE";
    private static final byte[] TRACED = Info.encode("traceparent", TRACEPARENT, "tracestate", TRACESTATE);

    private final InMemorySpanExporter exporter = InMemorySpanExporter.create();
    private final SdkTracerProvider provider =
            SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(exporter)).build();
    private final Tracer tracer = provider.get("test");
    private final ExecutorService client = Executors.newSingleThreadExecutor();
    private FakeCore core;

    @BeforeEach
    void startCore() throws Exception {
        core = FakeCore.unix();
    }

    @AfterEach
    void stop() throws Exception {
        client.shutdownNow();
        core.close();
        provider.close();
    }

    private static Request request(byte[] requestInfo) {
        return new Request(new Frame.Request(TransId.of(1, Peer.NODE_ID, 99), 4000, 0, 0, 0, "/test/a",
                "/test/a", requestInfo, new byte[0]));
    }

    @Test
    void aSpanWithTheRequestsContextIsItsChildAndTheParentOfACall() {
        Span span = tracer.spanBuilder("work").setParent(Otel.context(request(TRACED))).startSpan();
        byte[] sent;
        Scope scope = span.makeCurrent(); // (a try-with-resources would not use it: -Xlint:try)
        try {
            sent = Otel.inject(Info.encode("k", "v", "traceparent", "old"));
        } finally {
            scope.close();
            span.end();
        }
        SpanData data = exporter.getFinishedSpanItems().get(0);
        assertEquals(TRACE_ID, data.getTraceId(), "in the request's trace");
        assertEquals(PARENT_ID, data.getParentSpanId(), "the request's span is its parent");
        assertTrue(data.getParentSpanContext().isRemote());
        String child = "00-" + TRACE_ID + "-" + data.getSpanId() + "-01";
        assertArrayEquals(Info.encode("k", "v", "traceparent", child, "tracestate", TRACESTATE), sent,
                "the span's own id, in place of the old traceparent");
    }

    @Test
    void withoutASpanOrATraceContextNothingIsAdded() {
        byte[] kv = Info.encode("k", "v");
        assertSame(kv, Otel.inject(kv), "no span current");
        Context untraced = Otel.context(request(kv));
        assertFalse(Span.fromContext(untraced).getSpanContext().isValid(), "a request without traceparent");
        assertSame(Context.root(), untraced, "the root context");
        assertArrayEquals(new byte[0], Otel.inject(new byte[0], untraced));
        Context invalid = Otel.context(request(Info.encode("traceparent", "nonsense")));
        assertFalse(Span.fromContext(invalid).getSpanContext().isValid(), "an invalid traceparent");

        // The request's own context, injected as it is, replaces an old pair.
        Context traced = Otel.context(request(TRACED));
        assertArrayEquals(TRACED, Otel.inject(Info.encode("traceparent", "old"), traced), "replaced");
        byte[] raw = {'r', 'a', 'w'};
        assertSame(raw, Otel.inject(raw, traced), "not key/value encoded: as given");
    }

    /** Through a session: the injected traceparent is sent instead of the one the SDK appends. */
    @Test
    void aHandlersCallInsideItsSpanCarriesTheSpansId() throws Exception {
        Future<Api> connecting = client.submit(() -> Api.connect(Options.unmanaged(core.address(), Peer.PREFIX)));
        try (Peer peer = core.accept()) {
            peer.handshake();
            Api api = connecting.get(5, TimeUnit.SECONDS);
            Future<Boolean> polling = client.submit(() -> {
                api.subscribe("a", (a, request) -> {
                    Span span = tracer.spanBuilder("work").setParent(Otel.context(request)).startSpan();
                    Scope scope = span.makeCurrent();
                    try {
                        a.sendAsync("/child", new byte[0], Otel.inject(Info.encode("k", "v")));
                    } finally {
                        scope.close();
                        span.end();
                    }
                    // Outside the span: the request's own context, as the SDK appends it.
                    a.sendAsync("/after", new byte[0], Otel.inject(Info.encode("k", "v")));
                    return null;
                });
                return api.poll();
            });
            peer.replyTo(FrameType.SUBSCRIBE, "a", 0);
            peer.write(new Frame.Request(TransId.of(1, Peer.NODE_ID, 99), 4000, 0, 0, 0, "/test/a", "/test/a",
                    TRACED, new byte[0]));
            List<Frame.Send> sent = List.of(peer.read(Frame.Send.class), peer.read(Frame.Send.class));
            peer.read(Frame.Return.class);
            peer.write(new Frame.Terminate(0));
            assertFalse(polling.get(5, TimeUnit.SECONDS));
            api.close();

            String child = "00-" + TRACE_ID + "-" + exporter.getFinishedSpanItems().get(0).getSpanId() + "-01";
            assertEquals("/child", sent.get(0).name());
            assertArrayEquals(Info.encode("k", "v", "traceparent", child, "tracestate", TRACESTATE),
                    sent.get(0).requestInfo());
            assertEquals("/after", sent.get(1).name());
            assertArrayEquals(Info.encode("k", "v", "traceparent", TRACEPARENT, "tracestate", TRACESTATE),
                    sent.get(1).requestInfo());
        }
    }
}
