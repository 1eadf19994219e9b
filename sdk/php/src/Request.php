<?php

declare(strict_types=1);

namespace Cumulo;

/** A REQUEST delivered to a handler. */
final class Request
{
    public const SYNC = 0x01;
    public const MCAST = 0x02;

    private bool $forwarded = false;

    public function __construct(
        public readonly string $transId,
        public readonly int $timeout,
        public readonly int $priority,
        public readonly int $flags,
        public readonly int $source,
        public readonly string $name,
        public readonly string $pattern,
        public readonly string $requestInfo,
        public readonly string $request,
    ) {
    }

    public static function fromFields(array $f): self
    {
        return new self(
            $f['trans_id'], $f['timeout'], $f['priority'], $f['flags'], $f['source'],
            $f['name'], $f['pattern'], $f['request_info'], $f['request'],
        );
    }

    /** Sent with send_sync. */
    public function isSync(): bool
    {
        return ($this->flags & self::SYNC) !== 0;
    }

    /** A multicast copy. */
    public function isMcast(): bool
    {
        return ($this->flags & self::MCAST) !== 0;
    }

    /** request_info parsed as key/value pairs. */
    public function info(): array
    {
        return Info::parse($this->requestInfo);
    }

    public function isForwarded(): bool
    {
        return $this->forwarded;
    }

    /** @internal set by Api::forward */
    public function markForwarded(): void
    {
        $this->forwarded = true;
    }
}
