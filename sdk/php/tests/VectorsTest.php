<?php

declare(strict_types=1);

namespace Cumulo\Tests;

use Cumulo\Codec;
use Cumulo\CumuloException;
use Cumulo\Info;
use Cumulo\Status;
use PHPUnit\Framework\TestCase;

/**
 * Every vector of proto/vectors/*.json: decode and compare every field,
 * encode the fields and compare the bytes, reject every invalid one.
 */
final class VectorsTest extends TestCase
{
    private const VECTOR_LIMIT = 1024; // TOO_LARGE vectors assume this frame limit
    private const ERRORS = ['MALFORMED' => Status::MALFORMED, 'TOO_LARGE' => Status::TOO_LARGE];

    /** @return array<string, array{0: string, 1: array}> family => parsed file */
    private static function files(): array
    {
        $files = glob(VECTORS_DIR . '/*.json');
        if (!$files) {
            throw new \RuntimeException('no vectors found in ' . VECTORS_DIR);
        }
        $families = [];
        foreach ($files as $file) {
            $families[basename($file, '.json')] = json_decode(file_get_contents($file), true, 512, JSON_THROW_ON_ERROR);
        }
        return $families;
    }

    public static function frameVectors(): iterable
    {
        foreach (self::files() as $family => $data) {
            if ($family !== 'kv') {
                foreach ($data['vectors'] as $vector) {
                    yield "$family/{$vector['name']}" => [$vector];
                }
            }
        }
    }

    public static function kvVectors(): iterable
    {
        foreach (self::files()['kv']['vectors'] as $vector) {
            yield "kv/{$vector['name']}" => [$vector];
        }
    }

    public static function invalidVectors(): iterable
    {
        foreach (self::files() as $family => $data) {
            foreach ($data['invalid'] ?? [] as $vector) {
                yield "$family/{$vector['name']}" => [$family, $vector];
            }
        }
    }

    /** @dataProvider frameVectors */
    public function testFrameVectorDecodesAndEncodes(array $vector): void
    {
        $type = $vector['type'];
        $expected = [];
        foreach (Codec::LAYOUTS[$type] as $name => $kind) {
            $value = $vector['fields'][$name];
            $expected[$name] = match ($kind) {
                'tid', 'bytes' => hex2bin($value),
                'tids' => array_map('hex2bin', $value),
                default => $value,
            };
        }
        $frame = Codec::decode(hex2bin($vector['hex']));
        $this->assertSame($type, $frame->type);
        $this->assertSame($expected, $frame->fields);
        $this->assertSame($vector['hex'], bin2hex(Codec::encode($type, $expected)));
    }

    /** @dataProvider kvVectors */
    public function testKvVectorParsesAndEncodes(array $vector): void
    {
        $this->assertSame($vector['pairs'], Info::parse(hex2bin($vector['hex'])));
        $this->assertSame($vector['hex'], bin2hex(Info::encode($vector['pairs'])));
    }

    /** @dataProvider invalidVectors */
    public function testInvalidVectorIsRejected(string $family, array $vector): void
    {
        $raw = hex2bin($vector['hex']);
        $this->expectException(CumuloException::class);
        $this->expectExceptionCode(self::ERRORS[$vector['error']]);
        if ($family === 'kv') {
            Info::parse($raw);
        } else {
            Codec::decode($raw, self::VECTOR_LIMIT);
        }
    }

    public function testEveryFamilyIsPresent(): void
    {
        $this->assertGreaterThanOrEqual(6, count(self::files()));
        $this->assertArrayHasKey('kv', self::files());
    }
}
