#!/usr/bin/env perl
# {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
# answers "hello from {{name}}", with the request's "value" parameter when it
# has one. Runs CUMULO_THREAD_COUNT instances, one per thread.
use strict;
use warnings;
use lib '{{sdk}}/perl/lib';
use Cumulo;

my $TEXT = Cumulo::Info::encode([['content-type' => 'text/plain; charset=utf-8']]);

sub answer {
    my ($body) = @_;
    my $value = eval { Cumulo::Info::lookup($body, 'value') };    # undef if malformed too
    return defined $value ? "hello from {{name}} (value $value)" : 'hello from {{name}}';
}

Cumulo::run(sub {
    my ($api) = @_;
    $api->subscribe('{{name}}/get', sub { return ($TEXT, answer($_[0]->request)) });
});
