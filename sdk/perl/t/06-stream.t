# The stream as the core writes it: several frames in one read, frames cut
# anywhere across reads, frames larger than a read, and the in-place decoder
# agreeing with the field-by-field one.
use strict;
use warnings;
use Test::More;
use FindBin;
use Time::HiRes ();
use lib "$FindBin::Bin/lib";
use Scalar::Util qw(blessed);
use FakeCore;
use Cumulo;
use Cumulo::API;
use Cumulo::Codec;
use Cumulo::Status;

sub tid { pack 'Q>NN', $_[0], 3, 1 }

sub request_frame {
    my ($index, %fields) = @_;
    return Cumulo::Codec::encode('REQUEST', { trans_id => tid($index), timeout => 500, priority => 0, flags => 0,
        source => 0, name => '/t/echo', pattern => '/t/echo', request_info => '', request => "r$index", %fields });
}

sub status_of {
    my ($code) = @_;
    return eval { $code->(); 'nothing raised' } // (blessed($@) ? $@->status_name : "plain die: $@");
}

sub echo_instance {
    my ($core, %options) = @_;
    my $api = Cumulo::API->new(socket => $core->path, prefix => '/t/', %options);
    $api->subscribe('echo', sub { 'echo ' . $_[0]->request });
    return $api;
}

subtest 'several frames in one write: each served in order, TERMINATE last' => sub {
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance(window => 4);
        $peer->reply('SUBSCRIBE', 'echo');
        $peer->write_raw(join '', request_frame(1), Cumulo::Codec::encode('PING', { nonce => 9 }),
            request_frame(2), request_frame(3), Cumulo::Codec::encode('TERMINATE', { timeout => 100 }));
        my @seen = map { [$peer->read_frame] } 1 .. 4;
        return ([map { $_->[0] } @seen], [map { $_->[1]{response} // $_->[1]{nonce} } @seen]);
    });
    my $api = echo_instance($core, window => 4);
    ok(!$api->poll(5000), 'poll returns false after the TERMINATE in the same read');
    my ($types, $values) = $core->join;    # all answers out before poll returned, not at close
    $api->close;
    is_deeply($types, [qw(RETURN PONG RETURN RETURN)], 'answers in the order of the frames');
    is_deeply($values, ['echo r1', 9, 'echo r2', 'echo r3'], 'each answer to its frame');
};

subtest 'frames cut anywhere across reads' => sub {
    my $stream = join '', map { request_frame($_) } 1 .. 3;
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'echo');
        # inside the first length field, between length and body, inside a
        # body, and a piece holding the end of one frame and the start of the next
        my @cuts = (2, 4, 20, length(request_frame(1)) + 3, length($stream) - 1);
        my $from = 0;
        for my $cut (@cuts, length $stream) {
            $peer->write_raw(substr $stream, $from, $cut - $from);
            $from = $cut;
            Time::HiRes::sleep(0.05);    # let each piece arrive on its own
        }
        my @responses = map { $peer->expect('RETURN')->{response} } 1 .. 3;
        $peer->send_frame('TERMINATE', { timeout => 100 });
        return @responses;
    });
    my $api = echo_instance($core);
    1 while $api->poll(5000);
    $api->close;
    is_deeply([$core->join], ['echo r1', 'echo r2', 'echo r3'], 'every request whole and served');
};

subtest 'a frame larger than one read, both ways' => sub {
    my $body = join '', map { chr($_ % 251) } 1 .. 3_000_000;
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance(max_frame => 4_000_000);
        $peer->reply('SUBSCRIBE', 'echo');
        $peer->write_raw(request_frame(1, request => $body) . request_frame(2));
        my @returns = map { $peer->expect('RETURN') } 1 .. 2;
        $peer->send_frame('TERMINATE', { timeout => 100 });
        return map { $_->{response} } @returns;
    });
    my $api = echo_instance($core);
    1 while $api->poll(5000);
    $api->close;
    my ($big, $small) = $core->join;
    ok($big eq "echo $body", '3 MB request in, 3 MB response out') or diag('got ' . length($big) . ' bytes');
    is($small, 'echo r2', 'the frame after it');
};

subtest 'after a slow handler the answers so far go out before the next one runs' => sub {
    pipe(my $signal_in, my $signal_out) or die "pipe: $!";
    my $core = FakeCore->new(sub {
        my ($peer) = $_[0]->accept_instance(window => 3);
        $peer->reply('SUBSCRIBE', 'echo');
        $peer->write_raw(join '', map { request_frame($_) } 1 .. 3);
        my $first = $peer->expect('RETURN')->{response};
        syswrite $signal_out, "x";    # lets the second handler finish
        my @rest = map { $peer->expect('RETURN')->{response} } 1 .. 2;
        $peer->send_frame('TERMINATE', { timeout => 100 });
        return ($first, @rest);
    });
    close $signal_out;
    my $api = Cumulo::API->new(socket => $core->path, prefix => '/t/', window => 3);
    $api->subscribe('echo', sub {
        my $request = $_[0]->request;
        Time::HiRes::sleep(0.02) if $request eq 'r1';    # slow
        if ($request eq 'r2') {    # waits for the core to have r1's answer
            vec(my $bits = '', fileno $signal_in, 1) = 1;
            return 'r1 was still held' unless select $bits, undef, undef, 5;
        }
        return "echo $request";
    });
    1 while $api->poll(10_000);
    $api->close;
    is_deeply([$core->join], ['echo r1', 'echo r2', 'echo r3'], 'r1 answered while r2 was running');
};

subtest 'one instance runs in its own blocking loop until TERMINATE' => sub {
    my $core = FakeCore->new(sub {
        my ($peer, $hello) = $_[0]->accept_instance;
        $peer->reply('SUBSCRIBE', 'echo');
        $peer->write_raw(request_frame(1));
        my $response = $peer->expect('RETURN')->{response};
        $peer->send_frame('PING', { nonce => 5 });
        my $pong = $peer->expect('PONG')->{nonce};
        $peer->send_frame('TERMINATE', { timeout => 100 });
        return ($hello->{thread_index}, $response, $pong, $peer->closed_by_instance);
    });
    Cumulo::run(sub { $_[0]->subscribe('echo', sub { 'echo ' . $_[0]->request }) },
        thread_count => 1, socket => $core->path, prefix => '/t/');
    is_deeply([$core->join], [0, 'echo r1', 5, 1], 'served, PONGed, closed after TERMINATE');
};

subtest 'decoding in place agrees with the field-by-field decoder' => sub {
    my $name = "/t/caf\x{e9}/\x{263a}";
    my @frames = (
        request_frame(7, name => $name, request_info => "k\0v\0", request => "\0\xff"),
        Cumulo::Codec::encode('WELCOME', { %FakeCore::WELCOME }),
        Cumulo::Codec::encode('PING', { nonce => 18446744073709551615 }),
        Cumulo::Codec::encode('MCAST_SENT', { trans_id => tid(1), trans_ids => [tid(2), tid(3)] }),
        Cumulo::Codec::encode('GOODBYE', {}),
    );
    for my $frame (@frames) {
        my $body = substr $frame, 4;
        my $buffer = "junk$frame" . request_frame(8);    # other bytes on both sides
        is_deeply([Cumulo::Codec::decode_at(\$buffer, 8, length $body)], [Cumulo::Codec::_decode_checked($body)],
            'frame ' . unpack('H2', $body));
    }
    my ($type, $fields) = Cumulo::Codec::decode($frames[0]);
    is($fields->{name}, $name, 'a UTF-8 name decodes to characters');

    my $cut = substr $frames[0], 4, -1;    # the request field one byte short...
    my $buffer = $cut . request_frame(9);  # ...with the next frame's bytes right behind it
    is(status_of(sub { Cumulo::Codec::decode_at(\$buffer, 0, length $cut) }), 'MALFORMED',
        'a field running into the next frame is malformed');
    my $bad_utf8 = substr request_frame(1, name => 'ab'), 4;
    substr($bad_utf8, 1 + 16 + 4 + 1 + 1 + 8 + 2, 1, "\xff");
    is(status_of(sub { Cumulo::Codec::decode_body($bad_utf8) }), 'MALFORMED', 'invalid UTF-8 in a str field');
    is(status_of(sub { Cumulo::Codec::decode_body(substr $bad_utf8, 0, 10) }), 'MALFORMED', 'cut in a fixed field');
};

subtest 'RETURN is packed at once only when its fields need nothing more' => sub {
    my %fields = (trans_id => tid(1), status => 0, response_info => "k\0v\0", response => 'ok');
    my $character = "caf\x{e9}";
    utf8::upgrade($character);    # Latin-1 text stored as characters: still a byte string
    for my $case (['bytes', \%fields], ['characters that downgrade', { %fields, response => $character }]) {
        my ($label, $input) = @$case;
        my ($type, $decoded) = Cumulo::Codec::decode(Cumulo::Codec::encode('RETURN', $input));
        is_deeply($decoded, { %$input, response => "$input->{response}" }, $label);
    }
    is(status_of(sub { Cumulo::Codec::encode('RETURN', { %fields, status => 65536 }) }), 'INVALID_ARGUMENT',
        'status over u16');
    is(status_of(sub { Cumulo::Codec::encode('RETURN', { %fields, response => undef }) }), 'nothing raised',
        'undef response is empty');
};

done_testing;
