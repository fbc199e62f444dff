# The client scenario (see run_clients.py) through Dalli (binary protocol).
#
# usage: ruby dalli_client.rb HOST PORT PREFIX binary
#
# Prints one "STEP ok|FAIL|n/a DETAIL" line per step; exits 1 if a step
# failed. The driver holds a lock on PREFIX + "locked" (value "held").

require 'dalli'
require 'logger'

Dalli.logger = Logger.new($stderr, level: Logger::ERROR)

module Dalli
  module Protocol
    # Dalli has no call for a custom opcode, but its per-server class builds
    # each request from a header it exposes; Binary#request(op, ...) sends
    # whatever method op names. Lock (0x40) and Unlock (0x42) take a key only,
    # like Delete: generic_response returns true on success and raises
    # DalliError for the lock statuses (0x10 locked, 0x11 not locked).
    class Binary
      def lockcached_lock(key)
        write_generic(lockcached_key_request(0x40, key))
      end

      def lockcached_unlock(key)
        write_generic(lockcached_key_request(0x42, key))
      end

      private

      def lockcached_key_request(opcode, key)
        header = [RequestFormatter::REQUEST, opcode, key.bytesize, 0, 0, 0, key.bytesize, 0, 0]
        header.pack(RequestFormatter::REQ_HEADER_FORMAT) + key
      end
    end
  end
end

host, port, prefix, = ARGV
$failures = 0

def report(step, ok, detail)
  puts "#{step} #{ok ? 'ok' : 'FAIL'} #{detail}"
  $failures += 1 unless ok
end

def attempt
  [yield, nil]
rescue StandardError => e
  [nil, "#{e.class}: #{e.message}"]
end

def new_client(host, port)
  Dalli::Client.new("#{host}:#{port}", socket_timeout: 10, socket_max_failures: 1)
end

# The server handling `key` (one here): where a custom opcode goes.
def server_for(client, key)
  client.send(:ring).server_for_key(key)
end

client = new_client(host, port)
other = new_client(host, port)
raw = { raw: true } # plain strings, as incr needs, instead of Marshal

k = "#{prefix}k"
report('store', client.set(k, 'v1', 0, raw), 'set returns a CAS')
report('read', client.get(k) == 'v1' && client.get("#{prefix}missing").nil?,
       'get returns v1, a miss nil')

deleted = client.delete(k)
gone = client.get(k).nil?
again = client.delete(k)
report('delete', deleted && gone && !again, "delete #{deleted}, then gone, again #{again.inspect}")

n = "#{prefix}n"
client.set(n, '10', 0, raw)
total = client.incr(n, 5)
missing = client.incr("#{prefix}missing", 1)
report('incr', total == 15 && missing.nil?, "10+5=#{total}, missing key #{missing.inspect}")

c = "#{prefix}c"
client.set(c, 'v1', 0, raw)
_, stale = client.get_cas(c)
client.set(c, 'v2', 0, raw)
refused = client.set_cas(c, 'v3', stale, 0, raw)
_, fresh = client.get_cas(c)
accepted = client.set_cas(c, 'v3', fresh, 0, raw)
report('cas', refused == false && accepted && client.get(c) == 'v3',
       "stale cas #{refused.inspect}, fresh cas #{accepted ? 'accepted' : accepted.inspect}")

locked = "#{prefix}locked"
before = client.get(locked)
stored, error = attempt { client.set(locked, 'mine', 0, raw) }
after, read_error = attempt { client.get(locked) }
report('locked', before == 'held' && !stored && after == 'held',
       "set on a locked key: #{error || stored.inspect}; read after it: " \
       "#{read_error || after.inspect}")

mine = "#{prefix}mine"
client.set(mine, 'v1', 0, raw)
taken, = attempt { server_for(client, mine).request(:lockcached_lock, mine) }
stored, error = attempt { other.set(mine, 'v2', 0, raw) }
readable = other.get(mine) == 'v1'
released, = attempt { server_for(client, mine).request(:lockcached_unlock, mine) }
after = other.set(mine, 'v2', 0, raw)
report('lock', taken == true && !stored && readable && released == true && after,
       "lock (0x40) #{taken.inspect}; another client's set meanwhile: " \
       "#{error || stored.inspect}; unlock (0x42) #{released.inspect}; set after it " \
       "#{after ? 'stored' : after.inspect}")

exit($failures.zero? ? 0 : 1)
