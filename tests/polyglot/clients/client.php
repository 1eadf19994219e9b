<?php

declare(strict_types=1);

// Unmanaged client: php client.php SOCKET NAME HEX_BODY [sync|async]
// Prints the hex response_info, a newline and the response body; on an error
// status prints its name, a newline and the message, and exits 3.

require __DIR__ . '/../../../sdk/php/autoload.php';

use Cumulo\Api;
use Cumulo\ConnectionClosedException;
use Cumulo\CumuloException;

[, $socket, $name, $bodyHex] = $argv;
$async = ($argv[4] ?? 'sync') === 'async';
$body = hex2bin($bodyHex);
$api = new Api(socket: $socket, prefix: '/client/php/');
$exitCode = 0;
try {
    if ($async) {
        $r = $api->recvAsync($api->sendAsync($name, $body));
        [$info, $response] = [$r->responseInfo, $r->response];
    } else {
        [$info, $response] = $api->sendSync($name, $body);
    }
    fwrite(STDOUT, bin2hex($info) . "\n" . $response);
} catch (ConnectionClosedException $e) {
    throw $e;
} catch (CumuloException $e) {
    fwrite(STDOUT, $e->statusName() . "\n" . $e->getMessage());
    $exitCode = 3;
} finally {
    $api->close();
}
exit($exitCode);
