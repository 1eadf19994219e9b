<?php

declare(strict_types=1);

namespace Cumulo;

/**
 * One stream to the core: writes frames and reads whole frames with a
 * deadline, buffering partial ones between calls.
 *
 * @internal used by Api
 */
final class Connection
{
    private const READ_CHUNK = 65536;
    private const CONNECT_TIMEOUT = 10;

    /** @var resource|null */
    private $stream;
    private string $buffer = '';

    /** $address: a Unix socket path or "tcp://host:port". */
    public function __construct(string $address)
    {
        if ($address === '') {
            throw CumuloException::invalidArgument('no socket given (CUMULO_SOCKET is not set)');
        }
        $target = str_starts_with($address, 'tcp://') ? $address : 'unix://' . $address;
        $stream = @stream_socket_client($target, $errno, $error, self::CONNECT_TIMEOUT);
        if ($stream === false) {
            throw new ConnectionClosedException("cannot connect to $address: $error");
        }
        // Unbuffered and non-blocking, so stream_select sees every byte not yet read.
        stream_set_read_buffer($stream, 0);
        stream_set_blocking($stream, false);
        $this->stream = $stream;
    }

    /** @return resource */
    public function stream()
    {
        return $this->stream ?? throw new ConnectionClosedException('connection closed');
    }

    public function writeFrame(string $type, array $fields, int $maxFrame): void
    {
        $frame = Codec::encode($type, $fields);
        $length = strlen($frame) - Codec::HEADER_SIZE;
        if ($length > $maxFrame) {
            throw CumuloException::tooLarge("$type frame of $length bytes is over the limit of $maxFrame");
        }
        $stream = $this->stream();
        for ($offset = 0; $offset < strlen($frame); $offset += $written) {
            $written = @fwrite($stream, substr($frame, $offset, self::READ_CHUNK * 16));
            if ($written === false) {
                $this->close();
                throw new ConnectionClosedException('connection to the core lost while writing');
            }
            if ($written === 0) {
                $read = $except = null;
                $write = [$stream];
                @stream_select($read, $write, $except, 1);
            }
        }
    }

    /**
     * The next frame, or null once $deadline (hrtime seconds, null for none)
     * passes. A length over $maxFrame throws TOO_LARGE before the body is read.
     */
    public function readFrame(?float $deadline, int $maxFrame): ?Frame
    {
        while (true) {
            if (strlen($this->buffer) >= Codec::HEADER_SIZE) {
                $length = Codec::frameLength(substr($this->buffer, 0, Codec::HEADER_SIZE), $maxFrame);
                if (strlen($this->buffer) >= Codec::HEADER_SIZE + $length) {
                    $body = substr($this->buffer, Codec::HEADER_SIZE, $length);
                    $this->buffer = substr($this->buffer, Codec::HEADER_SIZE + $length);
                    return Codec::decodeBody($body);
                }
            }
            if (!$this->fill($deadline)) {
                return null;
            }
        }
    }

    public function close(): void
    {
        if ($this->stream !== null) {
            fclose($this->stream);
            $this->stream = null;
        }
    }

    public function isClosed(): bool
    {
        return $this->stream === null;
    }

    public static function now(): float
    {
        return hrtime(true) / 1e9;
    }

    /** Reads what is available; false when the deadline passed first. */
    private function fill(?float $deadline): bool
    {
        $stream = $this->stream();
        while (true) {
            $chunk = @fread($stream, self::READ_CHUNK);
            if ($chunk !== false && $chunk !== '') {
                $this->buffer .= $chunk;
                return true;
            }
            if ($chunk === false || feof($stream)) {
                $this->close();
                throw new ConnectionClosedException('the core closed the connection');
            }
            $wait = $deadline === null ? null : $deadline - self::now();
            if ($wait !== null && $wait <= 0) {
                return false;
            }
            $read = [$stream];
            $write = $except = null;
            $seconds = $wait === null ? null : (int) $wait;
            $micros = $wait === null ? null : (int) (($wait - (int) $wait) * 1e6);
            if (@stream_select($read, $write, $except, $seconds, $micros) === 0) {
                return false;
            }
        }
    }
}
