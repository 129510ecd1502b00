// SPDX-License-Identifier: Apache-2.0
// go_redis_export.go — added by rings_compat.py to a mirror of go-redis v5's package (symlinks
// to Debian's golang-gopkg-redis.v5-dev files, in a temporary GOPATH) for go_redis_ring.go:
// go-redis v5 routes a key inside Ring (shardByKey) and exports no way to ask which shard a key
// goes to, or to mark a shard down without a failing server. These two functions call the
// package's own code for that; they add no placement logic.
package redis

// ChashShardName returns the name of the shard Ring.shardByKey picks for key ("" for none).
func ChashShardName(c *Ring, key string) string {
	shard, err := c.shardByKey(key)
	if err != nil || shard == nil {
		return ""
	}
	for name, s := range c.shards {
		if s == shard {
			return name
		}
	}
	return ""
}

// ChashMarkDown votes each named shard down as failed heartbeats do (three votes reach the
// threshold), then rebalances the ring as the heartbeat does after a change.
func ChashMarkDown(c *Ring, names ...string) {
	for _, name := range names {
		for i := 0; i < 3; i++ {
			c.shards[name].Vote(false)
		}
	}
	c.rebalance()
}
