# The client scenario (see run_clients.py) through Cache::Memcached::Fast
# (text protocol only).
#
# usage: perl perl_fast_client.pl HOST PORT PREFIX text
#
# Prints one "STEP ok|FAIL|n/a DETAIL" line per step; exits 1 if a step
# failed. The driver holds a lock on PREFIX."locked" (value "held").

use strict;
use warnings;
use Cache::Memcached::Fast;

my ($host, $port, $prefix) = @ARGV;
my $failures = 0;
$| = 1;

sub report {
    my ($step, $ok, $detail) = @_;
    print "$step ", ($ok ? "ok" : "FAIL"), " $detail\n";
    $failures++ unless $ok;
}

sub shown { defined $_[0] ? "'$_[0]'" : "undef" }

my $m = Cache::Memcached::Fast->new({
    servers => ["$host:$port"],
    io_timeout => 10,
    utf8 => 0,
});

my $k = "${prefix}k";
report("store", $m->set($k, "v1"), "set returns true");
my $value = $m->get($k);
my $miss = $m->get("${prefix}missing");
report("read", defined $value && $value eq "v1" && !defined $miss,
       "get returns v1, a miss undef");

my $deleted = $m->delete($k);
my $gone = !defined $m->get($k);
my $again = $m->delete($k);
report("delete", $deleted && $gone && defined $again && !$again,
       "delete " . shown($deleted) . ", then gone, again " . shown($again));

my $n = "${prefix}n";
$m->set($n, "10");
my $total = $m->incr($n, 5);
my $missing = $m->incr("${prefix}missing", 1);
report("incr", defined $total && $total == 15 && defined $missing && !$missing,
       "10+5=" . shown($total) . ", missing key " . shown($missing));

my $c = "${prefix}c";
$m->set($c, "v1");
my ($stale) = @{ $m->gets($c) };
$m->set($c, "v2");
my $refused = $m->cas($c, $stale, "v3");
my ($fresh) = @{ $m->gets($c) };
my $accepted = $m->cas($c, $fresh, "v3");
my $now = $m->get($c);
report("cas", defined $refused && !$refused && $accepted && defined $now && $now eq "v3",
       "stale cas " . shown($refused) . ", fresh cas " . shown($accepted));

my $locked = "${prefix}locked";
my $before = $m->get($locked);
my $write = $m->set($locked, "mine");
my $after = $m->get($locked);
report("locked",
       defined $before && $before eq "held" && !$write && defined $after && $after eq "held",
       "set on a locked key: " . shown($write) . "; read after it: " . shown($after));

print "lock n/a Cache::Memcached::Fast sends no raw commands\n";
exit($failures == 0 ? 0 : 1);
