package Cumulo::Status;

# Status codes of PROTOCOL.md section 2.3.

use strict;
use warnings;
use Exporter 'import';

my @NAMES = qw(OK TIMEOUT NO_SERVICE QUEUE_FULL CRASHED MALFORMED SHUTTING_DOWN
    SERVICE_ERROR TOO_LARGE INVALID_ARGUMENT UNSUPPORTED_VERSION UNAUTHORIZED PROTOCOL UNAVAILABLE);

use constant {
    OK => 0, TIMEOUT => 1, NO_SERVICE => 2, QUEUE_FULL => 3, CRASHED => 4, MALFORMED => 5,
    SHUTTING_DOWN => 6, SERVICE_ERROR => 7, TOO_LARGE => 8, INVALID_ARGUMENT => 9,
    UNSUPPORTED_VERSION => 10, UNAUTHORIZED => 11, PROTOCOL => 12, UNAVAILABLE => 13,
};

our @EXPORT_OK = @NAMES;
our %EXPORT_TAGS = (all => \@NAMES);

# "TIMEOUT" for 1; codes a newer core may send are named "STATUS_<n>".
sub name_of {
    my ($code) = @_;
    return $NAMES[$code] if defined $code && $code =~ /\A[0-9]+\z/ && $code < @NAMES;
    return "STATUS_" . ($code // '?');
}

# The code of a name ("NO_SERVICE" => 2), or undef.
sub code_of {
    my ($name) = @_;
    for my $code (0 .. $#NAMES) {
        return $code if $NAMES[$code] eq $name;
    }
    return undef;    ## no critic (ProhibitExplicitReturnUndef): one value in list context too, as documented
}

1;
