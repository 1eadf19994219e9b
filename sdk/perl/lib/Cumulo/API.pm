package Cumulo::API;

# One instance: one connection to the core. Use one per thread (Cumulo::run
# does). Timeouts are in milliseconds, as on the wire; undef means the
# core's default.

use strict;
use warnings;
use Scalar::Util ();
use Time::HiRes ();
use Cumulo::Codec;
use Cumulo::Connection;
use Cumulo::Error;
use Cumulo::Info;
use Cumulo::Request;
use Cumulo::Status;

use constant {
    WAIT_FOR_SERVICE     => 0x01,
    REQUEST_OVERHEAD     => 8 + 2 + 0xffff,    # what a REQUEST adds to its SEND: source, pattern
    GRACE_MS             => 1000,              # how long past a timeout to wait for the core's own
    HANDSHAKE_TIMEOUT_MS => 30_000,
    # A handler slower than this (seconds) is taken as a sign the next one is
    # too: the answers queued so far go out before it runs, not after.
    SLOW_HANDLER         => 0.001,
    MONOTONIC            => Time::HiRes::CLOCK_MONOTONIC(),
};

# Managed (started by the core): everything comes from the environment.
# Unmanaged (tests, tools): pass socket and prefix, no token. max_frame caps
# frames read from the core (default: the core's max_frame plus what a
# REQUEST adds).
sub new {
    my ($class, %args) = @_;
    my $token = $args{token} // $ENV{CUMULO_TOKEN} // '';
    my $hello_prefix = $token eq '' ? $args{prefix} // '' : '';
    _throw(Cumulo::Status::INVALID_ARGUMENT, "an unmanaged instance needs a prefix starting with '/'")
        if $token eq '' && $hello_prefix !~ m{\A/};
    my $self = bless {
        thread_index => $args{thread_index} // 0,
        read_limit   => $args{max_frame},
        max_frame    => $args{max_frame} // Cumulo::Codec::DEFAULT_MAX_FRAME,
        handlers     => {},
        queue        => [],
        responses    => {},
        response_order => [],
        abandoned    => {},
        next_req_id  => 0,
        last_time_ns => 0,
        terminated   => 0,
        slow_handler => 0,
        # The trace context of the request whose handler runs (PROTOCOL.md
        # 5.1): its encoded traceparent/tracestate pairs, else undef. Kept on
        # the instance: an instance belongs to one thread and runs one
        # handler at a time.
        trace        => undef,
    }, $class;
    $self->{connection} = Cumulo::Connection->new($args{socket} // $ENV{CUMULO_SOCKET});
    eval { $self->_handshake($token, $hello_prefix, $args{window} // 1); 1 } or do {
        my $error = $@;
        $self->{connection}->close;
        die $error;
    };
    return $self;
}

# Subscribes $pattern (relative to the prefix). $handler->($request, $api)
# returns the response: ($response) or ($response_info, $response), where
# response_info is a byte string, a hash or an array of pairs.
sub subscribe {
    my ($self, $pattern, $handler) = @_;
    _throw(Cumulo::Status::INVALID_ARGUMENT, 'subscribe needs a handler') unless ref $handler eq 'CODE';
    $self->_control('SUBSCRIBE', $pattern);
    $self->{handlers}{ $self->prefix . $pattern } = $handler;
    return;
}

sub unsubscribe {
    my ($self, $pattern) = @_;
    $self->_control('UNSUBSCRIBE', $pattern);
    delete $self->{handlers}{ $self->prefix . $pattern } if $self->subscribe_count($pattern) == 0;
    return;
}

sub subscribe_count {
    my ($self, $pattern) = @_;
    return $self->_control('SUBSCRIBE_COUNT', $pattern);
}

# Options of the sends: request_info, timeout, priority, wait_for_service.
# Returns the new request's trans_id; collect the answer with recv_async.
sub send_async {
    my ($self, $name, $request, %options) = @_;
    return $self->_send_request('SEND_ASYNC', $name, $request, %options);
}

# Returns ($response_info, $response); dies with a Cumulo::Error carrying
# the response's status for an error.
sub send_sync {
    my ($self, $name, $request, %options) = @_;
    my $trans_id = $self->_send_request('SEND_SYNC', $name, $request, %options);
    my $fields = $self->_await($self->_deadline_after($options{timeout} // $self->timeout_sync), sub {
        my ($type, $f) = @_;
        return $type eq 'RESPONSE' && $f->{trans_id} eq $trans_id ? $f : undef;
    });
    unless ($fields) {
        $self->{abandoned}{$trans_id} = 1;
        _throw(Cumulo::Status::TIMEOUT, "no response to $name in time", $trans_id);
    }
    return _answer($fields);
}

# Sends a copy to every matching subscriber; returns their trans_ids.
sub mcast_async {
    my ($self, $name, $request, %options) = @_;
    my $trans_id = $self->_send_request('MCAST_ASYNC', $name, $request, %options);
    my $fields = $self->_await($self->_deadline_after($options{timeout} // $self->timeout_async), sub {
        my ($type, $f) = @_;
        return $type eq 'MCAST_SENT' && $f->{trans_id} eq $trans_id ? $f : undef;
    });
    _throw(Cumulo::Status::TIMEOUT, "no MCAST_SENT for $name in time", $trans_id) unless $fields;
    return @{ $fields->{trans_ids} };
}

# recv_async(trans_id => $id, timeout => $ms): the response of that send, or
# of any async send without trans_id, as a hash { trans_id, response_info,
# response }. Dies with its error status, or TIMEOUT if nothing came.
sub recv_async {
    my ($self, %options) = @_;
    my $trans_id = $options{trans_id};
    my $fields = $self->_take_response($trans_id) // $self->_await(
        $self->_deadline_after($options{timeout} // $self->timeout_async), sub {
            my ($type, $f) = @_;
            return $type eq 'RESPONSE' && (!defined $trans_id || $f->{trans_id} eq $trans_id) ? $f : undef;
        });
    _throw(Cumulo::Status::TIMEOUT, 'no response received in time', $trans_id) unless $fields;
    my ($info, $response) = _answer($fields);
    return { trans_id => $fields->{trans_id}, response_info => $info, response => $response };
}

# Passes $request (being handled) on to $name; options request_info,
# request, timeout, priority default to the request's own. The handler's
# return value is then ignored.
sub forward {
    my ($self, $req, $name, %options) = @_;
    $self->{connection}->write_frame('FORWARD', {
        trans_id => $req->trans_id, timeout => $options{timeout} // $req->timeout,
        priority => $options{priority} // $req->priority, flags => 0, name => $name,
        request_info => $self->_traced(_info_bytes($options{request_info} // $req->request_info)),
        request => $options{request} // $req->request,
    }, $self->{max_frame});
    $req->mark_forwarded;
    return;
}

# The event loop. Returns false once TERMINATE arrived (after finishing the
# requests already delivered), true when $timeout ms passed first.
sub poll {
    my ($self, $timeout) = @_;
    my $deadline = defined $timeout ? $self->_deadline_after($timeout, 0) : undef;
    while (1) {
        if (my $request = shift @{ $self->{queue} }) {
            # RETURNs wait in the output while requests that came in the same
            # read are handled, unless the handlers are slow.
            $self->{connection}->flush if $self->{slow_handler};
            my $started = Time::HiRes::clock_gettime(MONOTONIC);
            $self->_handle($request);
            $self->{slow_handler} = Time::HiRes::clock_gettime(MONOTONIC) - $started > SLOW_HANDLER;
            next;
        }
        if ($self->{terminated}) {
            $self->{connection}->flush;
            return 0;
        }
        my ($type, $fields) = $self->_next_frame($deadline);    # sends the queued RETURNs first
        return 1 unless defined $type;
        if ($type eq 'REQUEST') {
            push @{ $self->{queue} }, Cumulo::Request->_from_frame($fields);
            next;
        }
        $self->_background($type, $fields);
    }
}

sub is_terminated { $_[0]{terminated} }

# Says GOODBYE and closes the connection.
sub close {
    my ($self) = @_;
    my $connection = $self->{connection};
    return if $connection->is_closed;
    eval { $connection->write_frame('GOODBYE', {}, $self->{max_frame}) };    # it may be gone already
    $connection->close;
    return;
}

# The socket, for waiting on several instances at once.
sub socket { $_[0]{connection}->socket }

sub thread_index      { $_[0]{thread_index} }
sub max_frame         { $_[0]{max_frame} }
sub node_id           { $_[0]{welcome}{node_id} }
sub instance_id       { $_[0]{welcome}{instance_id} }
sub process_index     { $_[0]{welcome}{process_index} }
sub process_count     { $_[0]{welcome}{process_count} }
sub thread_count      { $_[0]{welcome}{thread_count} }
sub window            { $_[0]{welcome}{window} }
sub keepalive         { $_[0]{welcome}{keepalive} }
sub timeout_async     { $_[0]{welcome}{timeout_async} }
sub timeout_sync      { $_[0]{welcome}{timeout_sync} }
sub timeout_terminate { $_[0]{welcome}{timeout_terminate} }
sub priority_default  { $_[0]{welcome}{priority_default} }
sub prefix            { $_[0]{welcome}{prefix} }

sub info_encode { shift; Cumulo::Info::encode(@_) }
sub info_parse  { shift; Cumulo::Info::parse(@_) }

sub _handshake {
    my ($self, $token, $hello_prefix, $window) = @_;
    $self->{connection}->write_frame('HELLO', {
        version => Cumulo::Codec::VERSION, window => $window, thread_index => $self->{thread_index},
        token => $token, prefix => $hello_prefix,
    }, $self->{max_frame});
    my ($type, $fields) = $self->_next_frame($self->_deadline_after(HANDSHAKE_TIMEOUT_MS, 0));
    _throw(Cumulo::Status::TIMEOUT, 'no WELCOME from the core') unless defined $type;
    _throw($fields->{status}, $fields->{message}) if $type eq 'ERROR';
    _throw(Cumulo::Status::PROTOCOL, "expected WELCOME, got $type") unless $type eq 'WELCOME';
    $self->{welcome} = $fields;
    $self->{max_frame} = $fields->{max_frame};
    return;
}

sub _control {
    my ($self, $type, $pattern) = @_;
    my $req_id = $self->{next_req_id} = ($self->{next_req_id} + 1) & 0xffffffff;
    $self->{connection}->write_frame($type, { req_id => $req_id, pattern => $pattern }, $self->{max_frame});
    my $fields = $self->_await(undef, sub {
        my ($t, $f) = @_;
        return $t eq 'REPLY' && $f->{req_id} == $req_id ? $f : undef;
    });
    _throw($fields->{status}, $fields->{message}) if $fields->{status} != Cumulo::Status::OK;
    return $fields->{value};
}

sub _send_request {
    my ($self, $type, $name, $request, %options) = @_;
    my $trans_id = $self->_new_trans_id;
    $self->{connection}->write_frame($type, {
        trans_id => $trans_id, timeout => $options{timeout} // 0,
        priority => $options{priority} // $self->priority_default,
        flags => $options{wait_for_service} ? WAIT_FOR_SERVICE : 0, name => $name,
        request_info => $self->_traced(_info_bytes($options{request_info})), request => $request // '',
    }, $self->{max_frame});
    return $trans_id;
}

# PROTOCOL 2.2: time (ns, strictly increasing), node_id, instance_id.
sub _new_trans_id {
    my ($self) = @_;
    my ($seconds, $micros) = Time::HiRes::gettimeofday();
    my $time_ns = $seconds * 1_000_000_000 + $micros * 1000;
    $time_ns = $self->{last_time_ns} + 1 if $time_ns <= $self->{last_time_ns};
    $self->{last_time_ns} = $time_ns;
    return pack 'Q>NN', $time_ns, $self->node_id, $self->instance_id;
}

# Reads frames until $wanted returns a value for one (returned) or the
# deadline passes (undef); every other frame is handled in the background.
sub _await {
    my ($self, $deadline, $wanted) = @_;
    while (1) {
        my ($type, $fields) = $self->_next_frame($deadline);
        return unless defined $type;
        my $result = $wanted->($type, $fields);
        return $result if defined $result;
        $self->_background($type, $fields);
    }
}

sub _next_frame {
    my ($self, $deadline) = @_;
    my $limit = $self->{read_limit} // $self->{max_frame} + REQUEST_OVERHEAD;
    my @frame = eval { $self->{connection}->read_frame($deadline, $limit) };
    if (my $error = $@) {
        $self->{connection}->close;    # after a bad frame the stream cannot be resynchronised
        die $error;
    }
    return @frame;
}

sub _background {
    my ($self, $type, $fields) = @_;
    if ($type eq 'PING') {
        $self->{connection}->write_frame('PONG', { nonce => $fields->{nonce} }, $self->{max_frame});
    } elsif ($type eq 'REQUEST') {
        push @{ $self->{queue} }, Cumulo::Request->_from_frame($fields);
    } elsif ($type eq 'RESPONSE') {
        my $trans_id = $fields->{trans_id};
        return if delete $self->{abandoned}{$trans_id};
        push @{ $self->{response_order} }, $trans_id unless exists $self->{responses}{$trans_id};
        $self->{responses}{$trans_id} = $fields;
    } elsif ($type eq 'TERMINATE') {
        $self->{terminated} = 1;
    } elsif ($type eq 'ERROR') {
        $self->{connection}->close;
        _throw($fields->{status}, $fields->{message});
    } elsif ($type !~ /\A(?:REPLY|MCAST_SENT|PONG)\z/) {    # those: answers nobody waits for any more
        _throw(Cumulo::Status::PROTOCOL, "unexpected $type from the core");
    }
    return;
}

sub _take_response {
    my ($self, $trans_id) = @_;
    my $order = $self->{response_order};
    $trans_id //= $order->[0];
    return unless defined $trans_id && exists $self->{responses}{$trans_id};
    @$order = grep { $_ ne $trans_id } @$order;
    return delete $self->{responses}{$trans_id};
}

sub _answer {
    my ($fields) = @_;
    _throw($fields->{status}, $fields->{response}, $fields->{trans_id}) if $fields->{status} != Cumulo::Status::OK;
    return ($fields->{response_info}, $fields->{response});
}

sub _handle {
    my ($self, $req) = @_;
    my $handler = $self->{handlers}{ $req->{pattern} };
    my ($status, $info, $response) = $handler
        ? $self->_run_handler($handler, $req)
        : (Cumulo::Status::NO_SERVICE, '', "no handler for $req->{pattern}");
    return if $req->{forwarded};
    my $connection = $self->{connection};
    eval { $connection->queue_return($req->{trans_id}, $status, $info, $response, $self->{max_frame}); 1 }
        and return;
    my $error = $@;
    die $error unless Scalar::Util::blessed($error) && $error->isa('Cumulo::Error')
        && $error->status == Cumulo::Status::TOO_LARGE;
    $connection->queue_return($req->{trans_id}, Cumulo::Status::TOO_LARGE, '', $error->message, $self->{max_frame});
    return;
}

sub _run_handler {
    my ($self, $handler, $req) = @_;
    # PROTOCOL.md 5.1: the handler's calls inherit the request's trace
    # context; local puts the previous one (undef) back however it ends.
    local $self->{trace} = _trace_context($req->{request_info});
    my ($info, $response);
    my $ok = eval {
        my @result = $handler->($req, $self);
        ($info, $response) = @result > 1 ? @result[0, 1] : ('', $result[0]);
        die "handler returned a reference, not a string\n" if ref $response;
        $info = ref $info ? Cumulo::Info::encode($info) : $info // '';
        $response //= '';
        utf8::encode($response) if utf8::is_utf8($response);    # text out as UTF-8
        1;
    };
    return (Cumulo::Status::OK, $info, $response) if $ok;
    return (Cumulo::Status::SERVICE_ERROR, '', _describe($@));
}

# "Class: text" for an exception object, the text (without the final
# newline) for a plain die.
sub _describe {
    my ($error) = @_;
    my $text = "$error";
    chomp $text;
    $text = ref($error) . ": $text" if Scalar::Util::blessed($error) && $text !~ /\A\Q@{[ref $error]}\E/;
    utf8::encode($text) if utf8::is_utf8($text);
    return $text;
}

# The encoded traceparent and tracestate pairs of $info, or undef without a
# traceparent (a request without one is not parsed).
sub _trace_context {
    my ($info) = @_;
    return if !defined $info || index($info, "traceparent\0") < 0;
    my $pairs = eval { Cumulo::Info::parse($info) } or return;
    my ($parent) = grep { $_->[0] eq 'traceparent' } @$pairs;
    my ($state) = grep { $_->[0] eq 'tracestate' } @$pairs;
    return $parent && Cumulo::Info::encode([$parent, $state ? $state : ()]);
}

# $info (encoded) with the current trace context appended, unless it has a
# traceparent of its own or no handler with a context is running.
sub _traced {
    my ($self, $info) = @_;
    my $trace = $self->{trace};
    return $info unless defined $trace;
    my $pairs = eval { Cumulo::Info::parse($info) } or return $info;    # malformed: sent as given
    return $info if grep { $_->[0] eq 'traceparent' } @$pairs;
    return $info . $trace;
}

sub _info_bytes {
    my ($info) = @_;
    return ref $info ? Cumulo::Info::encode($info) : $info // '';
}

sub _deadline_after {
    my ($self, $milliseconds, $grace) = @_;
    return Cumulo::Connection::now() + ($milliseconds + ($grace // GRACE_MS)) / 1000;
}

sub _throw {
    my ($status, $message, $trans_id) = @_;
    Cumulo::Error->throw(status => $status, message => $message, trans_id => $trans_id);
}

1;
