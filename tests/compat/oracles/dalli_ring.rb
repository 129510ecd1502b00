# dalli_ring.rb -- the oracle for chash's dalli@3: the real Dalli::Ring of ruby-dalli (3.x),
# over real Dalli::Protocol::Binary servers built from "host:port:weight" strings by Dalli's own
# parser (no connection is made: alive? is stubbed true, so no failover rehash happens).
#
# Reads the case format of clients_compat.py on stdin (node W HEXID, key HEX; the node id is
# Dalli's server name "host:port" or a socket path, W a whole weight) and prints each key's
# owner as its index in the node list, from Ring#server_for_key.
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
    def s.alive?
      true
    end
    raise "Dalli names #{name} #{s.name}" unless s.name == name
    index[s.object_id] = servers.size
    servers << s
  when 'key'
    ring ||= Dalli::Ring.new(servers, { threadsafe: false })
    key = f[1] == '-' ? '' : [f[1]].pack('H*')
    out << index[ring.server_for_key(key).object_id]
  end
end
$stdout.write(out.join("\n") + "\n")
