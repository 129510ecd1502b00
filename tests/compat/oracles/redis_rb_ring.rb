# SPDX-License-Identifier: Apache-2.0
# redis_rb_ring.rb -- the oracle for chash's redis_rb@4 and redis_rb@5: the real
# Redis::Distributed of redis-rb 4.8 (Debian ruby-redis).
#
#   ruby redis_rb_ring.rb {4,5} < cases
#
# Each case (rings_compat.py's batch format) builds Redis::Distributed.new(node_configs) as an
# application does (nothing connects): an id "redis://..." is given as the node's url, an id
# "host:port" as its host and port (the client's id is then "redis://host:port/0"), any other
# id as the :id of a node. For each key, Distributed#node_for (its tag rule, then HashRing#
# get_node) names the node, printed as its index in the node list.
#
# Mode 5 is redis-rb 5's ring, which no Debian package has: redis-rb 5's HashRing hashes its
# points with MD5 (Digest::MD5.digest("<id>:<i>").unpack1("L>")) where 4.x uses Zlib.crc32, and
# is otherwise 4.x's. The oracle passes Distributed a HashRing whose add_node makes the points
# that way (written from redis-rb 5.0's lib/redis/hash_ring.rb); the rest -- Distributed's tag
# rule, HashRing's search and wrap -- is 4.8's own code.
require 'redis'
require 'redis/distributed'
require 'digest/md5'

class HashRing5 < Redis::HashRing
  def add_node(node)
    @nodes << node
    @replicas.times do |i|
      key = Digest::MD5.digest("#{node.id}:#{i}").unpack1('L>')
      @ring[key] = node
      @sorted_keys << key
    end
    @sorted_keys.sort!
  end
end

mode = ARGV[0]
ids = []
dist = nil
index = {}
out = []

build = lambda do
  configs = ids.map do |id|
    if id.include?('://')
      { url: id }
    elsif (m = id.match(/\A([^:]+):(\d+)\z/))
      { host: m[1], port: Integer(m[2]) }
    else
      { host: '127.0.0.1', port: 6379, id: id }
    end
  end
  opts = mode == '5' ? { ring: HashRing5.new } : {}
  d = Redis::Distributed.new(configs, opts)
  index = {}
  d.nodes.each_with_index do |n, i|
    want = ids[i].include?('://') || ids[i] !~ /\A[^:]+:\d+\z/ ? ids[i] : "redis://#{ids[i]}/0"
    raise "node #{i}: id #{n.id}, chash reads #{want}" unless n.id == want

    index[n.id] = i
  end
  d
end

$stdin.each_line do |line|
  f = line.split
  next if f.empty?

  case f[0]
  when 'case'
    ids = []
    dist = nil
  when 'node'
    ids << [f[2]].pack('H*').force_encoding('UTF-8')
  when 'key'
    dist ||= build.call
    key = f[1] == '-' ? ''.b : [f[1]].pack('H*')
    out << index[dist.node_for(key).id]
  end
end
$stdout.write(out.join("\n") + "\n")
