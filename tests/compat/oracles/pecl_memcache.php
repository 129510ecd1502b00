<?php
// pecl_memcache.php -- the oracle for chash's pecl_memcache@4: the real PECL memcache extension
// (Debian php-memcache, 4.x) in php-cli, memcache.hash_strategy = consistent, with the hash
// function given as the first argument (crc32 or fnv). Servers are added with
// MemcachePool::addServer(host, port, 0, false, weight) in list order (nothing connects) and
// MemcachePool::findServer(key) names each key's server ("host:port").
//
// Reads the case format of clients_compat.py on stdin (node W HEXID with the id "host:port",
// key HEX; keys are bytes) and prints each key's owner as its index in the node list.
ini_set('memcache.hash_strategy', 'consistent');
ini_set('memcache.hash_function', $argv[1]);
$pool = new MemcachePool();
$index = [];
$out = [];
while (($line = fgets(STDIN)) !== false) {
    $f = explode(' ', trim($line));
    if ($f[0] === 'node') {
        $id = hex2bin($f[2]);
        $colon = strrpos($id, ':');
        $w = (float)$f[1];
        if ($w != floor($w)) {
            fwrite(STDERR, "PECL memcache weights are integers\n");
            exit(2);
        }
        $pool->addServer(substr($id, 0, $colon), (int)substr($id, $colon + 1), 0, false, (int)$w);
        $index[$id] = count($index);
    } elseif ($f[0] === 'key') {
        $server = $pool->findServer($f[1] === '-' ? '' : hex2bin($f[1]));
        $out[] = $index[$server];
    }
}
echo implode("\n", $out), "\n";
