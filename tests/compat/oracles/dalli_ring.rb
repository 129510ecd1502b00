# SPDX-License-Identifier: Apache-2.0
# dalli_ring.rb -- the oracle for chash's dalli@3: the real Dalli::Ring of ruby-dalli (3.x),
# over real Dalli::Protocol::Binary servers built from "host:port:weight" strings by Dalli's own
# parser (no connection is made: alive? is stubbed, true unless the case marks the server down).
#
# Reads the case format of clients_compat.py on stdin (node W HEXID, down I, key HEX; the node id
# is Dalli's server name "host:port" or a socket path, W a whole weight) and prints each key's
# server as its index in the node list, from Ring#server_for_key: with servers down, Dalli's own
# failover rehash picks it ("#{try}#{key}", 20 tries); -1 where Dalli raises RingError ("No
# server available").
require 'dalli'

servers = []
ring = nil
index = {}
out = []
$stdin.each_line do |line|
  f = line.split
  next if f.empty?
  case f[0]
  when 'node'
    name = [f[2]].pack('H*')
    w = Float(f[1])
    raise "Dalli weights are whole numbers: #{f[1]}" unless w == w.floor
    s = Dalli::Protocol::Binary.new("#{name}:#{w.to_i}", {})
    s.instance_variable_set(:@chash_down, false)
    def s.alive?
      !@chash_down
    end
    raise "Dalli names #{name} #{s.name}" unless s.name == name
    index[s.object_id] = servers.size
    servers << s
  when 'down'
    servers[Integer(f[1])].instance_variable_set(:@chash_down, true)
  when 'key'
    ring ||= Dalli::Ring.new(servers, { threadsafe: false })
    key = f[1] == '-' ? '' : [f[1]].pack('H*')
    begin
      out << index[ring.server_for_key(key).object_id]
    rescue Dalli::RingError
      out << -1
    end
  end
end
$stdout.write(out.join("\n") + "\n")
