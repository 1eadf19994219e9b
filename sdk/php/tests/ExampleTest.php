<?php

declare(strict_types=1);

namespace Cumulo\Tests;

use PHPUnit\Framework\TestCase;

/** Runs examples/http_req/php as a real managed process against the fake core. */
final class ExampleTest extends TestCase
{
    private const EXAMPLE = __DIR__ . '/../../../examples/http_req/php/http_req.php';
    private const XML_INFO = "content-type\0text/xml; charset=utf-8\0";
    private const NO_VALUE = '<http_test><error>no value specified</error></http_test>';

    private static function cases(): array
    {
        return [
            "value\0" . "42\0" => '<http_test><value>42</value></http_test>',
            "value\0+007\0" => '<http_test><value>7</value></http_test>',
            "value\0-3\0" => '<http_test><value>-3</value></http_test>',
            "value\0-0\0" => '<http_test><value>0</value></http_test>',
            "a\0b\0value\0-9223372036854775808\0" => '<http_test><value>-9223372036854775808</value></http_test>',
            "value\0" . "9223372036854775807\0" => '<http_test><value>9223372036854775807</value></http_test>',
            "value\0" . "9223372036854775808\0" => self::NO_VALUE,
            "value\0" . "4x\0" => self::NO_VALUE,
            "value\0\0" => self::NO_VALUE,
            "other\0" . "1\0" => self::NO_VALUE,
            "value\0" . "42" => self::NO_VALUE,
            '' => self::NO_VALUE,
        ];
    }

    public function testHttpReqExampleAnswersOnEveryInstance(): void
    {
        $bodies = array_keys(self::cases());
        $core = new FakeCore(function (FakeCore $c) use ($bodies) {
            $peers = [];
            $hellos = [];
            for ($i = 0; $i < 2; $i++) {
                [$peers[], $hellos[]] = $c->acceptInstance(['prefix' => '/tests/http_req/']);
                end($peers)->reply('SUBSCRIBE', 'php.xml/get');
            }
            $answers = [];
            foreach ($bodies as $index => $body) {
                $peer = $peers[$index % 2];
                $peer->send('REQUEST', [
                    'trans_id' => pack('JNN', $index + 1, 3, 9), 'timeout' => 1000, 'priority' => 0, 'flags' => 1,
                    'source' => 0, 'name' => '/tests/http_req/php.xml/get', 'pattern' => '/tests/http_req/php.xml/get',
                    'request_info' => '', 'request' => (string) $body,
                ]);
                $return = $peer->expect('RETURN');
                $answers[] = [$return['status'], $return['response_info'], $return['response']];
            }
            foreach ($peers as $peer) {
                $peer->send('TERMINATE', ['timeout' => 100]);
            }
            return [array_column($hellos, 'token'), $answers];
        });
        $env = ['CUMULO_SOCKET' => $core->path, 'CUMULO_TOKEN' => 'token', 'CUMULO_THREAD_COUNT' => '2'];
        $process = proc_open([PHP_BINARY, self::EXAMPLE], [], $pipes, null, $env);
        try {
            [$tokens, $answers] = $core->join();
        } finally {
            $exitCode = self::waitFor($process);
        }

        $this->assertSame(0, $exitCode, 'the example exits cleanly after TERMINATE');
        $this->assertSame(['token', 'token'], $tokens);
        $expected = array_map(fn ($xml) => [0, self::XML_INFO, $xml], array_values(self::cases()));
        $this->assertSame($expected, $answers);
    }

    /** The exit code, killing the process if it has not ended within 5 s. */
    private static function waitFor($process): int
    {
        // Only the first proc_get_status() after the exit reports the exit code.
        for ($tries = 0; ($status = proc_get_status($process))['running'] && $tries < 50; $tries++) {
            usleep(100000);
        }
        if ($status['running']) {
            proc_terminate($process, 9);
            proc_close($process);
            return -1;
        }
        proc_close($process);
        return $status['exitcode'];
    }
}
