import dev.cumulo.Api;
import dev.cumulo.Response;
import dev.cumulo.TransId;
import java.util.List;

/**
 * Faulty service: /tests/faulty/java/boom throws, /ok answers "ok". The trace_* handlers call
 * /echo/trace with an empty request_info and answer with the info the echo got: the trace context
 * they inherit (PROTOCOL.md 5.1).
 */
public final class Faulty {
    private static final String ECHO = "/echo/trace";
    private static final byte[] NOTHING = new byte[0];

    static final class FaultyException extends RuntimeException {
        FaultyException(String message) {
            super(message);
        }
    }

    public static void main(String[] args) throws Exception {
        Api.run(api -> {
            api.subscribe("boom", (a, request) -> {
                throw new FaultyException("boom from java");
            });
            api.subscribe("ok", (a, request) -> Response.of("ok"));
            api.subscribe("trace_sync", (a, request) -> Response.of(a.sendSync(ECHO, NOTHING, NOTHING).info()));
            api.subscribe("trace_async", (a, request) -> {
                TransId id = a.sendAsync(ECHO, NOTHING, NOTHING);
                return Response.of(a.recvAsync(id).response().info());
            });
            api.subscribe("trace_mcast", (a, request) -> {
                List<TransId> ids = a.mcastAsync(ECHO, NOTHING, NOTHING);
                if (ids.isEmpty()) {
                    throw new FaultyException("no copy of " + ECHO);
                }
                return Response.of(a.recvAsync(ids.get(0)).response().info());
            });
            api.subscribe("trace_forward", (a, request) -> {
                a.forward(request, ECHO, NOTHING, request.request(), request.timeout(), request.priority());
                return null;
            });
        });
    }
}
