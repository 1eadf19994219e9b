<?php

declare(strict_types=1);

namespace Cumulo;

/** Status codes of PROTOCOL.md section 2.3. */
final class Status
{
    public const OK = 0;
    public const TIMEOUT = 1;
    public const NO_SERVICE = 2;
    public const QUEUE_FULL = 3;
    public const CRASHED = 4;
    public const MALFORMED = 5;
    public const SHUTTING_DOWN = 6;
    public const SERVICE_ERROR = 7;
    public const TOO_LARGE = 8;
    public const INVALID_ARGUMENT = 9;
    public const UNSUPPORTED_VERSION = 10;
    public const UNAUTHORIZED = 11;
    public const PROTOCOL = 12;
    public const UNAVAILABLE = 13;

    /** "TIMEOUT" for 1; codes a newer core may send are named "STATUS_<n>". */
    public static function name(int $status): string
    {
        $names = array_flip((new \ReflectionClass(self::class))->getConstants());
        return $names[$status] ?? "STATUS_$status";
    }
}
