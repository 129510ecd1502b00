<?php
// SPDX-License-Identifier: Apache-2.0
// predis_ring.php -- the oracle for chash's predis@1 and predis_ketama@1: the real Predis 1.1
// (Debian php-predis) in php-cli.
//
//   php predis_ring.php {hashring,ketama} < cases
//
// Each case (rings_compat.py's batch format: "case", then node W HEXID lines, then key HEX
// lines) builds a client as an application does, new Predis\Client($servers, ['cluster' => ...])
// with the servers as connection parameters in list order ("host:port" or a socket path, and
// the weight parameter): 'predis' (PredisCluster over PredisStrategy's default HashRing) or a
// PredisCluster over PredisStrategy(new KetamaRing()). Nothing connects. For each key the
// cluster's getConnectionByKey() (the strategy's tag rule, then the distributor) names the
// connection, printed as its index in the node list.
require 'Predis/Autoloader.php';
Predis\Autoloader::register();

use Predis\Cluster\Distributor\KetamaRing;
use Predis\Cluster\PredisStrategy;
use Predis\Connection\Aggregate\PredisCluster;

$mode = $argv[1];
$nodes = [];
$cluster = null;
$index = [];
$out = fopen('php://stdout', 'w');

function build($nodes, $mode, &$index)
{
    $params = [];
    $index = [];
    foreach ($nodes as $i => [$id, $w]) {
        if ($id[0] === '/') {
            $params[] = ['scheme' => 'unix', 'path' => $id, 'weight' => $w];
        } else {
            $colon = strrpos($id, ':');
            $params[] = ['host' => substr($id, 0, $colon), 'port' => (int)substr($id, $colon + 1),
                         'weight' => $w];
        }
        $index[$id] = $i;
    }
    $cluster = $mode === 'ketama'
        ? function () { return new PredisCluster(new PredisStrategy(new KetamaRing())); }
        : 'predis';
    $client = new Predis\Client($params, ['cluster' => $cluster]);
    $conn = $client->getConnection();
    if (!($conn instanceof PredisCluster)) {
        fwrite(STDERR, "not a PredisCluster: " . get_class($conn) . "\n");
        exit(2);
    }
    foreach ($conn as $c) {
        if (!isset($index[(string)$c])) {
            fwrite(STDERR, "Predis names a node " . (string)$c . "\n");
            exit(2);
        }
    }
    return $conn;
}

while (($line = fgets(STDIN)) !== false) {
    $f = explode(' ', rtrim($line, "\n"));
    if ($f[0] === 'case') {
        $nodes = [];
        $cluster = null;
    } elseif ($f[0] === 'node') {
        $nodes[] = [hex2bin($f[2]), (int)(float)$f[1]];
    } elseif ($f[0] === 'key') {
        if ($cluster === null)
            $cluster = build($nodes, $mode, $index);
        $key = $f[1] === '-' ? '' : hex2bin($f[1]);
        fwrite($out, $index[(string)$cluster->getConnectionByKey($key)] . "\n");
    }
}
