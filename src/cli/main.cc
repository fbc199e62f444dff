// lockcached-cli: a command-line client for everything lockcached serves,
// and a distributed flock(1) on its named-lock service (docs/cli.md).
#include <cstdlib>
#include <iostream>

#include "commands.h"
#include "failure.h"
#include "lockcached/version.h"
#include "options.h"

namespace {

constexpr const char* kUsage =
    R"(usage: lockcached-cli [OPTIONS] COMMAND [ARGS...]

Cache commands (memcached text protocol on --port, default 11211; --binary
speaks the binary protocol instead):
  get KEY...                  print each value followed by a newline
  set KEY VALUE [--flags F] [--exptime E]
                              store VALUE; VALUE - reads standard input
  delete KEY                  delete an item
  lock KEY                    lock an object; the lock ends when this program
                              does, so alone it only shows whether it could
  lock KEY -- COMMAND [ARGS...]
                              hold the cache lock on KEY while COMMAND runs
  unlock KEY                  unlock an object (only this connection's: none)
  unlock_all                  (only this connection's locks: none)
  keys [PREFIX]               list keys, one a line
  stats [GROUP]               print "name value" lines
  cluster status              a Raft cluster member's view: role, term, leader,
                              commit and applied index, members
  cluster leads               exit 0 if the node leads its Raft cluster, 1 if
                              not (a keepalived track script's question)

Named-lock service (--lock-port, default 11400):
  run NAME [--wait SECONDS] -- COMMAND [ARGS...]
                              distributed flock: take lock NAME, run COMMAND
                              with $LOCKCACHED_FENCING_TOKEN set, release it
                              when COMMAND ends; exit with COMMAND's status
  locks [PREFIX]              list held locks: NAME SESSION HELD_MS WAITERS TOKEN
  cluster add ID IPV4:PORT    (from a member's machine) the leader adds node ID,
                              whose cluster port is IPV4:PORT, and makes it a
                              voter once it has caught up
  cluster remove ID           the leader removes node ID
  cluster transfer [ID]       the leader hands leadership to node ID (or to the
                              most up-to-date voter)

Options:
  --host H          server name or address (default $LOCKCACHED_HOST, else
                    localhost)
  --port P          cache port (default $LOCKCACHED_PORT, else 11211)
  --lock-port P     lock service port (default $LOCKCACHED_LOCK_PORT, else
                    11400)
  --binary          use the memcached binary protocol for cache commands
  --timeout S       seconds to connect and for each reply (default 10)
  --flags F         set: client flags (default 0)
  --exptime E       set: expiration, memcached style (default 0: never)
  --wait S          run: seconds to wait for the lock (fractions allowed,
                    "forever" waits as long as it takes; default 0: try once)
  --ping S          run, lock -- COMMAND: seconds between keep-alive requests
                    while COMMAND runs (default 10; 0: none)
  --kill-on-loss    run, lock -- COMMAND: send COMMAND SIGTERM if the lock is
                    lost (server gone, or lockcached-cli killed)
  --tls             speak TLS (1.2 or later) to both ports, every command;
                    the server's certificate must verify and name --host
  --tls-ca-file F   the CA certificates to verify the server with (default:
                    the system's)
  --tls-cert-file F, --tls-key-file F
                    a client certificate and its key, for a server that
                    asks for one (mutual TLS); both or neither
  --tls-server-name N
                    the name the server's certificate must carry, also sent
                    as SNI (default: --host)
  --user NAME       log in as NAME (a server with --auth_file), on the port
                    the command uses, before anything else
  --password-file F --user's password: the first line of F (default
                    $LOCKCACHED_PASSWORD; there is no option with the
                    password itself, which ps would show)
  -h, --help        print this help
  --version         print the version

Where the server is: --host, --port and --lock-port go with every command
(each uses the port it speaks to), so one alias serves both ports:
  alias lc='lockcached-cli --port 11311 --lock-port 11411'
The environment variables LOCKCACHED_HOST, LOCKCACHED_PORT and
LOCKCACHED_LOCK_PORT set their defaults; an option on the command line wins
over its variable. An empty variable counts as unset; an invalid one (not a
port from 1 to 65535, a host with spaces) is a usage error unless its option
is given.

The --tls-* options need --tls; underscores work for dashes in every option
(--tls_ca_file, --lock_port).

Exit status: 0 done; 1 the server said no (miss, not stored, locked...);
64 usage error; 69 server unreachable or failing, or its TLS certificate did
not verify; 75 lock busy (run, lock); 77 the server refused the login;
78 a --tls-* file or --password-file cannot be loaded;
run and lock -- COMMAND: COMMAND's status (128+N if killed by signal N,
126 not executable, 127 not found).
)";

int execute(const lockcached::cli::Options& options) {
  const std::string& command = options.args[0];
  if (command == "run") return lockcached::cli::run_locked(options);
  if (command == "locks") return lockcached::cli::list_locks(options);
  if (command == "cluster" && options.args.size() > 1 && options.args[1] != "status" &&
      options.args[1] != "leads") {
    return lockcached::cli::change_members(options);
  }
  return lockcached::cli::run_cache_command(options);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    lockcached::cli::Options options = lockcached::cli::parse_options(
        argc, argv, [](const char* name) { return std::getenv(name); });
    // Read: no command run under a lock (run, lock -- COMMAND) inherits it.
    unsetenv("LOCKCACHED_PASSWORD");
    if (options.help) {
      std::cout << kUsage;
      return EX_OK;
    }
    if (options.version) {
      std::cout << "lockcached-cli " LOCKCACHED_VERSION "\n";
      return EX_OK;
    }
    return execute(options);
  } catch (const lockcached::cli::UsageError& error) {
    std::cerr << "lockcached-cli: " << error.what() << "\nTry 'lockcached-cli --help'.\n";
    return error.exit_code();
  } catch (const lockcached::cli::Failure& error) {
    std::cerr << "lockcached-cli: " << error.what() << "\n";
    return error.exit_code();
  }
}
