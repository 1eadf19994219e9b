package FakeCore;

# A scripted stand-in for the cumulo core on a real Unix socket. The script
# runs in a forked child (the SDK under test blocks the parent); the list it
# returns comes back from join(), which dies with whatever failed in it.

use strict;
use warnings;
use File::Temp ();
use IO::Select;
use IO::Socket::UNIX;
use POSIX ();
use Socket qw(SOCK_STREAM);
use Storable ();
use Cumulo::Codec;

use constant ACCEPT_TIMEOUT => 5;

our %WELCOME = (
    version => 1, node_id => 3, instance_id => 9, process_index => 1, process_count => 2,
    thread_count => 4, window => 1, max_frame => 1024, timeout_async => 700, timeout_sync => 800,
    timeout_terminate => 900, priority_default => -2, keepalive => 5000, prefix => '/t/',
);

sub new {
    my ($class, $script) = @_;
    my $dir = File::Temp::tempdir('cumulo-test-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $self = bless { dir => $dir, path => "$dir/core.sock" }, $class;
    $self->{server} = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => $self->{path}, Listen => 8)
        or die "fake core cannot listen: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my @result = eval { $script->($self) };
        Storable::nstore($@ ? { error => "$@" } : { ok => \@result }, "$dir/result");
        POSIX::_exit(0);    # skip the test framework's END blocks in this copy of it
    }
    $self->{pid} = $pid;
    $self->{server}->close;    # the child listens
    return $self;
}

sub path { $_[0]{path} }

sub accept {
    my ($self) = @_;
    IO::Select->new($self->{server})->can_read(ACCEPT_TIMEOUT) or die "no connection to the fake core\n";
    return FakeCore::Peer->new($self->{server}->accept);
}

# Accepts a connection and completes the handshake: ($peer, \%hello).
sub accept_instance {
    my ($self, %welcome) = @_;
    my $peer = $self->accept;
    my $hello = $peer->expect('HELLO');
    $peer->send_frame('WELCOME', { %WELCOME, %welcome });
    return ($peer, $hello);
}

# Waits for the script; returns what it returned.
sub join {
    my ($self) = @_;
    waitpid $self->{pid}, 0;
    my $file = "$self->{dir}/result";
    my $result = -e $file ? Storable::retrieve($file) : { error => 'fake core died' };
    unlink $file;
    die "fake core: $result->{error}" if $result->{error};
    return wantarray ? @{ $result->{ok} } : $result->{ok}[0];
}

package FakeCore::Peer;

use strict;
use warnings;
use IO::Select;
use Cumulo::Codec;

use constant READ_TIMEOUT => 5;

sub new {
    my ($class, $socket) = @_;
    binmode $socket;
    return bless { socket => $socket }, $class;
}

sub send_frame {
    my ($self, $type, $fields) = @_;
    $self->write_raw(Cumulo::Codec::encode($type, $fields));
}

sub write_raw {
    my ($self, $bytes) = @_;
    syswrite($self->{socket}, $bytes) == length $bytes or die "fake core: write failed: $!";
}

# ($type, \%fields) of the next frame.
sub read_frame {
    my ($self) = @_;
    my $header = $self->_read_exactly(4);
    return Cumulo::Codec::decode($header . $self->_read_exactly(unpack 'V', $header));
}

# The fields of the next frame, which must be of $type.
sub expect {
    my ($self, $type) = @_;
    my ($got, $fields) = $self->read_frame;
    die "expected $type, got $got\n" unless $got eq $type;
    return $fields;
}

# Answers a control request with REPLY.
sub reply {
    my ($self, $type, $pattern, %reply) = @_;
    my $fields = $self->expect($type);
    die "$type of $fields->{pattern}, expected $pattern\n" unless $fields->{pattern} eq $pattern;
    $self->send_frame('REPLY', { req_id => $fields->{req_id}, status => 0, value => 0, message => '', %reply });
}

# True when the instance said GOODBYE (or nothing) and closed its end.
sub closed_by_instance {
    my ($self) = @_;
    while (1) {
        my ($type) = eval { $self->read_frame };
        return 1 if $@ =~ /instance closed/;
        die $@ if $@;
        return 0 unless $type eq 'GOODBYE';
    }
}

sub close { $_[0]{socket}->close }

sub _read_exactly {
    my ($self, $count) = @_;
    my $data = '';
    while (length $data < $count) {
        IO::Select->new($self->{socket})->can_read(READ_TIMEOUT) or die "fake core: read timed out\n";
        my $read = sysread($self->{socket}, $data, $count - length $data, length $data);
        die "fake core: read failed: $!\n" unless defined $read;
        die "instance closed the connection\n" if $read == 0;
    }
    return $data;
}

1;
