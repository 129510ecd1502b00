# SPDX-License-Identifier: Apache-2.0
# cache_memcached.pl -- the oracle for chash's cache_memcached@1: the real Cache::Memcached 1.30
# (Debian libcache-memcached-perl).
#
# Each case of rings_compat.py's batch format on stdin ("case", node W HEXID with the server
# "host:port", down I, key HEX) makes Cache::Memcached->new({servers => [[host:port, weight],
# ...]}) in list order, and for each key calls its get_sock($key): the bucket of the key's hash,
# and past a dead server its own rehash ("<tries><key>", 20 tries). The only change: no socket.
# sock_to_host() -- which get_sock calls to connect to a bucket's server -- is replaced by one
# that answers the server's name for a server that is up and undef for one the case marks
# down (what a refused connection gives). Prints each key's server as its index in the node
# list, -1 where get_sock finds none.
use strict;
use warnings;
use Cache::Memcached;

my (@servers, %down, %index, $memd);
{
    no warnings 'redefine';
    *Cache::Memcached::sock_to_host = sub {
        my $host = ref $_[0] ? $_[1] : $_[0];
        return $down{$host} ? undef : "sock:$host";
    };
}
my @out;
while (my $line = <STDIN>) {
    chomp $line;
    my @f = split / /, $line;
    next unless @f;
    if ($f[0] eq 'case') {
        @servers = ();
        %down = ();
        %index = ();
        undef $memd;
    } elsif ($f[0] eq 'node') {
        my $id = pack('H*', $f[2]);
        die "Cache::Memcached weights are whole: $f[1]\n" unless $f[1] == int($f[1]);
        $index{$id} = scalar @servers;
        push @servers, [$id, int($f[1])];
    } elsif ($f[0] eq 'down') {
        $down{$servers[$f[1]][0]} = 1;
    } elsif ($f[0] eq 'key') {
        $memd //= Cache::Memcached->new({servers => [@servers]});
        my $key = $f[1] eq '-' ? '' : pack('H*', $f[1]);
        my $sock = $memd->get_sock($key);
        push @out, defined $sock ? $index{substr($sock, 5)} : -1;
    }
}
print join("\n", @out), "\n";
