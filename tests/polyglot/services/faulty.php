<?php

declare(strict_types=1);

// Faulty service: /tests/faulty/php/boom throws, /ok answers "ok".
// trace_* call the echo service with an empty request_info and answer with
// the request_info it got (test_trace.py, PROTOCOL.md 5.1).

require __DIR__ . '/../../../sdk/php/autoload.php';

use Cumulo\Api;
use Cumulo\Request;
use Cumulo\Runner;

final class FaultyException extends RuntimeException
{
}

const ECHO_NAME = '/echo/trace';

Runner::run(function ($api) {
    $api->subscribe('boom', function () {
        throw new FaultyException('boom from php');
    });
    $api->subscribe('ok', fn () => 'ok');
    $api->subscribe('trace_sync', fn (Request $req, Api $api) => $api->sendSync(ECHO_NAME, '', '')[0]);
    $api->subscribe('trace_async', fn (Request $req, Api $api)
        => $api->recvAsync($api->sendAsync(ECHO_NAME, '', ''))->responseInfo);
    $api->subscribe('trace_mcast', fn (Request $req, Api $api)
        => $api->recvAsync($api->mcastAsync(ECHO_NAME, '', '')[0])->responseInfo);
    $api->subscribe('trace_forward', function (Request $req, Api $api) {
        $api->forward($req, ECHO_NAME, '');
        return null;
    });
});
