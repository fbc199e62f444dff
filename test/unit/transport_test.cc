// Unit tests of the transports between a connection and its socket:
// PlainTransport, and TlsTransport against an OpenSSL client whose bytes go
// through memory (io_uring's calls) or a socket pair (epoll's read and
// send).
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lockcached/core/stats.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/server/input_buffer.h"
#include "lockcached/server/plain_transport.h"
#include "lockcached/server/tls_transport.h"
#include "lockcached/tls/context.h"

namespace lockcached::server {
namespace {

using Status = Input::Status;

constexpr size_t kScratchSize = 64 * 1024;

// What gather() describes, as one string.
std::string gathered(Transport& transport, protocol::OutputQueue& replies) {
  iovec iov[64];
  int count = transport.gather(replies, iov, 64);
  std::string bytes;
  for (int i = 0; i < count; ++i) bytes.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
  return bytes;
}

// A connected pair of sockets, as a client and its connection.
class SocketPair {
 public:
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds_), 0); }
  ~SocketPair() {
    ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  int server() const { return fds_[0]; }
  void client_sends(std::string_view bytes) {
    ASSERT_EQ(::send(fds_[1], bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }
  std::string client_reads() {
    std::string bytes(kScratchSize, '\0');
    ssize_t read = ::recv(fds_[1], bytes.data(), bytes.size(), MSG_DONTWAIT);
    bytes.resize(read > 0 ? static_cast<size_t>(read) : 0);
    return bytes;
  }
  void client_closes() {
    ::close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

TEST(PlainTransport, ReadsWhereTheProtocolReads) {
  core::Counter written;
  PlainTransport transport(written);
  std::string scratch(kScratchSize, '\0');
  InputBuffer input(scratch.data(), scratch.size());
  SocketPair sockets;

  EXPECT_EQ(transport.read(sockets.server(), input).status, Status::kAgain);
  sockets.client_sends("get k\r\n");
  Input read = transport.read(sockets.server(), input);
  ASSERT_EQ(read.status, Status::kBytes);
  EXPECT_EQ(read.bytes, "get k\r\n");
  EXPECT_EQ(read.bytes.data(), scratch.data());
  sockets.client_closes();
  EXPECT_EQ(transport.read(sockets.server(), input).status, Status::kEnd);
}

TEST(PlainTransport, PassesReceivedBytesThroughWithoutCopies) {
  core::Counter written;
  PlainTransport transport(written);
  std::string scratch(kScratchSize, '\0');
  InputBuffer input(scratch.data(), scratch.size());

  const char raw[] = "get k\r\n";
  Input plaintext = transport.decode(raw, sizeof raw - 1, input);
  EXPECT_EQ(plaintext.status, Status::kBytes);
  EXPECT_EQ(plaintext.bytes.data(), raw);
  EXPECT_EQ(transport.decode(nullptr, 0, input).status, Status::kAgain);

  transport.keep(raw, sizeof raw - 1, input);  // plaintext waits in the input
  EXPECT_EQ(input.kept(), "get k\r\n");
}

TEST(PlainTransport, SendsTheRepliesThemselves) {
  core::Counter written;
  PlainTransport transport(written);
  protocol::OutputQueue replies;
  replies.append("END\r\n");
  EXPECT_EQ(gathered(transport, replies), "END\r\n");
  EXPECT_TRUE(transport.consume(replies, 2));
  EXPECT_FALSE(transport.consume(replies, 3));
  EXPECT_EQ(written.load(), 5u);

  SocketPair sockets;
  replies.append("STORED\r\n");
  EXPECT_EQ(transport.send(sockets.server(), replies), 0);
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(sockets.client_reads(), "STORED\r\n");
  EXPECT_EQ(written.load(), 13u);
  EXPECT_FALSE(transport.holds_output());
  EXPECT_TRUE(transport.handshake_done());
  EXPECT_TRUE(transport.last_words().empty());
}

// An OpenSSL client whose ciphertext goes through memory: what it writes
// is handed to the transport, what the transport sends is put into it.
class TlsClient {
 public:
  TlsClient() : context_(SSL_CTX_new(TLS_client_method())) {
    ssl_ = SSL_new(context_);
    in_ = BIO_new(BIO_s_mem());
    out_ = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(in_, -1);
    SSL_set_bio(ssl_, in_, out_);
    SSL_set_connect_state(ssl_);
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(context_);
  }

  // Takes the handshake a step on; true once it is done.
  bool step() { return SSL_do_handshake(ssl_) == 1; }
  void write(std::string_view plaintext) {
    ASSERT_EQ(SSL_write(ssl_, plaintext.data(), static_cast<int>(plaintext.size())),
              static_cast<int>(plaintext.size()));
  }
  // What the client has sent since last asked.
  std::string ciphertext() {
    std::string bytes(BIO_ctrl_pending(out_), '\0');
    if (!bytes.empty()) BIO_read(out_, bytes.data(), static_cast<int>(bytes.size()));
    return bytes;
  }
  void put(std::string_view ciphertext) {
    BIO_write(in_, ciphertext.data(), static_cast<int>(ciphertext.size()));
  }
  std::string read() {
    std::string plaintext;
    char buffer[4096];
    int read;
    while ((read = SSL_read(ssl_, buffer, sizeof buffer)) > 0) plaintext.append(buffer, read);
    ERR_clear_error();
    return plaintext;
  }
  void shutdown() { SSL_shutdown(ssl_); }
  bool server_closed() {
    read();
    return (SSL_get_shutdown(ssl_) & SSL_RECEIVED_SHUTDOWN) != 0;
  }

 private:
  SSL_CTX* context_;
  SSL* ssl_;
  BIO* in_;
  BIO* out_;
};

class TlsTransportTest : public testing::Test {
 protected:
  TlsTransportTest()
      : scratch_(kScratchSize, '\0'),
        ciphertext_scratch_(kScratchSize, '\0'),
        input_(scratch_.data(), scratch_.size()) {
    tls::Settings settings;
    settings.cert_file = LOCKCACHED_SOURCE_DIR "/test/certs/server.pem";
    settings.key_file = LOCKCACHED_SOURCE_DIR "/test/certs/server.key";
    std::string error;
    auto context = tls::Context::load(settings, &error);
    EXPECT_NE(context, nullptr) << error;
    transport_ = std::make_unique<TlsTransport>(context, 7, written_, handshake_errors_,
                                                ciphertext_scratch_.data(), kScratchSize);
  }

  // Sends what the transport has for the client, all of it.
  void deliver() {
    std::string ciphertext;
    while (true) {
      std::string piece = gathered(*transport_, replies_);
      if (piece.empty()) break;
      ciphertext += piece;
      transport_->consume(replies_, piece.size());
    }
    client_.put(ciphertext);
  }
  Input receive(const std::string& ciphertext) {
    return transport_->decode(ciphertext.data(), ciphertext.size(), input_);
  }
  void handshake() {
    for (int step = 0; step < 10 && !transport_->handshake_done(); ++step) {
      client_.step();
      EXPECT_EQ(receive(client_.ciphertext()).status, Status::kAgain);
      deliver();
    }
    ASSERT_TRUE(transport_->handshake_done());
    ASSERT_TRUE(client_.step());
  }

  std::string scratch_;
  std::string ciphertext_scratch_;
  InputBuffer input_;
  core::Counter written_;
  std::atomic<uint64_t> handshake_errors_{0};
  std::unique_ptr<TlsTransport> transport_;
  protocol::OutputQueue replies_;
  TlsClient client_;
};

TEST_F(TlsTransportTest, CarriesRequestsAndRepliesBothWays) {
  EXPECT_FALSE(transport_->handshake_done());
  handshake();
  client_.write("get k\r\n");
  Input plaintext = receive(client_.ciphertext());
  ASSERT_EQ(plaintext.status, Status::kBytes);
  EXPECT_EQ(plaintext.bytes, "get k\r\n");
  EXPECT_EQ(plaintext.bytes.data(), scratch_.data()) << "decrypted where a plain read lands";

  replies_.append("VALUE k 0 1\r\n");
  replies_.append("v\r\nEND\r\n");
  deliver();
  EXPECT_EQ(client_.read(), "VALUE k 0 1\r\nv\r\nEND\r\n");
  EXPECT_EQ(written_.load(), 21u) << "reply bytes, as they were before encryption";
  EXPECT_FALSE(transport_->holds_output());
}

// io_uring sends from what gather() described a loop turn later, while
// the client's next bytes may make the session write more.
TEST_F(TlsTransportTest, GatheredCiphertextStaysPutUntilConsumed) {
  handshake();
  replies_.append(std::string(1000, 'a'));
  iovec iov[64];
  ASSERT_EQ(transport_->gather(replies_, iov, 64), 1);
  std::string described(static_cast<const char*>(iov[0].iov_base), iov[0].iov_len);

  client_.write(std::string(40000, 'b'));  // decrypted meanwhile
  EXPECT_EQ(receive(client_.ciphertext()).status, Status::kBytes);
  EXPECT_EQ(std::string_view(static_cast<const char*>(iov[0].iov_base), iov[0].iov_len), described);
  EXPECT_TRUE(transport_->holds_output());
  EXPECT_FALSE(transport_->consume(replies_, iov[0].iov_len));
  client_.put(described);
  EXPECT_EQ(client_.read(), std::string(1000, 'a'));
}

TEST_F(TlsTransportTest, KeepsCiphertextUntilAskedToDecodeIt) {
  handshake();
  client_.write("version\r\n");
  std::string ciphertext = client_.ciphertext();
  transport_->keep(ciphertext.data(), ciphertext.size(), input_);
  EXPECT_TRUE(input_.empty());
  Input plaintext = transport_->decode(nullptr, 0, input_);
  ASSERT_EQ(plaintext.status, Status::kBytes);
  EXPECT_EQ(plaintext.bytes, "version\r\n");
}

// epoll: the transport reads and sends on the socket itself.
TEST_F(TlsTransportTest, ReadsAndSendsOnASocket) {
  handshake();
  SocketPair sockets;
  client_.write("get k\r\n");
  sockets.client_sends(client_.ciphertext());
  Input plaintext = transport_->read(sockets.server(), input_);
  ASSERT_EQ(plaintext.status, Status::kBytes);
  EXPECT_EQ(plaintext.bytes, "get k\r\n");

  replies_.append("END\r\n");
  EXPECT_EQ(transport_->send(sockets.server(), replies_), 0);
  EXPECT_FALSE(transport_->holds_output());
  client_.put(sockets.client_reads());
  EXPECT_EQ(client_.read(), "END\r\n");
}

TEST_F(TlsTransportTest, PlaintextOnATlsPortBreaksTheStream) {
  EXPECT_EQ(receive("get k\r\n").status, Status::kBroken);
  EXPECT_EQ(handshake_errors_.load(), 1u);
}

TEST_F(TlsTransportTest, ABadHandshakeGetsAnAlertAsLastWords) {
  // A handshake record whose message is nonsense.
  EXPECT_EQ(receive(std::string("\x16\x03\x01\x00\x05hello", 10)).status, Status::kBroken);
  EXPECT_EQ(handshake_errors_.load(), 1u);
  std::string_view words = transport_->last_words();
  ASSERT_FALSE(words.empty());
  EXPECT_EQ(words[0], '\x15') << "an alert record";
}

TEST_F(TlsTransportTest, GoodbyeIsACloseNotify) {
  handshake();
  transport_->say_goodbye();
  std::string_view words = transport_->last_words();
  ASSERT_FALSE(words.empty());
  client_.put(words);
  EXPECT_TRUE(client_.server_closed());
}

TEST_F(TlsTransportTest, ACloseNotifyEndsTheStream) {
  handshake();
  client_.shutdown();
  EXPECT_EQ(receive(client_.ciphertext()).status, Status::kEnd);
}

}  // namespace
}  // namespace lockcached::server
