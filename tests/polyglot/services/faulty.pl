#!/usr/bin/env perl
# Faulty service: /tests/faulty/perl/boom dies, /ok answers "ok".
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../../../sdk/perl/lib";
use Cumulo;

Cumulo::run(sub {
    my ($api) = @_;
    $api->subscribe('boom', sub { die "boom from perl\n" });
    $api->subscribe('ok', sub { return ('ok') });
});
