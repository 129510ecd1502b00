// SPDX-License-Identifier: Apache-2.0
// groupcache_ring.go — the oracle for chash's groupcache@0: the real
// github.com/golang/groupcache/consistenthash (Debian golang-github-golang-groupcache-dev),
// built with GOPATH=/usr/share/gocode by clients_compat.py.
//
// Reads the case format of clients_compat.py on stdin (vnodes V = replicas, node W HEXID,
// key HEX; Go strings are bytes, so ids and keys are any bytes), calls Map.Add(ids...) once with
// the ids in list order, and prints Map.Get(key) for each key as its index in the node list.
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/golang/groupcache/consistenthash"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	replicas := 50
	var ids []string
	index := map[string]int{}
	var m *consistenthash.Map
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "vnodes":
			replicas, _ = strconv.Atoi(f[1])
		case "node":
			if f[1] != "1.0" {
				fmt.Fprintln(os.Stderr, "groupcache has no weights")
				os.Exit(2)
			}
			b, _ := hex.DecodeString(f[2])
			index[string(b)] = len(ids)
			ids = append(ids, string(b))
		case "key":
			if m == nil {
				m = consistenthash.New(replicas, nil)
				m.Add(ids...)
			}
			var key []byte
			if f[1] != "-" {
				key, _ = hex.DecodeString(f[1])
			}
			fmt.Fprintln(out, index[m.Get(string(key))])
		}
	}
}
