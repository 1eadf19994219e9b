package dev.cumulo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Api.run: one thread and one connection per CUMULO_THREAD_COUNT, against a fake core. */
@Timeout(20)
class RunnerTest {
    private static Map<String, String> env(FakeCore core, int threads) {
        return Map.of("CUMULO_SOCKET", core.address(), "CUMULO_TOKEN", "tok", "CUMULO_THREAD_COUNT",
                String.valueOf(threads), "CUMULO_PREFIX", "/svc/", "CUMULO_PROCESS_INDEX", "0",
                "CUMULO_PROCESS_COUNT", "1");
    }

    @Test
    void runsOneSubscribedInstancePerThreadUntilTerminate() throws Exception {
        servesEveryThreadUntilTerminate(3, 1);
    }

    @Test
    void everyInstanceAsksForTheWindowGiven() throws Exception {
        servesEveryThreadUntilTerminate(2, 16);
    }

    /** Runner.run with {@code threads} instances asking for {@code window}, each one subscribed, then terminated. */
    private static void servesEveryThreadUntilTerminate(int threads, long window) throws Exception {
        ExecutorService executor = Executors.newSingleThreadExecutor();
        try (FakeCore core = FakeCore.unix()) {
            Future<?> run = executor.submit(() -> {
                Runner.run(env(core, threads), window, api -> api.subscribe("t" + api.threadIndex(), (a, r) -> null));
                return null;
            });
            List<Peer> peers = new ArrayList<>();
            Set<Long> threadIndexes = new TreeSet<>();
            for (int i = 0; i < threads; i++) {
                Peer peer = core.accept();
                peers.add(peer);
                Frame.Hello hello = peer.read(Frame.Hello.class);
                assertEquals("tok", hello.token());
                assertEquals("", hello.prefix(), "a managed instance names no prefix");
                assertEquals(window, hello.window(), "each instance's HELLO carries the window");
                threadIndexes.add(hello.threadIndex());
                peer.write(Peer.welcome(1 << 20, "/svc/"));
                peer.replyTo(FrameType.SUBSCRIBE, "t" + hello.threadIndex(), 0);
            }
            assertEquals(LongStream.range(0, threads).boxed().collect(Collectors.toSet()), threadIndexes);
            for (Peer peer : peers) {
                peer.write(new Frame.Terminate(1000));
            }
            run.get(10, TimeUnit.SECONDS);
            for (Peer peer : peers) {
                peer.read(Frame.Goodbye.class);
                assertTrue(peer.atEndOfStream());
                peer.close();
            }
        } finally {
            executor.shutdownNow();
        }
    }

    @Test
    void oneFailingInstanceStopsTheOthersAndIsThrown() throws Exception {
        ExecutorService executor = Executors.newSingleThreadExecutor();
        try (FakeCore core = FakeCore.unix()) {
            Future<?> run = executor.submit(() -> {
                Runner.run(env(core, 2), 1, api -> {
                    if (api.threadIndex() == 1) {
                        throw new IllegalStateException("setup failed");
                    }
                });
                return null;
            });
            List<Peer> peers = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                Peer peer = core.accept();
                peers.add(peer);
                peer.read(Frame.Hello.class);
                peer.write(Peer.welcome(1 << 20, "/svc/"));
            }
            ExecutionException e = assertThrows(ExecutionException.class, () -> run.get(10, TimeUnit.SECONDS));
            assertInstanceOf(IllegalStateException.class, e.getCause());
            assertEquals("setup failed", e.getCause().getMessage());
            for (Peer peer : peers) {
                peer.read(Frame.Goodbye.class);
                peer.close();
            }
        } finally {
            executor.shutdownNow();
        }
    }

    @Test
    void windowOutOfRangeIsRefused() {
        Map<String, String> env = Map.of("CUMULO_SOCKET", "/nonexistent", "CUMULO_TOKEN", "tok",
                "CUMULO_THREAD_COUNT", "1");
        for (long window : new long[] {0, 1L << 32}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> Runner.run(env, window, api -> { }));
            assertEquals("window " + window + " is out of range", e.getMessage());
        }
    }

    @Test
    void badThreadCountIsRefused() {
        assertThrows(IllegalStateException.class, () -> Runner.threadCount(Map.of("CUMULO_THREAD_COUNT", "0")));
        assertThrows(IllegalStateException.class, () -> Runner.threadCount(Map.of("CUMULO_THREAD_COUNT", "x")));
        assertEquals(1, Runner.threadCount(Map.of()));
    }
}
