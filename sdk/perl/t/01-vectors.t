# Every vector of proto/vectors/*.json: decode and compare every field,
# encode the fields and compare the bytes, reject every invalid one.
use strict;
use warnings;
use Test::More;
use FindBin;
use JSON::PP;
use Scalar::Util qw(blessed);
use Cumulo::Codec;
use Cumulo::Info;
use Cumulo::Status;

use constant VECTOR_LIMIT => 1024;    # TOO_LARGE vectors assume this frame limit

my @files = sort glob("$FindBin::Bin/../../../proto/vectors/*.json");
ok(@files >= 6, 'vector files found') or BAIL_OUT('no vectors');

sub slurp {
    my ($file) = @_;
    open my $fh, '<:raw', $file or die "$file: $!";
    local $/;
    return scalar <$fh>;
}

# JSON fields to the codec's values: tid and bytes fields as bytes.
sub expected_fields {
    my ($type, $json) = @_;
    my %fields;
    my @layout = @{ $Cumulo::Codec::LAYOUTS{$type} };
    while (my ($name, $kind) = splice @layout, 0, 2) {
        my $value = $json->{$name};
        $fields{$name} = $kind eq 'tid' || $kind eq 'bytes' ? pack('H*', $value)
            : $kind eq 'tids' ? [map { pack 'H*', $_ } @$value]
            : $value;
    }
    return \%fields;
}

sub status_of {
    my ($error) = @_;
    return blessed($error) && $error->isa('Cumulo::Error') ? $error->status_name : "not a Cumulo::Error: $error";
}

for my $file (@files) {
    my ($family) = $file =~ m{([^/]+)\.json\z};
    my $data = JSON::PP->new->utf8->decode(slurp($file));
    for my $vector (@{ $data->{vectors} }) {
        my $label = "$family/$vector->{name}";
        if ($family eq 'kv') {
            my @pairs = map { [map { my $b = $_; utf8::encode($b); $b } @$_] } @{ $vector->{pairs} };
            is_deeply(Cumulo::Info::parse(pack 'H*', $vector->{hex}), \@pairs, "$label parses");
            is(unpack('H*', Cumulo::Info::encode($vector->{pairs})), $vector->{hex}, "$label encodes");
            next;
        }
        my $expected = expected_fields($vector->{type}, $vector->{fields});
        my ($type, $fields) = Cumulo::Codec::decode(pack 'H*', $vector->{hex});
        is($type, $vector->{type}, "$label type");
        is_deeply($fields, $expected, "$label decodes");
        is(unpack('H*', Cumulo::Codec::encode($vector->{type}, $expected)), $vector->{hex}, "$label encodes");
    }
    for my $vector (@{ $data->{invalid} || [] }) {
        my $raw = pack 'H*', $vector->{hex};
        eval { $family eq 'kv' ? Cumulo::Info::parse($raw) : Cumulo::Codec::decode($raw, VECTOR_LIMIT); 1 };
        is(status_of($@ || 'nothing raised'), $vector->{error}, "$family/$vector->{name} rejected");
    }
}

done_testing;
