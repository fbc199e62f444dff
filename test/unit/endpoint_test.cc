// net::Endpoint without sockets: what accept() and getsockname() give turned
// into one, every text form the server prints of it, and address_text's
// form read back (as a Raft log's sessions are).
#include "lockcached/net/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace lockcached::net {
namespace {

sockaddr_storage ipv4(const char* ip, uint16_t port) {
  sockaddr_storage storage{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  v4->sin_family = AF_INET;
  v4->sin_port = htons(port);
  inet_pton(AF_INET, ip, &v4->sin_addr);
  return storage;
}

sockaddr_storage ipv6(const char* ip, uint16_t port) {
  sockaddr_storage storage{};
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &v6->sin6_addr);
  return storage;
}

sockaddr_storage unix_socket(const char* path) {
  sockaddr_storage storage{};
  auto* local = reinterpret_cast<sockaddr_un*>(&storage);
  local->sun_family = AF_UNIX;
  std::strncpy(local->sun_path, path, sizeof local->sun_path - 1);
  return storage;
}

TEST(EndpointTest, AnIpv4AddressInEveryForm) {
  Endpoint endpoint = endpoint_of(ipv4("10.1.2.3", 4567));
  EXPECT_EQ(endpoint.family, Endpoint::Family::kIpv4);
  EXPECT_EQ(endpoint.port, 4567);
  EXPECT_EQ(address_text(endpoint), "10.1.2.3:4567");
  EXPECT_EQ(host_text(endpoint), "10.1.2.3");
  EXPECT_EQ(ip_text(endpoint), "10.1.2.3");
  EXPECT_EQ(conn_text(endpoint, false), "tcp:10.1.2.3:4567");
  EXPECT_EQ(conn_text(endpoint, true), "tcp:10.1.2.3:4567");
}

TEST(EndpointTest, AnIpv6AddressIsBracketedWhereAPortFollows) {
  Endpoint endpoint = endpoint_of(ipv6("::1", 11211));
  EXPECT_EQ(endpoint.family, Endpoint::Family::kIpv6);
  EXPECT_EQ(address_text(endpoint), "[::1]:11211");
  EXPECT_EQ(host_text(endpoint), "[::1]");
  EXPECT_EQ(ip_text(endpoint), "::1") << "memcached's rip=";
  EXPECT_EQ(conn_text(endpoint, false), "tcp6:[::1]:11211");
  EXPECT_EQ(address_text(endpoint_of(ipv6("::ffff:192.0.2.7", 80))), "[::ffff:192.0.2.7]:80");
}

// memcached keeps no address for a unix socket's client; a listener shows its path.
TEST(EndpointTest, AUnixSocketHasAPathAndNoPort) {
  Endpoint listener = endpoint_of(unix_socket("/run/lockcached.sock"));
  EXPECT_EQ(listener.family, Endpoint::Family::kUnix);
  EXPECT_EQ(listener.port, 0);
  EXPECT_EQ(address_text(listener), "unix:/run/lockcached.sock");
  EXPECT_EQ(conn_text(listener, true), "unix:/run/lockcached.sock");
  EXPECT_EQ(conn_text(listener, false), "?:<AF 0>");

  Endpoint client = endpoint_of(unix_socket(""));
  EXPECT_EQ(address_text(client), "unix:");
  EXPECT_EQ(ip_text(client), "unix");
  EXPECT_EQ(client.port, 0) << "rport=0";
  EXPECT_EQ(conn_text(client, false), "?:<AF 0>");
}

TEST(EndpointTest, AnotherFamilyIsUnknown) {
  sockaddr_storage storage{};
  storage.ss_family = AF_PACKET;
  Endpoint endpoint = endpoint_of(storage);
  EXPECT_FALSE(endpoint.known());
  EXPECT_EQ(endpoint, Endpoint{});
  EXPECT_EQ(address_text(endpoint), "?");
  EXPECT_EQ(host_text(endpoint), "?");
  EXPECT_EQ(ip_text(endpoint), "");
  EXPECT_EQ(conn_text(endpoint, false), "tcp:?");
}

TEST(EndpointTest, AddressTextReadsBack) {
  for (const Endpoint& endpoint :
       {endpoint_of(ipv4("192.0.2.7", 4000)), endpoint_of(ipv4("0.0.0.0", 0)),
        endpoint_of(ipv6("fe80::1:2", 65535)), endpoint_of(unix_socket("/tmp/a:b.sock")),
        endpoint_of(unix_socket("")), Endpoint{}}) {
    std::optional<Endpoint> back = parse_endpoint(address_text(endpoint));
    ASSERT_TRUE(back) << address_text(endpoint);
    EXPECT_EQ(*back, endpoint) << address_text(endpoint);
  }
}

TEST(EndpointTest, WhatAddressTextNeverWritesIsRefused) {
  for (const char* text :
       {"", "192.0.2.7", "192.0.2.7:", "192.0.2.7:65536", "192.0.2.7:-1", "192.0.2.7:80x", "::1:80",
        "[::1:80", "[192.0.2.7]:80", "[::1]", "localhost:80", "300.0.0.1:80"}) {
    EXPECT_FALSE(parse_endpoint(text)) << text;
  }
}

TEST(EndpointTest, TheHostOfAConfiguredAddress) {
  EXPECT_EQ(host_of("192.0.2.7:7000"), "192.0.2.7");
  EXPECT_EQ(host_of("[::1]:7000"), "[::1]");
  EXPECT_EQ(host_of("no-port"), "no-port");
}

}  // namespace
}  // namespace lockcached::net
