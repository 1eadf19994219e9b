package dev.cumulo;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;

/**
 * One instance: one connection to the core. Not thread-safe: each thread makes its own (see
 * {@link #run}). Calls that wait for the core keep reading meanwhile: they answer PING, keep
 * RESPONSEs of other requests for {@link #recvAsync} and queue REQUESTs for the next {@link #poll}.
 */
public final class Api implements AutoCloseable {
    public static final int PROTOCOL_VERSION = 1;

    /** A REQUEST may exceed the largest SEND by its source (u64) and pattern (str) fields. */
    private static final long REQUEST_OVERHEAD = 8 + 2 + 0xffff;
    /** Extra wait past a request's timeout, for the core's own TIMEOUT answer to arrive. */
    private static final long GRACE_NANOS = Duration.ofSeconds(2).toNanos();
    private static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(30);
    private static final int MAX_ERROR_MESSAGE = 4096;
    private static final byte[] NOTHING = new byte[0];

    private final Connection conn;
    private final Frame.Welcome welcome;
    private final long threadIndex;
    private final TransIdGenerator transIds;
    private final Map<String, Handler> handlers = new HashMap<>();
    private final Map<String, Integer> subscriptions = new HashMap<>();
    private final ArrayDeque<Frame.Request> queuedRequests = new ArrayDeque<>();
    /** RESPONSEs that arrived while nobody was waiting for them, in arrival order. */
    private final LinkedHashMap<TransId, Frame.Response> unclaimed = new LinkedHashMap<>();
    /** send_sync calls that gave up waiting; their late RESPONSEs are dropped. */
    private final Set<TransId> abandoned = new HashSet<>();
    private long nextReqId = 1;
    private int dispatchDepth;
    private boolean terminated;
    private IOException failure;
    private boolean closed;
    /**
     * The trace context of the handler running (PROTOCOL.md 5.1): its request's traceparent and
     * tracestate pairs, encoded; null outside handlers. A field of the instance is per handler
     * invocation here: an instance belongs to one thread and runs its handlers one at a time; a
     * handler that polls again gets its own context back when the inner handler ends.
     */
    private byte[] traceContext;

    private Api(Connection conn, Frame.Welcome welcome, long threadIndex) {
        this.conn = conn;
        this.welcome = welcome;
        this.threadIndex = threadIndex;
        this.transIds = new TransIdGenerator(welcome.nodeId(), welcome.instanceId());
        conn.limits(welcome.maxFrame(), welcome.maxFrame() + REQUEST_OVERHEAD);
    }

    /** Connects instance {@code threadIndex} of a process started by the core (from the environment). */
    public static Api connect(int threadIndex) throws IOException {
        return connect(Options.fromEnv(threadIndex));
    }

    /** Connects, sends HELLO and waits for WELCOME; an ERROR from the core is thrown. */
    public static Api connect(Options options) throws IOException {
        return connect(options, System.getenv());
    }

    /** As {@link #connect(Options)}, with {@code env} for the {@code CUMULO_TLS_*} variables. */
    static Api connect(Options options, Map<String, String> env) throws IOException {
        Connection conn = Connection.open(options.socket(), Tls.context(options, env), HANDSHAKE_TIMEOUT.toMillis());
        try {
            conn.send(new Frame.Hello(PROTOCOL_VERSION, options.window(), options.threadIndex(),
                    options.token(), options.token().isEmpty() ? options.prefix() : ""));
            Frame answer = conn.receive(System.nanoTime() + HANDSHAKE_TIMEOUT.toNanos());
            if (answer instanceof Frame.Error error) {
                throw new CumuloException(error.status(), error.message(), null);
            }
            if (!(answer instanceof Frame.Welcome welcome)) {
                throw answer == null
                        ? new CumuloException(Status.TIMEOUT, "no WELCOME within " + HANDSHAKE_TIMEOUT.toSeconds() + " s")
                        : new CumuloException(Status.PROTOCOL, "expected WELCOME, got " + answer.type());
            }
            if (welcome.version() != PROTOCOL_VERSION) {
                throw new CumuloException(Status.UNSUPPORTED_VERSION, "the core speaks version " + welcome.version());
            }
            return new Api(conn, welcome, options.threadIndex());
        } catch (IOException | RuntimeException e) {
            conn.close();
            throw e;
        }
    }

    /**
     * Runs a whole process: {@code CUMULO_THREAD_COUNT} instances, each in its own thread with its
     * own connection, each prepared by {@code setup} and then polled until the core terminates it.
     * If one instance fails, the others are stopped and the first failure is thrown.
     */
    public static void run(Setup setup) throws Exception {
        run(1, setup);
    }

    /**
     * As {@link #run(Setup)}, each instance asking for {@code window} requests at once: the core may
     * deliver that many before an answer, so the thread reads several per system call and the
     * answers share writes. They are still handled one at a time, in order, on the instance's thread.
     */
    public static void run(long window, Setup setup) throws Exception {
        Runner.run(System.getenv(), window, setup);
    }

    // ---- subscriptions -------------------------------------------------------------------

    /** Subscribes {@code prefix + pattern}; requests matching it go to {@code handler}. */
    public void subscribe(String pattern, Handler handler) throws IOException {
        Objects.requireNonNull(handler, "handler");
        control(FrameType.SUBSCRIBE, pattern);
        String full = prefix() + pattern;
        handlers.put(full, handler);
        subscriptions.merge(full, 1, Integer::sum);
    }

    /** Removes one subscription of the pattern; its handler goes with the last one. */
    public void unsubscribe(String pattern) throws IOException {
        control(FrameType.UNSUBSCRIBE, pattern);
        String full = prefix() + pattern;
        if (subscriptions.merge(full, -1, Integer::sum) <= 0) {
            subscriptions.remove(full);
            handlers.remove(full);
        }
    }

    /** How many times this instance has subscribed the pattern. */
    public long subscribeCount(String pattern) throws IOException {
        return control(FrameType.SUBSCRIBE_COUNT, pattern);
    }

    private long control(FrameType type, String pattern) throws IOException {
        Objects.requireNonNull(pattern, "pattern");
        ensureOpen();
        long reqId = nextReqId;
        nextReqId = nextReqId == 0xffffffffL ? 1 : nextReqId + 1;
        send(new Frame.Control(type, reqId, pattern));
        long deadline = System.nanoTime() + millisToNanos(welcome.timeoutSync()) + GRACE_NANOS;
        Frame.Reply reply = waitFor(f -> f instanceof Frame.Reply r && r.reqId() == reqId ? r : null, deadline);
        if (reply == null) {
            throw new CumuloException(Status.TIMEOUT, "no REPLY to " + type + " " + pattern);
        }
        if (reply.status() != Status.OK.code()) {
            throw new CumuloException(reply.status(), reply.message(), null);
        }
        return reply.value();
    }

    // ---- sending ---------------------------------------------------------------------------

    /** Sends a request with default timeout and priority; returns its trans_id. */
    public TransId sendAsync(String name, byte[] request) throws IOException {
        return sendAsync(name, request, NOTHING);
    }

    public TransId sendAsync(String name, byte[] request, byte[] requestInfo) throws IOException {
        return sendAsync(name, request, requestInfo, 0, welcome.priorityDefault());
    }

    /** @param timeoutMs 0 for the service's default */
    public TransId sendAsync(String name, byte[] request, byte[] requestInfo, long timeoutMs, int priority)
            throws IOException {
        return sendAsync(name, request, requestInfo, timeoutMs, priority, false);
    }

    /** @param waitForService wait up to the timeout for a subscriber instead of failing with NO_SERVICE */
    public TransId sendAsync(String name, byte[] request, byte[] requestInfo, long timeoutMs, int priority,
                             boolean waitForService) throws IOException {
        TransId id = send(FrameType.SEND_ASYNC, name, request, requestInfo, timeoutMs, priority, waitForService);
        flushUnlessDispatching();
        return id;
    }

    /** Sends a request and waits for its answer; an error status is thrown as {@link CumuloException}. */
    public Response sendSync(String name, byte[] request) throws IOException {
        return sendSync(name, request, NOTHING);
    }

    public Response sendSync(String name, byte[] request, byte[] requestInfo) throws IOException {
        return sendSync(name, request, requestInfo, 0, welcome.priorityDefault());
    }

    public Response sendSync(String name, byte[] request, byte[] requestInfo, long timeoutMs, int priority)
            throws IOException {
        return sendSync(name, request, requestInfo, timeoutMs, priority, false);
    }

    public Response sendSync(String name, byte[] request, byte[] requestInfo, long timeoutMs, int priority,
                             boolean waitForService) throws IOException {
        TransId id = send(FrameType.SEND_SYNC, name, request, requestInfo, timeoutMs, priority, waitForService);
        long wait = timeoutMs == 0 ? welcome.timeoutSync() : timeoutMs;
        long deadline = System.nanoTime() + millisToNanos(wait) + GRACE_NANOS;
        Frame.Response response = waitFor(
                f -> f instanceof Frame.Response r && r.transId().equals(id) ? r : null, deadline);
        if (response == null) {
            abandoned.add(id);
            throw new CumuloException(Status.TIMEOUT, "no RESPONSE from the core within " + wait + " ms", id);
        }
        return answer(response);
    }

    /** Sends a copy to every subscriber of a matching pattern; returns the copies' trans_ids. */
    public List<TransId> mcastAsync(String name, byte[] request) throws IOException {
        return mcastAsync(name, request, NOTHING);
    }

    public List<TransId> mcastAsync(String name, byte[] request, byte[] requestInfo) throws IOException {
        return mcastAsync(name, request, requestInfo, 0, welcome.priorityDefault());
    }

    public List<TransId> mcastAsync(String name, byte[] request, byte[] requestInfo, long timeoutMs, int priority)
            throws IOException {
        TransId id = send(FrameType.MCAST_ASYNC, name, request, requestInfo, timeoutMs, priority, false);
        long deadline = System.nanoTime() + millisToNanos(welcome.timeoutSync()) + GRACE_NANOS;
        // A core that refuses the call itself answers its trans_id with an error RESPONSE.
        Frame answer = waitFor(f -> f instanceof Frame.McastSent m && m.transId().equals(id)
                || f instanceof Frame.Response r && r.transId().equals(id) ? f : null, deadline);
        if (answer == null) {
            throw new CumuloException(Status.TIMEOUT, "no MCAST_SENT from the core", id);
        }
        if (answer instanceof Frame.Response r) {
            answer(r);
            throw new CumuloException(Status.PROTOCOL, "RESPONSE OK to MCAST_ASYNC", id);
        }
        return ((Frame.McastSent) answer).transIds();
    }

    /** Passes a request this handler is serving to another name; the handler then returns nothing. */
    public void forward(Request request, String name) throws IOException {
        forward(request, name, request.requestInfo(), request.request(), request.timeout(), request.priority());
    }

    /** @param timeoutMs the core keeps the smaller of this and what is left of the original */
    public void forward(Request request, String name, byte[] requestInfo, byte[] requestBody, long timeoutMs,
                        int priority) throws IOException {
        Objects.requireNonNull(name, "name");
        ensureOpen();
        if (request.forwarded()) {
            throw new IllegalStateException("request " + request.transId() + " was already forwarded");
        }
        send(new Frame.Send(FrameType.FORWARD, request.transId(), timeoutMs, priority, 0, name,
                withTrace(requestInfo), orEmpty(requestBody)));
        // Only once it is on its way: a refused FORWARD still needs the handler's RETURN.
        request.markForwarded();
        flushUnlessDispatching();
    }

    private TransId send(FrameType type, String name, byte[] request, byte[] requestInfo, long timeoutMs,
                         int priority, boolean waitForService) throws IOException {
        Objects.requireNonNull(name, "name");
        ensureOpen();
        TransId id = transIds.next();
        send(new Frame.Send(type, id, timeoutMs, priority, waitForService ? Frame.Send.WAIT_FOR_SERVICE : 0,
                name, withTrace(requestInfo), orEmpty(request)));
        return id;
    }

    /** R's traceparent and tracestate pairs, encoded; null when R has no traceparent (PROTOCOL.md 5.1). */
    private static byte[] traceOf(byte[] requestInfo) {
        if (!hasTraceparentKey(requestInfo)) {
            return null; // the common case, found without parsing
        }
        List<Map.Entry<String, String>> pairs;
        try {
            pairs = Info.parse(requestInfo);
        } catch (CumuloException notKeyValue) {
            return null;
        }
        String parent = Info.first(pairs, "traceparent");
        if (parent == null) {
            return null;
        }
        String state = Info.first(pairs, "tracestate");
        return state == null ? Info.encode("traceparent", parent)
                : Info.encode("traceparent", parent, "tracestate", state);
    }

    /** The key as encoded: its bytes, then NUL. */
    private static final byte[] TRACEPARENT_KEY = "traceparent\0".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    /** Whether the bytes {@code traceparent\0} occur in {@code info}: a parse can find the key only then. */
    private static boolean hasTraceparentKey(byte[] info) {
        outer:
        for (int i = 0; i + TRACEPARENT_KEY.length <= info.length; i++) {
            for (int j = 0; j < TRACEPARENT_KEY.length; j++) {
                if (info[i + j] != TRACEPARENT_KEY[j]) {
                    continue outer;
                }
            }
            return true;
        }
        return false;
    }

    /**
     * The request_info of an outgoing call: with the running handler's trace context appended,
     * unless it has a traceparent already (or is not key/value encoded: sent as given).
     */
    private byte[] withTrace(byte[] requestInfo) {
        byte[] info = orEmpty(requestInfo);
        if (traceContext == null) {
            return info;
        }
        try {
            if (Info.first(Info.parse(info), "traceparent") != null) {
                return info;
            }
        } catch (CumuloException notKeyValue) {
            return info;
        }
        byte[] out = Arrays.copyOf(info, info.length + traceContext.length);
        System.arraycopy(traceContext, 0, out, info.length, traceContext.length);
        return out;
    }

    // ---- receiving -------------------------------------------------------------------------

    /** The next RESPONSE of an asynchronous send not collected yet, waiting up to timeout_async. */
    public AsyncResponse recvAsync() throws IOException {
        return recvAsync(null);
    }

    /** The RESPONSE of {@code transId} (or of any, when null), waiting up to timeout_async. */
    public AsyncResponse recvAsync(TransId transId) throws IOException {
        return recvAsync(transId, Duration.ofNanos(millisToNanos(welcome.timeoutAsync()) + GRACE_NANOS));
    }

    /**
     * The RESPONSE of {@code transId} (or of any, when null). An error status is thrown as
     * {@link CumuloException} carrying the trans_id; no RESPONSE within the timeout is TIMEOUT.
     */
    public AsyncResponse recvAsync(TransId transId, Duration timeout) throws IOException {
        ensureOpen();
        Frame.Response response = transId == null ? takeFirstUnclaimed() : unclaimed.remove(transId);
        if (response == null) {
            long deadline = System.nanoTime() + timeout.toNanos();
            response = waitFor(f -> f instanceof Frame.Response r
                    && (transId == null || r.transId().equals(transId)) ? r : null, deadline);
        }
        if (response == null) {
            throw new CumuloException(Status.TIMEOUT, "no RESPONSE within " + timeout.toMillis() + " ms", transId);
        }
        return new AsyncResponse(response.transId(), answer(response));
    }

    private Frame.Response takeFirstUnclaimed() {
        Iterator<Frame.Response> it = unclaimed.values().iterator();
        if (!it.hasNext()) {
            return null;
        }
        Frame.Response first = it.next();
        it.remove();
        return first;
    }

    private static Response answer(Frame.Response r) throws CumuloException {
        if (r.status() != Status.OK.code()) {
            throw new CumuloException(r.status(), new String(r.response(), StandardCharsets.UTF_8), r.transId());
        }
        return new Response(r.responseInfo(), r.response());
    }

    // ---- the event loop --------------------------------------------------------------------

    /** Serves requests until the core sends TERMINATE; returns false then. */
    public boolean poll() throws IOException {
        return poll(null);
    }

    /**
     * Reads frames and runs handlers: returns false when TERMINATE has arrived (after serving the
     * requests already received), true when {@code timeout} (null: none) runs out first.
     */
    public boolean poll(Duration timeout) throws IOException {
        ensureOpen();
        long deadline = timeout == null ? Connection.NO_DEADLINE : System.nanoTime() + timeout.toNanos();
        dispatchDepth++;
        boolean timedOut;
        try {
            timedOut = serveUntil(deadline);
        } finally {
            dispatchDepth--;
        }
        if (dispatchDepth == 0) {
            flush();
        }
        return timedOut;
    }

    private boolean serveUntil(long deadline) throws IOException {
        while (true) {
            Frame.Request queued = queuedRequests.poll();
            if (queued != null) {
                dispatch(queued);
                continue;
            }
            if (terminated || conn.stopRequested()) {
                return false;
            }
            Frame frame = receive(deadline);
            if (frame == null) {
                return !conn.stopRequested();
            }
            if (frame instanceof Frame.Request request) {
                dispatch(request);
            } else {
                handleInBackground(frame);
            }
        }
    }

    private void dispatch(Frame.Request frame) throws IOException {
        Handler handler = handlers.get(frame.pattern());
        if (handler == null) {
            sendReturn(frame.transId(), Status.NO_SERVICE, "no handler for pattern " + frame.pattern());
            return;
        }
        Request request = new Request(frame);
        Response response;
        byte[] outerTrace = traceContext;
        traceContext = traceOf(frame.requestInfo());
        try {
            response = handler.handle(this, request);
        } catch (Exception e) {
            if (failure != null) {
                throw failure;
            }
            logFailure(frame.name(), e);
            if (!request.forwarded()) {
                sendReturn(frame.transId(), Status.SERVICE_ERROR, describe(e));
            }
            return;
        } finally {
            traceContext = outerTrace; // null unless a handler polled: its own context again
        }
        if (request.forwarded()) {
            return;
        }
        if (response == null) {
            response = Response.empty();
        }
        try {
            send(new Frame.Return(frame.transId(), Status.OK.code(), response.info(), response.body()));
        } catch (CumuloException e) {
            if (e.status() != Status.TOO_LARGE) {
                throw e;
            }
            sendReturn(frame.transId(), Status.TOO_LARGE, e.reason());
        }
    }

    private void sendReturn(TransId id, Status status, String message) throws IOException {
        send(new Frame.Return(id, status.code(), NOTHING, message.getBytes(StandardCharsets.UTF_8)));
    }

    /**
     * The sender gets the message; the stack trace goes to stderr, in one
     * write so that the core logs it as one record.
     */
    private static void logFailure(String name, Exception e) {
        java.io.StringWriter trace = new java.io.StringWriter();
        e.printStackTrace(new java.io.PrintWriter(trace));
        System.err.print("cumulo: handler for " + name + " threw " + trace);
        System.err.flush();
    }

    private static String describe(Exception e) {
        String text = e.getMessage() == null ? e.getClass().getName() : e.getClass().getName() + ": " + e.getMessage();
        return text.length() > MAX_ERROR_MESSAGE ? text.substring(0, MAX_ERROR_MESSAGE) : text;
    }

    /** Reads until {@code match} accepts a frame; others are handled in the background. */
    private <T> T waitFor(Function<Frame, T> match, long deadline) throws IOException {
        while (true) {
            Frame frame = receive(deadline);
            if (frame == null) {
                if (conn.stopRequested()) {
                    throw new CumuloException(Status.SHUTTING_DOWN, "the instance is stopping");
                }
                return null;
            }
            if (frame instanceof Frame.Response r && abandoned.remove(r.transId())) {
                continue;
            }
            T matched = match.apply(frame);
            if (matched != null) {
                // A PONG queued while waiting must not sit in the buffer until the next read.
                flushUnlessDispatching();
                return matched;
            }
            handleInBackground(frame);
        }
    }

    private void handleInBackground(Frame frame) throws IOException {
        if (frame instanceof Frame.Ping ping) {
            send(new Frame.Pong(ping.nonce()));
        } else if (frame instanceof Frame.Request request) {
            queuedRequests.add(request);
        } else if (frame instanceof Frame.Response response) {
            if (!abandoned.remove(response.transId())) {
                unclaimed.put(response.transId(), response);
            }
        } else if (frame instanceof Frame.Terminate) {
            terminated = true;
        } else if (frame instanceof Frame.Error error) {
            throw fail(new CumuloException(error.status(), error.message(), null));
        } else if (!(frame instanceof Frame.Pong || frame instanceof Frame.Reply || frame instanceof Frame.McastSent)) {
            // PONG needs nothing; a stray REPLY or MCAST_SENT answers a call that stopped waiting.
            throw fail(new CumuloException(Status.PROTOCOL, "unexpected " + frame.type() + " from the core"));
        }
    }

    // ---- connection state ------------------------------------------------------------------

    private Frame receive(long deadline) throws IOException {
        try {
            return conn.receive(deadline);
        } catch (IOException e) {
            throw fail(e);
        }
    }

    private void send(Frame frame) throws IOException {
        try {
            conn.send(frame);
        } catch (CumuloException e) {
            if (e.status() != Status.TOO_LARGE) {
                throw fail(e);
            }
            throw e; // refused before any byte was queued: the connection is still usable
        } catch (IOException e) {
            throw fail(e);
        }
    }

    private void flush() throws IOException {
        try {
            conn.flush();
        } catch (IOException e) {
            throw fail(e);
        }
    }

    private void flushUnlessDispatching() throws IOException {
        if (dispatchDepth == 0) {
            flush();
        }
    }

    /** A broken stream cannot be resynchronised: close it and remember why. */
    private IOException fail(IOException e) {
        if (failure == null) {
            failure = e;
            try {
                conn.close();
            } catch (IOException closing) {
                e.addSuppressed(closing);
            }
        }
        return e;
    }

    private void ensureOpen() throws IOException {
        if (closed) {
            throw new IOException("this cumulo instance is closed");
        }
        if (failure != null) {
            throw new IOException("the connection to the core failed: " + failure.getMessage(), failure);
        }
    }

    /** From another thread: makes poll return false and waiting calls fail with SHUTTING_DOWN. */
    void requestStop() {
        conn.requestStop();
    }

    /** Sends GOODBYE (when the connection is still sound) and closes. */
    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        try {
            if (failure == null) {
                conn.send(new Frame.Goodbye());
                conn.flush();
            }
        } catch (IOException ignored) {
            // The core may already have closed its side after TERMINATE.
        } finally {
            conn.close();
        }
    }

    // ---- accessors -------------------------------------------------------------------------

    public long threadIndex() {
        return threadIndex;
    }

    public long processIndex() {
        return welcome.processIndex();
    }

    public long processCount() {
        return welcome.processCount();
    }

    public long threadCount() {
        return welcome.threadCount();
    }

    public String prefix() {
        return welcome.prefix();
    }

    public long timeoutAsync() {
        return welcome.timeoutAsync();
    }

    public long timeoutSync() {
        return welcome.timeoutSync();
    }

    public long timeoutTerminate() {
        return welcome.timeoutTerminate();
    }

    public int priorityDefault() {
        return welcome.priorityDefault();
    }

    public long nodeId() {
        return welcome.nodeId();
    }

    public long instanceId() {
        return welcome.instanceId();
    }

    /** The window the core granted. */
    public long window() {
        return welcome.window();
    }

    /** The largest frame the core accepts, bytes. */
    public long maxFrame() {
        return welcome.maxFrame();
    }

    /** The core's keep-alive interval, ms. */
    public long keepalive() {
        return welcome.keepalive();
    }

    /** True once TERMINATE has arrived. */
    public boolean terminated() {
        return terminated;
    }

    private static byte[] orEmpty(byte[] b) {
        return b == null ? NOTHING : b;
    }

    private static long millisToNanos(long ms) {
        return ms * 1_000_000L;
    }
}
