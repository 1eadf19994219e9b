<?php

declare(strict_types=1);

namespace Cumulo;

/**
 * The key/value encoding of request_info and response_info
 * (PROTOCOL.md section 5): key\0value\0key\0value\0 ...
 */
final class Info
{
    /**
     * @param array<int, array{0: string, 1: string}>|array<string, string|int> $pairs
     *        a list of [key, value] pairs (order and repeats kept) or a map
     */
    public static function encode(array $pairs): string
    {
        $out = '';
        foreach (self::pairsOf($pairs) as [$key, $value]) {
            foreach ([(string) $key, (string) $value] as $field) {
                if (str_contains($field, "\0")) {
                    throw CumuloException::invalidArgument('key/value field contains NUL: ' . json_encode($field));
                }
                $out .= $field . "\0";
            }
        }
        return $out;
    }

    /**
     * @return list<array{0: string, 1: string}>
     * @throws CumuloException MALFORMED without a final NUL or with an odd number of fields
     */
    public static function parse(string $data): array
    {
        if ($data === '') {
            return [];
        }
        if (!str_ends_with($data, "\0")) {
            throw CumuloException::malformed('key/value data does not end with NUL');
        }
        $fields = explode("\0", substr($data, 0, -1));
        if (count($fields) % 2 !== 0) {
            throw CumuloException::malformed('key/value data has an odd number of fields');
        }
        return array_chunk($fields, 2);
    }

    /** The first value of $key in encoded $data, or null. */
    public static function lookup(string $data, string $key): ?string
    {
        foreach (self::parse($data) as [$k, $v]) {
            if ($k === $key) {
                return $v;
            }
        }
        return null;
    }

    /** @return list<array{0: mixed, 1: mixed}> */
    private static function pairsOf(array $pairs): array
    {
        if (!array_is_list($pairs)) {
            return array_map(null, array_keys($pairs), array_values($pairs));
        }
        foreach ($pairs as $pair) {
            if (!is_array($pair) || count($pair) !== 2) {
                throw CumuloException::invalidArgument('key/value pairs must be [key, value] arrays');
            }
        }
        return array_map('array_values', $pairs);
    }
}
