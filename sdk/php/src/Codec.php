<?php

declare(strict_types=1);

namespace Cumulo;

/**
 * Frame encoding and decoding (PROTOCOL.md sections 2 and 4).
 *
 * u64 fields are PHP ints holding the same 64 bits: values of 2^63 and more
 * read as negative numbers and are written back unchanged.
 */
final class Codec
{
    public const VERSION = 1;
    public const DEFAULT_MAX_FRAME = 8 * 1024 * 1024;
    public const HEADER_SIZE = 4;
    public const TID_SIZE = 16;

    public const TYPES = [
        'HELLO' => 0x01, 'SUBSCRIBE' => 0x02, 'UNSUBSCRIBE' => 0x03, 'SUBSCRIBE_COUNT' => 0x04,
        'SEND_ASYNC' => 0x10, 'SEND_SYNC' => 0x11, 'MCAST_ASYNC' => 0x12,
        'RETURN' => 0x20, 'FORWARD' => 0x21, 'PING' => 0x30, 'PONG' => 0x31, 'GOODBYE' => 0x32,
        'WELCOME' => 0x81, 'REQUEST' => 0x82, 'RESPONSE' => 0x83, 'REPLY' => 0x84,
        'MCAST_SENT' => 0x85, 'TERMINATE' => 0x86, 'ERROR' => 0x87,
    ];

    private const CONTROL = ['req_id' => 'u32', 'pattern' => 'str'];
    private const SEND = [
        'trans_id' => 'tid', 'timeout' => 'u32', 'priority' => 'i8', 'flags' => 'u8',
        'name' => 'str', 'request_info' => 'bytes', 'request' => 'bytes',
    ];
    private const ANSWER = ['trans_id' => 'tid', 'status' => 'u16', 'response_info' => 'bytes', 'response' => 'bytes'];

    /** Field name => kind, in wire order, for each type. */
    public const LAYOUTS = [
        'HELLO' => ['version' => 'u16', 'window' => 'u32', 'thread_index' => 'u32', 'token' => 'str', 'prefix' => 'str'],
        'SUBSCRIBE' => self::CONTROL, 'UNSUBSCRIBE' => self::CONTROL, 'SUBSCRIBE_COUNT' => self::CONTROL,
        'SEND_ASYNC' => self::SEND, 'SEND_SYNC' => self::SEND, 'MCAST_ASYNC' => self::SEND, 'FORWARD' => self::SEND,
        'RETURN' => self::ANSWER, 'RESPONSE' => self::ANSWER,
        'PING' => ['nonce' => 'u64'], 'PONG' => ['nonce' => 'u64'], 'GOODBYE' => [],
        'WELCOME' => [
            'version' => 'u16', 'node_id' => 'u32', 'instance_id' => 'u32', 'process_index' => 'u32',
            'process_count' => 'u32', 'thread_count' => 'u32', 'window' => 'u32', 'max_frame' => 'u32',
            'timeout_async' => 'u32', 'timeout_sync' => 'u32', 'timeout_terminate' => 'u32',
            'priority_default' => 'i8', 'keepalive' => 'u32', 'prefix' => 'str',
        ],
        'REQUEST' => [
            'trans_id' => 'tid', 'timeout' => 'u32', 'priority' => 'i8', 'flags' => 'u8', 'source' => 'u64',
            'name' => 'str', 'pattern' => 'str', 'request_info' => 'bytes', 'request' => 'bytes',
        ],
        'REPLY' => ['req_id' => 'u32', 'status' => 'u16', 'value' => 'u32', 'message' => 'str'],
        'MCAST_SENT' => ['trans_id' => 'tid', 'trans_ids' => 'tids'],
        'TERMINATE' => ['timeout' => 'u32'],
        'ERROR' => ['status' => 'u16', 'message' => 'str'],
    ];

    /** [pack format, size, smallest, largest] of the fixed-width integers. */
    public const INTEGERS = [
        'u8' => ['C', 1, 0, 0xff],
        'i8' => ['c', 1, -0x80, 0x7f],
        'u16' => ['v', 2, 0, 0xffff],
        'u32' => ['V', 4, 0, 0xffffffff],
        'u64' => ['P', 8, PHP_INT_MIN, PHP_INT_MAX],
    ];

    /** The whole frame, length prefix included. */
    public static function encode(string $type, array $fields = []): string
    {
        if (!isset(self::TYPES[$type])) {
            throw CumuloException::invalidArgument("unknown frame type $type");
        }
        $body = chr(self::TYPES[$type]);
        foreach (self::LAYOUTS[$type] as $name => $kind) {
            if (!array_key_exists($name, $fields)) {
                throw CumuloException::invalidArgument("$type: missing field $name");
            }
            $body .= self::encodeField($name, $kind, $fields[$name]);
        }
        return pack('V', strlen($body)) . $body;
    }

    /** Decodes exactly one whole frame (length prefix included). */
    public static function decode(string $data, int $maxFrame = self::DEFAULT_MAX_FRAME): Frame
    {
        if (strlen($data) < self::HEADER_SIZE) {
            throw CumuloException::malformed('frame shorter than its length field');
        }
        $length = self::frameLength(substr($data, 0, self::HEADER_SIZE), $maxFrame);
        $following = strlen($data) - self::HEADER_SIZE;
        if ($following !== $length) {
            throw CumuloException::malformed("frame length $length but $following bytes follow");
        }
        return self::decodeBody(substr($data, self::HEADER_SIZE));
    }

    /** Validates a 4-byte length field against $maxFrame and returns it. */
    public static function frameLength(string $header, int $maxFrame): int
    {
        $length = unpack('V', $header)[1];
        if ($length === 0) {
            throw CumuloException::malformed('frame length 0 (no type byte)');
        }
        if ($length > $maxFrame) {
            throw CumuloException::tooLarge("frame of $length bytes is over the limit of $maxFrame");
        }
        return $length;
    }

    /** Decodes the type byte and the body, which its layout must consume exactly. */
    public static function decodeBody(string $data): Frame
    {
        if ($data === '') {
            throw CumuloException::malformed('frame has no type byte');
        }
        $type = array_search(ord($data[0]), self::TYPES, true);
        if ($type === false) {
            throw CumuloException::malformed(sprintf('unknown frame type 0x%02x', ord($data[0])));
        }
        $cursor = new Cursor($data, 1);
        $fields = [];
        foreach (self::LAYOUTS[$type] as $name => $kind) {
            $fields[$name] = $cursor->read($kind);
        }
        if ($cursor->remaining() !== 0) {
            throw CumuloException::malformed("$type: {$cursor->remaining()} trailing bytes");
        }
        return new Frame($type, $fields);
    }

    private static function encodeField(string $name, string $kind, mixed $value): string
    {
        switch ($kind) {
            case 'tid':
                return self::tid($name, $value);
            case 'str':
                $text = (string) $value;
                if (preg_match('//u', $text) !== 1) {
                    throw CumuloException::invalidArgument("$name: not valid UTF-8");
                }
                if (strlen($text) > 0xffff) {
                    throw CumuloException::invalidArgument("$name: " . strlen($text) . ' bytes is over 65535');
                }
                return pack('v', strlen($text)) . $text;
            case 'bytes':
                $raw = (string) $value;
                if (strlen($raw) > 0xffffffff) {
                    throw CumuloException::tooLarge("$name: " . strlen($raw) . ' bytes');
                }
                return pack('V', strlen($raw)) . $raw;
            case 'tids':
                return pack('V', count($value)) . implode('', array_map(fn ($tid) => self::tid($name, $tid), $value));
            default:
                [$format, , $min, $max] = self::INTEGERS[$kind];
                if (!is_int($value) || $value < $min || $value > $max) {
                    throw CumuloException::invalidArgument("$name: " . var_export($value, true) . " is not a $kind");
                }
                return pack($format, $value);
        }
    }

    private static function tid(string $name, mixed $value): string
    {
        if (!is_string($value) || strlen($value) !== self::TID_SIZE) {
            throw CumuloException::invalidArgument("$name: a trans_id is 16 bytes");
        }
        return $value;
    }
}
