<?php

declare(strict_types=1);

namespace Cumulo;

/** The connection to the core ended (status SHUTTING_DOWN). */
final class ConnectionClosedException extends CumuloException
{
    public function __construct(string $message)
    {
        parent::__construct($message, Status::SHUTTING_DOWN);
    }
}
