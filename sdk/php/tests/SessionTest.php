<?php

declare(strict_types=1);

namespace Cumulo\Tests;

use Cumulo\Api;
use Cumulo\ConnectionClosedException;
use Cumulo\CumuloException;
use Cumulo\Request;
use Cumulo\Response;
use Cumulo\Runner;
use Cumulo\Status;
use PHPUnit\Framework\TestCase;

/** The session logic against a fake core over a real Unix socket. */
final class SessionTest extends TestCase
{
    private const TID_A = "\x18z+\x1b@\xfd\xcd\x15\0\0\0\x03\0\0\0\x01";
    private const TID_B = "\x18z+\x1b@\xfd\xcd\x16\0\0\0\x03\0\0\0\x01";

    private static function requestFields(string $transId, string $pattern = '/t/echo', string $request = 'hi', string $info = ''): array
    {
        return [
            'trans_id' => $transId, 'timeout' => 500, 'priority' => 0, 'flags' => 1, 'source' => (3 << 32) | 1,
            'name' => $pattern, 'pattern' => $pattern, 'request_info' => $info, 'request' => $request,
        ];
    }

    private static function connect(FakeCore $core): Api
    {
        return new Api(0, socket: $core->path, prefix: '/t/');
    }

    private function assertStatus(int $status, callable $call): CumuloException
    {
        try {
            $call();
        } catch (CumuloException $e) {
            $this->assertSame($status, $e->getCode(), $e->getMessage());
            return $e;
        }
        $this->fail('expected status ' . Status::name($status));
    }

    public function testHandshakeSendsHelloAndExposesWelcome(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer, $hello] = $c->acceptInstance();
            return [$hello, $peer->expect('SEND_ASYNC')['trans_id'], $peer->expect('SEND_ASYNC')['trans_id']];
        });
        $api = new Api(2, socket: $core->path, prefix: '/t/', window: 4);
        $first = $api->sendAsync('/x', '1');
        $second = $api->sendAsync('/x', '2');
        [$hello, $sentFirst, $sentSecond] = $core->join();

        $this->assertSame(['version' => 1, 'window' => 4, 'thread_index' => 2, 'token' => '', 'prefix' => '/t/'], $hello);
        $this->assertSame([3, 9, 1, 2, 4], [$api->nodeId(), $api->instanceId(), $api->processIndex(),
            $api->processCount(), $api->threadCount()]);
        $this->assertSame([700, 800, 900, -2, '/t/'], [$api->timeoutAsync(), $api->timeoutSync(),
            $api->timeoutTerminate(), $api->priorityDefault(), $api->prefix()]);
        $this->assertSame([$first, $second], [$sentFirst, $sentSecond]);
        $this->assertSame(pack('NN', 3, 9), substr($first, 8));
        $this->assertGreaterThan(0, strcmp($second, $first));
        $this->assertEqualsWithDelta(microtime(true), unpack('J', $first)[1] / 1e9, 5.0);
    }

    public function testManagedHelloSendsTheTokenAndNoPrefix(): void
    {
        $core = new FakeCore(fn (FakeCore $c) => $c->acceptInstance()[1]);
        new Api(1, socket: $core->path, token: 'c0ffee', prefix: '/ignored/');
        $hello = $core->join();
        $this->assertSame(['c0ffee', ''], [$hello['token'], $hello['prefix']]);
    }

    public function testErrorInsteadOfWelcomeThrowsItsStatus(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            $peer = $c->accept();
            $peer->expect('HELLO');
            $peer->send('ERROR', ['status' => Status::UNAUTHORIZED, 'message' => 'unknown token']);
        });
        $error = $this->assertStatus(Status::UNAUTHORIZED, fn () => new Api(0, socket: $core->path, token: 'bad'));
        $core->join();
        $this->assertSame('unknown token', $error->getMessage());
    }

    public function testUnmanagedInstanceNeedsAPrefixAndASocket(): void
    {
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => new Api(0, socket: '/nonexistent', token: ''));
        $this->expectException(ConnectionClosedException::class);
        new Api(0, socket: '/nonexistent/sock', token: '', prefix: '/t/');
    }

    public function testSubscribeUnsubscribeAndCountUseReplies(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->reply('SUBSCRIBE', 'a/*');
            $peer->reply('SUBSCRIBE_COUNT', 'a/*', value: 2);
            $peer->reply('UNSUBSCRIBE', 'zz', status: 9, message: 'not subscribed');
        });
        $api = self::connect($core);
        $api->subscribe('a/*', fn () => 'x');
        $this->assertSame(2, $api->subscribeCount('a/*'));
        $error = $this->assertStatus(Status::INVALID_ARGUMENT, fn () => $api->unsubscribe('zz'));
        $core->join();
        $this->assertSame('not subscribed', $error->getMessage());
    }

    public function testRequestIsHandledAndReturnedThenTerminateEndsPoll(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->reply('SUBSCRIBE', 'echo');
            $peer->send('REQUEST', self::requestFields(self::TID_A, info: "a\0" . "1\0"));
            $returned = $peer->expect('RETURN');
            $peer->send('TERMINATE', ['timeout' => 100]);
            return $returned;
        });
        $api = self::connect($core);
        $seen = null;
        $api->subscribe('echo', function (Request $req) use (&$seen) {
            $seen = $req;
            return [['content-type' => 'text/plain'], "echo: {$req->request}"];
        });
        $this->assertFalse($api->poll());
        $returned = $core->join();

        $this->assertTrue($api->isTerminated());
        $this->assertSame(['trans_id' => self::TID_A, 'status' => 0, 'response_info' => "content-type\0text/plain\0",
            'response' => 'echo: hi'], $returned);
        $this->assertTrue($seen->isSync());
        $this->assertFalse($seen->isMcast());
        $this->assertSame([['a', '1']], $seen->info());
        $this->assertSame((3 << 32) | 1, $seen->source);
    }

    public function testSendSyncAnswersPingAndKeepsOtherFramesMeanwhile(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->reply('SUBSCRIBE', 'echo');
            $asyncTid = $peer->expect('SEND_ASYNC')['trans_id'];
            $sync = $peer->expect('SEND_SYNC');
            $peer->send('PING', ['nonce' => 77]);
            $pong = $peer->expect('PONG'); // answered before the sync answer exists
            $peer->send('REQUEST', self::requestFields(self::TID_B));
            $peer->send('RESPONSE', ['trans_id' => $asyncTid, 'status' => 0, 'response_info' => '', 'response' => 'async answer']);
            $peer->send('RESPONSE', ['trans_id' => $sync['trans_id'], 'status' => 0, 'response_info' => "k\0v\0",
                'response' => 'sync answer']);
            $queuedReturn = $peer->expect('RETURN');
            $peer->closedByInstance();
            return [$sync, $pong, $queuedReturn];
        });
        $api = self::connect($core);
        $api->subscribe('echo', fn (Request $req) => "handled {$req->request}");
        $asyncTid = $api->sendAsync('/other', 'a');
        $answer = $api->sendSync('/t/peer', 'question', requestInfo: ['q' => '1'], timeout: 3000);
        $this->assertSame(["k\0v\0", 'sync answer'], $answer);
        $this->assertEquals(new Response($asyncTid, '', 'async answer'), $api->recvAsync($asyncTid));
        $this->assertTrue($api->poll(100), 'poll returns true on timeout after serving the queued request');
        $api->close();
        [$sync, $pong, $queuedReturn] = $core->join();

        $this->assertSame(['nonce' => 77], $pong);
        $this->assertSame([3000, -2, 0, '/t/peer', "q\0" . "1\0", 'question'], [$sync['timeout'], $sync['priority'],
            $sync['flags'], $sync['name'], $sync['request_info'], $sync['request']]);
        $this->assertSame([self::TID_B, 0, 'handled hi'], [$queuedReturn['trans_id'], $queuedReturn['status'],
            $queuedReturn['response']]);
    }

    public function testSendSyncErrorStatusThrowsWithCodeAndMessage(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $tid = $peer->expect('SEND_SYNC')['trans_id'];
            $peer->send('RESPONSE', ['trans_id' => $tid, 'status' => 2, 'response_info' => '', 'response' => 'no service /nowhere']);
        });
        $api = self::connect($core);
        $error = $this->assertStatus(Status::NO_SERVICE, fn () => $api->sendSync('/nowhere', ''));
        $core->join();
        $this->assertSame(['NO_SERVICE', 'no service /nowhere'], [$error->statusName(), $error->getMessage()]);
    }

    public function testHandlerExceptionReturnsServiceErrorAndKeepsServing(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->reply('SUBSCRIBE', 'echo');
            $peer->send('REQUEST', self::requestFields(self::TID_A, request: 'boom'));
            $failed = $peer->expect('RETURN');
            $peer->send('REQUEST', self::requestFields(self::TID_B, request: 'fine'));
            $served = $peer->expect('RETURN');
            $peer->send('TERMINATE', ['timeout' => 100]);
            return [$failed, $served];
        });
        $api = self::connect($core);
        $api->subscribe('echo', function (Request $req) {
            if ($req->request === 'boom') {
                throw new \InvalidArgumentException('bad input');
            }
            return "ok {$req->request}";
        });
        $this->assertFalse($api->poll(5000));
        [$failed, $served] = $core->join();

        $this->assertSame([self::TID_A, 7, 'InvalidArgumentException: bad input'],
            [$failed['trans_id'], $failed['status'], $failed['response']]);
        $this->assertSame([self::TID_B, 0, 'ok fine'], [$served['trans_id'], $served['status'], $served['response']]);
    }

    public function testForwardedRequestGetsNoReturn(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->reply('SUBSCRIBE', 'route');
            $peer->send('REQUEST', self::requestFields(self::TID_A, '/t/route'));
            $forwarded = $peer->expect('FORWARD');
            $peer->send('REQUEST', self::requestFields(self::TID_B, '/t/route', 'keep'));
            $next = $peer->expect('RETURN');
            $peer->send('TERMINATE', ['timeout' => 100]);
            return [$forwarded, $next];
        });
        $api = self::connect($core);
        $api->subscribe('route', function (Request $req, Api $api) {
            if ($req->request === 'keep') {
                return 'kept';
            }
            $api->forward($req, '/elsewhere', request: 'changed');
            return 'ignored';
        });
        $this->assertFalse($api->poll(5000));
        [$forwarded, $next] = $core->join();

        $this->assertSame([self::TID_A, '/elsewhere', 'changed', 500, 0], [$forwarded['trans_id'], $forwarded['name'],
            $forwarded['request'], $forwarded['timeout'], $forwarded['priority']]);
        $this->assertSame([self::TID_B, 'kept'], [$next['trans_id'], $next['response']]);
    }

    private const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    private const TRACE = "traceparent\0" . self::PARENT . "\0tracestate\0congo=t61rcWkgMzE\0";

    /** PROTOCOL.md 5.1: a handler's calls carry its request's traceparent and tracestate. */
    public function testHandlerCallsInheritTheTraceContext(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->reply('SUBSCRIBE', 'echo');
            $peer->send('REQUEST', self::requestFields(self::TID_A, request: 'calls', info: "a\0b\0" . self::TRACE));
            $sent = [$peer->expect('SEND_SYNC')];
            $peer->send('RESPONSE', ['trans_id' => $sent[0]['trans_id'], 'status' => 0, 'response_info' => '',
                'response' => 'answer']);
            $sent[] = $peer->expect('SEND_ASYNC');
            $sent[] = $mcast = $peer->expect('MCAST_ASYNC');
            $peer->send('MCAST_SENT', ['trans_id' => $mcast['trans_id'], 'trans_ids' => []]);
            $sent[] = $peer->expect('SEND_ASYNC');
            $peer->expect('RETURN');
            $peer->send('REQUEST', self::requestFields(self::TID_B, request: 'forward',
                info: "traceparent\0" . self::PARENT . "\0"));
            $sent[] = $peer->expect('FORWARD');
            $peer->send('REQUEST', self::requestFields(self::TID_A, request: 'fail', info: self::TRACE));
            $sent[] = $peer->expect('SEND_ASYNC');
            $peer->expect('RETURN');
            $peer->send('TERMINATE', ['timeout' => 100]);
            $sent[] = $peer->expect('SEND_ASYNC'); // after poll returned: outside any handler
            return array_map(fn (array $f) => [$f['name'], $f['request_info']], $sent);
        });
        $api = self::connect($core);
        $api->subscribe('echo', function (Request $req, Api $api) {
            if ($req->request === 'forward') {
                $api->forward($req, '/fwd', ['k' => 'v']);
                return null;
            }
            if ($req->request === 'fail') {
                $api->sendAsync('/failing', '');
                throw new \RuntimeException('after sending');
            }
            $api->sendSync('/sync', '', "k\0v\0");
            $api->sendAsync('/async', '');
            $api->mcastAsync('/mcast/*', '');
            $api->sendAsync('/own', '', [['traceparent', 'own']]);
            return 'done';
        });
        $this->assertFalse($api->poll(5000));
        $api->sendAsync('/outside', '', "x\0y\0");
        $this->assertSame([
            ['/sync', "k\0v\0" . self::TRACE], ['/async', self::TRACE], ['/mcast/*', self::TRACE],
            ['/own', "traceparent\0own\0"], ['/fwd', "k\0v\0traceparent\0" . self::PARENT . "\0"],
            ['/failing', self::TRACE], ['/outside', "x\0y\0"],
        ], $core->join());
    }

    public function testRequestsWithoutTraceparentAddNothing(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->reply('SUBSCRIBE', 'echo');
            $sent = [];
            // No info; "traceparent" only as a value; tracestate alone.
            foreach (['', "x\0traceparent\0", "tracestate\0a=b\0"] as $info) {
                $peer->send('REQUEST', self::requestFields(self::TID_A, info: $info));
                $sent[] = $peer->expect('SEND_ASYNC')['request_info'];
                $peer->expect('RETURN');
            }
            $peer->send('TERMINATE', ['timeout' => 100]);
            return $sent;
        });
        $api = self::connect($core);
        $api->subscribe('echo', function (Request $req, Api $api) {
            $api->sendAsync('/call', '', "k\0v\0");
            return 'ok';
        });
        $this->assertFalse($api->poll(5000));
        $this->assertSame(["k\0v\0", "k\0v\0", "k\0v\0"], $core->join());
    }

    public function testMcastAsyncReturnsCopiesAndRecvAsyncCollectsThem(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $tid = $peer->expect('MCAST_ASYNC')['trans_id'];
            $peer->send('MCAST_SENT', ['trans_id' => $tid, 'trans_ids' => [self::TID_A, self::TID_B]]);
            $peer->send('RESPONSE', ['trans_id' => self::TID_A, 'status' => 0, 'response_info' => '', 'response' => 'one']);
            $peer->send('RESPONSE', ['trans_id' => self::TID_B, 'status' => 4, 'response_info' => '', 'response' => 'instance died']);
        });
        $api = self::connect($core);
        $this->assertSame([self::TID_A, self::TID_B], $api->mcastAsync('/t/*', 'all'));
        $this->assertSame('one', $api->recvAsync()->response);
        $error = $this->assertStatus(Status::CRASHED, fn () => $api->recvAsync(null, 2000));
        $core->join();
        $this->assertSame(self::TID_B, $error->transId());
    }

    public function testRecvAsyncTimesOutWhenNothingArrives(): void
    {
        $core = new FakeCore(fn (FakeCore $c) => $c->acceptInstance()[0]->closedByInstance());
        $api = self::connect($core);
        $started = microtime(true);
        $this->assertStatus(Status::TIMEOUT, fn () => $api->recvAsync(self::TID_A, 10));
        $this->assertLessThan(3, microtime(true) - $started);
        $api->close();
        $this->assertTrue($core->join());
    }

    public function testOversizedFrameFromTheCoreIsRefused(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->writeRaw(pack('VC', 10000000, 0x82)); // header only: the body must not be awaited
            usleep(200000);
        });
        $api = self::connect($core);
        $error = $this->assertStatus(Status::TOO_LARGE, fn () => $api->poll(5000));
        $core->join();
        $this->assertStringContainsString('10000000', $error->getMessage());
    }

    public function testOversizedFrameIsNotSent(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance(); // max_frame 1024
            return $peer->expect('SEND_ASYNC')['request'];
        });
        $api = self::connect($core);
        $this->assertStatus(Status::TOO_LARGE, fn () => $api->sendAsync('/x', str_repeat('x', 2000)));
        $api->sendAsync('/x', 'small');
        $this->assertSame('small', $core->join());
    }

    public function testMalformedFrameFromTheCoreThrows(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->writeRaw("\x05\0\0\0\x30\x01\0\0\0"); // PING with a 4-byte nonce
            usleep(200000);
        });
        $api = self::connect($core);
        $this->assertStatus(Status::MALFORMED, fn () => $api->poll(5000));
        $core->join();
    }

    public function testClosedConnectionThrowsConnectionClosed(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            [$peer] = $c->acceptInstance();
            $peer->close();
        });
        $api = self::connect($core);
        $this->expectException(ConnectionClosedException::class);
        try {
            $api->poll(5000);
        } finally {
            $core->join();
        }
    }

    public function testRunnerServesOneInstancePerThreadCount(): void
    {
        $core = new FakeCore(function (FakeCore $c) {
            $peers = [];
            $hellos = [];
            for ($i = 0; $i < 2; $i++) {
                [$peers[], $hellos[]] = $c->acceptInstance();
                end($peers)->reply('SUBSCRIBE', 'work');
            }
            $returns = [];
            foreach ([1, 0] as $index) { // the second instance first: both must be served
                $peers[$index]->send('REQUEST', self::requestFields(self::TID_A, '/t/work', "to $index"));
                $returns[] = $peers[$index]->expect('RETURN')['response'];
            }
            foreach ($peers as $peer) {
                $peer->send('TERMINATE', ['timeout' => 100]);
            }
            $closed = array_map(fn (Peer $peer) => $peer->closedByInstance(), $peers);
            return [array_column($hellos, 'thread_index'), $returns, $closed];
        });
        $setups = [];
        Runner::run(function (Api $api) use (&$setups) {
            $api->subscribe('work', fn (Request $req) => "done {$req->request} by {$api->threadIndex()}");
            $setups[] = $api->threadIndex();
        }, 2, ['socket' => $core->path, 'prefix' => '/t/']);
        [$threadIndexes, $returns, $closed] = $core->join();

        $this->assertSame([0, 1], $setups);
        $this->assertSame([0, 1], $threadIndexes);
        $this->assertSame(['done to 1 by 1', 'done to 0 by 0'], $returns);
        $this->assertSame([true, true], $closed);
    }
}
