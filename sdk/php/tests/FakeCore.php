<?php

declare(strict_types=1);

namespace Cumulo\Tests;

use PHPUnit\Framework\AssertionFailedError;

/**
 * A scripted stand-in for the cumulo core on a real Unix socket. PHP has no
 * threads, so the script runs in a forked child process; what it returns is
 * handed back by join(), and whatever failed in it is raised there.
 */
final class FakeCore
{
    public const WELCOME = [
        'version' => 1, 'node_id' => 3, 'instance_id' => 9, 'process_index' => 1, 'process_count' => 2,
        'thread_count' => 4, 'window' => 1, 'max_frame' => 1024, 'timeout_async' => 700,
        'timeout_sync' => 800, 'timeout_terminate' => 900, 'priority_default' => -2, 'keepalive' => 5000,
        'prefix' => '/t/',
    ];
    private const ACCEPT_TIMEOUT = 5;

    public readonly string $path;
    private readonly string $dir;
    /** @var resource */
    private $server;
    private int $pid;

    public function __construct(callable $script)
    {
        $this->dir = sys_get_temp_dir() . '/cumulo-test-' . bin2hex(random_bytes(6));
        mkdir($this->dir);
        $this->path = $this->dir . '/core.sock';
        $this->server = stream_socket_server('unix://' . $this->path, $errno, $error)
            ?: throw new \RuntimeException("fake core cannot listen: $error");
        $pid = pcntl_fork();
        if ($pid === -1) {
            throw new \RuntimeException('fork failed');
        }
        if ($pid === 0) {
            $this->runChild($script);
        }
        $this->pid = $pid;
        fclose($this->server); // the child listens
    }

    public function accept(): Peer
    {
        $socket = @stream_socket_accept($this->server, self::ACCEPT_TIMEOUT)
            ?: throw new \RuntimeException('no connection to the fake core');
        return new Peer($socket);
    }

    /** Accepts a connection and completes the handshake; returns [peer, hello]. */
    public function acceptInstance(array $welcome = []): array
    {
        $peer = $this->accept();
        $hello = $peer->expect('HELLO');
        $peer->send('WELCOME', $welcome + self::WELCOME);
        return [$peer, $hello];
    }

    /** Waits for the script; returns what it returned. */
    public function join(): mixed
    {
        pcntl_waitpid($this->pid, $status);
        $result = @file_get_contents($this->dir . '/result');
        @unlink($this->dir . '/result');
        @unlink($this->path);
        @rmdir($this->dir);
        [$outcome, $value] = $result === false ? ['error', 'fake core died'] : unserialize($result);
        if ($outcome !== 'ok') {
            throw new AssertionFailedError("fake core: $value");
        }
        return $value;
    }

    private function runChild(callable $script): never
    {
        try {
            $result = ['ok', $script($this)];
        } catch (\Throwable $e) {
            $result = ['error', get_class($e) . ': ' . $e->getMessage() . ' at ' . $e->getFile() . ':' . $e->getLine()];
        }
        file_put_contents($this->dir . '/result', serialize($result));
        // Leave without running the test runner's shutdown code in this copy of it.
        posix_kill(posix_getpid(), SIGKILL);
        exit(1);
    }
}
