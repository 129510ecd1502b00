# SPDX-License-Identifier: Apache-2.0
# cmfast.pl -- the oracle for chash's cmfast@0: the real Cache::Memcached::Fast 0.28 (Debian
# libcache-memcached-fast-perl), an XS client with no way to ask where a key goes but to send
# it. So each case's servers are real sockets: a child process listens on every "ip:port" of
# the case (loopback addresses the test picked free) and answers each "get" with "END", noting
# which listener each key reached; the client, Cache::Memcached::Fast->new({servers =>
# [{address, weight}, ...], ketama_points => N[, namespace, hash_namespace]}), asks get_multi
# for the case's keys (its own dispatch: the continuum of crc32 points, the key's crc32).
#
# Reads rings_compat.py's batch format on stdin ("case", "ketama_points N", "namespace NS",
# "hash_namespace 1", node W HEXID, key HEX; keys without space or newline) and prints each
# key's server as its index in the node list.
use strict;
use warnings;
use Cache::Memcached::Fast;
use IO::Select;
use IO::Socket::INET;
use File::Temp qw(tempfile);

sub serve {
    my ($addrs, $report) = @_;
    my (@listeners, %listener_of);
    for my $i (0 .. $#$addrs) {
        my ($host, $port) = $addrs->[$i] =~ /^(.*):(\d+)$/;
        my $l = IO::Socket::INET->new(LocalAddr => $host, LocalPort => $port, Listen => 16,
                                      ReuseAddr => 1, Proto => 'tcp')
            or die "listen $addrs->[$i]: $!";
        push @listeners, $l;
        $listener_of{fileno $l} = $i;
    }
    print $report "ready\n";
    $report->flush;
    my $sel = IO::Select->new(@listeners);
    my (%server_of, %buf);
    while (1) {
        for my $fh ($sel->can_read) {
            my $fd = fileno $fh;
            if (exists $listener_of{$fd} && !exists $server_of{$fd}) {
                my $c = $fh->accept or next;
                $server_of{fileno $c} = $listener_of{$fd};
                $buf{fileno $c} = '';
                $sel->add($c);
                next;
            }
            my $n = sysread($fh, my $chunk, 65536);
            if (!$n) {
                $sel->remove($fh);
                close $fh;
                next;
            }
            $buf{$fd} .= $chunk;
            while ($buf{$fd} =~ s/\A(.*?)\r\n//s) {
                my $line = $1;
                if ($line =~ s/\Aget //) {
                    print $report "$server_of{$fd} ", unpack('H*', $_), "\n" for split / /, $line;
                    $report->flush;
                    syswrite($fh, "END\r\n");
                } else {
                    syswrite($fh, "ERROR\r\n");
                }
            }
        }
    }
}

sub place {
    my ($case) = @_;
    my @addrs = map { $_->[0] } @{$case->{nodes}};
    # The child notes each key in a file before it answers the get that carried it, so the
    # notes are complete when get_multi returns (a pipe would fill up while the client waits).
    my ($report, $path) = tempfile(UNLINK => 1);
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        serve(\@addrs, $report);
        exit 0;
    }
    close $report;
    open(my $from_child, '<', $path) or die "$path: $!";
    my $ready;
    for (1 .. 5000) {
        seek($from_child, 0, 1);    # clears end-of-file: the child may have written since
        $ready = <$from_child>;
        last if defined $ready;
        select(undef, undef, undef, 0.001);
    }
    die "the fake servers did not start\n" unless defined $ready && $ready eq "ready\n";
    my %conf = (servers => [map { {address => $_->[0], weight => $_->[1]} } @{$case->{nodes}}],
                ketama_points => $case->{ketama_points}, connect_timeout => 5,
                io_timeout => 5, close_on_error => 0);
    if (defined $case->{namespace}) {
        $conf{namespace} = $case->{namespace};
        $conf{hash_namespace} = $case->{hash_namespace};
    }
    my $memd = Cache::Memcached::Fast->new(\%conf);
    my %seen;
    my @unique = grep { !$seen{$_}++ } @{$case->{keys}};
    my %where;
    for (my $i = 0; $i < @unique; $i += 20000) {
        my @batch = @unique[$i .. ($i + 19999 < $#unique ? $i + 19999 : $#unique)];
        $memd->get_multi(@batch);
        seek($from_child, 0, 1);
        my $want = @batch;
        while ($want > 0) {
            my $line = <$from_child>;
            die "the fake servers stopped\n" unless defined $line;
            my ($server, $hex) = split / /, $line;
            chomp $hex;
            my $key = pack('H*', $hex);
            $key = substr($key, length $case->{namespace}) if defined $case->{namespace};
            $where{$key} //= $server;
            $want--;
        }
    }
    $memd->disconnect_all;
    kill 'TERM', $pid;
    waitpid $pid, 0;
    return map { $where{$_} // die "key not seen: " . unpack('H*', $_) . "\n" } @{$case->{keys}};
}

my (@cases, $case);
while (my $line = <STDIN>) {
    chomp $line;
    my @f = split / /, $line;
    next unless @f;
    if ($f[0] eq 'case') {
        $case = {nodes => [], keys => [], ketama_points => 150};
        push @cases, $case;
    } elsif ($f[0] eq 'ketama_points') {
        $case->{ketama_points} = $f[1];
    } elsif ($f[0] eq 'namespace') {
        $case->{namespace} = pack('H*', $f[1]);
    } elsif ($f[0] eq 'hash_namespace') {
        $case->{hash_namespace} = $f[1];
    } elsif ($f[0] eq 'node') {
        push @{$case->{nodes}}, [pack('H*', $f[2]), $f[1] + 0];
    } elsif ($f[0] eq 'key') {
        push @{$case->{keys}}, pack('H*', $f[1]);
    }
}
my @out;
push @out, place($_) for @cases;
print join("\n", @out), "\n";
