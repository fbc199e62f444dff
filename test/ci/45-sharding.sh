# Sharding with an existing proxy: twemproxy (Debian's nutcracker) runs the
# shipped etc/nutcracker.yml in front of two lockcached servers; the test
# checks the config with `nutcracker -t`, spreads keys over both servers,
# runs the cache commands through the proxy and pins down what twemproxy
# does with the lock commands (docs/scaling.md). Takes a few seconds.
if ! dpkg-query -W -f='${Status}' nutcracker 2>/dev/null | grep -q 'ok installed'; then
  # The package enables its service, which only starts once
  # /etc/nutcracker/nutcracker.yml exists; the test runs its own copies.
  apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends nutcracker >/dev/null
fi
export NUTCRACKER_BINARY=/usr/sbin/nutcracker

# Stage 10 builds build/lockcached; build just the server if it is missing.
if [ ! -x build/lockcached ]; then
  cmake -S . -B build -DLOCKCACHED_WERROR=ON
  cmake --build build -j2 --target lockcached
fi

python3 test/clients/twemproxy_test.py build/lockcached
