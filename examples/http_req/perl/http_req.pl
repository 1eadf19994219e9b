#!/usr/bin/env perl
# The http_req example service (docs/SDK_GUIDE.md): answers perl.xml/get
# with the integer found under the key "value" of the key/value request body.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../../../sdk/perl/lib";
use Cumulo;

my $RESPONSE_INFO = Cumulo::Info::encode([['content-type' => 'text/xml; charset=utf-8']]);    # once, not per request

# The decimal form of $text if it is an integer that fits in 64 bits
# (signed), else undef.
sub int64_text {
    my ($text) = @_;
    return unless defined $text && $text =~ /\A([+-]?)([0-9]+)\z/;
    my ($negative, $digits) = ($1 eq '-', $2 =~ s/\A0+//r);
    my $limit = $negative ? '9223372036854775808' : '9223372036854775807';
    return if length $digits > length $limit || (length $digits == length $limit && $digits gt $limit);
    return '0' if $digits eq '';
    return $negative ? "-$digits" : $digits;
}

sub http_req_answer {
    my ($body) = @_;
    my $number = eval { int64_text(Cumulo::Info::lookup($body, 'value')) };    # undef if malformed too
    return defined $number
        ? "<http_test><value>$number</value></http_test>"
        : '<http_test><error>no value specified</error></http_test>';
}

# HTTP_REQ_WINDOW: requests the core may deliver at once (default 1); with
# more, one read brings several and their answers go out in one write.
# Anything but a positive integer stops the process.
my $window = $ENV{HTTP_REQ_WINDOW} // '';
$window = 1 if $window eq '';
if ($window !~ /\A[0-9]+\z/ || $window < 1 || $window > 4294967295) {
    print STDERR "http_req: HTTP_REQ_WINDOW='$window' is not a positive integer\n";
    exit 2;
}
Cumulo::run(sub {
    my ($api) = @_;
    $api->subscribe('perl.xml/get', sub { return ($RESPONSE_INFO, http_req_answer($_[0]->request)) });
}, window => $window + 0);
