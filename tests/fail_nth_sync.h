// A hook for G4 tests: fails one sync of segment data with EIO.
#pragma once

#include <atomic>
#include <cerrno>

#include "io/hook.h"

namespace synclog::test {

// Fails the n-th operation that makes segment data durable with EIO, then
// counts every such operation that follows.
class FailNthSync : public io::Hook {
 public:
  explicit FailNthSync(int n) : n_(n) {}
  int before(const io::Event& e) override {
    if (!is_data_sync(e)) return 0;
    const int k = ++count_;
    if (k == n_) return EIO;
    if (k > n_) ++after_failure_;
    if (observed_.load()) ++after_observed_;
    return 0;
  }
  // Operations begun after the failed one. A backend with several writes in
  // flight for one sync (io_uring, libaio, the msync pool) may have begun
  // others of that sync after it, so this counts them too.
  int after_failure() const { return after_failure_.load(); }
  // Call once the log has reported the failure (stats().failures): by then
  // every operation of the failed sync has completed, so any operation
  // after this is one the log began after failing.
  void observed() { observed_.store(true); }
  int after_observed() const { return after_observed_.load(); }
  bool fired() const { return count_.load() >= n_; }

 private:
  static bool is_data_sync(const io::Event& e) {
    const bool segment = e.path.extension() == ".seg";
    return segment &&
           (e.op == io::Op::msync || e.op == io::Op::datasync || e.op == io::Op::direct_write);
  }
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<int> after_failure_{0};
  std::atomic<bool> observed_{false};
  std::atomic<int> after_observed_{0};
};

}  // namespace synclog::test
