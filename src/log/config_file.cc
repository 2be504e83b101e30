// TOML config files (toml++). Every value is turned back into the text the
// string syntax takes and handed to Config::set, so both syntaxes accept
// exactly the same keys and values and give the same messages. Debian's
// toml++ is built with exceptions; they are caught here and become Errors.
#include <toml++/toml.h>

#include <span>

#include "io/file.h"
#include "synclog/config.h"

namespace synclog {
namespace {

std::string where(const std::string& origin, const toml::source_region& r) {
  return origin + ":" + std::to_string(r.begin.line);
}

}  // namespace

Result<Config> Config::parse_toml(std::string_view text, const std::string& origin) {
  toml::table table;
  try {
    table = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return make_error(Errc::invalid_config, where(origin, e.source()) + ": not valid TOML: " +
                                                std::string(e.description()));
  }
  Config c;
  for (auto&& [key, node] : table) {
    const std::string k(key.str());
    std::string value;
    if (auto s = node.value_exact<std::string>()) {
      value = *s;
    } else if (auto i = node.value_exact<int64_t>()) {
      value = std::to_string(*i);
    } else if (auto b = node.value_exact<bool>()) {
      value = *b ? "true" : "false";
    } else {
      return make_error(Errc::invalid_config,
                        where(origin, node.source()) + ": config key '" + k +
                            "' must be a string, an integer or a boolean (tables and arrays are "
                            "not config values)");
    }
    if (auto r = c.set(k, value); !r) {
      return make_error(Errc::invalid_config,
                        where(origin, node.source()) + ": " + r.error().message);
    }
  }
  return c;
}

Result<Config> Config::load_file(const std::filesystem::path& path) {
  // Config files are often links (alternatives, mounted config maps).
  auto file = io::File::open(path, io::File::Mode::read_following_links);
  if (!file) {
    return make_error(Errc::invalid_config, "config file: " + file.error().message,
                      file.error().sys_errno);
  }
  // A directory opens but does not read (EISDIR): still a bad config path.
  auto unreadable = [&](const Error& e) {
    return make_error(Errc::invalid_config, "config file: " + e.message, e.sys_errno);
  };
  auto size = file->size();
  if (!size) return unreadable(size.error());
  std::string text(*size, '\0');
  auto n = file->read_at(0, std::as_writable_bytes(std::span(text)));
  if (!n) return unreadable(n.error());
  text.resize(*n);
  return parse_toml(text, path.string());
}

}  // namespace synclog
