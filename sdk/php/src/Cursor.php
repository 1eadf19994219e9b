<?php

declare(strict_types=1);

namespace Cumulo;

/**
 * Reads protocol fields from a string, never past its end.
 *
 * @internal used by Codec
 */
final class Cursor
{
    public function __construct(private readonly string $data, private int $position)
    {
    }

    public function remaining(): int
    {
        return strlen($this->data) - $this->position;
    }

    public function read(string $kind): mixed
    {
        return match ($kind) {
            'tid' => $this->take(Codec::TID_SIZE),
            'str' => $this->utf8($this->take($this->integer('u16'))),
            'bytes' => $this->take($this->integer('u32')),
            'tids' => $this->tids(),
            default => $this->integer($kind),
        };
    }

    private function integer(string $kind): int
    {
        [$format, $size] = Codec::INTEGERS[$kind];
        return unpack($format, $this->take($size))[1];
    }

    private function tids(): array
    {
        $count = $this->integer('u32');
        if ($count * Codec::TID_SIZE > $this->remaining()) {
            throw CumuloException::malformed("$count trans_ids run past the end of the frame");
        }
        $tids = [];
        for ($i = 0; $i < $count; $i++) {
            $tids[] = $this->take(Codec::TID_SIZE);
        }
        return $tids;
    }

    private function take(int $count): string
    {
        if ($count > $this->remaining()) {
            throw CumuloException::malformed("field of $count bytes runs past the end of the frame");
        }
        $bytes = substr($this->data, $this->position, $count);
        $this->position += $count;
        return $bytes;
    }

    private function utf8(string $text): string
    {
        if (preg_match('//u', $text) !== 1) {
            throw CumuloException::malformed('string field is not valid UTF-8');
        }
        return $text;
    }
}
