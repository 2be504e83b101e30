// Plots with gnuplot: one PNG per record size, a grid with one row per
// (medium, mode) and two panels per row, op/s and p99 latency versus writer
// threads, one line per backend. Each PNG's gnuplot script (data inline) is
// kept next to it so a plot can be restyled without rerunning the sweep.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "report.h"

namespace bench {

bool gnuplot_installed();

// Writes plot-<size>.gp and renders plot-<size>.png into `dir`. Returns the
// PNGs written; failures are described in *error (the sweep still counts).
std::vector<std::filesystem::path> write_plots(const std::vector<Row>& rows,
                                               const std::filesystem::path& dir,
                                               std::string* error);

}  // namespace bench
