<?php
// SPDX-License-Identifier: Apache-2.0
// pecl_memcache.php -- the oracle for chash's pecl_memcache@4: the real PECL memcache extension
// (Debian php-memcache, 4.x) in php-cli, memcache.hash_strategy = consistent, with the hash
// function given as the first argument (crc32 or fnv). Servers are added with
// MemcachePool::addServer(host, port, 0, false, weight) in list order (nothing connects) and
// MemcachePool::findServer(key) names each key's server ("host:port").
//
// A server the case marks down ("down I") is added with status false and retry_interval -1:
// PECL then counts it failed for good, and findServer's own failover (mmc_pool_find: "<key>-<i>"
// for i < memcache.max_failover_attempts) picks the key's server; -1 where it found none up.
// findServer prepares the key first, as every command does (mmc_prepare_key).
//
// Reads the case format of clients_compat.py on stdin (node W HEXID with the id "host:port",
// down I, key HEX; keys are bytes) and prints each key's server as its index in the node list.
ini_set('memcache.hash_strategy', 'consistent');
ini_set('memcache.hash_function', $argv[1]);
$pool = null;
$nodes = [];
$down = [];
$index = [];
$out = [];
while (($line = fgets(STDIN)) !== false) {
    $f = explode(' ', trim($line));
    if ($f[0] === 'node') {
        $w = (float)$f[1];
        if ($w != floor($w)) {
            fwrite(STDERR, "PECL memcache weights are integers\n");
            exit(2);
        }
        $nodes[] = [hex2bin($f[2]), (int)$w];
    } elseif ($f[0] === 'down') {
        $down[(int)$f[1]] = true;
    } elseif ($f[0] === 'key') {
        if ($pool === null) {
            $pool = new MemcachePool();
            foreach ($nodes as $i => [$id, $w]) {
                $colon = strrpos($id, ':');
                $pool->addServer(substr($id, 0, $colon), (int)substr($id, $colon + 1), 0, false,
                                 $w, 1, -1, !isset($down[$i]));
                $index[$id] = $i;
            }
        }
        $i = $index[$pool->findServer($f[1] === '-' ? '' : hex2bin($f[1]))];
        $out[] = isset($down[$i]) ? -1 : $i;
    }
}
echo implode("\n", $out), "\n";
