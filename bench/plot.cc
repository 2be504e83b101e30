#include "plot.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

namespace bench {
namespace {

template <class T>
void add_unique(std::vector<T>* v, const T& x) {
  if (std::find(v->begin(), v->end(), x) == v->end()) v->push_back(x);
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A line per backend/kind and, when swept, in-flight depth, batch size,
// payload, compression and encryption: threads on the x axis only compare
// points that differ in nothing else.
std::string line_of(const Row& r) {
  std::string s = r.backend + "/" + r.segment_kind;
  if (r.inflight > 0) s += " qd" + std::to_string(r.inflight);
  if (r.batch > 1) s += " b" + std::to_string(r.batch);
  if (r.payload != "random" || r.compression != "none" || r.encryption != "none") {
    s += " " + data_label(r);
  }
  return s;
}

std::string script_for(const std::string& size, const std::vector<const Row*>& rows,
                       const std::string& png, const std::string& terminal) {
  std::vector<std::pair<std::string, std::string>> panels;  // (medium, mode)
  std::vector<std::string> lines;                           // line_of()
  std::map<std::string, std::string> medium_desc;
  uint32_t max_threads = 1;
  for (const Row* r : rows) {
    add_unique(&panels, {r->medium, r->mode});
    add_unique(&lines, line_of(*r));
    medium_desc[r->medium] = r->medium_desc;
    max_threads = std::max(max_threads, r->threads);
  }
  std::string s;
  s += "# synclog-bench plot for " + size + " records; render with: gnuplot <this file>\n";
  s += "set terminal " + terminal + " size 1500," + std::to_string(120 + 330 * panels.size()) +
       " font ',10'\n";
  s += "set output '" + png + "'\n";
  // One data block per (panel, line): threads, op/s, p99 us.
  std::map<std::pair<size_t, size_t>, std::string> block;
  for (size_t p = 0; p < panels.size(); ++p) {
    for (size_t l = 0; l < lines.size(); ++l) {
      std::vector<const Row*> pts;
      for (const Row* r : rows) {
        if (r->medium == panels[p].first && r->mode == panels[p].second &&
            line_of(*r) == lines[l]) {
          pts.push_back(r);
        }
      }
      if (pts.empty()) continue;
      std::sort(pts.begin(), pts.end(), [](auto* a, auto* b) { return a->threads < b->threads; });
      const std::string name = "$d" + std::to_string(p) + "_" + std::to_string(l);
      s += name + " << EOD\n";
      for (const Row* r : pts) {
        s += std::to_string(r->threads) + " " + std::to_string(r->ops_per_s) + " " +
             std::to_string(std::max(r->p99_us, 0.01)) + "\n";
      }
      s += "EOD\n";
      block[{p, l}] = name;
    }
  }
  s += "set multiplot layout " + std::to_string(panels.size()) +
       ",2 title 'synclog-bench: " + size +
       " records, op/s and p99 append latency vs writer threads'\n";
  s += "set logscale x 2\nset logscale y\nset grid\nset key outside right top Left reverse\n";
  s += "set xrange [0.8:" + std::to_string(max_threads * 1.25) + "]\n";
  s += "set xlabel 'writer threads'\nset pointsize 1.2\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const auto& [medium, mode] = panels[p];
    const std::string where = medium + ": " + medium_desc[medium] + ", " + mode + " mode";
    for (int col : {2, 3}) {
      s += std::string("set ylabel '") + (col == 2 ? "op/s" : "p99 latency, us") + "'\n";
      s += col == 2 ? "set format y '%.0s%c'\n" : "set format y '%g'\n";  // 10k, 1M; 0.1, 10
      s += "set title \"" + where + (col == 2 ? ": op/s" : ": p99 latency") + "\"\n";
      std::string plot;
      for (size_t l = 0; l < lines.size(); ++l) {
        auto it = block.find({p, l});
        if (it == block.end()) continue;
        plot += (plot.empty() ? "plot " : ", ") + it->second + " using 1:" + std::to_string(col) +
                " with linespoints lw 2 title '" + lines[l] + "'";
      }
      s += plot + "\n";
    }
  }
  s += "unset multiplot\n";
  return s;
}

}  // namespace

bool gnuplot_installed() { return std::system("gnuplot --version >/dev/null 2>&1") == 0; }

std::vector<std::filesystem::path> write_plots(const std::vector<Row>& rows,
                                               const std::filesystem::path& dir,
                                               std::string* error) {
  std::vector<std::string> sizes;
  for (const auto& r : rows) {
    if (r.status == "verified") add_unique(&sizes, r.size);
  }
  std::vector<std::filesystem::path> pngs;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& size : sizes) {
    std::vector<const Row*> these;
    for (const auto& r : rows) {
      if (r.status == "verified" && r.size == size) these.push_back(&r);
    }
    const auto gp = dir / ("plot-" + size + ".gp");
    const auto png = dir / ("plot-" + size + ".png");
    bool ok = false;
    for (const char* terminal : {"pngcairo", "png"}) {
      std::ofstream(gp) << script_for(size, these, png.filename().string(), terminal);
      const std::string cmd = "cd " + quote(dir.string()) + " && gnuplot " +
                              quote(gp.filename().string()) + " >/dev/null 2>&1";
      if (std::system(cmd.c_str()) == 0) {
        ok = true;
        break;
      }
    }
    if (ok) {
      pngs.push_back(png);
    } else {
      *error += "gnuplot failed on " + gp.string() + "; ";
    }
  }
  return pngs;
}

}  // namespace bench
