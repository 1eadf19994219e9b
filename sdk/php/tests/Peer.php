<?php

declare(strict_types=1);

namespace Cumulo\Tests;

use Cumulo\Codec;
use Cumulo\Frame;

/** One connection accepted by the fake core, seen from the core's side. */
final class Peer
{
    private const READ_TIMEOUT = 5;

    /** @param resource $socket */
    public function __construct(private $socket)
    {
        stream_set_timeout($socket, self::READ_TIMEOUT);
    }

    public function send(string $type, array $fields = []): void
    {
        $this->writeRaw(Codec::encode($type, $fields));
    }

    public function writeRaw(string $bytes): void
    {
        fwrite($this->socket, $bytes);
        fflush($this->socket);
    }

    public function readFrame(): Frame
    {
        $header = $this->readExactly(4);
        return Codec::decode($header . $this->readExactly(unpack('V', $header)[1]));
    }

    /** The fields of the next frame, which must be of $type. */
    public function expect(string $type): array
    {
        $frame = $this->readFrame();
        if ($frame->type !== $type) {
            throw new \RuntimeException("expected $type, got {$frame->type} " . json_encode(array_map('bin2hex', array_filter($frame->fields, 'is_string'))));
        }
        return $frame->fields;
    }

    /** Answers a control request with REPLY. */
    public function reply(string $type, string $pattern, int $status = 0, int $value = 0, string $message = ''): void
    {
        $fields = $this->expect($type);
        if ($fields['pattern'] !== $pattern) {
            throw new \RuntimeException("$type of {$fields['pattern']}, expected $pattern");
        }
        $this->send('REPLY', ['req_id' => $fields['req_id'], 'status' => $status, 'value' => $value, 'message' => $message]);
    }

    /** True when the instance said GOODBYE (or nothing) and closed its end. */
    public function closedByInstance(): bool
    {
        try {
            while ($this->readFrame()->type === 'GOODBYE') {
                // keep reading until the end of the stream
            }
            return false;
        } catch (PeerClosed) {
            return true;
        }
    }

    public function close(): void
    {
        fclose($this->socket);
    }

    private function readExactly(int $count): string
    {
        $data = '';
        while (strlen($data) < $count) {
            $chunk = fread($this->socket, $count - strlen($data));
            if ($chunk === false || $chunk === '') {
                if (stream_get_meta_data($this->socket)['timed_out']) {
                    throw new \RuntimeException('fake core: read timed out');
                }
                if (feof($this->socket)) {
                    throw new PeerClosed('instance closed the connection');
                }
                continue;
            }
            $data .= $chunk;
        }
        return $data;
    }
}

/** The instance closed its end of the connection. */
final class PeerClosed extends \RuntimeException
{
}
