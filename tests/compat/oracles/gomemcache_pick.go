// SPDX-License-Identifier: Apache-2.0
// gomemcache_pick.go — the oracle for chash's gomemcache@0: the real memcache.ServerList of
// github.com/bradfitz/gomemcache (Debian golang-github-bradfitz-gomemcache-dev), built by
// rings_compat.py in GOPATH mode.
//
// Each case of rings_compat.py's batch format on stdin ("case", node W HEXID with the server
// "ip:port", key HEX; Go strings are bytes) calls ServerList.SetServers with each server listed
// W times in a row (gomemcache's way to weight a server; SetServers resolves IP literals
// without a lookup) and prints ServerList.PickServer(key)'s address as the server's index in
// the node list.
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/bradfitz/gomemcache/memcache"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var list []string
	index := map[string]int{}
	n := 0
	var sl *memcache.ServerList
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "case":
			list, index, n, sl = nil, map[string]int{}, 0, nil
		case "node":
			w, err := strconv.ParseFloat(f[1], 64)
			if err != nil || w != float64(int(w)) || w < 1 {
				fmt.Fprintln(os.Stderr, "gomemcache repeats a server: whole weights only")
				os.Exit(2)
			}
			b, _ := hex.DecodeString(f[2])
			for i := 0; i < int(w); i++ {
				list = append(list, string(b))
			}
			index[string(b)] = n
			n++
		case "key":
			if sl == nil {
				sl = new(memcache.ServerList)
				if err := sl.SetServers(list...); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
			}
			var key []byte
			if f[1] != "-" {
				key, _ = hex.DecodeString(f[1])
			}
			addr, err := sl.PickServer(string(key))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			i, ok := index[addr.String()]
			if !ok {
				fmt.Fprintln(os.Stderr, "gomemcache names a server", addr.String())
				os.Exit(2)
			}
			fmt.Fprintln(out, i)
		}
	}
}
