#include "log/cdc.h"

#include "segments/format.h"

namespace synclog {

Cdc::Cdc(CdcOptions options, const seg::SegmentManager& manager, sync::Driver& driver)
    : opt_(std::move(options)), manager_(manager), driver_(driver), next_(opt_.first_new_id) {}

Cdc::~Cdc() {
  if (thread_.joinable()) stop(false);
}

void Cdc::start() {
  thread_ = std::thread([this] { run(); });
}

void Cdc::stop(bool sealed) {
  if (thread_.joinable()) {
    stopping_.store(true);
    driver_.nudge();
    thread_.join();
  }
  update(sealed);
}

std::string Cdc::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

void Cdc::run() {
  while (!stopping_.load()) {
    const uint32_t seen = driver_.generation();
    update(false);
    if (stopping_.load()) return;
    driver_.wait_generation(seen);
  }
}

void Cdc::update(bool sealed) {
  // Read once: every index written in this pass claims at most this, and a
  // position is only ever published once it is durable.
  const Position durable = driver_.durable();
  for (uint64_t id : manager_.cdc_linked_from(next_)) {
    seg::CdcIndex want;
    if (id < durable.segment() || (sealed && id == durable.segment())) {
      // Finished: a later segment holds the durable position (so this
      // one's end record is durable), or close sealed it. The consumer
      // reads to the end record.
      want = {opt_.segment_size, true};
    } else if (id == durable.segment()) {
      want = {durable.offset(), false};
    } else {
      break;  // the manager's index (header only) still holds
    }
    auto& have = written_[id];
    if (have.offset == want.offset && have.completed == want.completed) continue;
    if (auto r = seg::store_cdc_index(opt_.cdc_dir, id, want, opt_.file_perms); !r) {
      // Tried again at the next publish; the old index still claims less.
      std::lock_guard lock(mu_);
      last_error_ = "change data capture: index of segment " + std::to_string(id) + ": " +
                    r.error().describe();
      return;
    }
    {
      std::lock_guard lock(mu_);
      last_error_.clear();
    }
    have = want;
    if (want.completed) {
      written_.erase(id);
      next_ = id + 1;
    }
  }
}

}  // namespace synclog
