# Runs examples/http_req/perl as a real managed process against the fake core.
use strict;
use warnings;
use Test::More;
use FindBin;
use Time::HiRes ();
use lib "$FindBin::Bin/lib";
use FakeCore;

my $EXAMPLE = "$FindBin::Bin/../../../examples/http_req/perl/http_req.pl";
my $XML_INFO = "content-type\0text/xml; charset=utf-8\0";
my $NO_VALUE = '<http_test><error>no value specified</error></http_test>';
my @CASES = (
    ["value\0" . "42\0", '<http_test><value>42</value></http_test>'],
    ["value\0+007\0", '<http_test><value>7</value></http_test>'],
    ["value\0-3\0", '<http_test><value>-3</value></http_test>'],
    ["value\0-0\0", '<http_test><value>0</value></http_test>'],
    ["a\0b\0value\0-9223372036854775808\0", '<http_test><value>-9223372036854775808</value></http_test>'],
    ["value\0" . "9223372036854775807\0", '<http_test><value>9223372036854775807</value></http_test>'],
    ["value\0" . "9223372036854775808\0", $NO_VALUE],
    ["value\0" . "4x\0", $NO_VALUE],
    ["value\0" . "4\n\0", $NO_VALUE],
    ["value\0\0", $NO_VALUE],
    ["other\0" . "1\0", $NO_VALUE],
    ["value\0" . "42", $NO_VALUE],
    ['', $NO_VALUE],
);

my $core = FakeCore->new(sub {
    my (@peers, @tokens);
    for (1 .. 2) {
        my ($peer, $hello) = $_[0]->accept_instance(prefix => '/tests/http_req/');
        $peer->reply('SUBSCRIBE', 'perl.xml/get');
        push @peers, $peer;
        push @tokens, $hello->{token};
    }
    my @answers;
    for my $index (0 .. $#CASES) {
        my $peer = $peers[$index % 2];
        $peer->send_frame('REQUEST', { trans_id => pack('Q>NN', $index + 1, 3, 9), timeout => 1000, priority => 0,
            flags => 1, source => 0, name => '/tests/http_req/perl.xml/get',
            pattern => '/tests/http_req/perl.xml/get', request_info => '', request => $CASES[$index][0] });
        push @answers, [@{ $peer->expect('RETURN') }{qw(status response_info response)}];
    }
    $_->send_frame('TERMINATE', { timeout => 100 }) for @peers;
    return (\@tokens, \@answers);
});

my $pid = fork // die "fork: $!";
if ($pid == 0) {
    @ENV{qw(CUMULO_SOCKET CUMULO_TOKEN CUMULO_THREAD_COUNT)} = ($core->path, 'token', 2);
    exec $^X, $EXAMPLE or die "exec: $!";
}
my ($tokens, $answers) = eval { $core->join };
my $failure = $@;
my $exited = 0;
for (1 .. 50) {    # up to 5 s for the example to end after TERMINATE
    last if ($exited = waitpid($pid, POSIX::WNOHANG()) == $pid);
    Time::HiRes::sleep(0.1);
}
unless ($exited) {
    kill 'KILL', $pid;
    waitpid $pid, 0;
}
is($failure, '', 'the fake core saw what it expected');
ok($exited && $? == 0, 'the example exits cleanly after TERMINATE');
is_deeply($tokens, ['token', 'token'], 'two instances with the token');
is_deeply($answers, [map { [0, $XML_INFO, $_->[1]] } @CASES], 'every answer');

done_testing;
