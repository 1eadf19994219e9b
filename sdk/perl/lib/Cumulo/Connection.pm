package Cumulo::Connection;

# One stream to the core: writes frames and reads whole frames with a
# deadline, buffering partial ones between calls. Reads take what the
# socket has (up to READ_CHUNK) and frames are decoded in place until the
# buffer runs dry; frames queued with queue_frame go out in one write
# before the next wait for input (or with the next write_frame).

use strict;
use warnings;
use IO::Socket::IP;
use IO::Socket::UNIX;
use Socket qw(SOCK_STREAM MSG_NOSIGNAL);
use Time::HiRes ();
use Cumulo::Codec;
use Cumulo::Error;
use Cumulo::Status;

use constant READ_CHUNK => 65536;

# $address: a Unix socket path or "tcp://host:port".
sub new {
    my ($class, $address) = @_;
    Cumulo::Error->throw(status => Cumulo::Status::INVALID_ARGUMENT,
        message => 'no socket given (CUMULO_SOCKET is not set)') unless defined $address && length $address;
    my $socket = $address =~ m{\Atcp://(.+):([0-9]+)\z}
        ? IO::Socket::IP->new(PeerHost => $1 =~ s/\A\[|\]\z//gr, PeerPort => $2, Type => SOCK_STREAM)
        : IO::Socket::UNIX->new(Peer => $address, Type => SOCK_STREAM);
    Cumulo::Error::ConnectionClosed->throw(message => "cannot connect to $address: $!") unless $socket;
    binmode $socket;
    my $read_set = '';
    vec($read_set, fileno $socket, 1) = 1;
    # buffer: bytes read, of which the first `position` are decoded already;
    # output: frames queued, not yet written.
    return bless { socket => $socket, read_set => $read_set, buffer => '', position => 0, output => '' }, $class;
}

sub now { Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) }

sub socket { $_[0]{socket} }

sub write_frame {
    my ($self, $type, $fields, $max_frame) = @_;
    $self->queue_frame($type, $fields, $max_frame);
    $self->flush;
    return;
}

# Adds a frame to the output without writing it yet (see flush).
sub queue_frame {
    my ($self, $type, $fields, $max_frame) = @_;
    my $frame = Cumulo::Codec::encode($type, $fields);
    my $length = length($frame) - Cumulo::Codec::HEADER_SIZE;
    Cumulo::Error->throw(status => Cumulo::Status::TOO_LARGE,
        message => "$type frame of $length bytes is over the limit of $max_frame") if $length > $max_frame;
    $self->{socket} // $self->_open_socket;    # throws once closed
    $self->{output} .= $frame;
    return;
}

# queue_frame('RETURN', ...) without the hash.
sub queue_return {
    my ($self, $trans_id, $status, $info, $response, $max_frame) = @_;
    my $frame = Cumulo::Codec::return_frame($trans_id, $status, $info, $response)
        // return $self->queue_frame('RETURN',
            { trans_id => $trans_id, status => $status, response_info => $info, response => $response }, $max_frame);
    my $length = length($frame) - Cumulo::Codec::HEADER_SIZE;
    Cumulo::Error->throw(status => Cumulo::Status::TOO_LARGE,
        message => "RETURN frame of $length bytes is over the limit of $max_frame") if $length > $max_frame;
    $self->{socket} // $self->_open_socket;    # throws once closed
    $self->{output} .= $frame;
    return;
}

# Writes every queued frame.
sub flush {
    my ($self) = @_;
    my $output = \$self->{output};
    return unless length $$output;
    my $socket = $self->{socket} // $self->_open_socket;
    my $written = 0;
    while ($written < length $$output) {
        # MSG_NOSIGNAL: a closed peer is an error here, not a SIGPIPE.
        my $sent = send($socket, $written ? substr($$output, $written) : $$output, MSG_NOSIGNAL);
        if (!defined $sent) {
            next if $!{EINTR};
            $self->close;
            Cumulo::Error::ConnectionClosed->throw(message => "connection to the core lost: $!");
        }
        $written += $sent;
    }
    $$output = '';
    return;
}

# The next frame as ($type, \%fields), or () once $deadline (a monotonic
# time, undef for none) passes. A length over $max_frame throws TOO_LARGE
# before the body is read.
sub read_frame {
    my ($self, $deadline, $max_frame) = @_;
    my $buffer = \$self->{buffer};
    while (1) {
        my $position = $self->{position};
        my $available = length($$buffer) - $position;
        my $missing = READ_CHUNK;
        if ($available >= Cumulo::Codec::HEADER_SIZE) {
            my $length = unpack 'V', substr($$buffer, $position, Cumulo::Codec::HEADER_SIZE);
            $length = Cumulo::Codec::frame_length(substr($$buffer, $position, Cumulo::Codec::HEADER_SIZE), $max_frame)
                if $length == 0 || $length > $max_frame;    # throws
            if ($available >= Cumulo::Codec::HEADER_SIZE + $length) {
                my $end = $position + Cumulo::Codec::HEADER_SIZE + $length;
                if ($end == length $$buffer) {    # all decoded: start the buffer afresh
                    $self->{position} = 0;
                    my @frame = Cumulo::Codec::decode_at($buffer, $position + Cumulo::Codec::HEADER_SIZE, $length);
                    $$buffer = '';
                    return @frame;
                }
                $self->{position} = $end;
                return Cumulo::Codec::decode_at($buffer, $position + Cumulo::Codec::HEADER_SIZE, $length);
            }
            $missing = Cumulo::Codec::HEADER_SIZE + $length - $available;
        }
        if ($position) {    # drop the decoded frames before reading more
            substr($$buffer, 0, $position, '');
            $self->{position} = 0;
        }
        return () unless $self->_fill($deadline, $missing > READ_CHUNK ? $missing : READ_CHUNK);
    }
}

sub close {
    my ($self) = @_;
    if ($self->{socket}) {
        $self->{socket}->close;
        $self->{socket} = undef;
    }
    return;
}

sub is_closed { !$_[0]{socket} }

sub _open_socket {
    my ($self) = @_;
    return $self->{socket} // Cumulo::Error::ConnectionClosed->throw(message => 'connection closed');
}

# Writes the queued frames, then reads what is available (up to $size
# bytes); false when the deadline passed first. Without a deadline the read
# itself waits.
sub _fill {
    my ($self, $deadline, $size) = @_;
    $self->flush if length $self->{output};
    my $socket = $self->{socket} // $self->_open_socket;
    while (1) {
        if (defined $deadline) {
            my $wait = $deadline - now();
            $wait = 0 if $wait < 0;
            my $ready = select(my $readable = $self->{read_set}, undef, undef, $wait);
            if ($ready <= 0) {
                return 0 if $wait == 0;
                next;    # a short timeout or EINTR: look at the deadline again
            }
        }
        my $read = sysread($socket, $self->{buffer}, $size, length $self->{buffer});
        return 1 if $read;
        next if !defined $read && ($!{EINTR} || $!{EAGAIN});
        my $why = defined $read ? 'the core closed the connection' : "connection to the core lost: $!";
        $self->close;
        Cumulo::Error::ConnectionClosed->throw(message => $why);
    }
}

1;
