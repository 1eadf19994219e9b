<?php

declare(strict_types=1);

namespace Cumulo;

/**
 * Runs a whole service process. PHP has no threads, so the
 * CUMULO_THREAD_COUNT instances the core expects are opened in this one
 * process and served in turn by one event loop: each instance handles one
 * request at a time, and the process one at a time overall.
 */
final class Runner
{
    /**
     * $setup(Api) makes the subscriptions of each instance. Returns once
     * every instance got TERMINATE or lost its connection.
     *
     * @param array<string, mixed> $options named arguments for Api::__construct
     */
    public static function run(callable $setup, ?int $threadCount = null, array $options = []): void
    {
        $threadCount ??= max(1, (int) (getenv('CUMULO_THREAD_COUNT') ?: 1));
        $instances = [];
        for ($threadIndex = 0; $threadIndex < $threadCount; $threadIndex++) {
            $api = new Api($threadIndex, ...$options);
            $setup($api);
            $instances[] = $api;
        }
        while ($instances !== []) {
            foreach ($instances as $key => $api) {
                if (!self::serveReady($api)) {
                    $api->close();
                    unset($instances[$key]);
                }
            }
            if ($instances !== []) {
                $read = array_map(fn (Api $api) => $api->stream(), $instances);
                $write = $except = null;
                @stream_select($read, $write, $except, null);
            }
        }
    }

    /** Serves what has arrived; false once the instance is done. */
    private static function serveReady(Api $api): bool
    {
        try {
            return $api->poll(0);
        } catch (ConnectionClosedException) {
            return false; // the core went away: nothing left to serve
        }
    }
}
