<?php

declare(strict_types=1);

// {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
// answers "hello from {{name}}", with the request's "value" parameter when it
// has one.

require '{{sdk}}/php/autoload.php';

use Cumulo\CumuloException;
use Cumulo\Info;
use Cumulo\Request;
use Cumulo\Runner;

function answer(string $body): string
{
    try {
        $value = Info::lookup($body, 'value');
    } catch (CumuloException) {
        $value = null; // malformed key/value bytes: as if there were no value
    }
    return $value === null ? 'hello from {{name}}' : "hello from {{name}} (value $value)";
}

Runner::run(function ($api) {
    $api->subscribe('{{name}}/get', fn (Request $req) => [['content-type' => 'text/plain; charset=utf-8'], answer($req->request)]);
});
