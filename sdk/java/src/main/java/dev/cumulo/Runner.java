package dev.cumulo;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

/** Runs a process's instances: one thread and one connection per {@code CUMULO_THREAD_COUNT}. */
final class Runner {
    private final Map<String, String> env;
    private final Setup setup;
    private final long window;
    /** Instances connected and not yet closed; guarded by itself. */
    private final List<Api> live = new ArrayList<>();
    private final AtomicReference<Throwable> firstFailure = new AtomicReference<>();

    private Runner(Map<String, String> env, long window, Setup setup) {
        this.env = env;
        this.window = window;
        this.setup = setup;
    }

    /** A window out of range fails every instance in {@link Options} before it connects, and is thrown. */
    static void run(Map<String, String> env, long window, Setup setup) throws Exception {
        new Runner(env, window, setup).runAll(threadCount(env));
    }

    static int threadCount(Map<String, String> env) {
        String value = env.getOrDefault("CUMULO_THREAD_COUNT", "1");
        try {
            int count = Integer.parseInt(value.trim());
            if (count >= 1) {
                return count;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalStateException("CUMULO_THREAD_COUNT must be a positive integer, not '" + value + "'");
    }

    private void runAll(int count) throws Exception {
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int index = i;
            Thread thread = new Thread(() -> serve(index), "cumulo-instance-" + index);
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join();
        }
        Throwable failure = firstFailure.get();
        if (failure instanceof Exception e) {
            throw e;
        }
        if (failure != null) {
            throw (Error) failure;
        }
    }

    private void serve(int index) {
        Api api = null;
        try {
            api = Api.connect(Options.fromEnv(env, index).withWindow(window), env);
            synchronized (live) {
                if (firstFailure.get() != null) {
                    return;
                }
                live.add(api);
            }
            setup.setup(api);
            api.poll();
        } catch (Throwable t) {
            // Said here too, since the rethrown failure does not tell which instance it came from.
            System.err.println("cumulo: instance " + index + " failed: " + t);
            if (firstFailure.compareAndSet(null, t)) {
                stopOthers();
            }
        } finally {
            if (api != null) {
                synchronized (live) {
                    live.remove(api);
                }
                closeQuietly(api, index);
            }
        }
    }

    /** One failed instance brings the process down, so the core sees it and can restart it. */
    private void stopOthers() {
        synchronized (live) {
            for (Api api : live) {
                api.requestStop();
            }
        }
    }

    private static void closeQuietly(Api api, int index) {
        try {
            api.close();
        } catch (Exception e) {
            System.err.println("cumulo: closing instance " + index + ": " + e);
        }
    }
}
