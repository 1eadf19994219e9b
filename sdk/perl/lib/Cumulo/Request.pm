package Cumulo::Request;

# A REQUEST delivered to a handler; read-only accessors named as the
# protocol fields.

use strict;
use warnings;
use Cumulo::Info;

use constant { SYNC => 0x01, MCAST => 0x02 };

my @FIELDS = qw(trans_id timeout priority flags source name pattern request_info request);

sub new {
    my ($class, $fields) = @_;
    my %self = map { $_ => $fields->{$_} } @FIELDS;
    return bless { %self, forwarded => 0 }, $class;
}

# A REQUEST frame's own fields hash, taken over (no copy).
sub _from_frame {
    my ($class, $fields) = @_;
    $fields->{forwarded} = 0;
    return bless $fields, $class;
}

for my $field (@FIELDS) {
    no strict 'refs';
    *{$field} = sub { $_[0]{$field} };
}

# Sent with send_sync.
sub is_sync { ($_[0]{flags} & SYNC) != 0 }

# A multicast copy.
sub is_mcast { ($_[0]{flags} & MCAST) != 0 }

# request_info parsed as key/value pairs.
sub info { Cumulo::Info::parse($_[0]{request_info}) }

sub forwarded      { $_[0]{forwarded} }
sub mark_forwarded { $_[0]{forwarded} = 1 }

1;
