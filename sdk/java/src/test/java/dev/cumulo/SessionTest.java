package dev.cumulo;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The session logic against a fake core on a real Unix socket: the test thread plays the core, the
 * SDK runs in a second thread.
 */
@Timeout(20)
class SessionTest {
    private static final Duration WAIT = Duration.ofSeconds(5);
    private static final TransId OTHER = TransId.of(42, Peer.NODE_ID, 99);

    private final ExecutorService client = Executors.newSingleThreadExecutor();
    private FakeCore core;

    @BeforeEach
    void startCore() throws IOException {
        core = FakeCore.unix();
    }

    @AfterEach
    void stop() throws IOException {
        client.shutdownNow();
        core.close();
    }

    private <T> Future<T> inClient(Callable<T> call) {
        return client.submit(call);
    }

    private static <T> T result(Future<T> future) throws Exception {
        try {
            return future.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw e;
        }
    }

    /** The client's exception, which must be a CumuloException. */
    private static CumuloException failure(Future<?> future) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> future.get(WAIT.toSeconds(), TimeUnit.SECONDS));
        return assertInstanceOf(CumuloException.class, e.getCause());
    }

    /** A connected instance (prefix /test/) and the core's side of it. */
    private record Session(Api api, Peer peer) implements AutoCloseable {
        @Override
        public void close() throws IOException {
            api.close();
            peer.close();
        }
    }

    private Session connect(long maxFrame) throws Exception {
        Future<Api> api = inClient(() -> Api.connect(Options.unmanaged(core.address(), Peer.PREFIX)));
        Peer peer = core.accept();
        peer.handshake(maxFrame);
        return new Session(result(api), peer);
    }

    private Session connect() throws Exception {
        return connect(1 << 20);
    }

    private static Frame.Request request(TransId id, String pattern, String body) {
        return new Frame.Request(id, 4000, 0, Frame.Request.SYNC, (Peer.NODE_ID << 32) | 99, Peer.PREFIX + "x",
                Peer.PREFIX + pattern, new byte[0], body.getBytes(UTF_8));
    }

    private static Frame.Response ok(TransId id, String body) {
        return new Frame.Response(id, 0, new byte[0], body.getBytes(UTF_8));
    }

    @Test
    void handshakeSendsHelloAndReadsWelcome() throws Exception {
        Future<Api> connecting = inClient(() ->
                Api.connect(Options.unmanaged(core.address(), "/mine/").withWindow(4).withThreadIndex(2)));
        try (Peer peer = core.accept()) {
            Frame.Hello hello = peer.read(Frame.Hello.class);
            assertEquals(new Frame.Hello(1, 4, 2, "", "/mine/"), hello);
            peer.write(new Frame.Welcome(1, 3, 8, 1, 2, 5, 4, 1000, 111, 222, 333, -7, 444, "/mine/"));
            Api api = result(connecting);
            assertEquals(3, api.nodeId());
            assertEquals(8, api.instanceId());
            assertEquals(1, api.processIndex());
            assertEquals(2, api.processCount());
            assertEquals(5, api.threadCount());
            assertEquals(2, api.threadIndex());
            assertEquals(4, api.window());
            assertEquals(1000, api.maxFrame());
            assertEquals(111, api.timeoutAsync());
            assertEquals(222, api.timeoutSync());
            assertEquals(333, api.timeoutTerminate());
            assertEquals(-7, api.priorityDefault());
            assertEquals(444, api.keepalive());
            assertEquals("/mine/", api.prefix());
            api.close();
            peer.read(Frame.Goodbye.class);
            assertTrue(peer.atEndOfStream());
        }
    }

    @Test
    void managedHelloSendsTheTokenAndNoPrefix() throws Exception {
        Future<Api> connecting = inClient(() ->
                Api.connect(new Options(core.address(), "c0ffee", "/ignored/", 1, 1)));
        try (Peer peer = core.accept()) {
            assertEquals(new Frame.Hello(1, 1, 1, "c0ffee", ""), peer.read(Frame.Hello.class));
            peer.write(Peer.welcome(1 << 20, "/svc/"));
            try (Api api = result(connecting)) {
                assertEquals("/svc/", api.prefix());
            }
        }
    }

    @Test
    void errorInsteadOfWelcomeIsThrown() throws Exception {
        Future<Api> connecting = inClient(() -> Api.connect(Options.unmanaged(core.address(), "/x/")));
        try (Peer peer = core.accept()) {
            peer.read(Frame.Hello.class);
            peer.write(new Frame.Error(Status.UNAUTHORIZED.code(), "unmanaged instances are refused"));
            CumuloException e = failure(connecting);
            assertEquals(Status.UNAUTHORIZED, e.status());
            assertEquals("unmanaged instances are refused", e.reason());
        }
    }

    @Test
    void subscribeCountAndUnsubscribeWaitForTheirReplies() throws Exception {
        try (Session s = connect()) {
            Future<Long> calls = inClient(() -> {
                s.api().subscribe("a/get", (api, request) -> null);
                s.api().subscribe("a/get", (api, request) -> null);
                return s.api().subscribeCount("a/get");
            });
            Frame.Control first = s.peer().replyTo(FrameType.SUBSCRIBE, "a/get", 0);
            Frame.Control second = s.peer().replyTo(FrameType.SUBSCRIBE, "a/get", 0);
            assertNotEquals(first.reqId(), second.reqId());
            s.peer().replyTo(FrameType.SUBSCRIBE_COUNT, "a/get", 2);
            assertEquals(2L, result(calls));

            Future<Void> unsubscribe = inClient(() -> {
                s.api().unsubscribe("nothing");
                return null;
            });
            Frame.Control control = s.peer().read(Frame.Control.class);
            assertEquals(FrameType.UNSUBSCRIBE, control.type());
            s.peer().write(new Frame.Reply(control.reqId(), Status.INVALID_ARGUMENT.code(), 0, "not subscribed"));
            CumuloException e = failure(unsubscribe);
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertEquals("not subscribed", e.reason());
        }
    }

    @Test
    void requestIsHandledAndReturnedUntilTerminate() throws Exception {
        try (Session s = connect()) {
            AtomicReference<Request> seen = new AtomicReference<>();
            Future<Void> subscribed = inClient(() -> {
                s.api().subscribe("echo/*", (api, request) -> {
                    seen.set(request);
                    return Response.of(Info.encode("k", "v"), ("echo " + new String(request.request(), UTF_8)).getBytes(UTF_8));
                });
                return null;
            });
            s.peer().replyTo(FrameType.SUBSCRIBE, "echo/*", 0);
            result(subscribed);

            assertTrue(result(inClient(() -> s.api().poll(Duration.ofMillis(50)))), "poll times out with nothing to do");

            Future<Boolean> polling = inClient(() -> s.api().poll());
            TransId id = TransId.of(1000, Peer.NODE_ID, 99);
            s.peer().write(request(id, "echo/*", "hi"));
            Frame.Return answer = s.peer().read(Frame.Return.class);
            assertEquals(id, answer.transId());
            assertEquals(0, answer.status());
            assertArrayEquals(Info.encode("k", "v"), answer.responseInfo());
            assertEquals("echo hi", new String(answer.response(), UTF_8));

            Request request = seen.get();
            assertEquals(Peer.PREFIX + "x", request.name());
            assertEquals(Peer.PREFIX + "echo/*", request.pattern());
            assertEquals(4000, request.timeout());
            assertEquals((Peer.NODE_ID << 32) | 99, request.source());
            assertTrue(request.isSync());
            assertFalse(request.isMcast());

            s.peer().write(new Frame.Terminate(2000));
            assertFalse(result(polling), "poll returns false on TERMINATE");
            assertTrue(s.api().terminated());
        }
    }

    @Test
    void requestForAPatternWithoutHandlerIsAnsweredNoService() throws Exception {
        try (Session s = connect()) {
            Future<Boolean> polling = inClient(() -> s.api().poll());
            TransId id = TransId.of(5, Peer.NODE_ID, 99);
            s.peer().write(request(id, "never", ""));
            Frame.Return answer = s.peer().read(Frame.Return.class);
            assertEquals(id, answer.transId());
            assertEquals(Status.NO_SERVICE.code(), answer.status());
            s.peer().write(new Frame.Terminate(0));
            assertFalse(result(polling));
        }
    }

    @Test
    void sendSyncAnswersPingAndKeepsWhatArrivesMeanwhile() throws Exception {
        try (Session s = connect()) {
            Future<Void> subscribed = inClient(() -> {
                s.api().subscribe("late", (api, request) -> Response.of("served later"));
                return null;
            });
            s.peer().replyTo(FrameType.SUBSCRIBE, "late", 0);
            result(subscribed);

            Future<Response> sync = inClient(() ->
                    s.api().sendSync("/svc/a", "question".getBytes(UTF_8), Info.encode("h", "1"), 700, -3));
            Frame.Send send = s.peer().read(Frame.Send.class);
            assertEquals(FrameType.SEND_SYNC, send.type());
            assertEquals("/svc/a", send.name());
            assertEquals(700, send.timeout());
            assertEquals(-3, send.priority());
            assertEquals(0, send.flags());
            assertArrayEquals(Info.encode("h", "1"), send.requestInfo());
            assertEquals(Peer.NODE_ID, send.transId().nodeId());
            assertEquals(Peer.INSTANCE_ID, send.transId().instanceId());

            TransId queued = TransId.of(7, Peer.NODE_ID, 99);
            s.peer().write(new Frame.Ping(77), ok(OTHER, "not yours"), request(queued, "late", ""));
            assertEquals(new Frame.Pong(77), s.peer().read(), "PONG while send_sync waits");
            assertFalse(sync.isDone());

            s.peer().write(new Frame.Response(send.transId(), 0, Info.encode("r", "2"), "answer".getBytes(UTF_8)));
            Response response = result(sync);
            assertEquals("answer", response.bodyText());
            assertArrayEquals(Info.encode("r", "2"), response.info());

            AsyncResponse kept = result(inClient(() -> s.api().recvAsync()));
            assertEquals(OTHER, kept.transId());
            assertEquals("not yours", kept.response().bodyText());

            Future<Boolean> polling = inClient(() -> s.api().poll(WAIT));
            Frame.Return served = s.peer().read(Frame.Return.class);
            assertEquals(queued, served.transId());
            assertEquals("served later", new String(served.response(), UTF_8));
            s.peer().write(new Frame.Terminate(0));
            assertFalse(result(polling));
        }
    }

    @Test
    void sendSyncErrorCarriesStatusMessageAndTransId() throws Exception {
        try (Session s = connect()) {
            Future<Response> sync = inClient(() -> s.api().sendSync("/nowhere", new byte[0]));
            Frame.Send send = s.peer().read(Frame.Send.class);
            assertEquals(0, send.timeout(), "0 asks for the service's default timeout");
            assertEquals(-1, send.priority(), "WELCOME's default priority");
            s.peer().write(new Frame.Response(send.transId(), Status.NO_SERVICE.code(), new byte[0],
                    "no service subscribes /nowhere".getBytes(UTF_8)));
            CumuloException e = failure(sync);
            assertEquals(Status.NO_SERVICE, e.status());
            assertEquals("no service subscribes /nowhere", e.reason());
            assertEquals(send.transId(), e.transId());
        }
    }

    @Test
    void recvAsyncCollectsByTransIdOrInArrivalOrder() throws Exception {
        try (Session s = connect()) {
            List<TransId> sent = result(inClient(() -> List.of(
                    s.api().sendAsync("/a", "1".getBytes(UTF_8)),
                    s.api().sendAsync("/a", "2".getBytes(UTF_8), new byte[0], 300, 5, true),
                    s.api().sendAsync("/a", "3".getBytes(UTF_8)))));
            Frame.Send first = s.peer().read(Frame.Send.class);
            Frame.Send second = s.peer().read(Frame.Send.class);
            Frame.Send third = s.peer().read(Frame.Send.class);
            assertEquals(List.of(first.transId(), second.transId(), third.transId()), sent);
            assertEquals(FrameType.SEND_ASYNC, first.type());
            assertEquals(Frame.Send.WAIT_FOR_SERVICE, second.flags());
            assertTrue(first.transId().compareTo(second.transId()) < 0);
            assertTrue(second.transId().compareTo(third.transId()) < 0);

            s.peer().write(ok(third.transId(), "three"), ok(first.transId(), "one"),
                    new Frame.Response(second.transId(), Status.TIMEOUT.code(), new byte[0], "too slow".getBytes(UTF_8)));

            AsyncResponse one = result(inClient(() -> s.api().recvAsync(first.transId())));
            assertEquals("one", one.response().bodyText());
            AsyncResponse next = result(inClient(() -> s.api().recvAsync()));
            assertEquals(third.transId(), next.transId(), "the oldest unclaimed RESPONSE comes first");
            CumuloException e = failure(inClient(() -> s.api().recvAsync()));
            assertEquals(Status.TIMEOUT, e.status());
            assertEquals(second.transId(), e.transId());

            CumuloException none = failure(inClient(() -> s.api().recvAsync(null, Duration.ofMillis(50))));
            assertEquals(Status.TIMEOUT, none.status());
        }
    }

    @Test
    void mcastAsyncReturnsTheCopiesTransIds() throws Exception {
        try (Session s = connect()) {
            Future<List<TransId>> mcast = inClient(() -> s.api().mcastAsync("/svc/*", "all".getBytes(UTF_8)));
            Frame.Send call = s.peer().read(Frame.Send.class);
            assertEquals(FrameType.MCAST_ASYNC, call.type());
            TransId copyA = TransId.of(10, Peer.NODE_ID, 0);
            TransId copyB = TransId.of(11, Peer.NODE_ID, 0);
            s.peer().write(new Frame.Ping(1), new Frame.McastSent(call.transId(), List.of(copyA, copyB)),
                    ok(copyB, "b"), ok(copyA, "a"));
            assertEquals(List.of(copyA, copyB), result(mcast));
            assertEquals(new Frame.Pong(1), s.peer().read());
            assertEquals("a", result(inClient(() -> s.api().recvAsync(copyA))).response().bodyText());
            assertEquals("b", result(inClient(() -> s.api().recvAsync(copyB))).response().bodyText());
        }
    }

    @Test
    void handlerExceptionReturnsServiceErrorAndServingGoesOn() throws Exception {
        try (Session s = connect()) {
            Future<Void> subscribed = inClient(() -> {
                s.api().subscribe("fragile", (api, request) -> {
                    if (new String(request.request(), UTF_8).equals("boom")) {
                        throw new IllegalStateException("bad input");
                    }
                    return Response.of("fine");
                });
                return null;
            });
            s.peer().replyTo(FrameType.SUBSCRIBE, "fragile", 0);
            result(subscribed);

            Future<Boolean> polling = inClient(() -> s.api().poll());
            TransId bad = TransId.of(1, Peer.NODE_ID, 99);
            TransId good = TransId.of(2, Peer.NODE_ID, 99);
            s.peer().write(request(bad, "fragile", "boom"));
            Frame.Return failed = s.peer().read(Frame.Return.class);
            assertEquals(bad, failed.transId());
            assertEquals(Status.SERVICE_ERROR.code(), failed.status());
            assertEquals("java.lang.IllegalStateException: bad input", new String(failed.response(), UTF_8));

            s.peer().write(request(good, "fragile", "ok"));
            Frame.Return served = s.peer().read(Frame.Return.class);
            assertEquals(good, served.transId());
            assertEquals(0, served.status());
            assertEquals("fine", new String(served.response(), UTF_8));
            s.peer().write(new Frame.Terminate(0));
            assertFalse(result(polling));
        }
    }

    @Test
    void forwardedRequestGetsNoReturn() throws Exception {
        try (Session s = connect()) {
            Future<Void> subscribed = inClient(() -> {
                s.api().subscribe("relay", (api, request) -> {
                    api.forward(request, "/elsewhere");
                    return Response.of("ignored");
                });
                return null;
            });
            s.peer().replyTo(FrameType.SUBSCRIBE, "relay", 0);
            result(subscribed);

            Future<Boolean> polling = inClient(() -> s.api().poll());
            TransId id = TransId.of(3, Peer.NODE_ID, 99);
            s.peer().write(request(id, "relay", "payload"), new Frame.Ping(9));
            Frame.Send forward = s.peer().read(Frame.Send.class);
            assertEquals(FrameType.FORWARD, forward.type());
            assertEquals(id, forward.transId());
            assertEquals("/elsewhere", forward.name());
            assertEquals(4000, forward.timeout());
            assertEquals("payload", new String(forward.request(), UTF_8));
            assertEquals(new Frame.Pong(9), s.peer().read(), "no RETURN between FORWARD and PONG");
            s.peer().write(new Frame.Terminate(0));
            assertFalse(result(polling));
        }
    }

    @Test
    void oversizedFrameFromTheCoreIsRefused() throws Exception {
        try (Session s = connect(1024)) {
            Future<Boolean> polling = inClient(() -> s.api().poll());
            // Only the header: the SDK must refuse on the length alone, without waiting for a body.
            s.peer().writeRaw(new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff, 0x7f, (byte) 0x82});
            CumuloException e = failure(polling);
            assertEquals(Status.TOO_LARGE, e.status());
            assertTrue(s.peer().atEndOfStream(), "the SDK closes a connection it cannot resynchronise");
            IOException after = assertThrows(IOException.class, () -> s.api().sendAsync("/a", new byte[0]));
            assertTrue(after.getMessage().contains("failed"), after.getMessage());
        }
    }

    @Test
    void malformedFrameFromTheCoreIsRefused() throws Exception {
        try (Session s = connect()) {
            Future<Boolean> polling = inClient(() -> s.api().poll());
            s.peer().writeRaw(new byte[] {1, 0, 0, 0, 0x7e});
            assertEquals(Status.MALFORMED, failure(polling).status());
        }
    }

    @Test
    void oversizedSendsAreRefusedBeforeAnyByteIsWritten() throws Exception {
        try (Session s = connect(1024)) {
            Future<Void> subscribed = inClient(() -> {
                s.api().subscribe("big", (api, request) -> Response.of(new byte[2000]));
                return null;
            });
            s.peer().replyTo(FrameType.SUBSCRIBE, "big", 0);
            result(subscribed);

            CumuloException e = failure(inClient(() -> s.api().sendAsync("/a", new byte[2000])));
            assertEquals(Status.TOO_LARGE, e.status());
            TransId small = result(inClient(() -> s.api().sendAsync("/a", new byte[10])));
            assertEquals(small, s.peer().read(Frame.Send.class).transId(), "the connection is still usable");

            Future<Boolean> polling = inClient(() -> s.api().poll());
            TransId id = TransId.of(8, Peer.NODE_ID, 99);
            s.peer().write(request(id, "big", ""));
            Frame.Return answer = s.peer().read(Frame.Return.class);
            assertEquals(id, answer.transId());
            assertEquals(Status.TOO_LARGE.code(), answer.status());
            s.peer().write(new Frame.Terminate(0));
            assertFalse(result(polling));
        }
    }

    @Test
    void errorFromTheCoreMidSessionIsThrown() throws Exception {
        try (Session s = connect()) {
            Future<Boolean> polling = inClient(() -> s.api().poll());
            s.peer().write(new Frame.Error(Status.SHUTTING_DOWN.code(), "the core is stopping"));
            s.peer().close();
            CumuloException e = failure(polling);
            assertEquals(Status.SHUTTING_DOWN, e.status());
            assertEquals("the core is stopping", e.reason());
        }
    }

    @Test
    void unknownStatusInAResponseIsAnError() throws Exception {
        try (Session s = connect()) {
            Future<Response> sync = inClient(() -> s.api().sendSync("/a", new byte[0]));
            Frame.Send send = s.peer().read(Frame.Send.class);
            s.peer().write(new Frame.Response(send.transId(), 99, new byte[0], "from the future".getBytes(UTF_8)));
            CumuloException e = failure(sync);
            assertEquals(Status.UNKNOWN, e.status());
            assertEquals(99, e.code());
        }
    }

    @Test
    void connectionClosedByTheCoreIsAnError() throws Exception {
        try (Session s = connect()) {
            Future<Response> sync = inClient(() -> s.api().sendSync("/a", new byte[0]));
            s.peer().read(Frame.Send.class);
            s.peer().close();
            ExecutionException e = assertThrows(ExecutionException.class, () -> sync.get(5, TimeUnit.SECONDS));
            assertInstanceOf(java.io.EOFException.class, e.getCause());
        }
    }

    @Test
    void worksOverTcp() throws Exception {
        try (FakeCore tcp = FakeCore.tcp()) {
            Future<Api> connecting = inClient(() -> Api.connect(Options.unmanaged(tcp.address(), Peer.PREFIX)));
            try (Peer peer = tcp.accept()) {
                peer.handshake();
                try (Api api = result(connecting)) {
                    Future<Response> sync = inClient(() -> api.sendSync("/a", "q".getBytes(UTF_8)));
                    Frame.Send send = peer.read(Frame.Send.class);
                    peer.write(ok(send.transId(), "over tcp"));
                    assertEquals("over tcp", result(sync).bodyText());
                }
            }
        }
    }

    // ---- trace context (PROTOCOL.md 5.1) -------------------------------------------------------

    private static final String TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    private static final String TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
    private static final String OWN_TRACEPARENT = "00-11111111111111111111111111111111-2222222222222222-00";

    private static Frame.Request request(TransId id, String pattern, byte[] requestInfo) {
        return new Frame.Request(id, 4000, 0, Frame.Request.SYNC, (Peer.NODE_ID << 32) | 99, Peer.PREFIX + "x",
                Peer.PREFIX + pattern, requestInfo, new byte[0]);
    }

    /**
     * Subscribes "trace": sendSync with k=v, sendAsync with its own traceparent, mcastAsync with no
     * info, then forward with an empty info.
     */
    private void subscribeTraceHandler(Session s) throws Exception {
        Future<Void> subscribed = inClient(() -> {
            s.api().subscribe("trace", (api, request) -> {
                api.sendSync("/sync", new byte[0], Info.encode("k", "v"));
                api.sendAsync("/async", new byte[0], Info.encode("traceparent", OWN_TRACEPARENT));
                api.mcastAsync("/mcast", new byte[0]);
                api.forward(request, "/forward", new byte[0], request.request(), request.timeout(), request.priority());
                return null;
            });
            return null;
        });
        s.peer().replyTo(FrameType.SUBSCRIBE, "trace", 0);
        result(subscribed);
    }

    /** Answers the trace handler's calls; returns the request_info of each, in order. */
    private static List<byte[]> traceCalls(Peer peer) throws IOException {
        Frame.Send sync = peer.read(Frame.Send.class);
        peer.write(ok(sync.transId(), ""));
        Frame.Send async = peer.read(Frame.Send.class);
        Frame.Send mcast = peer.read(Frame.Send.class);
        peer.write(new Frame.McastSent(mcast.transId(), List.of()));
        Frame.Send forward = peer.read(Frame.Send.class);
        assertEquals(List.of(FrameType.SEND_SYNC, FrameType.SEND_ASYNC, FrameType.MCAST_ASYNC, FrameType.FORWARD),
                List.of(sync.type(), async.type(), mcast.type(), forward.type()));
        return List.of(sync.requestInfo(), async.requestInfo(), mcast.requestInfo(), forward.requestInfo());
    }

    @Test
    void handlerCallsInheritTheRequestsTraceContext() throws Exception {
        try (Session s = connect()) {
            subscribeTraceHandler(s);
            Future<Boolean> polling = inClient(() -> s.api().poll());
            s.peer().write(request(TransId.of(1, Peer.NODE_ID, 99), "trace",
                    Info.encode("x", "1", "traceparent", TRACEPARENT, "tracestate", TRACESTATE)));
            List<byte[]> infos = traceCalls(s.peer());
            assertArrayEquals(Info.encode("k", "v", "traceparent", TRACEPARENT, "tracestate", TRACESTATE), infos.get(0),
                    "after the pairs the handler gave");
            assertArrayEquals(Info.encode("traceparent", OWN_TRACEPARENT), infos.get(1), "a handler-given traceparent is kept");
            assertArrayEquals(Info.encode("traceparent", TRACEPARENT, "tracestate", TRACESTATE), infos.get(2));
            assertArrayEquals(Info.encode("traceparent", TRACEPARENT, "tracestate", TRACESTATE), infos.get(3));

            s.peer().write(request(TransId.of(2, Peer.NODE_ID, 99), "trace", Info.encode("traceparent", TRACEPARENT)));
            infos = traceCalls(s.peer());
            assertArrayEquals(Info.encode("k", "v", "traceparent", TRACEPARENT), infos.get(0), "no tracestate: none added");
            assertArrayEquals(Info.encode("traceparent", TRACEPARENT), infos.get(2));

            s.peer().write(new Frame.Terminate(0));
            assertFalse(result(polling));
            // Outside any handler, after those ran: nothing added.
            result(inClient(() -> s.api().sendAsync("/client", new byte[0], Info.encode("k", "v"))));
            assertArrayEquals(Info.encode("k", "v"), s.peer().read(Frame.Send.class).requestInfo());
        }
    }

    @Test
    void requestWithoutTraceparentAddsNothing() throws Exception {
        try (Session s = connect()) {
            subscribeTraceHandler(s);
            Future<Boolean> polling = inClient(() -> s.api().poll());
            int n = 1;
            for (byte[] info : List.of(new byte[0], Info.encode("tracestate", TRACESTATE))) {
                s.peer().write(request(TransId.of(n++, Peer.NODE_ID, 99), "trace", info));
                List<byte[]> infos = traceCalls(s.peer());
                assertArrayEquals(Info.encode("k", "v"), infos.get(0));
                assertArrayEquals(new byte[0], infos.get(2));
                assertArrayEquals(new byte[0], infos.get(3));
            }
            s.peer().write(new Frame.Terminate(0));
            assertFalse(result(polling));
        }
    }

    @Test
    void handlerThatPollsGetsItsOwnTraceContextBack() throws Exception {
        try (Session s = connect()) {
            Future<Void> subscribed = inClient(() -> {
                s.api().subscribe("trace", (api, request) -> {
                    String name = new String(request.request(), UTF_8);
                    if (name.equals("outer")) {
                        api.poll(Duration.ofMillis(300)); // serves "inner", without a traceparent
                    }
                    api.sendAsync("/" + name, new byte[0]);
                    return null;
                });
                return null;
            });
            s.peer().replyTo(FrameType.SUBSCRIBE, "trace", 0);
            result(subscribed);
            Future<Boolean> polling = inClient(() -> s.api().poll());
            TransId outer = TransId.of(1, Peer.NODE_ID, 99);
            TransId inner = TransId.of(2, Peer.NODE_ID, 99);
            s.peer().write(new Frame.Request(outer, 4000, 0, 0, 0, "/x", Peer.PREFIX + "trace",
                            Info.encode("traceparent", TRACEPARENT), "outer".getBytes(UTF_8)),
                    new Frame.Request(inner, 4000, 0, 0, 0, "/x", Peer.PREFIX + "trace",
                            new byte[0], "inner".getBytes(UTF_8)));
            Frame.Send innerSend = s.peer().read(Frame.Send.class);
            assertEquals("/inner", innerSend.name());
            assertArrayEquals(new byte[0], innerSend.requestInfo(), "the inner request has no trace context");
            assertEquals(inner, s.peer().read(Frame.Return.class).transId());
            Frame.Send outerSend = s.peer().read(Frame.Send.class);
            assertEquals("/outer", outerSend.name());
            assertArrayEquals(Info.encode("traceparent", TRACEPARENT), outerSend.requestInfo());
            assertEquals(outer, s.peer().read(Frame.Return.class).transId());
            s.peer().write(new Frame.Terminate(0));
            assertFalse(result(polling));
        }
    }
}
