// `spmd train`: the seed's MLP (784-1024-1024-1024-10) trained on Fashion-MNIST, data parallel
// (`--mesh 8`) or data and tensor parallel (`--mesh 4x2`, with the seed's parameter shardings),
// with a progress bar, test metrics after each epoch, checkpoints and plots.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace spmd::cli {

struct TrainOptions {
  std::vector<int64_t> mesh = {8};  // 1-D: batch; 2-D: batch x model
  int epochs = 5;
  int64_t batch = 256;
  double lr = 1e-3;
  std::string optimizer = "adam";   // sgd | adam | adamw
  std::string schedule = "cosine";  // cosine (from lr to 0 over the run) | constant
  uint32_t seed = 0;
  std::string out = "spmd-train";  // checkpoints, history and plots
  bool resume = false;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // Stop after this many epochs of the run, as an interrupted run would (0: run them all).
  int stop_after = 0;
  // Stop each epoch after this many steps (0: the whole epoch); for quick runs and tests.
  int64_t max_steps = 0;
  // Draw the progress bar in place and the final plot with braille dots; false for plain text.
  bool interactive = false;
  bool plot = true;  // draw the curves in the terminal at the end
};

// "8" or "4x2" → {8} or {4, 2}; raises ValueError "[spmd train] ..." for anything else.
std::vector<int64_t> parse_mesh(const std::string& text);

// What a run measured, epoch by epoch (a resumed run includes the epochs before it).
struct TrainHistory {
  std::vector<double> step_loss;      // every step's loss, in order
  std::vector<double> step_epoch;     // the step's position in epochs (1.0 = end of epoch 1)
  std::vector<double> epoch_seconds;  // training time of each epoch
  std::vector<double> test_loss;      // after each epoch
  std::vector<double> test_accuracy;
};

// Runs the training; progress and results go to `out`, the last line being
// "test accuracy 0.xxxx". Returns the history.
TrainHistory train(const TrainOptions& options, std::ostream& out);

}  // namespace spmd::cli
