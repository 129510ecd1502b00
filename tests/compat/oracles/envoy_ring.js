// SPDX-License-Identifier: Apache-2.0
// envoy_ring.js -- the oracle for chash's envoy_ring_hash@1: the real ring_hash load balancer
// of @grpc/grpc-js-xds 1.14 (gRFC A42, Envoy's ring hash), installed by scripts/bootstrap under
// /usr/local/lib/chash-oracles, run through grpc-js's own load-balancer machinery.
//
// Each case of rings_compat.py's batch format ("case", node W HEXID with the id "ip:port",
// down I, keyhash HEX64: a key's hash, computed by the test with libstdc++'s std::hash, Envoy's
// redis_proxy key hash) gives a ChildLoadBalancerHandler the ring_hash config {min_ring_size
// 1024, max_ring_size 8388608} (Envoy's defaults; the channel option ring_size_cap is raised
// to 8388608 so that gRPC's 4096 cap does not apply) and the endpoints in list order, each
// with its weight (a locality endpoint's endpointWeight). Subchannels are fakes that connect at
// once -- or fail, for the endpoints a case marks down -- so the ring's leaves are READY or in
// TRANSIENT_FAILURE. Then, for each key hash, the balancer's picker is asked (pick with
// extraPickInfo.hash): the endpoint of the subchannel it returns is printed as its index in
// the node list (the picker walks on past entries whose endpoint is down).
'use strict';
// The package's index first (it loads what its modules share, as an application's
// require('@grpc/grpc-js-xds') does), then the ring_hash balancer's registration.
require('@grpc/grpc-js-xds');
require('@grpc/grpc-js-xds/build/src/load-balancer-ring-hash').setup();
const grpc = require('@grpc/grpc-js');
const { ChildLoadBalancerHandler, parseLoadBalancingConfig, statusOrFromValue } = grpc.experimental;
const { ConnectivityState } = require('@grpc/grpc-js/build/src/connectivity-state');

class FakeSubchannel {
  constructor(address, down) {
    this.address = address;
    this.down = down;
    this.state = ConnectivityState.IDLE;
    this.listeners = new Set();
    this.healthWatchers = new Set();
  }
  getAddress() { return `${this.address.host}:${this.address.port}`; }
  getConnectivityState() { return this.state; }
  setState(s) {
    const prev = this.state;
    this.state = s;
    for (const l of [...this.listeners]) l(this, prev, s, 0, s === ConnectivityState.READY ? undefined : 'down');
  }
  startConnecting() {
    if (this.state !== ConnectivityState.IDLE) return;
    setImmediate(() => {
      this.setState(ConnectivityState.CONNECTING);
      this.setState(this.down ? ConnectivityState.TRANSIENT_FAILURE : ConnectivityState.READY);
    });
  }
  addConnectivityStateListener(l) { this.listeners.add(l); }
  removeConnectivityStateListener(l) { this.listeners.delete(l); }
  addHealthStateWatcher(w) { this.healthWatchers.add(w); }
  removeHealthStateWatcher(w) { this.healthWatchers.delete(w); }
  isHealthy() { return true; }
  getChannelzRef() { return { kind: 'subchannel', id: 0, name: this.getAddress() }; }
  ref() {}
  unref() {}
  realSubchannelEquals(other) { return other === this; }
  getRealSubchannel() { return this; }
  throttleKeepalive() {}
  getCallCredentials() { return null; }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 1));

async function place(nodes, down, hashes) {
  let picker = null;
  const subchannels = new Map();
  const helper = {
    createSubchannel(address) {
      const key = `${address.host}:${address.port}`;
      const sc = new FakeSubchannel(address, down.has(key));
      subchannels.set(key, sc);
      return sc;
    },
    updateState(state, p) { picker = p; },
    requestReresolution() {},
    addChannelzChild() {},
    removeChannelzChild() {},
  };
  const handler = new ChildLoadBalancerHandler(helper);
  const config = parseLoadBalancingConfig({ ring_hash: { min_ring_size: 1024, max_ring_size: 8388608 } });
  const endpoints = nodes.map(([id, w]) => {
    const colon = id.lastIndexOf(':');
    return { addresses: [{ host: id.slice(0, colon), port: +id.slice(colon + 1) }],
             localityPath: [], endpointWeight: w };
  });
  handler.updateAddressList(statusOrFromValue(endpoints), config,
                            { 'grpc.lb.ring_hash.ring_size_cap': 8388608 }, '');
  // The ring is built once xxhash's wasm is loaded; then every leaf is asked to connect.
  for (let i = 0; i < 5000 && (picker === null || !picker.ring || picker.ring.length === 0); i++)
    await tick();
  if (!picker || !picker.ring) throw new Error('no ring picker');
  for (const leaf of new Set(picker.ring.map((entry) => entry.leafBalancer))) leaf.startConnecting();
  const want = nodes.length - down.size;
  for (let i = 0; i < 5000; i++) {
    let ready = 0;
    for (const sc of subchannels.values()) if (sc.state === ConnectivityState.READY) ready++;
    if (ready === want && picker.ring) break;
    await tick();
  }
  const index = new Map(nodes.map(([id], i) => [id, i]));
  const out = [];
  for (const h of hashes) {
    const r = picker.pick({ extraPickInfo: { hash: BigInt('0x' + h).toString() } });
    out.push(r.subchannel ? index.get(r.subchannel.getAddress()) : -1);
  }
  handler.destroy();
  return out;
}

async function main() {
  const lines = require('fs').readFileSync(0, 'ascii').split('\n');
  const cases = [];
  let c = null;
  for (const line of lines) {
    const f = line.split(' ');
    if (f[0] === 'case') {
      c = { nodes: [], down: new Set(), hashes: [] };
      cases.push(c);
    } else if (f[0] === 'node') {
      c.nodes.push([Buffer.from(f[2], 'hex').toString('utf8'), +f[1]]);
    } else if (f[0] === 'down') {
      c.down.add(c.nodes[+f[1]][0]);
    } else if (f[0] === 'keyhash') {
      c.hashes.push(f[1]);
    }
  }
  const out = [];
  for (const cs of cases) out.push(...(await place(cs.nodes, cs.down, cs.hashes)));
  process.stdout.write(out.join('\n') + '\n', () => process.exit(0));
}

main().catch((e) => { console.error(e); process.exit(2); });
