package Cumulo::Runner;

# Runs a whole service process: CUMULO_THREAD_COUNT instances, each set up
# by the caller's code and then served until the core sends TERMINATE (or
# goes away). With ithreads each instance gets its own thread; a perl built
# without them serves all instances in turn from one select loop.

use strict;
use warnings;
use Config;
use IO::Select;
use Scalar::Util ();
use Cumulo::API;

# run(\&setup, thread_count => N, use_threads => 0|1, %api_options)
sub run {
    my ($setup, %options) = @_;
    my $count = delete $options{thread_count} // $ENV{CUMULO_THREAD_COUNT} // 1;
    my $use_threads = delete $options{use_threads} // $Config{useithreads};
    $count = 1 if $count < 1;
    return _run_threads($count, $setup, \%options) if $use_threads && $count > 1;
    return _serve(0, $setup, \%options) if $count == 1;    # the instance waits in its own reads
    return _run_select($count, $setup, \%options);
}

sub _run_threads {
    my ($count, $setup, $options) = @_;
    require threads;
    my @threads = map {
        my $thread_index = $_;
        threads->create({ context => 'scalar' }, sub {
            my $ok = eval { _serve($thread_index, $setup, $options); 1 };
            return $ok ? '' : "$@";
        });
    } 0 .. $count - 1;
    my @errors = grep { length } map { $_->join // 'thread died' } @threads;
    die join('', @errors) if @errors;
    return;
}

sub _serve {
    my ($thread_index, $setup, $options) = @_;
    my $api = Cumulo::API->new(%$options, thread_index => $thread_index);
    my $ok = eval {
        $setup->($api);
        1 while $api->poll;
        1;
    };
    my $error = $@;
    $api->close;
    die $error unless $ok || _connection_closed($error);
    return;
}

sub _run_select {
    my ($count, $setup, $options) = @_;
    my %instances;
    for my $thread_index (0 .. $count - 1) {
        my $api = Cumulo::API->new(%$options, thread_index => $thread_index);
        $setup->($api);
        $instances{$thread_index} = $api;
    }
    while (%instances) {
        for my $thread_index (sort keys %instances) {
            my $api = $instances{$thread_index};
            next if _serve_ready($api);
            $api->close;
            delete $instances{$thread_index};
        }
        IO::Select->new(map { $_->socket } values %instances)->can_read if %instances;
    }
    return;
}

# Serves what has arrived; false once the instance is done.
sub _serve_ready {
    my ($api) = @_;
    my $more = eval { $api->poll(0) };
    return $more if defined $more;
    die $@ unless _connection_closed($@);
    return 0;    # the core went away: nothing left to serve
}

sub _connection_closed {
    my ($error) = @_;
    return Scalar::Util::blessed($error) && $error->isa('Cumulo::Error::ConnectionClosed');
}

1;
