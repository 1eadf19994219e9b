# Cumulo::run: one instance per CUMULO_THREAD_COUNT, served until TERMINATE,
# with ithreads and with the single-threaded select loop.
use strict;
use warnings;
use Config;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use FakeCore;
use Cumulo;

my $TID = pack('Q>NN', 1, 3, 1);

sub run_two_instances {
    my (%options) = @_;
    my $core = FakeCore->new(sub {
        my (@peers, @hellos);
        for (1 .. 2) {
            my ($peer, $hello) = $_[0]->accept_instance;
            $peer->reply('SUBSCRIBE', 'work');    # the select loop sets instances up one after the other
            push @peers, $peer;
            push @hellos, $hello->{thread_index};
        }
        my @returns;
        for my $index (1, 0) {    # the second instance first: both must be served
            $peers[$index]->send_frame('REQUEST', { trans_id => $TID, timeout => 500, priority => 0, flags => 0,
                source => 0, name => '/t/work', pattern => '/t/work', request_info => '', request => "to $index" });
            push @returns, $peers[$index]->expect('RETURN')->{response};
        }
        $_->send_frame('TERMINATE', { timeout => 100 }) for @peers;
        return ([sort @hellos], \@returns, [map { $_->closed_by_instance } @peers]);
    });
    Cumulo::run(sub {
        my ($api) = @_;
        $api->subscribe('work', sub { "done $_[0]{request} by " . $api->thread_index });
    }, thread_count => 2, socket => $core->path, prefix => '/t/', %options);
    my ($hellos, $returns, $closed) = $core->join;
    is_deeply($hellos, [0, 1], 'one HELLO per thread_index');
    is_deeply($returns, ['done to 1 by 1', 'done to 0 by 0'], 'each instance serves its requests');
    is_deeply($closed, [1, 1], 'every instance closes after TERMINATE');
}

SKIP: {
    skip 'perl built without ithreads', 3 unless $Config{useithreads};
    run_two_instances(use_threads => 1);
}
run_two_instances(use_threads => 0);

done_testing;
