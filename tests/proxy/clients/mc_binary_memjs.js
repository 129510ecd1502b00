// SPDX-License-Identifier: Apache-2.0
// memjs (npm memjs@1.3.2, binary protocol only, SASL PLAIN) through chash-proxy: the work of
// test_mc_binary_clients.py's memjs client, each result checked here, the state it leaves on
// the servers printed for the test to find there.
//
//   node mc_binary_memjs.js HOST PORT USER PASSWORD PREFIX
//
// memjs 1.3.2 has no multi-get and no CAS: its gets are pipelined on one connection instead
// (every request in flight at once, answered by opaque), and CAS is left to the other clients.
// Prints one line: "ok " + JSON {present: {key: value}, absent: [key]}; exit 1 with the
// failed check on stderr otherwise.
'use strict';
const memjs = require('memjs');

const [host, port, user, password, prefix] = process.argv.slice(2);
const quiet = {log: () => {}};

function check(what, got, want) {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  if (g !== w) throw new Error(what + ': ' + g + ', expected ' + w);
}

const str = (r) => (r.value === null ? null : r.value.toString());

async function work() {
  const mc = memjs.Client.create(user + ':' + password + '@' + host + ':' + port,
                                 {timeout: 20, retries: 1, logger: quiet});
  const present = {}, absent = [];
  const key = (i) => prefix + 'k' + i;
  const keys = Array.from({length: 24}, (_, i) => key(i));
  const value = (i) => (i === 5 ? 'B'.repeat(300000) : prefix + '-value-' + i);
  try {
    for (let i = 0; i < keys.length; i++) {
      check('set ' + keys[i], await mc.set(keys[i], value(i), {expires: 0}), true);
    }
    for (let i = 0; i < keys.length; i++) {
      check('get ' + keys[i], str(await mc.get(keys[i])), value(i));
    }
    // every get of the set's keys and of 6 absent ones in flight at once on one connection
    const ask = keys.concat(Array.from({length: 6}, (_, i) => prefix + 'absent' + i));
    const got = await Promise.all(ask.map((k) => mc.get(k)));
    check('pipelined gets', got.map(str), ask.map((k, i) => (i < keys.length ? value(i) : null)));
    ask.slice(keys.length).forEach((k) => absent.push(k));

    check('add of a present key', await mc.add(key(0), 'x'), false);
    check('add of a new key', await mc.add(prefix + 'added', 'fresh'), true);
    check('replace of a present key', await mc.replace(key(1), 'replaced'), true);
    check('replace of an absent key', await mc.replace(prefix + 'nobody', 'x'), false);
    absent.push(prefix + 'nobody');
    // (memjs 1.3.2's prepend sends append's opcode, 0x0e, and memcached appends: not used)
    check('append', await mc.append(key(2), '+tail'), true);
    check('get after append', str(await mc.get(key(2))), value(2) + '+tail');

    const counter = prefix + 'counter';
    check('increment of an absent key (initial 10)',
          await mc.increment(counter, 5, {initial: 10}), {success: true, value: 10});
    check('increment by 5', await mc.increment(counter, 5, {}), {success: true, value: 15});
    check('decrement by 3', await mc.decrement(counter, 3, {}), {success: true, value: 12});

    check('touch of a present key', await mc.touch(key(3), 3600), true);
    check('touch of an absent key', await mc.touch(prefix + 'nobody', 3600), false);
    check('delete', await mc.delete(key(4)), true);
    check('delete of an absent key', await mc.delete(key(4)), false);
    check('get of the deleted key', str(await mc.get(key(4))), null);
    absent.push(key(4));

    for (let i = 0; i < keys.length; i++) {
      if (i !== 4) present[keys[i]] = value(i);
    }
    present[key(1)] = 'replaced';
    present[key(2)] = value(2) + '+tail';
    present[prefix + 'added'] = 'fresh';
    present[counter] = '12';
  } finally {
    mc.close();
  }

  // a wrong password: refused, never served
  const bad = memjs.Client.create(user + ':wr0ng-' + password + '@' + host + ':' + port,
                                  {timeout: 20, retries: 1, logger: quiet});
  let refused = false;
  try {
    await bad.get(key(0));
  } catch (e) {
    refused = true;
  } finally {
    bad.close();
  }
  check('a get with a wrong password refused', refused, true);
  return {present, absent};
}

work().then((state) => {
  // exit once the line is written: a pipe takes a 300 KB line in several writes
  process.stdout.write('ok ' + JSON.stringify(state) + '\n', () => process.exit(0));
}, (e) => {
  process.stderr.write('memjs: ' + e.message + '\n');
  process.exit(1);
});
