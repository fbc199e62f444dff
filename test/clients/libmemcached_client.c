// The client scenario (see run_clients.py) through libmemcached's C API.
//
// usage: libmemcached_client HOST PORT PREFIX text|binary
//
// Prints one "STEP ok|FAIL|n/a DETAIL" line per step; exits 1 if a step
// failed. The driver holds a lock on PREFIX "locked" (value "held") from its
// own connection while this runs.

#include <libmemcached/memcached.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static const char* prefix = "";

static void report(const char* step, bool ok, const char* format, ...) {
  va_list args;
  va_start(args, format);
  printf("%s %s ", step, ok ? "ok" : "FAIL");
  vprintf(format, args);
  printf("\n");
  va_end(args);
  if (!ok) ++failures;
}

// Every key carries the row's prefix: the rows share one server.
static const char* key_of(const char* name, char* buffer, size_t size) {
  snprintf(buffer, size, "%s%s", prefix, name);
  return buffer;
}

static memcached_return_t set_value(memcached_st* memc, const char* key, const char* value) {
  return memcached_set(memc, key, strlen(key), value, strlen(value), 0, 0);
}

// The value as a NUL-terminated string (free it), or NULL with *rc set.
static char* get_value(memcached_st* memc, const char* key, memcached_return_t* rc) {
  size_t length = 0;
  uint32_t flags = 0;
  return memcached_get(memc, key, strlen(key), &length, &flags, rc);
}

static bool value_is(memcached_st* memc, const char* key, const char* expected) {
  memcached_return_t rc;
  char* value = get_value(memc, key, &rc);
  bool same = value != NULL && strcmp(value, expected) == 0;
  free(value);
  return same;
}

static bool is_missing(memcached_st* memc, const char* key) {
  memcached_return_t rc;
  char* value = get_value(memc, key, &rc);
  free(value);
  return value == NULL && rc == MEMCACHED_NOTFOUND;
}

static void store_and_read(memcached_st* memc) {
  char key[300];
  key_of("k", key, sizeof key);
  memcached_return_t rc = set_value(memc, key, "v1");
  report("store", rc == MEMCACHED_SUCCESS, "set: %s", memcached_strerror(memc, rc));
  char missing[300];
  key_of("missing", missing, sizeof missing);
  bool ok = value_is(memc, key, "v1") && is_missing(memc, missing);
  report("read", ok, "get returns v1, a missing key NOTFOUND");
}

static void delete_twice(memcached_st* memc) {
  char key[300];
  key_of("k", key, sizeof key);
  memcached_return_t first = memcached_delete(memc, key, strlen(key), 0);
  bool gone = is_missing(memc, key);
  memcached_return_t second = memcached_delete(memc, key, strlen(key), 0);
  report("delete", first == MEMCACHED_SUCCESS && gone && second == MEMCACHED_NOTFOUND,
         "delete: %s, then gone, again: %s", memcached_strerror(memc, first),
         memcached_strerror(memc, second));
}

static void increment(memcached_st* memc) {
  char key[300];
  key_of("n", key, sizeof key);
  set_value(memc, key, "10");
  uint64_t value = 0;
  memcached_return_t rc = memcached_increment(memc, key, strlen(key), 5, &value);
  char missing[300];
  key_of("missing", missing, sizeof missing);
  uint64_t ignored = 0;
  memcached_return_t miss = memcached_increment(memc, missing, strlen(missing), 1, &ignored);
  report("incr", rc == MEMCACHED_SUCCESS && value == 15 && miss == MEMCACHED_NOTFOUND,
         "10+5=%llu, missing key: %s", (unsigned long long)value, memcached_strerror(memc, miss));
}

// The CAS of `key` from a gets (mget with MEMCACHED_BEHAVIOR_SUPPORT_CAS), 0 if none.
static uint64_t gets_cas(memcached_st* memc, const char* key) {
  const char* keys[] = {key};
  size_t lengths[] = {strlen(key)};
  if (memcached_mget(memc, keys, lengths, 1) != MEMCACHED_SUCCESS) return 0;
  uint64_t cas = 0;
  memcached_return_t rc;
  memcached_result_st* result;
  while ((result = memcached_fetch_result(memc, NULL, &rc)) != NULL) {
    cas = memcached_result_cas(result);
    memcached_result_free(result);
  }
  return cas;
}

static memcached_return_t cas_value(memcached_st* memc, const char* key, const char* value,
                                    uint64_t cas) {
  return memcached_cas(memc, key, strlen(key), value, strlen(value), 0, 0, cas);
}

static void compare_and_swap(memcached_st* memc) {
  char key[300];
  key_of("c", key, sizeof key);
  set_value(memc, key, "v1");
  uint64_t stale = gets_cas(memc, key);
  set_value(memc, key, "v2");  // someone else's write: the CAS moves on
  memcached_return_t refused = cas_value(memc, key, "v3", stale);
  uint64_t fresh = gets_cas(memc, key);
  memcached_return_t accepted = cas_value(memc, key, "v3", fresh);
  bool ok = stale != 0 && fresh != stale && refused == MEMCACHED_DATA_EXISTS &&
            accepted == MEMCACHED_SUCCESS && value_is(memc, key, "v3");
  report("cas", ok, "stale cas: %s, fresh cas: %s", memcached_strerror(memc, refused),
         memcached_strerror(memc, accepted));
}

// A write to a key another connection holds locked must not report success,
// and the client must go on working.
static void locked_write(memcached_st* memc) {
  char key[300];
  key_of("locked", key, sizeof key);
  bool readable = value_is(memc, key, "held");
  memcached_return_t rc = set_value(memc, key, "mine");
  bool recovers = value_is(memc, key, "held");
  report("locked", readable && rc != MEMCACHED_SUCCESS && recovers,
         "set on a locked key: %s (%d); reads before and after see the value",
         memcached_strerror(memc, rc), (int)rc);
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s HOST PORT PREFIX text|binary\n", argv[0]);
    return 2;
  }
  prefix = argv[3];
  memcached_st* memc = memcached_create(NULL);
  memcached_server_add(memc, argv[1], (in_port_t)atoi(argv[2]));
  memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, strcmp(argv[4], "binary") == 0);
  memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
  memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 10000);

  store_and_read(memc);
  delete_twice(memc);
  increment(memc);
  compare_and_swap(memc);
  locked_write(memc);
  printf("lock n/a the API has no raw command and no custom opcode\n");

  memcached_free(memc);
  return failures == 0 ? 0 : 1;
}
