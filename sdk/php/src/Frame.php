<?php

declare(strict_types=1);

namespace Cumulo;

/**
 * One decoded frame: its type name ("SEND_ASYNC", ...) and its fields named
 * as in PROTOCOL.md section 4 (tid and bytes fields are binary strings).
 */
final class Frame
{
    /** @param array<string, mixed> $fields */
    public function __construct(
        public readonly string $type,
        public readonly array $fields,
    ) {
    }
}
