import dev.cumulo.Api;
import dev.cumulo.Response;

/** Faulty service: /tests/faulty/java/boom throws, /ok answers "ok". */
public final class Faulty {
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
        });
    }
}
