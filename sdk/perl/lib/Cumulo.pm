package Cumulo;

# cumulo SDK: a service instance speaking the cumulo wire protocol v1.
#
#   use Cumulo;
#   Cumulo::run(sub {
#       my ($api) = @_;
#       $api->subscribe('hello/get', sub { my ($req) = @_; return 'hello' });
#   });

use strict;
use warnings;
use Cumulo::API;
use Cumulo::Codec;
use Cumulo::Error;
use Cumulo::Info;
use Cumulo::Request;
use Cumulo::Runner;
use Cumulo::Status;

our $VERSION = '0.1.0';

# One instance per CUMULO_THREAD_COUNT, set up by $setup->($api), served
# until TERMINATE. Options: thread_count, use_threads, and those of
# Cumulo::API->new.
sub run {
    my ($setup, %options) = @_;
    return Cumulo::Runner::run($setup, %options);
}

1;
