package Cumulo::Error;

# Every failure the SDK reports: an object with the protocol status code
# (Cumulo::Status), the core's message and, for answers, the trans_id.
#
#   eval { $api->send_sync(...); 1 } or do {
#       die $@ unless ref $@ && $@->isa('Cumulo::Error');
#       warn $@->status_name, ": ", $@->message;
#   };

use strict;
use warnings;
use Carp ();
use Cumulo::Status;

use overload '""' => \&as_string, fallback => 1;

sub new {
    my ($class, %args) = @_;
    Carp::croak('Cumulo::Error needs a status') unless defined $args{status};
    my $message = defined $args{message} && length $args{message}
        ? $args{message} : Cumulo::Status::name_of($args{status});
    return bless { status => $args{status}, message => $message, trans_id => $args{trans_id} }, $class;
}

sub throw {
    my ($class, %args) = @_;
    die $class->new(%args);
}

sub status      { $_[0]{status} }
sub message     { $_[0]{message} }
sub trans_id    { $_[0]{trans_id} }
sub status_name { Cumulo::Status::name_of($_[0]{status}) }

# $error->is('NO_SERVICE')
sub is {
    my ($self, $name) = @_;
    return $self->status_name eq $name;
}

sub as_string {
    my ($self) = @_;
    return $self->status_name . ": " . $self->message;
}

# The connection to the core ended (status SHUTTING_DOWN).
package Cumulo::Error::ConnectionClosed;

our @ISA = ('Cumulo::Error');

sub new {
    my ($class, %args) = @_;
    return Cumulo::Error::new($class, status => Cumulo::Status::SHUTTING_DOWN, %args);
}

1;
