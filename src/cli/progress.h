// The per-epoch progress bar of `spmd train`: one line redrawn in place on a terminal, plain
// lines every few steps when the output goes to a file or a pipe, and a summary line per epoch.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace spmd::cli {

// Seconds since an arbitrary origin; only differences are used. Tests pass a fake one.
using Clock = std::function<double()>;

// The monotonic wall clock.
double steady_seconds();

// Whether the file descriptor is a terminal (isatty).
bool is_terminal(int fd);

// The width of the terminal on `fd` in columns: COLUMNS when it is set to a positive integer,
// else what the terminal reports (TIOCGWINSZ), else 80.
int terminal_width(int fd);

// `seconds` (rounded to the nearest second) as m:ss under an hour and h:mm:ss from one hour on,
// like tqdm: 0:07, 12:34, 1:02:03. Negative or non-finite values print as -:--.
std::string format_duration(double seconds);

// `value` rounded to an integer with thousands separators (12,345); values under 100 keep one
// decimal (85.3) so that slow rates still read.
std::string format_rate(double value);

struct ProgressOptions {
  int epoch = 1;  // 1-based
  int num_epochs = 1;
  int64_t steps = 1;  // steps in this epoch
  // true: one line redrawn with '\r'; false: plain lines without '\r' or escape codes.
  bool interactive = false;
  // Columns the interactive line may use; 0 asks the terminal on stdout (terminal_width(1)).
  int width = 0;
  // Plain mode: a line every `log_every` steps; 0 means every tenth of the epoch.
  int64_t log_every = 0;
  // Interactive mode: at most one redraw per `min_interval` seconds (the first step and
  // finish() always draw).
  double min_interval = 0.1;
  Clock clock = steady_seconds;
};

// Progress of one epoch. Call update() after each step, then finish() once.
//
//   epoch 2/5 [=========>          ] 143/234  loss 0.4123  12,345 samples/s  ETA 0:07
//
// The loss is the epoch's running mean so far, weighted by the samples of each step (so that a
// smaller last batch counts for what it is).
class ProgressBar {
 public:
  ProgressBar(std::ostream& out, ProgressOptions options);

  // One step done: `samples` samples whose mean loss is `loss`.
  void update(double loss, int64_t samples);

  // Prints the epoch summary line, followed by `extra` (for example the test metrics):
  //   epoch 2/5  234/234  loss 0.4123  12,345 samples/s  time 0:19  test loss 0.38
  void finish(std::string_view extra = {});

  double mean_loss() const;
  int64_t step() const { return step_; }

 private:
  std::string epoch_text() const;
  std::vector<std::string> step_fields(double now) const;
  std::string fitted_line(double now) const;
  void draw(double now);
  void log_line(double now);
  double rate(double now) const;

  std::ostream& out_;
  ProgressOptions options_;
  double start_;
  double last_draw_ = 0;
  size_t drawn_chars_ = 0;
  int64_t step_ = 0;
  int64_t samples_ = 0;
  double loss_sum_ = 0;
  bool finished_ = false;
};

}  // namespace spmd::cli
