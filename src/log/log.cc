#include "synclog/log.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>

#include "io/align.h"
#include "io/filesystem.h"
#include "io/links.h"
#include "log/archive_state.h"
#include "log/dir_lock.h"
#include "log/log_impl.h"
#include "sync/auto_order.h"
#include "sync/direct_sync.h"

namespace synclog {

Log::Log(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Log::~Log() {
  if (impl_ && impl_->completions && impl_->completions->on_callback_thread()) {
    // The callback thread would have to join itself: say why, then stop,
    // rather than die of an uncaught std::system_error.
    std::fprintf(stderr,
                 "synclog: a Log was destroyed from its own completion callback, whose thread "
                 "it must join; aborting (close and destroy it from another thread)\n");
    std::abort();
  }
  if (impl_ && !impl_->closed) (void)close();
}

namespace {

// A crashed process leaves what it wrote but never synced (mmap stores,
// buffered writes, direct writes under a volatile device cache) in the page
// cache, where recovery has just read it as the log. A power loss later
// would take it away from under this session's sync markers, which name it
// as durable. So everything recovery kept is made durable, names included,
// before this session acknowledges anything (as PostgreSQL syncs its data
// directory after a crash). A file already durable costs one cheap sync.
Result<void> make_recovered_durable(const std::filesystem::path& dir,
                                    const std::map<uint64_t, uint64_t>& kept) {
  for (const auto& [id, size] : kept) {
    auto file = io::File::open(dir / seg::segment_file_name(id), io::File::Mode::read);
    if (!file) return std::unexpected(file.error());
    if (auto r = file->datasync(); !r) return r;
  }
  return io::sync_dir(dir);
}

// One loss record per accepted loss, right after the session record; a
// long list ends in one record that sums up the rest.
Result<void> record_losses(seg::Appender& appender, const std::vector<Damage>& losses) {
  constexpr size_t kMaxLossRecords = 64;
  for (size_t i = 0; i < losses.size(); ++i) {
    seg::LossRecord l{losses[i].at, losses[i].bytes, losses[i].reason};
    if (i + 1 == kMaxLossRecords && losses.size() > kMaxLossRecords) {
      for (size_t k = i + 1; k < losses.size(); ++k) l.bytes += losses[k].bytes;
      l.reason = "this and " + std::to_string(losses.size() - i - 1) +
                 " more damaged regions after it (first: " + losses[i].reason + ")";
    }
    const std::string payload = seg::encode_loss(l);
    auto pos = appender.append(seg::Kind::loss, std::as_bytes(std::span(payload)));
    if (!pos) return std::unexpected(pos.error());
    if (i + 1 == kMaxLossRecords) break;
  }
  return {};
}

// One backend, ready to run, and what it needs from the rest of the log.
struct Started {
  std::unique_ptr<sync::Backend> backend;
  Config effective;  // backend, segment_kind and direct_sync as in use
  uint32_t block = 0;
  std::string direct_why;  // for Log::backend(); empty unless direct_sync=auto decided
};

// Starts config.backend (never auto) with config.segment_kind (the one it
// syncs) in the directory on `fs`. Whatever the machine or filesystem
// refuses is Errc::unsupported naming why, so backend=auto can try the next.
Result<Started> start_backend(const Config& config, const io::Filesystem& fs,
                              const std::filesystem::path& lock_path) {
  Started out;
  out.effective = config;
  if (config.segment_kind == SegmentKind::mmap && !fs.copy_on_write.empty()) {
    return make_error(Errc::unsupported,
                      "mmap segments are refused in " + config.dir.string() + ": " +
                          fs.copy_on_write +
                          ", so fallocate reserves no space for overwrites and a store into "
                          "the mapping could raise SIGBUS when the filesystem is full; use "
                          "segment_kind=direct or segment_kind=buffered there");
  }
  std::optional<io::DirectProbe> probe;
  if (config.segment_kind == SegmentKind::direct) {
    // The lock file is the probe: it exists for the whole session, so
    // probing leaves nothing behind for the directory scan. The probe
    // writes a block into it; record_holder() writes the pid over it and
    // cuts the rest.
    auto probed = io::probe_direct_io(lock_path);
    if (!probed) return std::unexpected(probed.error());
    if (config.block_size != 0 && probed->reported && config.block_size < probed->alignment) {
      return make_error(Errc::unsupported,
                        "config key 'block_size': " + std::to_string(config.block_size) +
                            " is below the direct I/O alignment of " +
                            std::to_string(probed->alignment) + " bytes that the filesystem of " +
                            config.dir.string() + " reports");
    }
    out.block = io::choose_block_size(config.block_size, probed->alignment, probed->physical);
    if (out.block > 4096) {
      return make_error(Errc::unsupported, "direct I/O alignment of " + std::to_string(out.block) +
                                               " bytes in " + config.dir.string() +
                                               " is above the supported 4096");
    }
    auto ds = sync::choose_direct_sync(config.direct_sync, fs, config.dir);
    if (!ds) return std::unexpected(ds.error());
    out.effective.direct_sync = ds->use;
    out.direct_why = ds->why;
    probe = std::move(*probed);
  }
  auto b = sync::make_backend(out.effective, out.block, probe ? &probe->file : nullptr);
  if (!b) return std::unexpected(b.error());
  out.backend = std::move(*b);
  return out;
}

}  // namespace

Result<std::unique_ptr<Log>> Log::open(const Config& config) {
  if (auto r = config.validate(); !r) return std::unexpected(r.error());
  if (config.create_dir) {
    if (auto r = io::create_dir(config.dir, config.dir_perms()); !r) {
      return make_error(Errc::bad_directory,
                        "cannot create log directory " + config.dir.string() +
                            " (create_dir=true): " + r.error().message,
                        r.error().sys_errno);
    }
  }
  if (auto r = io::check_writable_dir(config.dir); !r) {
    if (r.error().sys_errno != ENOENT || config.create_dir) return std::unexpected(r.error());
    return make_error(Errc::bad_directory,
                      r.error().message + " (set create_dir=true to have Log::open create it)",
                      ENOENT);
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  auto lock = DirLock::acquire(config);
  if (!lock) return std::unexpected(lock.error());
  impl->lock = std::move(*lock);

  if (!config.cdc_dir.empty()) {
    if (auto r = check_cdc_dir(config, impl->lock.path()); !r) return std::unexpected(r.error());
  }

  auto fs = io::probe_filesystem(config.dir);
  if (!fs) return std::unexpected(fs.error());
  std::vector<BackendKind> tries{config.backend};
  sync::AutoOrder order;
  if (config.backend == BackendKind::auto_select) {
    order = sync::auto_order(config, *fs);
    tries = order.backends;
  }
  std::optional<Started> started;
  std::string passed;
  for (BackendKind k : tries) {
    Config candidate = config;
    candidate.backend = k;
    candidate.segment_kind = segment_kind_for(k);
    auto s = start_backend(candidate, *fs, impl->lock.path());
    if (s) {
      started = std::move(*s);
      break;
    }
    // Only a backend this machine refuses is passed over: an I/O error in
    // a probe is the directory's, not the backend's.
    if (config.backend != BackendKind::auto_select || s.error().code != Errc::unsupported)
      return std::unexpected(s.error());
    passed += (passed.empty() ? "" : "; ") + std::string(to_string(k)) + ": " + s.error().message;
  }
  if (!started) {
    return make_error(Errc::unsupported, "backend=auto found no working backend for " +
                                             order.basis + (passed.empty() ? "" : ": " + passed));
  }
  // From here on the log runs with what started, so config() tells the
  // truth about the backend and segment kind.
  impl->config = started->effective;
  impl->block_size = started->block;
  impl->backend = std::move(started->backend);
  impl->backend_description = impl->backend->name();
  std::string why;
  if (config.backend == BackendKind::auto_select) {
    why = std::string("backend=auto chose ") + to_string(impl->config.backend) +
          (config.segment_kind == SegmentKind::auto_select ? " (" : " for ") +
          to_string(impl->config.segment_kind) + " segments" +
          (config.segment_kind == SegmentKind::auto_select ? ")" : "") +
          ": the first that started in the order measured for " + order.basis + ":";
    const char* sep = " ";
    for (BackendKind k : order.backends) {
      why += sep + std::string(to_string(k));
      sep = ", ";
    }
    if (!passed.empty()) why += " (" + passed + ")";
  }
  if (!started->direct_why.empty()) why += (why.empty() ? "" : "; ") + started->direct_why;
  // The first backend passed the probe; the others run the same code.
  for (uint32_t i = 1; i < impl->config.syncs_in_flight; ++i) {
    auto b = sync::make_backend(impl->config, impl->block_size);
    if (!b) return std::unexpected(b.error());
    impl->more_backends.push_back(std::move(*b));
  }
  if (impl->config.syncs_in_flight > 1) {
    why += (why.empty() ? "" : "; ") + std::to_string(impl->config.syncs_in_flight) +
           " syncs in flight";
  }
  if (!why.empty()) impl->backend_description += " (" + why + ")";
  const uint32_t block = impl->block_size;

  if (config.encryption != Encryption::none) {
    KeySource source = config.encryption_keys;
    if (!source) {
      auto loaded = seg::key_source_from_file(config.encryption_key_file);
      if (!loaded) return std::unexpected(loaded.error());
      source = std::move(*loaded);
    }
    impl->keys = std::make_shared<seg::Keyring>(std::move(source));
  }
  auto rec = seg::recover(config.dir, config.recovery, impl->keys.get());
  if (!rec) return std::unexpected(rec.error());
  // Temp files were never part of the log; discarded segments lie past its
  // end and hold only bytes that were never acknowledged.
  for (const auto& name : rec->temp_files) {
    if (auto r = io::remove_file(config.dir / name); !r) return std::unexpected(r.error());
  }
  for (uint64_t id : rec->discard) {
    if (auto r = io::remove_file(config.dir / seg::segment_file_name(id)); !r) {
      return std::unexpected(r.error());
    }
  }
  if (rec->next_id > seg::kMaxSegmentId + 1) {
    return make_error(Errc::bad_directory, "log directory " + config.dir.string() +
                                               " holds segment id " +
                                               std::to_string(rec->next_id - 1) +
                                               ", past the largest a position can hold (" +
                                               std::to_string(seg::kMaxSegmentId) + " = 2^32-2)");
  }
  if (auto r = make_recovered_durable(config.dir, rec->kept); !r) return std::unexpected(r.error());
  if (!config.cdc_dir.empty()) {
    if (auto r = settle_cdc_dir(config, *rec); !r) return std::unexpected(r.error());
  }
  impl->report = rec->report;
  impl->recovered = std::move(rec->extents);

  seg::ManagerOptions mo;
  mo.dir = config.dir;
  mo.segment_size = config.segment_size;
  mo.spares = config.spare_segments;
  mo.recycle = config.recycle;
  mo.prezero = config.prezero;
  mo.max_total_size = config.max_total_size;
  mo.kind = impl->config.segment_kind;
  mo.file_perms = config.file_perms();
  mo.log_id = rec->log_id;
  while (mo.log_id == 0)
    mo.log_id = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  mo.block_size = block != 0 ? block : 4096;
  mo.cdc_dir = config.cdc_dir;
  mo.cdc_max_size = config.cdc_max_size;
  if (impl->keys) {
    auto key = impl->keys->current();
    if (!key) return std::unexpected(key.error());
    mo.key = *key;
  }
  impl->first_new_id = rec->next_id;
  impl->manager = std::make_unique<seg::SegmentManager>(mo, rec->next_id, std::move(rec->kept));
  impl->manager->start();
  impl->appender = std::make_unique<seg::Appender>(
      *impl->manager, config.allocation_timeout, impl->metrics, config.max_unfragmented_size(),
      seg::RecordTransform{config.compression, config.compression_level,
                           config.encryption != Encryption::none});
  impl->appender->start(impl->report.end);
  // Losses a recovery mode accepted are recorded first; they, like any
  // append, take the session's first segment. Without them opening takes
  // no space.
  if (auto r = record_losses(*impl->appender, rec->losses); !r) {
    (void)impl->manager->stop();
    return std::unexpected(r.error());
  }
  // Nothing of this session is synced yet (its first segment may not exist).
  std::vector<sync::Backend*> backends{impl->backend.get()};
  for (auto& b : impl->more_backends) backends.push_back(b.get());
  impl->driver = std::make_unique<sync::Driver>(
      impl->config, *impl->appender, std::move(backends), impl->report.end, Position{},
      impl->config.segment_kind == SegmentKind::direct && config.tail == TailPolicy::pad ? block
                                                                                         : 8,
      impl->metrics);
  // A segment the manager cannot make (not for want of space) stops the
  // log as a failed sync does.
  impl->manager->on_failure([driver = impl->driver.get()](const Error& e) { driver->stop(e); });
  impl->driver->start();
  impl->completions = std::make_unique<Completions>(*impl->driver);
  if (!config.archive_command.empty() || config.archive || !config.archive_dir.empty()) {
    auto state = load_archive_state(config.dir);
    if (!state) {
      (void)impl->driver->close();
      (void)impl->manager->stop();
      return std::unexpected(state.error());
    }
    ArchiverOptions ao;
    ao.dir = config.dir;
    ao.command = config.archive_command;
    ao.hook = config.archive;
    ao.copy_dir = config.archive_dir;
    ao.log_id = mo.log_id;
    ao.first_new_id = rec->next_id;
    // A state of another log (the directory was emptied and a new log
    // begun) says nothing about this one's segments.
    if (*state && (*state)->log_id == mo.log_id) ao.through = (*state)->through;
    if (!config.archive_command.empty()) {
      // A crashed process's command for the first unarchived segment may
      // still be copying it (a shell outlives its parent). Recycling that
      // file would feed the copy a spare's bytes, and the late copy would
      // overwrite the good one this session makes: delete it instead.
      for (uint64_t id : impl->manager->segment_ids()) {
        if (id <= ao.through) continue;
        impl->manager->never_recycle(id);
        break;
      }
    }
    ao.file_perms = config.file_perms();
    impl->archiver = std::make_unique<Archiver>(std::move(ao), *impl->manager, *impl->driver);
    impl->archiver->start();
  }
  if (!config.cdc_dir.empty()) {
    CdcOptions co;
    co.cdc_dir = config.cdc_dir;
    co.segment_size = config.segment_size;
    co.first_new_id = rec->next_id;
    co.file_perms = config.file_perms();
    impl->cdc = std::make_unique<Cdc>(std::move(co), *impl->manager, *impl->driver);
    impl->cdc->start();
  }
  if (auto r = impl->lock.record_holder(); !r) return std::unexpected(r.error());
  impl->lock.keep();
  std::unique_ptr<Log> log(new Log(std::move(impl)));
  // A loss this open accepted is durable before open returns: a later
  // session's acknowledged records can never exist without it.
  if (!rec->losses.empty()) {
    if (auto r = log->sync(); !r) {
      (void)log->close();
      return std::unexpected(r.error());
    }
  }
  return log;
}

Result<Position> Log::append(std::span<const std::byte> record) {
  if (auto r = impl_->admit(record.size(), "record"); !r) return std::unexpected(r.error());
  const std::span<const std::byte> one[1] = {record};
  return impl_->write({.pieces = one, .bytes = record.size()});
}

Result<void> Log::sync() {
  if (impl_->closed) return make_error(Errc::closed, "the log is closed");
  return impl_->driver->sync();
}

Position Log::durable() const { return impl_->driver->durable(); }

Result<ReleaseReport> Log::release_before(Position pos) {
  seg::Released done;
  Result<void> r;
  std::vector<uint64_t> unarchived;
  {
    std::lock_guard lock(impl_->release_mu);
    if (impl_->closed) return make_error(Errc::closed, "the log is closed");
    const Position durable = impl_->driver->durable();
    const uint64_t archived =
        impl_->archiver ? impl_->archiver->archived_through() : seg::kMaxSegmentId;
    std::vector<uint64_t> ids;
    for (uint64_t id : impl_->manager->segment_ids()) {
      // A segment goes only when a later one holds the durable position: then
      // its end record, and everything before it, has been synced. With
      // archiving, also only once archived: archiving goes in id order, so
      // what goes is still the oldest segments.
      if (id < pos.segment() && id < durable.segment()) {
        (id <= archived ? ids : unarchived).push_back(id);
      }
    }
    if (!ids.empty()) {
      r = impl_->manager->release(ids, &done);
      // What failed to go stays readable.
      const auto left = impl_->manager->segment_ids();
      std::erase_if(impl_->recovered, [&](const seg::Extent& e) {
        return !std::binary_search(left.begin(), left.end(), e.segment);
      });
    }
  }
  {
    std::lock_guard lock(impl_->bounds_mu);
    for (uint64_t id : done.ids) impl_->bounds.erase(id);
  }
  if (!r) return std::unexpected(r.error());
  ReleaseReport report;
  report.ids = std::move(done.ids);
  report.recycled = done.recycled;
  report.deleted = static_cast<uint32_t>(report.ids.size()) - done.recycled;
  report.bytes_deleted = done.bytes_deleted;
  report.bytes_recycled = done.bytes_recycled;
  report.unarchived = std::move(unarchived);
  auto oldest = this->oldest();
  if (!oldest) return std::unexpected(oldest.error());
  report.oldest = *oldest;
  return report;
}

Result<void> Log::Impl::check_not_released(Position from) const {
  if (from.segment() == 0) return {};
  const auto ids = manager->segment_ids();
  const uint64_t oldest = ids.empty() ? first_new_id : ids.front();
  if (from.segment() >= oldest) return {};
  return make_error(Errc::released, "position " + from.to_string() + " is in segment " +
                                        std::to_string(from.segment()) +
                                        ", which was released: the oldest segment the log holds "
                                        "is " +
                                        std::to_string(oldest) + " (Log::oldest() says where)");
}

std::vector<seg::Extent> Log::Impl::readable_extents() const {
  std::vector<seg::Extent> out;
  const auto ids = manager->segment_ids();
  for (const auto& e : recovered) {
    if (std::binary_search(ids.begin(), ids.end(), e.segment)) out.push_back(e);
  }
  for (uint64_t id : ids) {
    if (id >= appender->first_segment())
      out.push_back(seg::Extent{id, seg::kHeaderSize, UINT32_MAX});
  }
  return out;
}

const RecoveryReport& Log::recovery() const { return impl_->report; }
const std::string& Log::backend() const { return impl_->backend_description; }
uint32_t Log::block_size() const { return impl_->block_size; }
const Config& Log::config() const { return impl_->config; }

namespace {

Latency summarize(const metrics::HistogramData& h) {
  Latency l;
  l.count = h.count;
  l.sum_ns = h.sum;
  l.mean_ns = h.count ? h.sum / h.count : 0;
  // Shards are read while their threads record, so the buckets may add up
  // to a little more than the count read a moment apart; the count bounds
  // them, keeping the +Inf bucket equal to it.
  for (uint64_t le : kLatencyBucketBoundsNs) {
    l.buckets.push_back({le, std::min(h.count_at_or_below(le), h.count)});
  }
  l.p50_ns = h.quantile(0.5);
  l.p90_ns = h.quantile(0.9);
  l.p99_ns = h.quantile(0.99);
  l.p999_ns = h.quantile(0.999);
  l.max_ns = h.max;
  return l;
}

}  // namespace

Stats Log::stats() const {
  Stats s;
  const auto d = impl_->driver->stats();
  const auto m = impl_->manager->stats();
  const auto snap = impl_->metrics.snapshot();
  auto count = [&](metrics::Count c) { return snap.count[static_cast<int>(c)]; };
  auto hist = [&](metrics::Hist h) { return summarize(snap.hist[static_cast<int>(h)]); };
  s.appends = count(metrics::Count::appends);
  s.bytes = count(metrics::Count::bytes);
  s.stored_bytes = count(metrics::Count::stored_bytes);
  s.syncs = count(metrics::Count::syncs);
  s.records_per_sync = s.syncs ? static_cast<double>(s.appends) / static_cast<double>(s.syncs) : 0;
  s.lag_blocked_appends = d.lag_blocked;
  s.max_sync_lag_us = d.max_lag_us;
  s.padding_bytes = d.padding_bytes;
  s.segments_created = m.created;
  s.segments_recycled = m.recycled;
  s.segments_released = m.released;
  s.allocation_stalls = m.stalls;
  s.failures = impl_->driver->failed() ? 1 : 0;
  s.durable = impl_->driver->durable();
  for (const auto& f : impl_->manager->files()) {
    s.disk_bytes += f.size;
    ++(f.role == seg::FileInfo::Role::log ? s.segment_files : s.spare_files);
  }
  s.append = hist(metrics::Hist::append);
  s.durable_wait = hist(metrics::Hist::durable_wait);
  s.sync = hist(metrics::Hist::sync);
  s.allocation_wait = hist(metrics::Hist::allocation_wait);
  if (impl_->archiver) {
    auto a = impl_->archiver->stats();
    s.segments_archived = a.archived;
    s.archive_failures = a.failures;
    s.archive_pending = a.pending;
    s.archive_error = std::move(a.last_error);
  }
  if (impl_->completions) {
    s.callback_exceptions = impl_->completions->exceptions();
    s.callback_error = impl_->completions->first_exception();
  }
  if (impl_->cdc) {
    s.cdc_segments_linked = m.cdc_linked;
    s.cdc_blocked_appends = m.cdc_blocked;
    s.cdc_error = impl_->cdc->last_error();
    // Counted now: the consumer frees space at any time.
    auto used = io::dir_file_bytes(impl_->config.cdc_dir);
    s.cdc_bytes = used ? *used : m.cdc_bytes;
    if (!used) s.cdc_error = "change data capture: " + used.error().describe();
  }
  return s;
}

Result<void> Log::close() {
  if (impl_->closed) return {};
  // close() waits for the callback thread to finish: from that thread it
  // would wait for itself.
  if (impl_->completions && impl_->completions->on_callback_thread()) {
    return make_error(Errc::invalid_argument,
                      "close() called from a completion callback: the log's callback thread "
                      "cannot wait for itself; close the log from another thread");
  }
  impl_->closing.store(true);
  // First, so that it is not archiving while the segments are closed; what
  // it did not reach waits for the next session.
  if (impl_->archiver) impl_->archiver->stop();
  auto r = impl_->driver->close();
  // After the driver: every pending callback's record is durable by now,
  // or the close failed and each gets the error.
  if (impl_->completions) impl_->completions->stop();
  // Before the manager: its stop() removes the spares' links, and the last
  // segment is marked complete only if the driver sealed it.
  if (impl_->cdc) impl_->cdc->stop(r.has_value() && !impl_->driver->failed());
  auto m = impl_->manager->stop();
  impl_->closed = true;
  impl_->lock.release();
  if (!r) return r;
  return m;
}

}  // namespace synclog
