use strict;
use warnings;
use Test::More;
use Scalar::Util qw(blessed);
use Cumulo::Codec;
use Cumulo::Error;
use Cumulo::Info;
use Cumulo::Status;

# The status name of what $code dies with.
sub dies_with {
    my ($code) = @_;
    return eval { $code->(); 'nothing raised' } // (blessed($@) ? $@->status_name : "plain die: $@");
}

my $ping = Cumulo::Codec::encode('PING', { nonce => 5 });
is(dies_with(sub { Cumulo::Codec::decode(substr $ping, 0, -1) }), 'MALFORMED', 'frame shorter than its length');
is(dies_with(sub { Cumulo::Codec::decode("$ping\0") }), 'MALFORMED', 'frame longer than its length');
is(dies_with(sub { Cumulo::Codec::decode_body("\x85" . ("\1" x 16) . pack('V', 0xffffffff)) }), 'MALFORMED',
    'a huge trans_id count is malformed');

is(dies_with(sub { Cumulo::Codec::encode('TERMINATE', { timeout => 2**32 }) }), 'INVALID_ARGUMENT', 'u32 range');
is(dies_with(sub { Cumulo::Codec::encode('TERMINATE', { timeout => -1 }) }), 'INVALID_ARGUMENT', 'negative u32');
is(dies_with(sub { Cumulo::Codec::encode('PING', { nonce => 'abc' }) }), 'INVALID_ARGUMENT', 'not a number');
is(dies_with(sub { Cumulo::Codec::encode('SUBSCRIBE', { req_id => 1, pattern => 'x' x 65536 }) }),
    'INVALID_ARGUMENT', 'str over 65535 bytes');
is(dies_with(sub { Cumulo::Codec::encode('RETURN', { trans_id => 'short', status => 0, response_info => '',
    response => '' }) }), 'INVALID_ARGUMENT', 'trans_id of the wrong size');
is(dies_with(sub { Cumulo::Codec::encode('RETURN', { trans_id => 'x' x 16, status => 0, response_info => '',
    response => "\x{263a}" }) }), 'INVALID_ARGUMENT', 'wide characters in a bytes field');
is(dies_with(sub { Cumulo::Codec::encode('PING', {}) }), 'INVALID_ARGUMENT', 'missing field');
is(dies_with(sub { Cumulo::Codec::encode('NOPE', {}) }), 'INVALID_ARGUMENT', 'unknown type');

my $max_nonce = pack 'H*', '0900000030ffffffffffffffff';
is((Cumulo::Codec::decode($max_nonce))[1]{nonce}, '18446744073709551615', 'u64 maximum decodes');
is(Cumulo::Codec::encode('PING', { nonce => 18446744073709551615 }), $max_nonce, 'u64 maximum encodes');

is(Cumulo::Codec::frame_length(pack('V', 9), 9), 9, 'length at the limit is accepted');
is(dies_with(sub { Cumulo::Codec::frame_length(pack('V', 10), 9) }), 'TOO_LARGE', 'length over the limit');

my $error = Cumulo::Error->new(status => 2, message => 'nobody there');
is_deeply([$error->status, $error->status_name, $error->message, "$error"],
    [2, 'NO_SERVICE', 'nobody there', 'NO_SERVICE: nobody there'], 'errors carry status codes by name');
ok($error->is('NO_SERVICE'), 'is() by name');
is(Cumulo::Status::name_of(99), 'STATUS_99', 'unknown codes get a name');
is(Cumulo::Status::code_of('TOO_LARGE'), 8, 'code_of');
is(Cumulo::Status::UNAVAILABLE, 13, 'UNAVAILABLE is 13');
is_deeply([Cumulo::Status::name_of(13), Cumulo::Status::code_of('UNAVAILABLE'), Cumulo::Status::name_of(14)],
    ['UNAVAILABLE', 13, 'STATUS_14'], 'UNAVAILABLE by name and code, 14 unknown');
is(Cumulo::Error->new(status => 1)->message, 'TIMEOUT', 'an empty message becomes the name');

# key/value encoding
is(Cumulo::Info::encode({ b => 2, a => '1' }), "a\0" . "1\0b\0" . "2\0", 'a hash encodes sorted by key');
is(Cumulo::Info::encode([[a => 1], [a => 2]]), "a\0" . "1\0a\0" . "2\0", 'pairs keep order and repeats');
is(Cumulo::Info::encode([]), '', 'no pairs');
my @pairs = (['k', ''], ['', 'v'], ['k', 'x']);
is_deeply(Cumulo::Info::parse(Cumulo::Info::encode(\@pairs)), \@pairs, 'round trip with empty keys and values');
is(dies_with(sub { Cumulo::Info::encode([["a\0b", 1]]) }), 'INVALID_ARGUMENT', 'NUL in a key');
is(dies_with(sub { Cumulo::Info::encode({ a => "1\0" }) }), 'INVALID_ARGUMENT', 'NUL in a value');
for my $raw ("\0", 'a', "a\0b", "a\0b\0c\0") {
    is(dies_with(sub { Cumulo::Info::parse($raw) }), 'MALFORMED', 'malformed ' . unpack('H*', $raw));
}
my $data = Cumulo::Info::encode([[value => 1], [value => 2]]);
is(Cumulo::Info::lookup($data, 'value'), '1', 'lookup finds the first value');
is(Cumulo::Info::lookup($data, 'other'), undef, 'lookup of a missing key');
is(Cumulo::Info::lookup('', 'value'), undef, 'lookup in empty data');
for my $raw ("value\0" . '1', "value\0" . "1\0x\0") {
    is(dies_with(sub { Cumulo::Info::lookup($raw, 'value') }), 'MALFORMED', 'lookup in malformed ' . unpack('H*', $raw));
}

done_testing;
