package Cumulo::Connection;

# One stream to the core: writes frames and reads whole frames with a
# deadline, buffering partial ones between calls.

use strict;
use warnings;
use IO::Select;
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
    return bless { socket => $socket, select => IO::Select->new($socket), buffer => '' }, $class;
}

sub now { Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) }

sub socket { $_[0]{socket} }

sub write_frame {
    my ($self, $type, $fields, $max_frame) = @_;
    my $frame = Cumulo::Codec::encode($type, $fields);
    my $length = length($frame) - Cumulo::Codec::HEADER_SIZE;
    Cumulo::Error->throw(status => Cumulo::Status::TOO_LARGE,
        message => "$type frame of $length bytes is over the limit of $max_frame") if $length > $max_frame;
    my $socket = $self->_open_socket;
    while (length $frame) {
        # MSG_NOSIGNAL: a closed peer is an error here, not a SIGPIPE.
        my $sent = send($socket, $frame, MSG_NOSIGNAL);
        if (!defined $sent) {
            next if $!{EINTR};
            $self->close;
            Cumulo::Error::ConnectionClosed->throw(message => "connection to the core lost: $!");
        }
        substr($frame, 0, $sent, '');
    }
    return;
}

# The next frame as ($type, \%fields), or () once $deadline (a monotonic
# time, undef for none) passes. A length over $max_frame throws TOO_LARGE
# before the body is read.
sub read_frame {
    my ($self, $deadline, $max_frame) = @_;
    while (1) {
        my $buffer = \$self->{buffer};
        if (length $$buffer >= Cumulo::Codec::HEADER_SIZE) {
            my $length = Cumulo::Codec::frame_length(substr($$buffer, 0, Cumulo::Codec::HEADER_SIZE), $max_frame);
            if (length $$buffer >= Cumulo::Codec::HEADER_SIZE + $length) {
                my $body = substr($$buffer, Cumulo::Codec::HEADER_SIZE, $length);
                substr($$buffer, 0, Cumulo::Codec::HEADER_SIZE + $length, '');
                return Cumulo::Codec::decode_body($body);
            }
        }
        return () unless $self->_fill($deadline);
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

# Reads what is available; false when the deadline passed first.
sub _fill {
    my ($self, $deadline) = @_;
    my $socket = $self->_open_socket;
    while (1) {
        my $wait = defined $deadline ? $deadline - now() : undef;
        $wait = 0 if defined $wait && $wait < 0;
        unless ($self->{select}->can_read($wait)) {
            return 0 if defined $wait && $wait == 0;
            next;    # a short timeout or EINTR: look at the deadline again
        }
        my $read = sysread($socket, $self->{buffer}, READ_CHUNK, length $self->{buffer});
        return 1 if $read;
        next if !defined $read && ($!{EINTR} || $!{EAGAIN});
        my $why = defined $read ? 'the core closed the connection' : "connection to the core lost: $!";
        $self->close;
        Cumulo::Error::ConnectionClosed->throw(message => $why);
    }
}

1;
