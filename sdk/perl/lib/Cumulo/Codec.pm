package Cumulo::Codec;

# Frame encoding and decoding (PROTOCOL.md sections 2 and 4). A frame is
# a type name ('SEND_ASYNC', ...) and a hash of fields named as in the
# protocol: tid and bytes fields are byte strings, str fields character
# strings (UTF-8 on the wire), MCAST_SENT's trans_ids an array of tids.

use strict;
use warnings;
use Encode ();
use Cumulo::Error;
use Cumulo::Status;

use constant {
    VERSION           => 1,
    DEFAULT_MAX_FRAME => 8 * 1024 * 1024,
    HEADER_SIZE       => 4,
    TID_SIZE          => 16,
};

our %TYPES = (
    HELLO => 0x01, SUBSCRIBE => 0x02, UNSUBSCRIBE => 0x03, SUBSCRIBE_COUNT => 0x04,
    SEND_ASYNC => 0x10, SEND_SYNC => 0x11, MCAST_ASYNC => 0x12,
    RETURN => 0x20, FORWARD => 0x21, PING => 0x30, PONG => 0x31, GOODBYE => 0x32,
    WELCOME => 0x81, REQUEST => 0x82, RESPONSE => 0x83, REPLY => 0x84,
    MCAST_SENT => 0x85, TERMINATE => 0x86, ERROR => 0x87,
);
our %TYPE_NAMES = reverse %TYPES;

my @CONTROL = (req_id => 'u32', pattern => 'str');
my @SEND = (trans_id => 'tid', timeout => 'u32', priority => 'i8', flags => 'u8',
    name => 'str', request_info => 'bytes', request => 'bytes');
my @ANSWER = (trans_id => 'tid', status => 'u16', response_info => 'bytes', response => 'bytes');

# Field name => kind pairs, in wire order.
our %LAYOUTS = (
    HELLO => [version => 'u16', window => 'u32', thread_index => 'u32', token => 'str', prefix => 'str'],
    SUBSCRIBE => \@CONTROL, UNSUBSCRIBE => \@CONTROL, SUBSCRIBE_COUNT => \@CONTROL,
    SEND_ASYNC => \@SEND, SEND_SYNC => \@SEND, MCAST_ASYNC => \@SEND, FORWARD => \@SEND,
    RETURN => \@ANSWER, RESPONSE => \@ANSWER,
    PING => [nonce => 'u64'], PONG => [nonce => 'u64'], GOODBYE => [],
    WELCOME => [version => 'u16', node_id => 'u32', instance_id => 'u32', process_index => 'u32',
        process_count => 'u32', thread_count => 'u32', window => 'u32', max_frame => 'u32',
        timeout_async => 'u32', timeout_sync => 'u32', timeout_terminate => 'u32',
        priority_default => 'i8', keepalive => 'u32', prefix => 'str'],
    REQUEST => [trans_id => 'tid', timeout => 'u32', priority => 'i8', flags => 'u8', source => 'u64',
        name => 'str', pattern => 'str', request_info => 'bytes', request => 'bytes'],
    REPLY => [req_id => 'u32', status => 'u16', value => 'u32', message => 'str'],
    MCAST_SENT => [trans_id => 'tid', trans_ids => 'tids'],
    TERMINATE => [timeout => 'u32'],
    ERROR => [status => 'u16', message => 'str'],
);

our %UNPACKERS;    # built below decode_at

# [pack template, size, smallest, largest] of the fixed-width integers.
my %INTEGERS = (
    u8  => ['C',  1, 0,     0xff],
    i8  => ['c',  1, -0x80, 0x7f],
    u16 => ['v',  2, 0,     0xffff],
    u32 => ['V',  4, 0,     0xffffffff],
    u64 => ['Q<', 8, 0,     18446744073709551615],
);

# The whole frame, length prefix included, as a byte string.
sub encode {
    my ($type, $fields) = @_;
    $fields ||= {};
    if ($type eq 'RETURN') {    # the hot path of every service
        my $frame = return_frame(@$fields{qw(trans_id status response_info response)});
        return $frame if defined $frame;
    }
    _invalid("unknown frame type $type") unless exists $TYPES{$type};
    my $body = chr $TYPES{$type};
    my @layout = @{ $LAYOUTS{$type} };
    while (my ($name, $kind) = splice @layout, 0, 2) {
        _invalid("$type: missing field $name") unless exists $fields->{$name};
        $body .= _encode_field($name, $kind, $fields->{$name});
    }
    return pack('V', length $body) . $body;
}

# RETURN in one pack when its fields need no conversion; undef otherwise,
# and encode('RETURN', ...) then converts them or says what is wrong.
sub return_frame {
    my ($trans_id, $status, $info, $response) = @_;
    return unless defined $trans_id && length $trans_id == TID_SIZE && !utf8::is_utf8($trans_id)
        && defined $status && $status =~ /\A[0-9]{1,5}\z/ && $status <= 0xffff
        && defined $info && !utf8::is_utf8($info) && defined $response && !utf8::is_utf8($response);
    return pack 'V C a16 v V/a* V/a*', 27 + length($info) + length($response),
        $TYPES{RETURN}, $trans_id, $status, $info, $response;
}

# Decodes exactly one whole frame (length prefix included): ($type, \%fields).
sub decode {
    my ($data, $max_frame) = @_;
    _malformed('frame shorter than its length field') if length $data < HEADER_SIZE;
    my $length = frame_length(substr($data, 0, HEADER_SIZE), $max_frame // DEFAULT_MAX_FRAME);
    my $following = length($data) - HEADER_SIZE;
    _malformed("frame length $length but $following bytes follow") if $following != $length;
    return decode_body(substr($data, HEADER_SIZE));
}

# Validates a 4-byte length field against $max_frame and returns it.
sub frame_length {
    my ($header, $max_frame) = @_;
    my $length = unpack 'V', $header;
    _malformed('frame length 0 (no type byte)') if $length == 0;
    Cumulo::Error->throw(status => Cumulo::Status::TOO_LARGE,
        message => "frame of $length bytes is over the limit of $max_frame") if $length > $max_frame;
    return $length;
}

# Decodes the type byte and the body, which its layout must consume exactly.
sub decode_body {
    my ($data) = @_;
    _malformed('frame has no type byte') if !defined $data || $data eq '';
    return decode_at(\$data, 0, length $data);
}

# Decodes the body of $length bytes at $offset in $$buffer (a frame read
# off a stream, without copying it out first): ($type, \%fields).
sub decode_at {
    my ($buffer, $offset, $length) = @_;
    my $unpacker = $UNPACKERS{ ord substr($$buffer, $offset, 1) }
        or return _decode_checked(substr($$buffer, $offset, $length));
    my ($type, $template, $count, $names, $named, $sized, $strings, $tids) = @$unpacker;
    CHECK: {
        my @values = eval { unpack "\@$offset $template", $$buffer } or last CHECK;
        my $end = pop @values;
        last CHECK unless @values == $count && $end == $offset + $length;
        for my $index (@$sized) {
            last CHECK unless length $values[$index] == $values[$index - 1];
        }
        for my $index (@$tids) {
            last CHECK unless length $values[$index] == TID_SIZE;
        }
        for my $index (@$strings) {    # ASCII is already its own text; the rest is decoded strictly
            last CHECK if $values[$index] =~ /[^\x00-\x7f]/;
        }
        my %fields;
        @fields{@$names} = @values[@$named];
        return ($type, \%fields);
    }
    return _decode_checked(substr($$buffer, $offset, $length));    # with its exact error
}

# One unpack per frame (the field loop below costs a call per field). Each
# str and bytes field is read as its length and its value, so a field cut
# short by the end of the data shows; anything unexpected goes to the field
# loop, which says what is wrong.
# [type, template, value count, names, positions of the named values,
# length-checked positions, str positions, tid positions], by type code.
{
    my %PIECES = (tid => 'a16', u8 => 'C', i8 => 'c', u16 => 'v', u32 => 'V', u64 => 'Q<',
        str => 'v X2 v/a', bytes => 'V X4 V/a');
    TYPE: for my $type (keys %LAYOUTS) {
        my (@pieces, @names, @named, @sized, @strings, @tids);
        my $count = 0;    # values unpacked so far
        my @layout = @{ $LAYOUTS{$type} };
        while (my ($name, $kind) = splice @layout, 0, 2) {
            next TYPE unless $PIECES{$kind};    # a list of trans_ids: the field loop
            push @pieces, $PIECES{$kind};
            push @tids, $count if $kind eq 'tid';
            if ($kind eq 'str' || $kind eq 'bytes') {
                $count++;    # the length
                push @sized, $count;
                push @strings, $count if $kind eq 'str';
            }
            push @names, $name;
            push @named, $count++;
        }
        $UNPACKERS{ $TYPES{$type} } =
            [$type, join(' ', 'x', @pieces, '.'), $count, \@names, \@named, \@sized, \@strings, \@tids];
    }
}

# The field by field decoder: slower, and says exactly what is malformed.
sub _decode_checked {
    my ($data) = @_;
    my $code = ord $data;
    my $type = $TYPE_NAMES{$code} // _malformed(sprintf 'unknown frame type 0x%02x', $code);
    my $position = 1;
    my %fields;
    my @layout = @{ $LAYOUTS{$type} };
    while (my ($name, $kind) = splice @layout, 0, 2) {
        $fields{$name} = _read_field($kind, \$data, \$position);
    }
    my $trailing = length($data) - $position;
    _malformed("$type: $trailing trailing bytes") if $trailing;
    return ($type, \%fields);
}

sub _encode_field {
    my ($name, $kind, $value) = @_;
    return _tid($name, $value) if $kind eq 'tid';
    if ($kind eq 'str') {
        my $text = eval { Encode::encode('UTF-8', $value // '', Encode::FB_CROAK) }
            // _invalid("$name: not encodable as UTF-8");
        _invalid("$name: " . length($text) . ' bytes is over 65535') if length $text > 0xffff;
        return pack('v', length $text) . $text;
    }
    if ($kind eq 'bytes') {
        my $raw = $value // '';
        _invalid("$name: bytes fields take byte strings") unless utf8::downgrade($raw, 1);
        return pack('V', length $raw) . $raw;
    }
    if ($kind eq 'tids') {
        return pack('V', scalar @$value) . join('', map { _tid($name, $_) } @$value);
    }
    my ($template, undef, $min, $max) = @{ $INTEGERS{$kind} };
    _invalid("$name: " . ($value // 'undef') . " is not a $kind")
        unless defined $value && $value =~ /\A-?[0-9]+\z/ && $value >= $min && $value <= $max;
    return pack $template, $value;
}

sub _read_field {
    my ($kind, $data, $position) = @_;
    return _take($data, $position, TID_SIZE) if $kind eq 'tid';
    if ($kind eq 'str') {
        my $bytes = _take($data, $position, _read_field('u16', $data, $position));
        return eval { Encode::decode('UTF-8', $bytes, Encode::FB_CROAK) }
            // _malformed('string field is not valid UTF-8');
    }
    return _take($data, $position, _read_field('u32', $data, $position)) if $kind eq 'bytes';
    if ($kind eq 'tids') {
        my $count = _read_field('u32', $data, $position);
        _malformed("$count trans_ids run past the end of the frame")
            if $count * TID_SIZE > length($$data) - $$position;
        return [map { _take($data, $position, TID_SIZE) } 1 .. $count];
    }
    my ($template, $size) = @{ $INTEGERS{$kind} };
    return unpack $template, _take($data, $position, $size);
}

# $count bytes at $$position, never past the end.
sub _take {
    my ($data, $position, $count) = @_;
    _malformed("field of $count bytes runs past the end of the frame")
        if $count > length($$data) - $$position;
    my $bytes = substr $$data, $$position, $count;
    $$position += $count;
    return $bytes;
}

sub _tid {
    my ($name, $value) = @_;
    _invalid("$name: a trans_id is 16 bytes") unless defined $value && length $value == TID_SIZE;
    return $value;
}

sub _malformed { Cumulo::Error->throw(status => Cumulo::Status::MALFORMED, message => $_[0]) }
sub _invalid   { Cumulo::Error->throw(status => Cumulo::Status::INVALID_ARGUMENT, message => $_[0]) }

1;
