<?php

declare(strict_types=1);

namespace Cumulo\Tests;

use Cumulo\Codec;
use Cumulo\CumuloException;
use Cumulo\Info;
use Cumulo\Status;
use PHPUnit\Framework\TestCase;

final class CodecTest extends TestCase
{
    private function assertStatus(int $status, callable $call): void
    {
        try {
            $call();
            $this->fail('expected status ' . Status::name($status));
        } catch (CumuloException $e) {
            $this->assertSame($status, $e->getCode(), $e->getMessage());
        }
    }

    public function testFrameShorterOrLongerThanItsLengthIsMalformed(): void
    {
        $frame = Codec::encode('PING', ['nonce' => 5]);
        $this->assertStatus(Status::MALFORMED, fn () => Codec::decode(substr($frame, 0, -1)));
        $this->assertStatus(Status::MALFORMED, fn () => Codec::decode($frame . "\0"));
    }

    public function testHugeTransIdCountIsMalformed(): void
    {
        $body = "\x85" . str_repeat("\1", 16) . pack('V', 0xffffffff);
        $this->assertStatus(Status::MALFORMED, fn () => Codec::decodeBody($body));
    }

    public function testEncodeChecksRangesAndSizes(): void
    {
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Codec::encode('TERMINATE', ['timeout' => 0x100000000]));
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Codec::encode('TERMINATE', ['timeout' => -1]));
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Codec::encode('SUBSCRIBE', ['req_id' => 1, 'pattern' => str_repeat('x', 65536)]));
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Codec::encode('SUBSCRIBE', ['req_id' => 1, 'pattern' => "\xff"]));
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Codec::encode('RETURN', [
            'trans_id' => 'short', 'status' => 0, 'response_info' => '', 'response' => '']));
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Codec::encode('PING', []));
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Codec::encode('NOPE', []));
    }

    public function testU64AboveTheSignedRangeRoundTrips(): void
    {
        $frame = hex2bin('0900000030ffffffffffffffff');
        $this->assertSame(-1, Codec::decode($frame)->fields['nonce']);
        $this->assertSame($frame, Codec::encode('PING', ['nonce' => -1]));
    }

    public function testLengthAtTheLimitIsAccepted(): void
    {
        $this->assertSame(9, Codec::frameLength(pack('V', 9), 9));
        $this->assertStatus(Status::TOO_LARGE, fn () => Codec::frameLength(pack('V', 10), 9));
    }

    public function testStatusNames(): void
    {
        $this->assertSame('NO_SERVICE', Status::name(2));
        $this->assertSame('STATUS_99', Status::name(99));
        $this->assertSame(13, Status::UNAVAILABLE);
        $this->assertSame('UNAVAILABLE', Status::name(13));
        $this->assertSame('STATUS_14', Status::name(14));
        $error = new CumuloException('', Status::TIMEOUT);
        $this->assertSame(['TIMEOUT', 'TIMEOUT', 1], [$error->getMessage(), $error->statusName(), $error->status()]);
    }

    public function testInfoEncodesMapsAndPairs(): void
    {
        $this->assertSame("a\0" . "1\0b\0" . "2\0", Info::encode(['a' => '1', 'b' => 2]));
        $this->assertSame("a\0" . "1\0a\0" . "2\0", Info::encode([['a', '1'], ['a', '2']]));
        $this->assertSame('', Info::encode([]));
        $pairs = [['k', ''], ['', 'v'], ['k', 'ключ']];
        $this->assertSame($pairs, Info::parse(Info::encode($pairs)));
    }

    public function testInfoRefusesNulAndMalformedData(): void
    {
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Info::encode([["a\0b", '1']]));
        $this->assertStatus(Status::INVALID_ARGUMENT, fn () => Info::encode(['a' => "1\0"]));
        foreach (["\0", 'a', "a\0b", "a\0b\0c\0"] as $raw) {
            $this->assertStatus(Status::MALFORMED, fn () => Info::parse($raw));
        }
    }

    public function testInfoLookupFindsTheFirstValue(): void
    {
        $data = Info::encode([['value', '1'], ['value', '2']]);
        $this->assertSame('1', Info::lookup($data, 'value'));
        $this->assertNull(Info::lookup($data, 'other'));
    }
}
