#pragma once

#define LOCKCACHED_VERSION "0.1.0"
// What `version` answers: memcached's release whose protocol we implement,
// so clients that gate features on the version enable them, then our own.
#define LOCKCACHED_PROTOCOL_VERSION "1.6.18-lockcached-" LOCKCACHED_VERSION
