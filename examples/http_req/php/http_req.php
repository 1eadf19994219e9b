<?php

declare(strict_types=1);

// The http_req example service (docs/SDK_GUIDE.md): answers php.xml/get with
// the integer found under the key "value" of the key/value request body.

require __DIR__ . '/../../../sdk/php/autoload.php';

use Cumulo\CumuloException;
use Cumulo\Info;
use Cumulo\Request;
use Cumulo\Runner;

const RESPONSE_INFO = ['content-type' => 'text/xml; charset=utf-8'];

/** The decimal form of $text if it is an integer that fits in 64 bits (signed), else null. */
function int64_text(?string $text): ?string
{
    if ($text === null || preg_match('/\A([+-]?)([0-9]+)\z/', $text, $match) !== 1) {
        return null;
    }
    $negative = $match[1] === '-';
    $digits = ltrim($match[2], '0');
    $limit = $negative ? '9223372036854775808' : '9223372036854775807';
    if (strlen($digits) > strlen($limit) || (strlen($digits) === strlen($limit) && strcmp($digits, $limit) > 0)) {
        return null;
    }
    if ($digits === '') {
        return '0';
    }
    return $negative ? "-$digits" : $digits;
}

function http_req_answer(string $body): string
{
    try {
        $number = int64_text(Info::lookup($body, 'value'));
    } catch (CumuloException) {
        $number = null; // malformed key/value bytes
    }
    return $number === null
        ? '<http_test><error>no value specified</error></http_test>'
        : "<http_test><value>$number</value></http_test>";
}

// HTTP_REQ_WINDOW: requests the core may deliver at once (default 1); with
// more, one read brings several, answered in turn without a round trip each.
// Anything but a positive integer stops the process.
$window = getenv('HTTP_REQ_WINDOW');
if ($window === false || $window === '') {
    $window = '1';
}
if (!preg_match('/\A[0-9]+\z/', $window) || (float) $window < 1 || (float) $window > 4294967295) {
    fwrite(STDERR, "http_req: HTTP_REQ_WINDOW='$window' is not a positive integer\n");
    exit(2);
}
Runner::run(function ($api) {
    $api->subscribe('php.xml/get', fn (Request $req) => [RESPONSE_INFO, http_req_answer($req->request)]);
}, null, ['window' => (int) $window]);
