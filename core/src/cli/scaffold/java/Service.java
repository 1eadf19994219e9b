import dev.cumulo.Api;
import dev.cumulo.CumuloException;
import dev.cumulo.Info;
import dev.cumulo.Request;
import dev.cumulo.Response;
import java.nio.charset.StandardCharsets;

/**
 * {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and answers "hello from
 * {{name}}", with the request's "value" parameter when it has one. Runs CUMULO_THREAD_COUNT
 * instances, one per thread.
 */
public final class Service {
    private static final byte[] TEXT = Info.encode("content-type", "text/plain; charset=utf-8");

    public static void main(String[] args) throws Exception {
        Api.run(api -> api.subscribe("{{name}}/get", Service::get));
    }

    static Response get(Api api, Request request) {
        String value;
        try {
            value = Info.first(Info.parse(request.request()), "value");
        } catch (CumuloException malformed) {
            value = null; // answered as if there were no value
        }
        String body = value == null ? "hello from {{name}}" : "hello from {{name}} (value " + value + ")";
        return Response.of(TEXT, body.getBytes(StandardCharsets.UTF_8));
    }
}
