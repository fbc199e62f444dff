<?php
// The client scenario (see run_clients.py) through php-memcached.
//
// usage: php php_memcached_client.php HOST PORT PREFIX text|binary
//
// Prints one "STEP ok|FAIL|n/a DETAIL" line per step; exits 1 if a step
// failed. The driver holds a lock on PREFIX."locked" (value "held").

[, $host, $port, $prefix, $protocol] = $argv;
$failures = 0;

function report(string $step, bool $ok, string $detail): void
{
    global $failures;
    echo "$step " . ($ok ? "ok" : "FAIL") . " $detail\n";
    if (!$ok) {
        $failures++;
    }
}

function outcome(Memcached $m): string
{
    return $m->getResultCode() . " " . $m->getResultMessage();
}

$m = new Memcached();
$m->setOption(Memcached::OPT_BINARY_PROTOCOL, $protocol === "binary");
$m->setOption(Memcached::OPT_COMPRESSION, false);
$m->addServer($host, (int)$port);

$k = "{$prefix}k";
$stored = $m->set($k, "v1");
report("store", $stored, "set: " . outcome($m));

$value = $m->get($k);
$miss = $m->get("{$prefix}missing");
report("read", $value === "v1" && $miss === false && $m->getResultCode() === Memcached::RES_NOTFOUND,
       "get returns v1, a miss false with RES_NOTFOUND");

$deleted = $m->delete($k);
$gone = $m->get($k) === false;
$again = $m->delete($k);
$againCode = $m->getResultCode();
report("delete", $deleted && $gone && !$again && $againCode === Memcached::RES_NOTFOUND,
       "delete, then gone, again: " . outcome($m));

$n = "{$prefix}n";
$m->set($n, "10");
$total = $m->increment($n, 5);
$missing = $m->increment("{$prefix}missing", 1);
report("incr", $total === 15 && $missing === false,
       "10+5=" . var_export($total, true) . ", missing key: " . outcome($m));

$c = "{$prefix}c";
$m->set($c, "v1");
$stale = $m->get($c, null, Memcached::GET_EXTENDED)["cas"];
$m->set($c, "v2");
$refused = $m->cas($stale, $c, "v3");
$refusedCode = $m->getResultCode();
$fresh = $m->get($c, null, Memcached::GET_EXTENDED)["cas"];
$accepted = $m->cas($fresh, $c, "v3");
report("cas", !$refused && $refusedCode === Memcached::RES_DATA_EXISTS && $accepted
       && $m->get($c) === "v3",
       "stale cas: $refusedCode, fresh cas: " . var_export($accepted, true));

$locked = "{$prefix}locked";
$before = $m->get($locked);
$write = $m->set($locked, "mine");
$writeOutcome = outcome($m);
$after = $m->get($locked);
report("locked", $before === "held" && !$write && $after === "held",
       "set on a locked key: $writeOutcome; read after it: " . var_export($after, true));

echo "lock n/a php-memcached sends no raw commands and no custom opcodes\n";
exit($failures === 0 ? 0 : 1);
