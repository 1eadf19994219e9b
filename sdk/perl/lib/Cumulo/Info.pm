package Cumulo::Info;

# The key/value encoding of request_info and response_info
# (PROTOCOL.md section 5): key\0value\0key\0value\0 ...
# Parsed keys and values are byte strings (UTF-8 by convention).

use strict;
use warnings;
use Cumulo::Error;
use Cumulo::Status;

# encode(\@pairs) with [key, value] pairs (order and repeats kept), or
# encode(\%map) (keys sorted, so the bytes are stable). Character strings
# are written as UTF-8.
sub encode {
    my ($pairs) = @_;
    my @list = !defined $pairs ? ()
        : ref $pairs eq 'HASH' ? map { [$_, $pairs->{$_}] } sort keys %$pairs
        : ref $pairs eq 'ARRAY' ? @$pairs
        : _invalid('key/value data must be an array of pairs or a hash');
    my $out = '';
    for my $pair (@list) {
        _invalid('key/value pairs must be [key, value] arrays') unless ref $pair eq 'ARRAY' && @$pair == 2;
        for my $field (@$pair) {
            my $bytes = defined $field ? "$field" : '';
            utf8::encode($bytes) if utf8::is_utf8($bytes);
            _invalid("key/value field contains NUL") if index($bytes, "\0") >= 0;
            $out .= $bytes . "\0";
        }
    }
    return $out;
}

# [[key, value], ...]; dies with a Cumulo::Error MALFORMED on a missing
# final NUL or an odd number of fields.
sub parse {
    my ($data) = @_;
    return [] if !defined $data || $data eq '';
    _malformed('key/value data does not end with NUL') unless substr($data, -1) eq "\0";
    _malformed('key/value data has an odd number of fields') if ($data =~ tr/\0//) % 2;
    my @fields = split /\0/, $data, -1;
    pop @fields;    # the empty string after the final NUL
    return [map { [@fields[2 * $_, 2 * $_ + 1]] } 0 .. @fields / 2 - 1];
}

# The first value of $key in encoded $data, or undef.
sub lookup {
    my ($data, $key) = @_;
    return undef if !defined $data || $data eq '';    ## no critic (ProhibitExplicitReturnUndef): one value in list context too, as documented
    _malformed('key/value data does not end with NUL') unless substr($data, -1) eq "\0";
    my @fields = split /\0/, $data, -1;
    pop @fields;    # the empty string after the final NUL
    _malformed('key/value data has an odd number of fields') if @fields % 2;
    for (my $index = 0; $index < @fields; $index += 2) {
        return $fields[$index + 1] if $fields[$index] eq $key;
    }
    return undef;    ## no critic (ProhibitExplicitReturnUndef): one value in list context too, as documented
}

sub _malformed { Cumulo::Error->throw(status => Cumulo::Status::MALFORMED, message => $_[0]) }
sub _invalid   { Cumulo::Error->throw(status => Cumulo::Status::INVALID_ARGUMENT, message => $_[0]) }

1;
