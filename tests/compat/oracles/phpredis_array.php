<?php
// SPDX-License-Identifier: Apache-2.0
// phpredis_array.php -- the oracle for chash's phpredis_array@5 and phpredis_array_range@5: the
// real RedisArray of phpredis 5 (Debian php-redis) in php-cli.
//
//   php phpredis_array.php {consistent,range} < cases
//
// Each case (rings_compat.py's batch format) builds new RedisArray($hosts, ['lazy_connect' =>
// true, 'consistent' => true|false]) with the host strings in list order (nothing connects)
// and prints, for each key, RedisArray::_target($key) (the tag extraction, the hash and the
// continuum or the range split of ra_find_node) as the host's index in the node list.
$consistent = $argv[1] === 'consistent';
$hosts = [];
$ra = null;
$index = [];
$out = fopen('php://stdout', 'w');
while (($line = fgets(STDIN)) !== false) {
    $f = explode(' ', rtrim($line, "\n"));
    if ($f[0] === 'case') {
        $hosts = [];
        $ra = null;
    } elseif ($f[0] === 'node') {
        $hosts[] = hex2bin($f[2]);
    } elseif ($f[0] === 'key') {
        if ($ra === null) {
            $ra = new RedisArray($hosts, ['lazy_connect' => true, 'consistent' => $consistent]);
            $index = array_flip($hosts);
        }
        $target = $ra->_target($f[1] === '-' ? '' : hex2bin($f[1]));
        if (!isset($index[$target])) {
            fwrite(STDERR, "RedisArray names a host " . var_export($target, true) . "\n");
            exit(2);
        }
        fwrite($out, $index[$target] . "\n");
    }
}
