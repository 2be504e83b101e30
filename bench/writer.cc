#include "writer.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "record.h"

namespace bench {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t next_random(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

// A completion that never comes would hang the sweep; a log that is this
// late has failed anyway.
constexpr uint64_t kDrainTimeoutNs = 60'000'000'000;

// One call's completion: the log keeps it until the call's records are
// durable, so it carries the call's own start time and size.
struct Ack {
  Writer* w;
  uint64_t call;  // this writer's call index
  uint64_t t0;    // when append_async() was called
  uint32_t records;
  bool timed;
  uint64_t bytes;

  void operator()(synclog::Result<synclog::Position> r) const {
    const uint64_t t1 = now_ns();
    Writer::Acks& a = w->acks;
    if (call != a.next_call && a.misorder.empty()) {
      a.misorder = "completion of call " + std::to_string(call) + " fired when call " +
                   std::to_string(a.next_call) + " was due (lost, repeated or out of order)";
    }
    a.next_call = call + 1;
    if (!r) {
      if (!a.error) a.error = r.error();
    } else if (!a.error) {
      // Completions come in position order, so after a failure none can
      // extend the acknowledged prefix.
      if (timed) a.hist->record(t1 - t0, records);
      w->done.store(w->done.load(std::memory_order_relaxed) + records, std::memory_order_relaxed);
      w->bytes.store(w->bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
      w->last_segment.store(r->segment(), std::memory_order_relaxed);
    }
    a.completed.fetch_add(1, std::memory_order_release);
    a.completed.notify_one();
  }
};

}  // namespace

void run_writer(synclog::Log& log, const Point& p, uint32_t t, WriterControl& control, Writer& w) {
  // Allocated by their owner thread, so their buckets sit in its memory.
  auto hist = std::make_unique<Histogram>();
  w.acks.hist = std::make_unique<Histogram>();
  const uint32_t k_max = std::max<uint32_t>(p.batch, 1);
  // A batch needs all its records at once; each writer reuses one buffer.
  std::vector<RecordWriter> records;
  records.reserve(k_max);
  for (uint32_t i = 0; i < k_max; ++i) records.emplace_back(t, p.size.max, p.payload);
  std::vector<std::span<const std::byte>> spans(k_max);
  const uint32_t n = p.threads;
  const uint64_t quota = p.ops > 0 ? p.ops / n + (t < p.ops % n ? 1 : 0) : UINT64_MAX;
  const uint64_t range = p.size.max - p.size.min + 1;
  uint64_t rng = 0x9e3779b97f4a7c15ull * (t + 1);
  const bool async = p.inflight > 0;
  Writer::Acks& acks = w.acks;

  control.ready.fetch_add(1);
  control.go.wait(false);
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint64_t calls = 0;
  uint64_t segment = UINT64_MAX;
  std::vector<std::pair<uint64_t, uint64_t>> starts;
  std::vector<synclog::Position> positions;
  while (seq < quota && !control.stop.load(std::memory_order_relaxed)) {
    const uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(k_max, quota - seq));
    uint64_t call_bytes = 0;
    for (uint32_t i = 0; i < k; ++i) {
      const size_t len = range == 1 ? p.size.min : p.size.min + next_random(&rng) % range;
      spans[i] = records[i].next(seq + i, len);
      call_bytes += len;
    }
    const std::span<const std::span<const std::byte>> batch(spans.data(), k);
    if (async) {
      for (uint64_t c = acks.completed.load(std::memory_order_acquire); calls - c >= p.inflight;
           c = acks.completed.load(std::memory_order_acquire)) {
        acks.completed.wait(c, std::memory_order_acquire);
      }
    }
    const bool timed = control.measuring.load(std::memory_order_relaxed);
    const uint64_t t0 = now_ns();
    std::optional<synclog::Error> error;
    positions.clear();
    if (async) {
      const Ack ack{&w, calls, t0, k, timed, call_bytes};
      if (k_max > 1) {
        auto r = log.append_batch_async(batch, ack);
        if (r) {
          positions = std::move(*r);
        } else {
          error = r.error();
        }
      } else {
        auto r = log.append_async(spans[0], ack);
        if (r) {
          positions.push_back(*r);
        } else {
          error = r.error();
        }
      }
    } else if (k_max > 1) {
      auto r = log.append_batch(batch);
      if (r) {
        positions = std::move(*r);
      } else {
        error = r.error();
      }
    } else {
      auto r = log.append(spans[0]);
      if (r) {
        positions.push_back(*r);
      } else {
        error = r.error();
      }
    }
    const uint64_t t1 = now_ns();
    if (error) {
      w.error = error;
      w.failed_records = k;
      break;
    }
    if (seq == 0) w.first_position = positions.front();
    w.last_position = positions.back();
    for (uint32_t i = 0; i < k; ++i) {
      if (positions[i].segment() != segment) {
        segment = positions[i].segment();
        starts.emplace_back(segment, seq + i);
      }
    }
    seq += k;
    if (async) {
      ++calls;
      continue;
    }
    if (timed) hist->record(t1 - t0, k);
    bytes += call_bytes;
    w.last_segment.store(segment, std::memory_order_relaxed);
    w.done.store(seq, std::memory_order_relaxed);
    w.bytes.store(bytes, std::memory_order_relaxed);
  }
  if (async) {
    // Polled rather than waited on: a completion that never fires must
    // end in an error, not a hung sweep.
    const uint64_t deadline = now_ns() + kDrainTimeoutNs;
    while (acks.completed.load(std::memory_order_acquire) < calls) {
      if (now_ns() > deadline) {
        w.drain_error = std::to_string(calls - acks.completed.load()) + " of " +
                        std::to_string(calls) + " completions had not fired 60s after the last " +
                        "append_async()";
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  w.submitted = seq;
  w.calls = calls;
  w.hist = std::move(hist);
  w.starts = std::move(starts);
  w.finished.store(true, std::memory_order_release);
}

std::string writer_failure(const Writer& w) {
  if (w.error) return "append: " + w.error->describe();
  if (!w.drain_error.empty()) return "completions: " + w.drain_error;
  const uint64_t fired = w.acks.completed.load(std::memory_order_acquire);
  if (fired != w.calls) {
    return "completions: " + std::to_string(fired) + " fired for " + std::to_string(w.calls) +
           " append_async() calls (each must fire exactly once)";
  }
  if (!w.acks.misorder.empty()) return "completions: " + w.acks.misorder;
  if (w.acks.error) return "completion: " + w.acks.error->describe();
  if (w.done.load() != w.submitted) {
    return "completions: " + std::to_string(w.done.load()) + " of " + std::to_string(w.submitted) +
           " records acknowledged";
  }
  return "";
}

}  // namespace bench
