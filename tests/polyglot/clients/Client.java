import dev.cumulo.Api;
import dev.cumulo.CumuloException;
import dev.cumulo.Options;
import dev.cumulo.Response;
import dev.cumulo.TransId;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * Unmanaged client: {@code java -cp <sdk jar> Client.java SOCKET NAME HEX_BODY [sync|async]}. Prints the
 * hex response_info, a newline and the response body; on an error status prints its name, a newline
 * and the message, and exits 3.
 */
public final class Client {
    public static void main(String[] args) throws Exception {
        byte[] body = HexFormat.of().parseHex(args[2]);
        boolean async = args.length > 3 && args[3].equals("async");
        PrintStream out = System.out;
        int exitCode = 0;
        try (Api api = Api.connect(Options.unmanaged(args[0], "/client/java/"))) {
            try {
                Response r;
                if (async) {
                    TransId id = api.sendAsync(args[1], body);
                    r = api.recvAsync(id).response();
                } else {
                    r = api.sendSync(args[1], body);
                }
                out.write((HexFormat.of().formatHex(r.info()) + "\n").getBytes(StandardCharsets.UTF_8));
                out.write(r.body());
            } catch (CumuloException e) {
                out.write((e.status().name() + "\n" + e.reason()).getBytes(StandardCharsets.UTF_8));
                exitCode = 3;
            }
        }
        out.flush();
        System.exit(exitCode);
    }
}
