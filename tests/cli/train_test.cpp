// `spmd train` on Fashion-MNIST: its first losses equal JAX + optax's for the same
// initialisation, data order and optimizer; the three meshes (one device, 8-way data parallel,
// 4x2 data and tensor parallel) agree; combined collectives meet fewer times with the same losses;
// a resumed run continues exactly; checkpoints, history and the plot are written; bad options and
// a missing data set raise clear errors.
#include "cli/train.h"
#include "compile/executable.h"
#include "data/idx_files.h"

#include "support/config_scope.h"
#include "support/support.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace sp = spmd;
namespace fs = std::filesystem;
using sp::cli::TrainHistory;
using sp::cli::TrainOptions;

namespace {

bool have_data() {
  return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

// A directory per test process (runs of the suite in other builds share the temp dir), removed
// at exit, with one fresh subdirectory per run.
fs::path temp_dir(const std::string& name) {
  static const spmd_test::TempDir process_dir;
  fs::path dir = fs::path(process_dir.path()) / name;
  fs::remove_all(dir);
  return dir;
}

TrainOptions quick(std::vector<int64_t> mesh, const std::string& name, int64_t steps) {
  TrainOptions o;
  o.mesh = std::move(mesh);
  o.epochs = 1;
  o.batch = 256;
  o.max_steps = steps;
  o.out = temp_dir(name).string();
  o.plot = false;
  return o;
}

TrainHistory run(const TrainOptions& o, std::string* text = nullptr) {
  std::ostringstream out;
  TrainHistory h = sp::cli::train(o, out);
  if (text) *text = out.str();
  return h;
}

// "adam 256: 2.30 2.21 ..." from tests/goldens/train/first_losses.txt.
std::vector<double> jax_losses(const std::string& key) {
  std::istringstream in(spmd_test::golden_text("train/first_losses.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key + ":")) continue;
    std::istringstream values(line.substr(key.size() + 1));
    std::vector<double> out;
    for (double v; values >> v;) out.push_back(v);
    return out;
  }
  ADD_FAILURE() << "no " << key << " in the golden";
  return {};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rtol * std::abs(want[i])) << what << ", step " << i;
}

TEST(TrainMesh, ParsesOneAndTwoAxes) {
  EXPECT_EQ(sp::cli::parse_mesh("8"), (std::vector<int64_t>{8}));
  EXPECT_EQ(sp::cli::parse_mesh("4x2"), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(sp::cli::parse_mesh("100"), (std::vector<int64_t>{100}));
  EXPECT_EQ(sp::cli::parse_mesh("64x64"), (std::vector<int64_t>{64, 64}));
  for (const char* bad : {"", "x", "4x", "0", "4x2x1", "-2", "4 x2", "8a", "99999999999999999999",
                          "5000", "4096x2", "3x3000000000000"}) {
    try {
      sp::cli::parse_mesh(bad);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const sp::ValueError& e) {
      EXPECT_TRUE(std::string(e.what()).starts_with("[spmd train] --mesh")) << e.what();
    }
  }
}

TEST(Train, FirstLossesMatchJaxAndOptax) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  // Adam divides by the root of the second moment, which magnifies float reassociation in
  // gradients near zero: by step 8 its losses are 2e-4 apart, where sgd's stay within 1e-5.
  for (auto [optimizer, lr, key, rtol] : {std::tuple{"adam", 1e-3, "adam 256 0.001", 5e-4},
                                          std::tuple{"sgd", 0.1, "sgd 256 0.1", 1e-4}}) {
    TrainOptions o = quick({1}, std::string("jax_") + optimizer, 10);
    o.optimizer = optimizer;
    o.lr = lr;
    o.schedule = "constant";  // as bench/compare/train_jax.py's default
    TrainHistory h = run(o);
    expect_close(h.step_loss, jax_losses(key), rtol, optimizer);
  }
}

TEST(Train, MeshesAgreeUpToReassociation) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TrainHistory one = run(quick({1}, "one", 20));
  TrainHistory data = run(quick({8}, "data", 20));
  TrainHistory tensor = run(quick({4, 2}, "tensor", 20));
  expect_close(data.step_loss, one.step_loss, 1e-4, "--mesh 8 vs one device");
  expect_close(tensor.step_loss, one.step_loss, 1e-4, "--mesh 4x2 vs one device");
  EXPECT_NEAR(tensor.test_accuracy.at(0), one.test_accuracy.at(0), 2e-3);
}

// The meetings of a run (every collective equation the devices ran, by the equation profile)
// and its step losses.
std::pair<int64_t, std::vector<double>> meetings_and_losses(const TrainOptions& o) {
  sp::clear_equation_profile();
  sp::set_equation_profiling(true);
  TrainHistory h = run(o);
  sp::set_equation_profiling(false);
  int64_t meetings = 0;
  for (const sp::EquationProfileEntry& e : sp::equation_profile()) {
    const std::string name = e.equation.substr(0, e.equation.find(' '));
    for (const char* collective : {"psum", "pmax", "pmin", "all_gather", "reduce_scatter",
                                   "all_to_all", "ppermute", "psum_invariant"})
      if (name == collective) meetings += e.count;
  }
  sp::clear_equation_profile();
  return {meetings, h.step_loss};
}

TEST(Train, CombinedCollectivesMeetFewerTimesWithTheSameLosses) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  for (const std::vector<int64_t>& mesh : {std::vector<int64_t>{8}, std::vector<int64_t>{4, 2}}) {
    const std::string what = mesh.size() == 1 ? "--mesh 8" : "--mesh 4x2";
    const TrainOptions o = quick(mesh, "combined", 3);
    const auto [combined, losses] = meetings_and_losses(o);
    std::pair<int64_t, std::vector<double>> alone;
    {
      spmd_test::CompileEnvScope each_alone("SPMD_COMBINE_COLLECTIVES", "0");
      alone = meetings_and_losses(o);
    }
    EXPECT_LT(combined, alone.first) << what;
    EXPECT_EQ(losses, alone.second) << what;
  }
}

TEST(Train, WritesCheckpointsHistoryAndPlotAndEndsWithTheAccuracy) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TrainOptions o = quick({4, 2}, "files", 3);
  o.plot = true;
  std::string text;
  TrainHistory h = run(o, &text);
  fs::path dir = o.out;
  for (const char* f : {"checkpoint.safetensors", "checkpoint.npz", "history.txt", "training.svg"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  std::string last = text.substr(text.rfind('\n', text.size() - 2) + 1);
  EXPECT_TRUE(std::regex_match(last, std::regex("test accuracy 0\\.\\d{4}\n"))) << last;
  // The checkpoint holds the state_dict under torch's names, sharded ones whole.
  sp::NamedArrays saved = sp::load_safetensors((dir / "checkpoint.safetensors").string());
  std::map<std::string, sp::Array> by_name(saved.begin(), saved.end());
  ASSERT_TRUE(by_name.contains("layers.1.weight"));
  EXPECT_EQ(by_name.at("layers.1.weight").shape(), (sp::Shape{1024, 1024}));
  EXPECT_EQ(by_name.at("layers.3.bias").shape(), (sp::Shape{10}));
  EXPECT_EQ(sp::load_safetensors_metadata((dir / "checkpoint.safetensors").string()).at("epoch"),
            "1");
  EXPECT_EQ(h.step_loss.size(), 3u);
}

TEST(Train, ResumedRunContinuesExactly) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TrainOptions whole = quick({8}, "whole", 4);
  whole.epochs = 2;
  TrainHistory expected = run(whole);

  // Interrupted after its first epoch: the cosine schedule spans both epochs.
  TrainOptions first = quick({8}, "resumed", 4);
  first.epochs = 2;
  first.stop_after = 1;
  run(first);
  TrainOptions rest = first;
  rest.stop_after = 0;
  rest.resume = true;
  std::string text;
  TrainHistory resumed = run(rest, &text);
  EXPECT_NE(text.find("resuming after epoch 1"), std::string::npos) << text;
  EXPECT_EQ(resumed.step_loss, expected.step_loss);
  EXPECT_EQ(resumed.test_accuracy, expected.test_accuracy);
}

TEST(Train, ResumeRefusesADifferentRun) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TrainOptions o = quick({8}, "refuse", 1);
  run(o);
  o.optimizer = "sgd";
  o.resume = true;
  try {
    run(o);
    FAIL() << "expected an error";
  } catch (const sp::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("written with --optimizer adam, this run has --optimizer "
                                         "sgd"),
              std::string::npos)
        << e.what();
  }
  // The cosine schedule spans the run's epochs, so they may not change; a constant rate lets a
  // run be extended.
  o.optimizer = "adam";
  o.epochs = 2;
  EXPECT_THROW(run(o), sp::ValueError);
  TrainOptions constant = quick({8}, "extend", 1);
  constant.schedule = "constant";
  run(constant);
  constant.epochs = 2;
  constant.resume = true;
  EXPECT_EQ(run(constant).test_accuracy.size(), 2u);
  TrainOptions none = quick({8}, "none", 1);
  none.resume = true;
  EXPECT_THROW(run(none), sp::IOError);
}

// A checkpoint another program wrote, or whose metadata or tensors were damaged, is refused
// with what is wrong before any step (a bad epoch count ended the run on std::stoi's
// exception; a tensor of another shape reached the step).
TEST(Train, ResumeRefusesForeignAndDamagedCheckpoints) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TrainOptions o = quick({8}, "damaged", 1);
  o.schedule = "constant";
  run(o);
  o.resume = true;
  const std::string path = (fs::path(o.out) / "checkpoint.safetensors").string();
  const sp::NamedArrays tensors = sp::load_safetensors(path);
  const std::map<std::string, std::string> meta = sp::load_safetensors_metadata(path);
  auto refusal = [&](const sp::NamedArrays& t, const std::map<std::string, std::string>& m) {
    sp::save_safetensors(path, t, m);
    std::string message = spmd_test::error_message<sp::ValueError>([&] { run(o); });
    const std::string prefix = "[spmd train] --resume: the checkpoint in " + o.out + " ";
    EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
    return message.substr(std::min(prefix.size(), message.size()));
  };
  EXPECT_EQ(refusal(tensors, {}),
            "is not one spmd train writes: expected the metadata format 'spmd-train-1', got ''");
  for (const std::string epoch : {"x", "-1", "", "99999999999"}) {
    auto damaged = meta;
    damaged["epoch"] = epoch;
    EXPECT_EQ(
        refusal(tensors, damaged),
        "is damaged: expected its metadata epoch to be a count of epochs, got '" + epoch + "'");
  }
  sp::NamedArrays reshaped = tensors;
  for (auto& [name, value] : reshaped)
    if (name == "layers.3.bias") value = sp::zeros({7});
  EXPECT_EQ(refusal(reshaped, meta), "has layers.3.bias float32(7,), this model's is float32(10,)");
  sp::NamedArrays retyped = tensors;
  for (auto& [name, value] : retyped)
    if (name == "layers.0.bias") value = value.astype(sp::int32);
  EXPECT_EQ(refusal(retyped, meta),
            "has layers.0.bias int32(1024,), this model's is float32(1024,)");
}

TEST(Train, BadOptionsAndMissingDataAreClearErrors) {
  for (auto change : std::vector<std::function<void(TrainOptions&)>>{
           [](TrainOptions& o) { o.epochs = 0; }, [](TrainOptions& o) { o.batch = 0; },
           [](TrainOptions& o) { o.max_steps = -1; }, [](TrainOptions& o) { o.lr = 0; },
           [](TrainOptions& o) { o.lr = std::nan(""); }}) {
    TrainOptions o = quick({8}, "options", 1);
    change(o);
    try {
      run(o);
      ADD_FAILURE() << "expected an error";
    } catch (const sp::ValueError& e) {
      EXPECT_TRUE(std::string(e.what()).starts_with("[spmd train] --epochs and --batch must be"))
          << e.what();
    }
  }
  if (have_data()) {
    TrainOptions o = quick({8}, "bad", 1);
    o.batch = 12;  // not a multiple of the 8 devices of the batch axis
    EXPECT_THROW(run(o), sp::ValueError);
    o.batch = 60008;  // more than the 60000 training examples: no step in an epoch
    EXPECT_EQ(spmd_test::error_message<sp::ValueError>([&] { run(o); }),
              "[spmd train] --batch 60008 is larger than the training set (60000 examples): an "
              "epoch would have no step");
    // --out under a regular file cannot be a directory: an error naming the option, not a
    // filesystem exception from the standard library.
    TrainOptions blocked = quick({8}, "blocked", 1);
    const fs::path file = temp_dir("a_file");
    std::ofstream(file) << "not a directory";
    blocked.out = (file / "out").string();
    const std::string message =
        spmd_test::error_message<sp::ValueError>([&] { run(blocked); });
    EXPECT_TRUE(message.starts_with("[spmd train] --out '" + blocked.out +
                                    "' cannot be made a directory: "))
        << message;
    blocked.out = file.string();
    EXPECT_EQ(spmd_test::error_message<sp::ValueError>([&] { run(blocked); }),
              "[spmd train] --out '" + file.string() +
                  "' cannot be made a directory: Not a directory");
  }
  TrainOptions missing = quick({8}, "missing", 1);
  missing.data_dir = temp_dir("no_data").string();
  try {
    run(missing);
    FAIL() << "expected an error";
  } catch (const sp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("dataset-fashion-mnist"), std::string::npos) << e.what();
  }
}

}  // namespace
