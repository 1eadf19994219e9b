<?php

declare(strict_types=1);

namespace Cumulo;

/** A successful RESPONSE collected with Api::recvAsync. */
final class Response
{
    public function __construct(
        public readonly string $transId,
        public readonly string $responseInfo,
        public readonly string $response,
    ) {
    }
}
