//===- RuntimeRendezvousTest.cpp - runtime/comm/Rendezvous.h
//---------------===//
//
// Worlds of threads meeting on the loopback interface: the bytes reach every
// rank; a missing rank, an absent rank 0, two claims of one rank, a
// disagreement on the world's size and a taken port are one line each, in
// bounded time.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Rendezvous.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using autopar::rt::Endpoint;
using autopar::rt::rankList;
using autopar::rt::rendezvous;
using autopar::rt::Status;

namespace {

/// A socket bound to a free loopback port, listening when `listening`
/// (the caller closes it).
int boundSocket(int &port, bool listening) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  port = ntohs(addr.sin_port);
  if (listening) {
    EXPECT_EQ(::listen(fd, 4), 0);
  }
  return fd;
}

Endpoint freeEndpoint() {
  int port = 0;
  ::close(boundSocket(port, false));
  return {"127.0.0.1", port, "MASTER_ADDR, MASTER_PORT"};
}

struct Member {
  int rank, worldSize;
  double timeout = 10;
  /// Starts this long after the others.
  int delayMs = 0;
};

struct Result {
  Status status;
  std::string blob;
};

/// Runs each member in its own thread; rank 0 offers "id-bytes".
std::vector<Result> meet(const Endpoint &endpoint,
                         const std::vector<Member> &members) {
  std::vector<Result> results(members.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < members.size(); ++i)
    threads.emplace_back([&, i] {
      const Member &m = members[i];
      std::this_thread::sleep_for(std::chrono::milliseconds(m.delayMs));
      std::string blob = m.rank == 0 ? std::string("id\0bytes", 8) : "";
      results[i].status =
          rendezvous(endpoint, m.rank, m.worldSize, m.timeout, blob);
      results[i].blob = blob;
    });
  for (std::thread &t : threads)
    t.join();
  return results;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST(RuntimeRendezvousTest, EveryRankGetsRankZerosBytes) {
  Endpoint e = freeEndpoint();
  // Rank 0 starts last: the others retry until it listens.
  auto results = meet(e, {{1, 4}, {3, 4}, {2, 4}, {0, 4, 10, 300}});
  for (const Result &r : results) {
    EXPECT_TRUE(r.status.isOk()) << r.status.message();
    EXPECT_EQ(r.blob, std::string("id\0bytes", 8));
  }
}

TEST(RuntimeRendezvousTest, OneRankNeedsNobody) {
  std::string blob = "x";
  EXPECT_TRUE(rendezvous(freeEndpoint(), 0, 1, 1, blob).isOk());
  EXPECT_EQ(blob, "x");
}

TEST(RuntimeRendezvousTest, MissingRanksAreNamedOnEveryRank) {
  Endpoint e = freeEndpoint();
  auto start = std::chrono::steady_clock::now();
  auto results = meet(e, {{0, 5, 0.5}, {1, 5, 0.5}, {3, 5, 0.5}});
  EXPECT_LT(secondsSince(start), 5.0);
  std::string expected = "the world of 5 ranks did not form at " + e.text() +
                         " (MASTER_ADDR, MASTER_PORT) in 0.5 s: ranks 2, 4 "
                         "did not arrive";
  for (const Result &r : results) {
    ASSERT_FALSE(r.status.isOk());
    EXPECT_EQ(r.status.message(), expected);
  }
}

TEST(RuntimeRendezvousTest, NoRankZeroIsNamed) {
  Endpoint e = freeEndpoint();
  auto start = std::chrono::steady_clock::now();
  auto results = meet(e, {{1, 2, 0.3}});
  EXPECT_LT(secondsSince(start), 5.0);
  ASSERT_FALSE(results[0].status.isOk());
  EXPECT_EQ(results[0].status.message(),
            "rank 1 could not reach rank 0 at " + e.text() +
                " (MASTER_ADDR, MASTER_PORT) in 0.3 s: Connection refused");
}

TEST(RuntimeRendezvousTest, TwoClaimsOfOneRank) {
  Endpoint e = freeEndpoint();
  auto results = meet(e, {{0, 3, 5}, {1, 3, 5}, {1, 3, 5, 100}});
  for (const Result &r : results) {
    ASSERT_FALSE(r.status.isOk());
    EXPECT_EQ(r.status.message(), "two processes of the world meeting at " +
                                      e.text() +
                                      " (MASTER_ADDR, MASTER_PORT) claim "
                                      "rank 1");
  }
}

TEST(RuntimeRendezvousTest, WorldSizesDisagree) {
  Endpoint e = freeEndpoint();
  auto results = meet(e, {{0, 2, 5}, {1, 3, 5}});
  for (const Result &r : results) {
    ASSERT_FALSE(r.status.isOk());
    EXPECT_EQ(r.status.message(),
              "rank 1 was launched into a world of 3 ranks, rank 0 into one "
              "of 2 (meeting at " +
                  e.text() + " (MASTER_ADDR, MASTER_PORT))");
  }
}

TEST(RuntimeRendezvousTest, ATakenPortIsNamed) {
  int port = 0;
  int taken = boundSocket(port, true);
  Endpoint e{"127.0.0.1", port, "MASTER_ADDR, MASTER_PORT"};
  std::string blob;
  Status s = rendezvous(e, 0, 2, 1, blob);
  ::close(taken);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "rank 0 cannot listen on port " +
                             std::to_string(port) +
                             ": Address already in use (MASTER_ADDR, "
                             "MASTER_PORT)");
}

TEST(RuntimeRendezvousTest, AStrangerIsIgnored) {
  Endpoint e = freeEndpoint();
  std::thread stranger([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(uint16_t(e.port));
    if (::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0)
      (void)!::write(fd, "GET / HTTP/1.0\r\n\r\n", 18);
    ::close(fd);
  });
  auto results = meet(e, {{0, 2}, {1, 2, 10, 300}});
  stranger.join();
  for (const Result &r : results) {
    EXPECT_TRUE(r.status.isOk()) << r.status.message();
    EXPECT_EQ(r.blob, std::string("id\0bytes", 8));
  }
}

TEST(RuntimeRendezvousTest, RankLists) {
  EXPECT_EQ(rankList({3}), "3");
  EXPECT_EQ(rankList({9, 1, 3, 4, 5}), "1, 3-5, 9");
  EXPECT_EQ(rankList({1, 3, 5, 7}, 2), "1, 3 and 2 more");
}

} // namespace
