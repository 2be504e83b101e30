#include "io/hook.h"

#include <atomic>

namespace synclog::io {
namespace {
std::atomic<Hook*> g_hook{nullptr};
}

void install_hook(Hook* hook) { g_hook.store(hook, std::memory_order_release); }
Hook* current_hook() { return g_hook.load(std::memory_order_acquire); }

}  // namespace synclog::io
