# The session logic against a fake core over a real Unix socket.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use Scalar::Util qw(blessed);
use Time::HiRes ();
use FakeCore;
use Cumulo::API;
use Cumulo::Status;

my $TID_A = pack('H*', '187a2b1b40fdcd15') . pack('NN', 3, 1);
my $TID_B = pack('H*', '187a2b1b40fdcd16') . pack('NN', 3, 1);

sub request_fields {
    my ($trans_id, %fields) = @_;
    my $pattern = $fields{pattern} // '/t/echo';
    return { trans_id => $trans_id, timeout => 500, priority => 0, flags => 1, source => (3 << 32) | 1,
        name => $pattern, pattern => $pattern, request_info => '', request => 'hi', %fields };
}

sub connect_to {
    my ($core, %options) = @_;
    return Cumulo::API->new(socket => $core->path, prefix => '/t/', %options);
}

# The Cumulo::Error $code dies with (a failing check if it does not).
sub error_of {
    my ($code) = @_;
    return eval { $code->(); undef } // (blessed($@) ? $@ : Cumulo::Error->new(status => -1, message => "$@"));
}

subtest 'handshake sends HELLO and exposes WELCOME' => sub {
    my $core = FakeCore->new(sub {
        my ($peer, $hello) = $_[0]->accept_instance;
        return ($hello, $peer->expect('SEND_ASYNC')->{trans_id}, $peer->expect('SEND_ASYNC')->{trans_id});
    });
    my $api = connect_to($core, thread_index => 2, window => 4);
    my $first = $api->send_async('/x', '1');
    my $second = $api->send_async('/x', '2');
    my ($hello, @sent) = $core->join;
    is_deeply($hello, { version => 1, window => 4, thread_index => 2, token => '', prefix => '/t/' }, 'HELLO');
    is_deeply([map { $api->$_ } qw(node_id instance_id process_index process_count thread_count)],
        [3, 9, 1, 2, 4], 'ids and counts');
    is_deeply([map { $api->$_ } qw(timeout_async timeout_sync timeout_terminate priority_default prefix)],
        [700, 800, 900, -2, '/t/'], 'timeouts, priority, prefix');
    is_deeply(\@sent, [$first, $second], 'the trans_ids sent are the ones returned');
    is(substr($first, 8), pack('NN', 3, 9), 'trans_id holds node_id and instance_id');
    ok($second gt $first, 'trans_ids increase');
    cmp_ok(abs(unpack('Q>', $first) / 1e9 - time), '<', 5, 'trans_id starts with the time in ns');
};

subtest 'a managed HELLO sends the token and no prefix' => sub {
    my $core = FakeCore->new(sub { return ($_[0]->accept_instance)[1] });
    Cumulo::API->new(socket => $core->path, token => 'c0ffee', prefix => '/ignored/', thread_index => 1);
    my $hello = $core->join;
    is_deeply([@$hello{qw(token prefix thread_index)}], ['c0ffee', '', 1]);
};

subtest 'ERROR instead of WELCOME dies with its status' => sub {
    my $core = FakeCore->new(sub {
        my $peer = $_[0]->accept;
        $peer->expect('HELLO');
        $peer->send_frame('ERROR', { status => Cumulo::Status::UNAUTHORIZED, message => 'unknown token' });
    });
    my $error = error_of(sub { Cumulo::API->new(socket => $core->path, token => 'bad') });
    $core->join;
    is_deeply([$error->status_name, $error->message], ['UNAUTHORIZED', 'unknown token']);
};

subtest 'unmanaged instances need a prefix and a socket' => sub {
    is(error_of(sub { Cumulo::API->new(socket => '/nonexistent', token => '') })->status_name, 'INVALID_ARGUMENT');
    isa_ok(error_of(sub { Cumulo::API->new(socket => '/nonexistent/sock', token => '', prefix => '/t/') }),
        'Cumulo::Error::ConnectionClosed');
};

subtest 'subscribe, unsubscribe and subscribe_count use REPLY' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'a/*');
        $peer->reply('SUBSCRIBE_COUNT', 'a/*', value => 2);
        $peer->reply('UNSUBSCRIBE', 'zz', status => 9, message => 'not subscribed');
    });
    my $api = connect_to($core);
    $api->subscribe('a/*', sub { 'x' });
    is($api->subscribe_count('a/*'), 2, 'count');
    my $error = error_of(sub { $api->unsubscribe('zz') });
    $core->join;
    is_deeply([$error->status_name, $error->message], ['INVALID_ARGUMENT', 'not subscribed'], 'error REPLY');
};

subtest 'a REQUEST is handled and RETURNed, then TERMINATE ends poll' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'echo');
        $peer->send_frame('REQUEST', request_fields($TID_A, request_info => "a\0" . "1\0"));
        my $returned = $peer->expect('RETURN');
        $peer->send_frame('TERMINATE', { timeout => 100 });
        return $returned;
    });
    my $api = connect_to($core);
    my $seen;
    $api->subscribe('echo', sub {
        my ($req) = @_;
        $seen = $req;
        return ({ 'content-type' => 'text/plain' }, 'echo: ' . $req->request);
    });
    ok(!$api->poll, 'poll returns false after TERMINATE');
    my $returned = $core->join;
    ok($api->is_terminated, 'terminated');
    is_deeply($returned, { trans_id => $TID_A, status => 0, response_info => "content-type\0text/plain\0",
        response => 'echo: hi' }, 'RETURN');
    ok($seen->is_sync && !$seen->is_mcast, 'flags');
    is_deeply($seen->info, [['a', '1']], 'request_info');
    is($seen->source, (3 << 32) | 1, 'source');
};

subtest 'send_sync answers PING and keeps other frames meanwhile' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'echo');
        my $async_tid = $peer->expect('SEND_ASYNC')->{trans_id};
        my $sync = $peer->expect('SEND_SYNC');
        $peer->send_frame('PING', { nonce => 77 });
        my $pong = $peer->expect('PONG');    # answered before the sync answer exists
        $peer->send_frame('REQUEST', request_fields($TID_B));
        $peer->send_frame('RESPONSE', { trans_id => $async_tid, status => 0, response_info => '',
            response => 'async answer' });
        $peer->send_frame('RESPONSE', { trans_id => $sync->{trans_id}, status => 0, response_info => "k\0v\0",
            response => 'sync answer' });
        my $queued_return = $peer->expect('RETURN');
        $peer->closed_by_instance;
        return ($sync, $pong, $queued_return);
    });
    my $api = connect_to($core);
    $api->subscribe('echo', sub { 'handled ' . $_[0]->request });
    my $async_tid = $api->send_async('/other', 'a');
    my @answer = $api->send_sync('/t/peer', 'question', request_info => { q => 1 }, timeout => 3000);
    is_deeply(\@answer, ["k\0v\0", 'sync answer'], 'send_sync returns its own RESPONSE');
    is_deeply($api->recv_async(trans_id => $async_tid),
        { trans_id => $async_tid, response_info => '', response => 'async answer' }, 'the other RESPONSE was kept');
    ok($api->poll(100), 'poll returns true on timeout after serving the queued request');
    $api->close;
    my ($sync, $pong, $queued_return) = $core->join;
    is_deeply($pong, { nonce => 77 }, 'PONG echoes the nonce');
    is_deeply([@$sync{qw(timeout priority flags name request_info request)}],
        [3000, -2, 0, '/t/peer', "q\0" . "1\0", 'question'], 'SEND_SYNC fields');
    is_deeply([@$queued_return{qw(trans_id status response)}], [$TID_B, 0, 'handled hi'], 'queued REQUEST served');
};

subtest 'an error status of send_sync dies with code and message' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        my $tid = $peer->expect('SEND_SYNC')->{trans_id};
        $peer->send_frame('RESPONSE', { trans_id => $tid, status => 2, response_info => '',
            response => 'no service /nowhere' });
    });
    my $api = connect_to($core);
    my $error = error_of(sub { $api->send_sync('/nowhere', '') });
    $core->join;
    is_deeply([$error->status, $error->status_name, $error->message], [2, 'NO_SERVICE', 'no service /nowhere']);
};

subtest 'a dying handler gives SERVICE_ERROR and the next request is served' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'echo');
        $peer->send_frame('REQUEST', request_fields($TID_A, request => 'boom'));
        my $failed = $peer->expect('RETURN');
        $peer->send_frame('REQUEST', request_fields($TID_B, request => 'fine'));
        my $served = $peer->expect('RETURN');
        $peer->send_frame('TERMINATE', { timeout => 100 });
        return ($failed, $served);
    });
    my $api = connect_to($core);
    $api->subscribe('echo', sub {
        my ($req) = @_;
        die "bad input\n" if $req->request eq 'boom';
        return 'ok ' . $req->request;
    });
    ok(!$api->poll(5000), 'served until TERMINATE');
    my ($failed, $served) = $core->join;
    is_deeply([@$failed{qw(trans_id status response)}], [$TID_A, 7, 'bad input'], 'status 7 with the message');
    is_deeply([@$served{qw(trans_id status response)}], [$TID_B, 0, 'ok fine'], 'then served');
};

subtest 'a forwarded request gets no RETURN' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'route');
        $peer->send_frame('REQUEST', request_fields($TID_A, pattern => '/t/route'));
        my $forwarded = $peer->expect('FORWARD');
        $peer->send_frame('REQUEST', request_fields($TID_B, pattern => '/t/route', request => 'keep'));
        my $next = $peer->expect('RETURN');
        $peer->send_frame('TERMINATE', { timeout => 100 });
        return ($forwarded, $next);
    });
    my $api = connect_to($core);
    $api->subscribe('route', sub {
        my ($req, $api) = @_;
        return 'kept' if $req->request eq 'keep';
        $api->forward($req, '/elsewhere', request => 'changed');
        return 'ignored';
    });
    ok(!$api->poll(5000), 'served until TERMINATE');
    my ($forwarded, $next) = $core->join;
    is_deeply([@$forwarded{qw(trans_id name request timeout priority)}], [$TID_A, '/elsewhere', 'changed', 500, 0],
        'FORWARD');
    is_deeply([@$next{qw(trans_id response)}], [$TID_B, 'kept'], 'no RETURN for the forwarded one');
};

my $PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
my $TRACE = "traceparent\0$PARENT\0tracestate\0congo=t61rcWkgMzE\0";

# PROTOCOL.md 5.1.
subtest "a handler's calls inherit its request's trace context" => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'echo');
        my @sent;
        $peer->send_frame('REQUEST', request_fields($TID_A, request => 'calls', request_info => "a\0b\0$TRACE"));
        push @sent, $peer->expect('SEND_SYNC');
        $peer->send_frame('RESPONSE', { trans_id => $sent[-1]{trans_id}, status => 0, response_info => '',
            response => 'answer' });
        push @sent, $peer->expect('SEND_ASYNC'), $peer->expect('MCAST_ASYNC');
        $peer->send_frame('MCAST_SENT', { trans_id => $sent[-1]{trans_id}, trans_ids => [] });
        push @sent, $peer->expect('SEND_ASYNC');
        $peer->expect('RETURN');
        $peer->send_frame('REQUEST', request_fields($TID_B, request => 'forward',
            request_info => "traceparent\0$PARENT\0"));
        push @sent, $peer->expect('FORWARD');
        $peer->send_frame('REQUEST', request_fields($TID_A, request => 'fail', request_info => $TRACE));
        push @sent, $peer->expect('SEND_ASYNC');
        $peer->expect('RETURN');
        $peer->send_frame('TERMINATE', { timeout => 100 });
        push @sent, $peer->expect('SEND_ASYNC');    # after poll returned: outside any handler
        return map { [$_->{name}, $_->{request_info}] } @sent;
    });
    my $api = connect_to($core);
    $api->subscribe('echo', sub {
        my ($req, $api) = @_;
        if ($req->request eq 'forward') {
            $api->forward($req, '/fwd', request_info => { k => 'v' });
            return;
        }
        if ($req->request eq 'fail') {
            $api->send_async('/failing', '');
            die "after sending\n";
        }
        $api->send_sync('/sync', '', request_info => "k\0v\0");
        $api->send_async('/async', '');
        $api->mcast_async('/mcast/*', '');
        $api->send_async('/own', '', request_info => [['traceparent', 'own']]);
        return 'done';
    });
    ok(!$api->poll(5000), 'served until TERMINATE');
    $api->send_async('/outside', '', request_info => "x\0y\0");
    is_deeply([$core->join], [
        ['/sync', "k\0v\0$TRACE"], ['/async', $TRACE], ['/mcast/*', $TRACE], ['/own', "traceparent\0own\0"],
        ['/fwd', "k\0v\0traceparent\0$PARENT\0"], ['/failing', $TRACE], ['/outside', "x\0y\0"],
    ], 'request_info of each call');
};

subtest 'requests without a traceparent add nothing' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'echo');
        my @sent;
        # No info; "traceparent" only as a value; tracestate alone.
        for my $info ('', "x\0traceparent\0", "tracestate\0a=b\0") {
            $peer->send_frame('REQUEST', request_fields($TID_A, request_info => $info));
            push @sent, $peer->expect('SEND_ASYNC')->{request_info};
            $peer->expect('RETURN');
        }
        $peer->send_frame('TERMINATE', { timeout => 100 });
        return @sent;
    });
    my $api = connect_to($core);
    $api->subscribe('echo', sub { $_[1]->send_async('/call', '', request_info => "k\0v\0"); 'ok' });
    ok(!$api->poll(5000), 'served until TERMINATE');
    is_deeply([$core->join], [("k\0v\0") x 3], 'request_info as given');
};

subtest 'mcast_async returns the copies and recv_async collects them' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        my $tid = $peer->expect('MCAST_ASYNC')->{trans_id};
        $peer->send_frame('MCAST_SENT', { trans_id => $tid, trans_ids => [$TID_A, $TID_B] });
        $peer->send_frame('RESPONSE', { trans_id => $TID_A, status => 0, response_info => '', response => 'one' });
        $peer->send_frame('RESPONSE', { trans_id => $TID_B, status => 4, response_info => '',
            response => 'instance died' });
    });
    my $api = connect_to($core);
    is_deeply([$api->mcast_async('/t/*', 'all')], [$TID_A, $TID_B], 'trans_ids of the copies');
    is($api->recv_async->{response}, 'one', 'first response');
    my $error = error_of(sub { $api->recv_async(timeout => 2000) });
    $core->join;
    is_deeply([$error->status_name, $error->trans_id], ['CRASHED', $TID_B], 'error response with its trans_id');
};

subtest 'recv_async times out when nothing arrives' => sub {
    my $core = FakeCore->new(sub { return ($_[0]->accept_instance)[0]->closed_by_instance });
    my $api = connect_to($core);
    my $started = Time::HiRes::time();
    is(error_of(sub { $api->recv_async(trans_id => $TID_A, timeout => 10) })->status_name, 'TIMEOUT');
    cmp_ok(Time::HiRes::time() - $started, '<', 3, 'within the timeout and its grace');
    $api->close;
    ok($core->join, 'closed with GOODBYE');
};

subtest 'an oversized frame from the core is refused' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->write_raw(pack 'VC', 10_000_000, 0x82);    # header only: the body must not be awaited
        Time::HiRes::sleep(0.2);
    });
    my $api = connect_to($core);
    my $error = error_of(sub { $api->poll(5000) });
    $core->join;
    is($error->status_name, 'TOO_LARGE');
    like($error->message, qr/10000000/, 'names the length');
};

subtest 'an oversized frame is not sent' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;    # max_frame 1024
        return $peer->expect('SEND_ASYNC')->{request};
    });
    my $api = connect_to($core);
    is(error_of(sub { $api->send_async('/x', 'x' x 2000) })->status_name, 'TOO_LARGE');
    $api->send_async('/x', 'small');
    is($core->join, 'small', 'the next frame is the small one');
};

subtest 'a malformed frame from the core dies' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->write_raw("\x05\0\0\0\x30\x01\0\0\0");    # PING with a 4-byte nonce
        Time::HiRes::sleep(0.2);
    });
    my $api = connect_to($core);
    is(error_of(sub { $api->poll(5000) })->status_name, 'MALFORMED');
    $core->join;
};

subtest 'a closed connection dies with ConnectionClosed' => sub {
    my $core = FakeCore->new(sub { ($_[0]->accept_instance)[0]->close });
    my $api = connect_to($core);
    isa_ok(error_of(sub { $api->poll(5000) }), 'Cumulo::Error::ConnectionClosed');
    $core->join;
};

done_testing;
