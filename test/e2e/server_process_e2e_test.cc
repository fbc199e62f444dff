// The harness's own reading of the server under test: server_run_by, which
// looks through test/CMakeLists.txt's wrapper scripts (sanitizer.h asks it
// how the server was built).
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "server_process.h"

namespace {

using e2e::server_run_by;
using e2e::TempDir;

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = (dir.path() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The two forms lockcached_wrapper writes in test/CMakeLists.txt.
TEST(ServerProcessE2e, WrapperScriptNamesItsServerLastOnItsExecLine) {
  TempDir dir;
  std::string epoll = write_file(dir, "lockcached-epoll",
                                 "#!/bin/sh\n# lockcached on the epoll backend, for the tests.\n"
                                 "exec '/build dir/lockcached' --io=epoll \"$@\"\n");
  EXPECT_EQ(server_run_by(epoll), "/build dir/lockcached");
  std::string refused = write_file(dir, "lockcached-uring-refused",
                                   "#!/bin/sh\n# lockcached where the kernel refuses io_uring.\n"
                                   "exec '/build/without-io-uring' '/build/lockcached' \"$@\"\n");
  EXPECT_EQ(server_run_by(refused), "/build/lockcached");
}

TEST(ServerProcessE2e, AnythingButSuchAScriptIsTheServerItself) {
  TempDir dir;
  constexpr char kElf[] =
      "\x7f"
      "ELF\2\1\1\0\nexec 'x'\n";
  std::string binary = write_file(dir, "binary", std::string(kElf, sizeof kElf - 1));
  EXPECT_EQ(server_run_by(binary), binary);
  std::string no_exec = write_file(dir, "no_exec", "#!/bin/sh\n'/build/lockcached' \"$@\"\n");
  EXPECT_EQ(server_run_by(no_exec), no_exec);
  std::string unquoted = write_file(dir, "unquoted", "#!/bin/sh\nexec /build/lockcached \"$@\"\n");
  EXPECT_EQ(server_run_by(unquoted), unquoted);
  std::string one_quote = write_file(dir, "one_quote", "#!/bin/sh\nexec '/build/lockcached\n");
  EXPECT_EQ(server_run_by(one_quote), one_quote);
  std::string missing = (dir.path() / "missing").string();
  EXPECT_EQ(server_run_by(missing), missing);
}

// What the suite starts, through its wrapper where it has one
// (LOCKCACHED_TEST_IO=refused), is a program, not another script.
TEST(ServerProcessE2e, TheSuitesServerIsAProgram) {
  std::ifstream server(server_run_by(e2e::server_binary()), std::ios::binary);
  std::string magic(4, '\0');
  ASSERT_TRUE(server.read(magic.data(), 4)) << server_run_by(e2e::server_binary());
  EXPECT_EQ(magic,
            "\x7f"
            "ELF");
}

}  // namespace
