// SPDX-License-Identifier: Apache-2.0
// go_redis_ring.go — the oracle for chash's go_redis_ring@5: the real Ring of go-redis v5
// (Debian golang-gopkg-redis.v5-dev), built by rings_compat.py in GOPATH mode against a mirror
// of the package with go_redis_export.go added (it exports Ring's own key-to-shard lookup and
// its way of taking a shard out).
//
// Each case (rings_compat.py's batch format: "case", node W HEXID, down I, key HEX) makes
// redis.NewRing(&redis.RingOptions{Addrs: name -> address, HeartbeatFrequency: an hour}) with
// the node ids as shard names (nothing connects; no heartbeat runs), marks the down shards down
// and rebalances (what Ring does when a shard stops answering), then prints, for each key, the
// shard Ring routes it to (hashtag.Key, then the consistent hash) as its index in the node
// list, -1 for none.
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	redis "gopkg.in/redis.v5"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var names, down []string
	index := map[string]int{}
	var ring *redis.Ring
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "case":
			if ring != nil {
				ring.Close()
			}
			names, down, ring = nil, nil, nil
			index = map[string]int{}
		case "node":
			b, _ := hex.DecodeString(f[2])
			index[string(b)] = len(names)
			names = append(names, string(b))
		case "down":
			var i int
			fmt.Sscan(f[1], &i)
			down = append(down, names[i])
		case "key":
			if ring == nil {
				addrs := map[string]string{}
				for i, n := range names {
					addrs[n] = fmt.Sprintf("127.0.0.1:%d", 20000+i)
				}
				ring = redis.NewRing(&redis.RingOptions{Addrs: addrs, HeartbeatFrequency: time.Hour})
				if len(down) > 0 {
					redis.ChashMarkDown(ring, down...)
				}
			}
			var key []byte
			if f[1] != "-" {
				key, _ = hex.DecodeString(f[1])
			}
			name := redis.ChashShardName(ring, string(key))
			if i, ok := index[name]; ok {
				fmt.Fprintln(out, i)
			} else {
				fmt.Fprintln(out, -1)
			}
		}
	}
}
