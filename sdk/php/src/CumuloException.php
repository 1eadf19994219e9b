<?php

declare(strict_types=1);

namespace Cumulo;

/**
 * Every failure the SDK reports: getCode() is the protocol status code
 * (Status::TIMEOUT, ...), getMessage() the core's text.
 */
class CumuloException extends \RuntimeException
{
    public function __construct(
        string $message,
        int $status,
        private readonly ?string $transId = null,
    ) {
        parent::__construct($message === '' ? Status::name($status) : $message, $status);
    }

    public function status(): int
    {
        return $this->getCode();
    }

    public function statusName(): string
    {
        return Status::name($this->getCode());
    }

    /** The trans_id of the request the error answers, if any. */
    public function transId(): ?string
    {
        return $this->transId;
    }

    public static function malformed(string $message): self
    {
        return new self($message, Status::MALFORMED);
    }

    public static function tooLarge(string $message): self
    {
        return new self($message, Status::TOO_LARGE);
    }

    public static function invalidArgument(string $message): self
    {
        return new self($message, Status::INVALID_ARGUMENT);
    }
}
