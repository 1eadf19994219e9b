#!/usr/bin/env perl
# Unmanaged client: perl client.pl SOCKET NAME HEX_BODY [sync|async]
# Prints the hex response_info, a newline and the response body; on an error
# status prints its name, a newline and the message, and exits 3.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../../../sdk/perl/lib";
use Cumulo;
use Scalar::Util qw(blessed);

my ($socket, $name, $body_hex, $mode) = @ARGV;
my $body = pack 'H*', $body_hex;
my $api = Cumulo::API->new(socket => $socket, prefix => '/client/perl/');
binmode STDOUT;
my $exit_code = 0;
my ($info, $response);
my $ok = eval {
    if (($mode // 'sync') eq 'async') {
        my $r = $api->recv_async(trans_id => $api->send_async($name, $body));
        ($info, $response) = ($r->{response_info}, $r->{response});
    } else {
        ($info, $response) = $api->send_sync($name, $body);
    }
    1;
};
if ($ok) {
    print unpack('H*', $info), "\n", $response;
} elsif (blessed $@ && $@->isa('Cumulo::Error') && !$@->isa('Cumulo::Error::ConnectionClosed')) {
    print $@->status_name, "\n", $@->message;
    $exit_code = 3;
} else {
    die $@;
}
$api->close;
exit $exit_code;
