<?php
// SPDX-License-Identifier: Apache-2.0
// PHP's memcached extension (Debian php-memcached, over libmemcached) with
// OPT_BINARY_PROTOCOL and SASL through chash-proxy: the work of test_mc_binary_clients.py's PHP
// client, each result checked here, the state it leaves on the servers printed for the test.
//
//   php -d memcached.use_sasl=1 mc_binary_php.php HOST PORT USER PASSWORD PREFIX TEXT_PORT
//
// TEXT_PORT: a pool without SASL, where the same extension in its default (text) mode reads the
// proxy's version and stats too (libmemcached refuses a server whose major version is 0).
//
// Prints one line: "ok " + JSON {present: {key: value}, absent: [key]}; exit 1 with the
// failed check on stderr otherwise. Values are strings, stored by the extension as they are
// (flags 0), so the test reads them back from the memcacheds unchanged.

[$host, $port, $user, $password, $prefix, $textPort] = array_slice($argv, 1);
$want_version = '1.6.0+chash-proxy-0.1.0'; // the version memcached clients read (docs/PROXY.md)

function check(string $what, $got, $want): void
{
    if ($got !== $want) {
        fwrite(STDERR, "php memcached: $what: " . var_export($got, true) . ", expected "
               . var_export($want, true) . "\n");
        exit(1);
    }
}

function client(string $host, string $port, string $user, string $password): Memcached
{
    $m = new Memcached();
    $m->setOption(Memcached::OPT_BINARY_PROTOCOL, true);
    $m->setOption(Memcached::OPT_COMPRESSION, false);
    $m->setOption(Memcached::OPT_POLL_TIMEOUT, 20000);
    $m->setOption(Memcached::OPT_RECV_TIMEOUT, 20000000);
    $m->setOption(Memcached::OPT_SEND_TIMEOUT, 20000000);
    $m->addServer($host, (int)$port);
    $m->setSaslAuthData($user, $password);
    return $m;
}

$m = client($host, $port, $user, $password);
check('binary protocol on', (bool)$m->getOption(Memcached::OPT_BINARY_PROTOCOL), true);
$key = fn(int $i): string => "{$prefix}k$i";
$value = fn(int $i): string => $i === 5 ? str_repeat('P', 300000) : "$prefix-value-$i";
$keys = array_map($key, range(0, 23));
$present = [];
$absent = [];

foreach ($keys as $i => $k) {
    check("set $k", $m->set($k, $value($i)), true);
}
foreach ($keys as $i => $k) {
    check("get $k", $m->get($k), $value($i));
}
// the multi-get (getkq of every key, then a noop) over the present keys and 6 absent ones
$ask = $keys;
for ($i = 0; $i < 6; $i++) {
    $ask[] = "{$prefix}absent$i";
    $absent[] = "{$prefix}absent$i";
}
$want = [];
foreach ($keys as $i => $k) {
    $want[$k] = $value($i);
}
check('getMulti', $m->getMulti($ask, Memcached::GET_PRESERVE_ORDER),
      array_merge($want, array_fill_keys($absent, null)));

// CAS: the value's cas from a get, an update with it, a second update with the stale one refused
$got = $m->get($key(1), null, Memcached::GET_EXTENDED);
check('get with its cas', is_array($got) && $got['value'] === $value(1) && $got['cas'] > 0, true);
check('cas with the current cas', $m->cas($got['cas'], $key(1), 'cas-updated'), true);
check('cas with a stale cas', $m->cas($got['cas'], $key(1), 'stale'), false);
check('the stale cas\'s result code', $m->getResultCode(), Memcached::RES_DATA_EXISTS);
check('get after cas', $m->get($key(1)), 'cas-updated');

check('add of a present key', $m->add($key(0), 'x'), false);
check('add of a new key', $m->add("{$prefix}added", 'fresh'), true);
check('replace of an absent key', $m->replace("{$prefix}nobody", 'x'), false);
$absent[] = "{$prefix}nobody";
check('append', $m->append($key(2), '+tail'), true);
check('prepend', $m->prepend($key(2), 'head+'), true);

// incr/decr with an initial value (the binary protocol's own: libmemcached sends it only there)
$counter = "{$prefix}counter";
check('increment of an absent key (initial 10)', $m->increment($counter, 5, 10, 0), 10);
check('increment by 5', $m->increment($counter, 5), 15);
check('decrement by 3', $m->decrement($counter, 3), 12);
check('decrement below zero stops at 0', $m->decrement("{$prefix}floor", 7, 3, 0), 3);
check('decrement of 3 by 7', $m->decrement("{$prefix}floor", 7), 0);

check('touch of a present key', $m->touch($key(3), 3600), true);
check('touch of an absent key', $m->touch("{$prefix}nobody", 3600), false);
check('delete', $m->delete($key(4)), true);
check('delete of an absent key', $m->delete($key(4)), false);
check('the absent delete\'s result code', $m->getResultCode(), Memcached::RES_NOTFOUND);
check('get of the deleted key', $m->get($key(4)), false);
$absent[] = $key(4);

foreach ($keys as $i => $k) {
    if ($i !== 4) {
        $present[$k] = $value($i);
    }
}
$present[$key(1)] = 'cas-updated';
$present[$key(2)] = 'head+' . $value(2) . '+tail';
$present["{$prefix}added"] = 'fresh';
$present[$counter] = '12';
$present["{$prefix}floor"] = '0';

// getVersion and getStats, binary (version, stat) and text (version, stats): the proxy's own
$text = new Memcached();
$text->addServer($host, (int)$textPort);
foreach (['binary' => $m, 'text' => $text] as $mode => $c) {
    $version = $c->getVersion();
    check("getVersion ($mode)", is_array($version) ? array_values($version) : $version, ['1.6.0']);
    $stats = $c->getStats();
    $stats = is_array($stats) && count($stats) === 1 ? reset($stats) : $stats;
    check("getStats ($mode)", is_array($stats) && ($stats['version'] ?? '') === $want_version
          && ($stats['pid'] ?? 0) > 0, true);
}

// a wrong password: refused
$bad = client($host, $port, $user, "wr0ng-$password");
check('a get with a wrong password', $bad->get($key(0)), false);
check('its result code', $bad->getResultCode() === Memcached::RES_AUTH_FAILURE
      || $bad->getResultCode() === Memcached::RES_AUTH_PROBLEM, true);

echo 'ok ' . json_encode(['present' => $present, 'absent' => $absent]) . "\n";
