<?php

declare(strict_types=1);

// Faulty service: /tests/faulty/php/boom throws, /ok answers "ok".

require __DIR__ . '/../../../sdk/php/autoload.php';

use Cumulo\Runner;

final class FaultyException extends RuntimeException
{
}

Runner::run(function ($api) {
    $api->subscribe('boom', function () {
        throw new FaultyException('boom from php');
    });
    $api->subscribe('ok', fn () => 'ok');
});
