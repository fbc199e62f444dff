# Common memcached clients against the real lockcached, one scenario each
# (store, read, delete, incr, cas, a write to a locked key, and the lock
# commands where a client can send them): pymemcache, libmemcached's C API
# and tools, php-memcached, Dalli, Cache::Memcached::Fast, memjs and nginx's
# memcached module, with the server on each I/O backend. The matrix:
# docs/clients.md.
apt-get install -y --no-install-recommends \
  gcc libc6-dev libmemcached-dev libmemcached-tools python3 python3-pymemcache \
  php-cli php-memcached ruby ruby-dalli libcache-memcached-fast-perl nginx
# Debian's nodejs and npm, unless a Node with npm is installed already
# (NodeSource's nodejs bundles npm and conflicts with Debian's npm package).
if ! command -v npm >/dev/null; then
  apt-get install -y --no-install-recommends nodejs npm
fi

# Stage 10 builds the server in build/; alone, this stage builds it there.
if [ ! -x build/lockcached ]; then
  cmake -S . -B build -DLOCKCACHED_WERROR=ON
  cmake --build build -j2 --target lockcached
fi

work=build-clients
mkdir -p "$work/node"
gcc -std=c11 -O1 -Wall -Wextra -Werror -o "$work/libmemcached_client" \
  test/clients/libmemcached_client.c -lmemcached
# memjs at the version package-lock.json pins.
cp test/clients/package.json test/clients/package-lock.json "$work/node/"
(cd "$work/node" && npm ci --no-audit --no-fund)

# The matrix runs twice: the server as built (its default, --io=auto, takes
# io_uring where the kernel allows it), then on epoll through the wrapper
# that adds --io=epoll (test/CMakeLists.txt makes it).
# Debian's python3: python3-pymemcache installs for it, and a python3 earlier
# in PATH (pyenv, a venv) may not see it.
status=0
for server in build/lockcached build/lockcached-epoll; do
  echo "== the client matrix against $server"
  /usr/bin/python3 -B -u test/clients/run_clients.py "$server" \
    --libmemcached-client "$work/libmemcached_client" \
    --node-modules "$work/node/node_modules" || status=$?
done
exit "$status"
