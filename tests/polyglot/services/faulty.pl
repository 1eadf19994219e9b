#!/usr/bin/env perl
# Faulty service: /tests/faulty/perl/boom dies, /ok answers "ok".
# trace_* call the echo service with an empty request_info and answer with
# the request_info it got (test_trace.py, PROTOCOL.md 5.1).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../../../sdk/perl/lib";
use Cumulo;

my $ECHO = '/echo/trace';

Cumulo::run(sub {
    my ($api) = @_;
    $api->subscribe('boom', sub { die "boom from perl\n" });
    $api->subscribe('ok', sub { return ('ok') });
    $api->subscribe('trace_sync', sub {
        my ($info) = $_[1]->send_sync($ECHO, '', request_info => '');
        return ($info);
    });
    $api->subscribe('trace_async', sub {
        my $api = $_[1];
        return ($api->recv_async(trans_id => $api->send_async($ECHO, '', request_info => ''))->{response_info});
    });
    $api->subscribe('trace_mcast', sub {
        my $api = $_[1];
        my ($first) = $api->mcast_async($ECHO, '', request_info => '');
        return ($api->recv_async(trans_id => $first)->{response_info});
    });
    $api->subscribe('trace_forward', sub {
        my ($req, $api) = @_;
        $api->forward($req, $ECHO, request_info => '');
        return;
    });
});
