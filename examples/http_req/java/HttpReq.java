import dev.cumulo.Api;
import dev.cumulo.CumuloException;
import dev.cumulo.Info;
import dev.cumulo.Request;
import dev.cumulo.Response;
import java.nio.charset.StandardCharsets;
import java.util.regex.Pattern;

/**
 * The http_req example: answers /tests/http_req/java.xml/get with the integer found under the key
 * "value" of the request's key/value body, as XML, on CUMULO_THREAD_COUNT threads. HTTP_REQ_WINDOW:
 * requests the core may deliver to each instance at once (default 1); they are read several per
 * system call and answered in order.
 */
public final class HttpReq {
    private static final byte[] XML = Info.encode("content-type", "text/xml; charset=utf-8");
    /** ASCII only: Long.parseLong alone would also take other scripts' digits. */
    private static final Pattern INTEGER = Pattern.compile("[+-]?[0-9]+");

    public static void main(String[] args) throws Exception {
        Api.run(window(System.getenv("HTTP_REQ_WINDOW")), api -> api.subscribe("java.xml/get", HttpReq::answer));
    }

    /** HTTP_REQ_WINDOW's value: unset or empty is 1; anything but a positive integer stops the process. */
    static long window(String text) {
        if (text == null || text.isEmpty()) {
            return 1;
        }
        if (text.matches("[0-9]+")) {
            try {
                long window = Long.parseLong(text);
                if (window >= 1 && window <= 0xffffffffL) {
                    return window;
                }
            } catch (NumberFormatException outOfRange) {
                // said below
            }
        }
        throw new IllegalArgumentException("HTTP_REQ_WINDOW='" + text + "' is not a positive integer");
    }

    static Response answer(Api api, Request request) {
        Long value = valueOf(request.request());
        String xml = value == null
                ? "<http_test><error>no value specified</error></http_test>"
                : "<http_test><value>" + value + "</value></http_test>";
        return Response.of(XML, xml.getBytes(StandardCharsets.UTF_8));
    }

    /** The integer under "value", or null if it is missing, not an integer, or the body is malformed. */
    private static Long valueOf(byte[] body) {
        String text;
        try {
            text = Info.first(Info.parse(body), "value");
        } catch (CumuloException malformed) {
            return null;
        }
        if (text == null || !INTEGER.matcher(text).matches()) {
            return null;
        }
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException outOfRange) {
            return null;
        }
    }
}
