#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
hashcheck_calibration.py -- are `chash hashcheck`'s p-values calibrated? (not run by ctest)

usage: hashcheck_calibration.py PATH/TO/chash [FLEETS] [VNODES]

For FLEETS random fleets (default 150: 3 to 20 nodes; ids short, "cache-NN" or "host:port") it
runs hashcheck on every hash and prints, per hash and test, the fraction of p-values below 0.05,
0.01 and 0.001, and their mean. For a hash that behaves like a random function the p-values are
uniform: about 5%, 1% and 0.1%, mean 0.5 (the spread test is Bonferroni-corrected, so it sits
lower and its mean higher). A clustering hash shows p-values near 0. docs/CLI.md quotes a run.
"""
import collections
import json
import random
import subprocess
import sys


def main():
    chash = sys.argv[1]
    fleets = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    vnodes = sys.argv[3] if len(sys.argv) > 3 else "160"
    rng = random.Random(1)
    ps = collections.defaultdict(lambda: collections.defaultdict(list))
    for t in range(fleets):
        n, style, ids = rng.choice([3, 5, 8, 12, 20]), rng.choice(["short", "cache", "ip"]), set()
        while len(ids) < n:
            if style == "short":
                ids.add("".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 3))))
            elif style == "cache":
                ids.add("cache-%02d" % rng.randint(0, 99))
            else:
                ids.add("10.0.%d.%d:11211:1" % (rng.randint(0, 3), rng.randint(1, 254)))
        out = subprocess.run([chash, "hashcheck", "--nodes", ",".join(sorted(ids)), "--vnodes",
                              vnodes, "--keys", "20000", "--seed", str(t), "--json"],
                             capture_output=True, text=True, check=True).stdout
        for r in json.loads(out)["results"]:
            for test in ("spread", "balance", "keys"):
                ps[r["hash"]][test].append(r[test]["p"])
    print("%d fleets, %s vnodes: fraction of p-values below 0.05 / 0.01 / 0.001, and the mean"
          % (fleets, vnodes))
    for h, tests in ps.items():
        print("%-13s" % h, "  ".join(
            "%s %.3f/%.3f/%.3f mean %.2f" % (t, *(sum(p < a for p in v) / len(v)
                                                 for a in (0.05, 0.01, 0.001)), sum(v) / len(v))
            for t, v in tests.items()))


if __name__ == "__main__":
    main()
