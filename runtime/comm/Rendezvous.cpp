//===- Rendezvous.cpp - the ranks of a world meet without MPI -------------===//
//
// The wire format (big-endian integers):
//   hello, each rank > 0 to rank 0:  "aprv", u32 version, i32 rank,
//                                    i32 world size (16 bytes);
//   answer, rank 0 to each:          u8 kind (0: the bytes, 1: an error
//                                    line), u32 length, the payload.
// Rank 0 polls its listening socket and the connections that have not yet
// said hello, without blocking on any one of them; a connection that does
// not speak the format is dropped (not an error of the world).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Rendezvous.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace autopar::rt {
namespace {

constexpr char kMagic[4] = {'a', 'p', 'r', 'v'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHelloBytes = 16;
/// The longest answer a rank accepts (NCCL's id is 128 bytes; error lines
/// are short).
constexpr uint32_t kMaxPayload = 1 << 16;

using Clock = std::chrono::steady_clock;

/// Milliseconds left until `deadline` (0 once past), for poll().
int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return int(std::clamp<int64_t>(left, 0, 1 << 30));
}

std::string secondsText(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", seconds);
  return buf;
}

void putU32(char *p, uint32_t v) {
  uint32_t be = htonl(v);
  std::memcpy(p, &be, 4);
}

uint32_t getU32(const char *p) {
  uint32_t be;
  std::memcpy(&be, p, 4);
  return ntohl(be);
}

/// Closes a descriptor when it goes out of scope.
class Fd {
public:
  explicit Fd(int fd = -1) : fd(fd) {}
  Fd(Fd &&other) noexcept : fd(other.release()) {}
  Fd &operator=(Fd &&other) noexcept {
    reset(other.release());
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd; }
  int release() { return std::exchange(fd, -1); }
  void reset(int next = -1) {
    if (fd >= 0)
      ::close(fd);
    fd = next;
  }

private:
  int fd;
};

/// Sends all of `bytes` on a blocking socket (no SIGPIPE); false on error.
bool sendAll(int fd, const std::string &bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n =
        ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

/// Receives exactly `count` bytes into `out` by `deadline`: "" or why not
/// ("closed", "timed out", an errno text).
std::string recvAll(int fd, char *out, size_t count,
                    Clock::time_point deadline) {
  size_t done = 0;
  while (done < count) {
    pollfd p = {fd, POLLIN, 0};
    int ready = ::poll(&p, 1, msLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready < 0)
      return std::strerror(errno);
    if (ready == 0)
      return "timed out";
    ssize_t n = ::recv(fd, out + done, count - done, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n < 0)
      return std::strerror(errno);
    if (n == 0)
      return "closed";
    done += size_t(n);
  }
  return "";
}

std::string answer(uint8_t kind, const std::string &payload) {
  std::string bytes(5, '\0');
  bytes[0] = char(kind);
  putU32(&bytes[1], uint32_t(payload.size()));
  return bytes + payload;
}

/// A socket listening on `port` on every interface (IPv6 and IPv4 where
/// the host has both), or the error line.
Status listenOn(int port, int backlog, Fd &out) {
  std::string why;
  for (int family : {AF_INET6, AF_INET}) {
    Fd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1, zero = 0;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (family == AF_INET6) {
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      sockaddr_in6 addr = {};
      addr.sin6_family = AF_INET6;
      addr.sin6_addr = in6addr_any;
      addr.sin6_port = htons(uint16_t(port));
      rc = ::bind(fd.get(), reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    } else {
      sockaddr_in addr = {};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_ANY);
      addr.sin_port = htons(uint16_t(port));
      rc = ::bind(fd.get(), reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    }
    if (rc != 0 || ::listen(fd.get(), backlog) != 0) {
      why = std::strerror(errno);
      // In use is in use for both families; anything else may be IPv6 only.
      if (errno == EADDRINUSE)
        break;
      continue;
    }
    out = std::move(fd);
    return Status::ok();
  }
  return Status::error("rank 0 cannot listen on port " + std::to_string(port) +
                       ": " + why);
}

/// Rank 0: waits for every other rank's hello, then answers each.
Status serve(const Endpoint &endpoint, int worldSize, double timeoutSeconds,
             const std::string &blob) {
  const std::string where = endpoint.text() + " (" + endpoint.source + ")";
  Fd listener;
  if (Status s =
          listenOn(endpoint.port, std::min(worldSize, SOMAXCONN), listener);
      !s)
    return Status::error(s.message() + " (" + endpoint.source + ")");
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeoutSeconds));
  struct Pending {
    Fd fd;
    std::string hello;
  };
  std::vector<Pending> pending;
  std::map<int, Fd> arrived;
  std::string error;
  while (int(arrived.size()) < worldSize - 1 && error.empty()) {
    std::vector<pollfd> fds = {{listener.get(), POLLIN, 0}};
    for (Pending &p : pending)
      fds.push_back({p.fd.get(), POLLIN, 0});
    int wait = msLeft(deadline);
    if (wait == 0)
      break;
    int ready = ::poll(fds.data(), fds.size(), wait);
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready < 0)
      return Status::error("rank 0 waiting at " + where +
                           ": poll: " + std::strerror(errno));
    // The connections first (their indices match `fds`), then new ones.
    for (size_t i = pending.size(); i-- > 0;) {
      if (!fds[i + 1].revents)
        continue;
      Pending &p = pending[i];
      char buf[kHelloBytes];
      ssize_t n =
          ::recv(p.fd.get(), buf, kHelloBytes - p.hello.size(), MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (n <= 0) { // closed or broken before its hello: not one of ours
        pending.erase(pending.begin() + long(i));
        continue;
      }
      p.hello.append(buf, size_t(n));
      if (p.hello.size() < kHelloBytes)
        continue;
      const char *h = p.hello.data();
      int rank = int(int32_t(getU32(h + 8)));
      int size = int(int32_t(getU32(h + 12)));
      if (std::memcmp(h, kMagic, 4) != 0 || getU32(h + 4) != kVersion) {
        pending.erase(pending.begin() + long(i));
        continue;
      }
      if (size != worldSize)
        error = "rank " + std::to_string(rank) +
                " was launched into a world "
                "of " +
                std::to_string(size) + " ranks, rank 0 into one of " +
                std::to_string(worldSize) + " (meeting at " + where + ")";
      else if (rank <= 0 || rank >= worldSize || arrived.count(rank))
        error = "two processes of the world meeting at " + where +
                " claim rank " + std::to_string(rank);
      if (!error.empty()) {
        // The offender hears it too.
        sendAll(p.fd.get(), answer(1, error));
        pending.erase(pending.begin() + long(i));
        break;
      }
      arrived[rank] = std::move(p.fd);
      pending.erase(pending.begin() + long(i));
    }
    if (error.empty() && (fds[0].revents & POLLIN)) {
      int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0)
        pending.push_back({Fd(fd), std::string()});
    }
  }
  if (error.empty() && int(arrived.size()) < worldSize - 1) {
    std::vector<int> missing;
    for (int r = 1; r < worldSize; ++r)
      if (!arrived.count(r))
        missing.push_back(r);
    error = "the world of " + std::to_string(worldSize) +
            " ranks did not form at " + where + " in " +
            secondsText(timeoutSeconds) +
            " s: " + (missing.size() == 1 ? "rank " : "ranks ") +
            rankList(missing) + " did not arrive";
  }
  const std::string reply = error.empty() ? answer(0, blob) : answer(1, error);
  for (auto &[rank, fd] : arrived) {
    // Blocking sends of a few bytes each.
    int flags = ::fcntl(fd.get(), F_GETFL);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    if (!sendAll(fd.get(), reply) && error.empty())
      error = "rank " + std::to_string(rank) + " left the world meeting at " +
              where + " before it formed";
  }
  return error.empty() ? Status::ok() : Status::error(error);
}

/// Ranks > 0: connects to rank 0, says hello, takes the answer.
Status join(const Endpoint &endpoint, int rank, int worldSize,
            double timeoutSeconds, std::string &blob) {
  const std::string where = endpoint.text() + " (" + endpoint.source + ")";
  auto start = Clock::now();
  auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(timeoutSeconds));
  auto deadline = start + timeout;
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *addrs = nullptr;
  int rc = ::getaddrinfo(endpoint.host.c_str(),
                         std::to_string(endpoint.port).c_str(), &hints, &addrs);
  if (rc != 0)
    return Status::error("rank " + std::to_string(rank) + " cannot find " +
                         where + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo *)> owner(addrs, ::freeaddrinfo);
  Fd fd;
  std::string why = "no address";
  while (fd.get() < 0) {
    for (addrinfo *a = addrs; a && fd.get() < 0; a = a->ai_next) {
      Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                    a->ai_protocol));
      if (s.get() < 0) {
        why = std::strerror(errno);
        continue;
      }
      // A non-blocking connect, bounded by the deadline.
      int flags = ::fcntl(s.get(), F_GETFL);
      ::fcntl(s.get(), F_SETFL, flags | O_NONBLOCK);
      int c = ::connect(s.get(), a->ai_addr, a->ai_addrlen);
      if (c != 0 && errno == EINPROGRESS) {
        pollfd p = {s.get(), POLLOUT, 0};
        int ready;
        do
          ready = ::poll(&p, 1, msLeft(deadline));
        while (ready < 0 && errno == EINTR);
        int err = ready > 0 ? 0 : ETIMEDOUT;
        socklen_t len = sizeof(err);
        if (ready > 0)
          ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        c = err == 0 ? 0 : -1;
        errno = err;
      }
      if (c != 0) {
        why = std::strerror(errno);
        continue;
      }
      ::fcntl(s.get(), F_SETFL, flags & ~O_NONBLOCK);
      fd = std::move(s);
    }
    if (fd.get() >= 0)
      break;
    // Rank 0 may not listen yet: try again shortly.
    if (msLeft(deadline) == 0)
      return Status::error("rank " + std::to_string(rank) +
                           " could not reach rank 0 at " + where + " in " +
                           secondsText(timeoutSeconds) + " s: " + why);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(100, msLeft(deadline))));
  }
  std::string hello(kHelloBytes, '\0');
  std::memcpy(&hello[0], kMagic, 4);
  putU32(&hello[4], kVersion);
  putU32(&hello[8], uint32_t(rank));
  putU32(&hello[12], uint32_t(worldSize));
  if (!sendAll(fd.get(), hello))
    return Status::error("rank " + std::to_string(rank) +
                         " lost its connection to rank 0 at " + where + ": " +
                         std::strerror(errno));
  // Rank 0 times out on its own clock and then says who is missing: wait a
  // little past this rank's deadline for that line.
  auto grace = std::min<Clock::duration>(timeout, std::chrono::seconds(2));
  char header[5];
  std::string got = recvAll(fd.get(), header, 5, deadline + grace);
  uint32_t length = got.empty() ? getU32(header + 1) : 0;
  if (got.empty() && length > kMaxPayload)
    got = "an answer of " + std::to_string(length) + " bytes";
  std::string payload(length, '\0');
  if (got.empty() && length > 0)
    got = recvAll(fd.get(), &payload[0], length, deadline + grace);
  if (got == "timed out")
    return Status::error("the world of " + std::to_string(worldSize) +
                         " ranks did not form at " + where + " in " +
                         secondsText(timeoutSeconds) + " s (rank " +
                         std::to_string(rank) +
                         " reached rank 0, which is still waiting for others)");
  if (got == "closed")
    return Status::error("rank 0 at " + where +
                         " closed the connection before the world formed");
  if (!got.empty())
    return Status::error("rank " + std::to_string(rank) +
                         " lost its connection to rank 0 at " + where + ": " +
                         got);
  if (header[0] != 0)
    return Status::error(payload);
  blob = std::move(payload);
  return Status::ok();
}

} // namespace

std::string rankList(const std::vector<int> &ranks, size_t limit) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string text;
  size_t items = 0, i = 0;
  for (; i < sorted.size() && items < limit; ++items) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1)
      ++j;
    text += (text.empty() ? "" : ", ") + std::to_string(sorted[i]);
    if (j > i)
      text += "-" + std::to_string(sorted[j]);
    i = j + 1;
  }
  if (i < sorted.size())
    text += " and " + std::to_string(sorted.size() - i) + " more";
  return text;
}

Status rendezvous(const Endpoint &endpoint, int rank, int worldSize,
                  double timeoutSeconds, std::string &blob) {
  if (worldSize <= 1)
    return Status::ok();
  if (!(timeoutSeconds > 0) || !std::isfinite(timeoutSeconds))
    timeoutSeconds = 600;
  if (rank == 0)
    return serve(endpoint, worldSize, timeoutSeconds, blob);
  return join(endpoint, rank, worldSize, timeoutSeconds, blob);
}

} // namespace autopar::rt
