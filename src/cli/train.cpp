// `spmd train`: the seed's MLP on Fashion-MNIST. One jit'd step (value_and_grad of the
// cross-entropy, the optimizer's update, apply_updates) runs where the parameters and the batch
// live: on a 1-D mesh the batch is split over "batch" and the parameters are replicated (data
// parallel); on a 2-D mesh the seed's tensor-parallel shardings split layers 1 and 2 over
// "model" as well. Computation follows those shardings; the step holds no parallel code.
#include "cli/train.h"

#include "cli/plot.h"
#include "cli/progress.h"

#include <spmd/spmd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

namespace spmd::cli {

namespace {

namespace fs = std::filesystem;
namespace sp = spmd;
using sp::Array;
using sp::P;
using StateDict = sp::nn::StateDict;

const std::vector<int64_t> kLayerSizes = {784, 1024, 1024, 1024, 10};
// Checkpoint metadata that must match for --resume (the mesh may change: the checkpoint holds
// whole values, placed anew). The epochs only matter to the cosine schedule, which spans them.
const std::vector<std::string> kResumeKeys = {"seed", "batch",    "optimizer",
                                              "lr",   "schedule", "epochs"};

// The seed's Model, with the ReLU between layers only: the last layer's outputs are the logits
// of the cross-entropy.
class MlpImpl : public sp::nn::Module {
 public:
  // `outputs[i]`: where layer i's outputs live (none, or past the end: where the partitioner
  // puts them).
  MlpImpl(const std::vector<int64_t>& sizes, const Array& key,
          std::vector<std::optional<sp::NamedSharding>> outputs = {})
      : outputs_(std::move(outputs)) {
    Array keys = sp::random::split(key, int64_t(sizes.size()) - 1);
    for (size_t i = 0; i + 1 < sizes.size(); ++i)
      layers->push_back(sp::nn::Linear(sizes[i], sizes[i + 1], keys[int64_t(i)]));
    register_module("layers", layers);
  }

  Array forward(Array x) const override {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers[int64_t(i)](x);
      if (i < outputs_.size() && outputs_[i]) x = sp::with_sharding_constraint(x, *outputs_[i]);
      if (i + 1 < layers.size()) x = sp::maximum(x, 0);
    }
    return x;
  }

  sp::nn::ModuleList layers;

 private:
  std::vector<std::optional<sp::NamedSharding>> outputs_;
};

std::string mesh_text(const std::vector<int64_t>& mesh) {
  std::string out;
  for (int64_t n : mesh) {
    if (!out.empty()) out += 'x';
    out += std::to_string(n);
  }
  return out;
}

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string devices_text(int64_t n) {
  return std::to_string(n) + (n == 1 ? " device" : " devices");
}

// Every process runs the same steps and reads the losses back: a process whose devices the mesh
// leaves out holds no part of them, and its reads raise JAX's error for values on other
// processes (unless reads gather from every process: sp::distributed::set_collective_reads).
void check_mesh_spans_processes(const sp::Mesh& mesh, const std::vector<int64_t>& shape) {
  if (sp::distributed::collective_reads()) return;
  std::vector<bool> covered(size_t(sp::process_count()), false);
  for (const sp::Device& d : mesh.devices()) covered[size_t(d.process_index)] = true;
  auto missing = std::find(covered.begin(), covered.end(), false);
  if (missing == covered.end()) return;
  throw sp::ValueError("[spmd train] --mesh " + mesh_text(shape) + " uses " +
                       devices_text(mesh.size()) + " but the job has " +
                       std::to_string(sp::process_count()) + " processes of " +
                       devices_text(sp::local_device_count()) + ": process " +
                       std::to_string(missing - covered.begin()) +
                       " would hold none of the mesh; every process must take part (--mesh " +
                       std::to_string(sp::device_count()) + " uses every device)");
}

// Where each parameter lives: replicated on a 1-D mesh; on "batch" x "model", the seed's
// column-parallel layer 1 (weight and bias split over "model") and row-parallel layer 2.
sp::NamedSharding parameter_sharding(const sp::Mesh& mesh, const std::string& name) {
  if (mesh.axis_names().size() == 2) {
    if (name == "layers.1.weight" || name == "layers.1.bias")
      return sp::NamedSharding(mesh, P("model"));
    if (name == "layers.2.weight") return sp::NamedSharding(mesh, P(sp::None, "model"));
  }
  return sp::NamedSharding(mesh, P());
}

// Where the layers' outputs live. On "batch" x "model", the first layer's are split over "model"
// too: its weight is replicated over "model", so without this every "model" shard would compute
// the same outputs (and the same weight gradient); split, each computes its half and the
// column-parallel layer 1 all-gathers them. The row-parallel layer 2's are replicated over
// "model": each shard multiplies its half of the features by its half of the weight and a psum
// adds the halves, where the partitioner would otherwise all-gather the activations and bring
// the weight to a column split with an all_to_all every step.
std::vector<std::optional<sp::NamedSharding>> layer_output_shardings(const sp::Mesh& mesh) {
  if (mesh.axis_names().size() != 2) return {};
  return {sp::NamedSharding(mesh, P("batch", "model")), std::nullopt,
          sp::NamedSharding(mesh, P("batch"))};
}

// Where a parameter's optimizer moments live: the parameter's sharding with the first dim that
// divides evenly also split over every axis the parameter is replicated over ("batch" as the
// minor one). Each data-parallel replica then updates only its slice of the moments and of the
// parameter (ZeRO's first stage): the gradient all-reduce becomes a psum_scatter, the update runs
// on 1/B of the elements, and the parameter is all-gathered back, where a replicated state would
// repeat the whole update on every replica. A parameter replicated over "model" (the first layer,
// whose outputs are split over "model") is split over "model" too, as its gradient comes.
sp::NamedSharding moment_sharding(const sp::Mesh& mesh, const std::string& name,
                                  const sp::Shape& shape) {
  const sp::PartitionSpec spec = parameter_sharding(mesh, name).spec();
  std::vector<std::string> extra;
  for (const std::string& a : mesh.axis_names()) {
    bool used = false;
    for (int d = 0; d < shape.ndim(); ++d)
      for (const std::string& b : spec.axes_of(d)) used = used || a == b;
    if (!used && a != "batch") extra.push_back(a);
  }
  extra.push_back("batch");
  int64_t extra_size = 1;
  for (const std::string& a : extra) extra_size *= mesh.axis_size(a);
  std::vector<sp::PartitionSpec::Entry> entries;
  for (int d = 0; d < shape.ndim(); ++d) entries.push_back(spec[d]);
  for (int d = 0; d < shape.ndim(); ++d) {
    std::vector<std::string> axes = spec.axes_of(d);
    int64_t split = extra_size;
    for (const std::string& a : axes) split *= mesh.axis_size(a);
    if (extra_size == 1 || shape[d] % split != 0) continue;
    axes.insert(axes.end(), extra.begin(), extra.end());
    entries[size_t(d)] = sp::AxisNames(axes, axes.size() > 1);
    break;
  }
  return sp::NamedSharding(mesh, sp::PartitionSpec(entries));
}

// The shardings of the optimizer state's leaves: each moment ("0.mu.<param>") as moment_sharding
// of its parameter, counts replicated.
std::vector<sp::ShardingTree> state_shardings(const sp::optim::State& state,
                                              const StateDict& params, const sp::Mesh& mesh) {
  std::vector<sp::ShardingTree> out;
  for (const auto& [leaf, value] : state) {
    std::shared_ptr<const sp::Sharding> sharding = std::make_shared<sp::NamedSharding>(mesh, P());
    for (const auto& [name, param] : params)
      if (leaf.ends_with("." + name))
        sharding = std::make_shared<sp::NamedSharding>(moment_sharding(mesh, name, param.shape()));
    out.emplace_back(sharding);
  }
  return out;
}

StateDict place_parameters(const StateDict& params, const sp::Mesh& mesh) {
  StateDict out;
  for (const auto& [name, value] : params)
    out.insert(name, sp::device_put(value, parameter_sharding(mesh, name)));
  return out;
}

// The learning rate falls from --lr to 0 along a cosine over the whole run (optax's
// cosine_decay_schedule): the last epochs take small steps, which is worth about a point of test
// accuracy over a constant rate here.
sp::optim::Optimizer make_optimizer(const TrainOptions& o, int64_t steps_per_epoch) {
  sp::optim::LearningRate lr = o.schedule == "cosine"
                                   ? sp::optim::LearningRate(sp::optim::cosine_decay_schedule(
                                         o.lr, o.epochs * steps_per_epoch))
                                   : sp::optim::LearningRate(o.lr);
  if (o.optimizer == "sgd") return sp::optim::sgd(lr);
  if (o.optimizer == "adam") return sp::optim::adam(lr);
  if (o.optimizer == "adamw") return sp::optim::adamw(lr);
  throw sp::ValueError("[spmd train] --optimizer must be sgd, adam or adamw, got '" + o.optimizer +
                       "'");
}

std::map<std::string, std::string> run_metadata(const TrainOptions& o, int epochs_done) {
  return {{"format", "spmd-train-1"},       {"epoch", std::to_string(epochs_done)},
          {"seed", std::to_string(o.seed)}, {"batch", std::to_string(o.batch)},
          {"optimizer", o.optimizer},       {"lr", number_text(o.lr)},
          {"mesh", mesh_text(o.mesh)},      {"layers", "784-1024-1024-1024-10"},
          {"schedule", o.schedule},         {"epochs", std::to_string(o.epochs)}};
}

// ---- history: every step's loss and each epoch's results, kept beside the checkpoints ------

void save_history(const fs::path& path, const TrainHistory& h) {
  std::ofstream f(path);
  f << std::setprecision(17);  // doubles read back exactly
  for (size_t i = 0; i < h.step_loss.size(); ++i)
    f << "step " << h.step_epoch[i] << " " << h.step_loss[i] << "\n";
  for (size_t i = 0; i < h.test_loss.size(); ++i)
    f << "epoch " << h.epoch_seconds[i] << " " << h.test_loss[i] << " " << h.test_accuracy[i]
      << "\n";
  if (!f) throw sp::IOError("[spmd train] cannot write " + path.string());
}

TrainHistory load_history(const fs::path& path) {
  TrainHistory h;
  std::ifstream f(path);
  std::string kind;
  while (f >> kind) {
    double a = 0, b = 0, c = 0;
    if (kind == "step" && f >> a >> b) {
      h.step_epoch.push_back(a);
      h.step_loss.push_back(b);
    } else if (kind == "epoch" && f >> a >> b >> c) {
      h.epoch_seconds.push_back(a);
      h.test_loss.push_back(b);
      h.test_accuracy.push_back(c);
    } else {
      throw sp::IOError("[spmd train] --resume: " + path.string() + " is damaged");
    }
  }
  return h;
}

// ---- checkpoints --------------------------------------------------------------------------

// A checkpoint as saved: whole values, placed by the caller on this run's mesh.
struct Checkpoint {
  StateDict params;
  std::vector<std::pair<std::string, Array>> optimizer;
  int epochs_done = 0;
};

// The parameters under their state_dict names and the optimizer state under "optimizer.", as
// .safetensors (readable by Python's safetensors and torch) and .npz. Written to a temporary
// file first, so that an interrupted save leaves the previous checkpoint whole.
// On several processes, the whole value of `x` on every process (a collective: every process
// calls it for the same values in the same order); in one process `x` itself. Replicated over
// every device of the job, not the mesh's: a mesh may leave out a process (--mesh 1), which
// would then hold no copy, and process 0's reads of the copies would be gathers the other
// processes do not join.
Array whole(const Array& x) {
  if (sp::process_count() == 1) return x;
  return sp::device_put(x, sp::NamedSharding(sp::make_mesh({sp::device_count()}, {"all"}), P()));
}

// Every process gathers the values; process 0 writes the files.
void save_checkpoint(const fs::path& dir, const StateDict& params, const sp::optim::State& state,
                     const std::map<std::string, std::string>& metadata) {
  sp::NamedArrays tensors;
  std::map<std::string, Array> npz;
  for (const auto& [name, value] : params) tensors.emplace_back(name, whole(value));
  for (const auto& [name, value] : sp::optim::named_state(state))
    tensors.emplace_back("optimizer." + name, whole(value));
  if (sp::process_index() != 0) return;
  for (const auto& [name, value] : tensors) npz.emplace(name, value);
  fs::path st = dir / "checkpoint.safetensors", z = dir / "checkpoint.npz";
  sp::save_safetensors(st.string() + ".tmp", tensors, metadata);
  sp::save_npz(z.string() + ".tmp.npz", npz);
  fs::rename(st.string() + ".tmp", st);
  fs::rename(z.string() + ".tmp.npz", z);
}

[[noreturn]] void refuse_checkpoint(const fs::path& dir, const std::string& what) {
  throw sp::ValueError("[spmd train] --resume: the checkpoint in " + dir.string() + " " + what);
}

// The epochs a checkpoint's metadata says were done: a count, written by this program.
int epochs_done(const fs::path& dir, std::map<std::string, std::string>& meta) {
  const std::string format = run_metadata(TrainOptions{}, 0).at("format");
  if (meta["format"] != format)
    refuse_checkpoint(dir, "is not one spmd train writes: expected the metadata format '" + format +
                               "', got '" + meta["format"] + "'");
  const std::string& text = meta["epoch"];
  int n = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 0)
    refuse_checkpoint(
        dir, "is damaged: expected its metadata epoch to be a count of epochs, got '" + text + "'");
  return n;
}

std::string describe(const Array& x) {
  return std::string(sp::dtype_name(x.dtype())) + x.shape().str();
}

Checkpoint load_checkpoint(const fs::path& dir, const TrainOptions& o, const StateDict& init) {
  fs::path st = dir / "checkpoint.safetensors";
  if (!fs::exists(st))
    throw sp::IOError("[spmd train] --resume: no checkpoint in " + dir.string() +
                      " (expected checkpoint.safetensors)");
  std::map<std::string, std::string> meta = sp::load_safetensors_metadata(st.string());
  Checkpoint c;
  c.epochs_done = epochs_done(dir, meta);
  std::map<std::string, std::string> want = run_metadata(o, 0);
  for (const std::string& k : kResumeKeys)
    if (meta[k] != want[k] && (k != "epochs" || o.schedule == "cosine"))
      refuse_checkpoint(
          dir, "was written with --" + k + " " + meta[k] + ", this run has --" + k + " " + want[k]);
  std::map<std::string, Array> params;
  for (auto& [name, value] : sp::load_safetensors(st.string())) {
    if (name.starts_with("optimizer."))
      c.optimizer.emplace_back(name.substr(std::string("optimizer.").size()), value);
    else
      params.emplace(name, value);
  }
  for (const auto& [name, value] : init) {
    auto it = params.find(name);
    if (it == params.end()) refuse_checkpoint(dir, "has no tensor " + name);
    if (it->second.shape() != value.shape() || it->second.dtype() != value.dtype())
      refuse_checkpoint(
          dir, "has " + name + " " + describe(it->second) + ", this model's is " + describe(value));
    c.params.insert(name, it->second);
  }
  return c;
}

// ---- plots ----------------------------------------------------------------------------------

std::vector<Panel> panels_of(const TrainHistory& h) {
  std::vector<double> epochs;
  for (size_t i = 0; i < h.test_loss.size(); ++i) epochs.push_back(double(i + 1));
  Panel loss{.title = "loss", .x_label = "epoch", .y_label = "cross-entropy", .series = {}};
  loss.series.push_back({.name = "train", .x = h.step_epoch, .y = h.step_loss});
  loss.series.push_back({.name = "test", .x = epochs, .y = h.test_loss, .markers = true});
  Panel acc{.title = "accuracy", .x_label = "epoch", .y_label = "test accuracy", .series = {}};
  acc.series.push_back({.name = "test", .x = epochs, .y = h.test_accuracy, .markers = true});
  return {loss, acc};
}

}  // namespace

std::vector<int64_t> parse_mesh(const std::string& text) {
  std::vector<int64_t> out;
  std::string_view rest = text;
  while (true) {
    size_t x = rest.find('x');
    std::string_view part = rest.substr(0, x);
    int64_t n = 0;  // from_chars refuses values past int64 (ec)
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || n < 1)
      throw sp::ValueError(
          "[spmd train] --mesh must be N (data parallel) or BxM (data x model "
          "parallel) with positive integers, got '" +
          text + "'");
    out.push_back(n);
    if (x == std::string_view::npos) break;
    rest = rest.substr(x + 1);
  }
  if (out.size() > 2)
    throw sp::ValueError("[spmd train] --mesh has at most two axes (batch x model), got '" + text +
                         "'");
  // Each size first, so that the product cannot overflow.
  if (out[0] > 4096 || out.back() > 4096 || (out.size() == 2 && out[0] * out[1] > 4096))
    throw sp::ValueError("[spmd train] --mesh asks for more than 4096 devices: '" + text + "'");
  return out;
}

namespace {

// --out and its parents, made if missing; a path that cannot be a directory is a ValueError.
void make_output_directory(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (!error && !fs::is_directory(dir)) error = std::make_error_code(std::errc::not_a_directory);
  if (error)
    throw sp::ValueError("[spmd train] --out '" + dir.string() +
                         "' cannot be made a directory: " + error.message());
}

}  // namespace

TrainHistory train(const TrainOptions& o, std::ostream& main_out) {
  // On several processes, process 0 reports and writes the files.
  std::ostream discard(nullptr);
  std::ostream& out = sp::process_index() == 0 ? main_out : discard;
  if (o.epochs < 1 || o.batch < 1 || o.max_steps < 0 || !(o.lr > 0) || !std::isfinite(o.lr))
    throw sp::ValueError(
        "[spmd train] --epochs and --batch must be at least 1, --steps at least "
        "0 and --lr a finite number above 0; got --epochs " +
        std::to_string(o.epochs) + " --batch " + std::to_string(o.batch) + " --steps " +
        std::to_string(o.max_steps) + " --lr " + number_text(o.lr));
  std::vector<std::string> names = {"batch"};
  if (o.mesh.size() == 2) names.push_back("model");
  sp::Mesh mesh = sp::make_mesh(sp::Shape(o.mesh), names);
  check_mesh_spans_processes(mesh, o.mesh);
  // The tensor-parallel layers split their hidden units over "model" (else device_put's error).
  if (o.mesh.size() == 2 && kLayerSizes[1] % o.mesh[1] != 0)
    throw sp::ValueError("[spmd train] --mesh " + mesh_text(o.mesh) + ": the model axis (" +
                         std::to_string(o.mesh[1]) + ") must divide the hidden layers' " +
                         std::to_string(kLayerSizes[1]) + " units");
  sp::NamedSharding batch_sharding(mesh, P("batch"));
  sp::data::Dataset train_set = sp::data::load_fashion_mnist("train", o.data_dir);
  sp::data::Dataset test_set = sp::data::load_fashion_mnist("test", o.data_dir);
  if (o.batch % o.mesh[0] != 0)
    throw sp::ValueError("[spmd train] --batch " + std::to_string(o.batch) +
                         " must be a multiple of the mesh's batch axis (" +
                         std::to_string(o.mesh[0]) + ")");

  if (o.batch > train_set.size())
    throw sp::ValueError("[spmd train] --batch " + std::to_string(o.batch) +
                         " is larger than the training set (" +
                         std::to_string(train_set.size()) +
                         " examples): an epoch would have no step");
  int64_t steps_per_epoch = train_set.size() / o.batch;
  if (o.max_steps > 0) steps_per_epoch = std::min(steps_per_epoch, o.max_steps);
  sp::optim::Optimizer opt = make_optimizer(o, steps_per_epoch);

  Array keys = sp::random::split(sp::random::key(o.seed));
  Array model_key = keys[0], data_key = keys[1];
  MlpImpl model(kLayerSizes, model_key, layer_output_shardings(mesh));
  StateDict params = place_parameters(model.state_dict(), mesh);
  sp::optim::State state = opt.init(params);

  fs::path dir = o.out;
  make_output_directory(dir);
  TrainHistory history;
  int first_epoch = 0;
  if (o.resume) {
    Checkpoint c = load_checkpoint(dir, o, params);
    params = place_parameters(c.params, mesh);
    state = opt.state_from_named(c.optimizer, params);
    first_epoch = c.epochs_done;
    history = load_history(dir / "history.txt");
    out << "resuming after epoch " << first_epoch << " from " << dir.string() << "\n";
  }

  auto loss_fn = [&model](const StateDict& p, const Array& x, const Array& y) {
    return sp::nn::cross_entropy(sp::nn::functional_call(model, p, x), y);
  };
  // The state is laid out by moment_sharding and kept there by out_shardings; the parameters
  // come back where they were placed.
  std::vector<sp::ShardingTree> param_tree;
  for (const auto& [name, value] : params) param_tree.emplace_back(parameter_sharding(mesh, name));
  std::vector<sp::ShardingTree> state_tree = state_shardings(state, params, mesh);
  state = sp::device_put(state, sp::ShardingTree(state_tree));
  sp::JitOptions step_options;
  step_options.out_shardings = {sp::ShardingTree(param_tree), sp::ShardingTree(state_tree),
                                sp::NamedSharding(mesh, P())};
  // The step's parameters and optimizer state are donated, as JAX training loops do: the old
  // values die with the call, and their buffers back the updated ones wherever the step computes
  // those after its last read of the old.
  step_options.donate_argnums = {0, 1};
  auto step = sp::jit(
      [&](const StateDict& p, const sp::optim::State& s, const Array& x, const Array& y) {
        auto [loss, grads] = sp::value_and_grad(loss_fn)(p, x, y);
        auto [updates, next] = opt.update(grads, s, p);
        // Each replica adds its slice of the updates and an all_gather brings the parameter
        // back: its result is one buffer that a process's devices share, where adding the
        // gathered updates on every replica would leave each device its own copy to read.
        StateDict updated = sp::optim::apply_updates(p, updates);
        for (const auto& [name, value] : p)
          updated.insert(name, sp::with_sharding_constraint(
                                   updated.at(name), moment_sharding(mesh, name, value.shape())));
        return std::tuple{updated, next, loss};
      },
      step_options);
  auto evaluate = sp::jit([&](const StateDict& p, const Array& x, const Array& y) {
    Array logits = sp::nn::functional_call(model, p, x);
    return std::pair{sp::nn::cross_entropy(logits, y), sp::nn::accuracy(logits, y)};
  });
  Array test_x = sp::device_put(test_set.images, batch_sharding);
  Array test_y = sp::device_put(test_set.labels, batch_sharding);

  out << "training the MLP 784-1024-1024-1024-10 on Fashion-MNIST (" << train_set.size()
      << " train, " << test_set.size() << " test images) on a " << mesh_text(o.mesh) << " mesh "
      << (o.mesh.size() == 2 ? "(data x tensor parallel)" : "(data parallel)") << ", batch "
      << o.batch << ", " << o.optimizer << " lr " << number_text(o.lr) << "\n";

  const int last_epoch = o.stop_after > 0 ? std::min(o.epochs, o.stop_after) : o.epochs;
  for (int epoch = first_epoch; epoch < last_epoch; ++epoch) {
    sp::data::Batches batches(train_set, o.batch, data_key, uint32_t(epoch));
    const int64_t steps = steps_per_epoch;
    ProgressBar bar(
        out,
        {.epoch = epoch + 1, .num_epochs = o.epochs, .steps = steps, .interactive = o.interactive});
    double start = steady_seconds();
    // The loss of step i is read after step i + 1 is launched, so the host prepares the next
    // batch while the devices work.
    Array pending;
    auto record = [&](const Array& loss, int64_t i) {
      double value = loss.item<float>();
      history.step_loss.push_back(value);
      history.step_epoch.push_back(epoch + double(i + 1) / double(steps));
      bar.update(value, o.batch);
    };
    for (int64_t i = 0; i < steps; ++i) {
      auto [x, y] = batches[i];
      Array loss;
      std::tie(params, state, loss) =
          step(params, state, sp::device_put(x, batch_sharding), sp::device_put(y, batch_sharding));
      if (i > 0) record(pending, i - 1);
      pending = loss;
    }
    record(pending, steps - 1);
    history.epoch_seconds.push_back(steady_seconds() - start);
    auto [test_loss, test_acc] = evaluate(params, test_x, test_y);
    history.test_loss.push_back(test_loss.item<float>());
    history.test_accuracy.push_back(test_acc.item<float>());
    std::ostringstream extra;
    extra << std::fixed << std::setprecision(4) << "  test loss " << history.test_loss.back()
          << "  accuracy " << history.test_accuracy.back();
    bar.finish(extra.str());
    save_checkpoint(dir, params, state, run_metadata(o, epoch + 1));
    if (sp::process_index() == 0) save_history(dir / "history.txt", history);
  }

  std::vector<Panel> panels = panels_of(history);
  if (sp::process_index() == 0)
    write_svg((dir / "training.svg").string(), panels, "spmd train: MLP on Fashion-MNIST");
  if (o.plot) {
    TextPlotOptions text{.charset = o.interactive ? Charset::automatic : Charset::ascii,
                         .color = o.interactive};
    for (const Panel& p : panels) out << "\n" << to_text(p, text);
  }
  out << "\ncheckpoint, history and plot (training.svg) in " << dir.string() << "\n";
  out << "test accuracy " << std::fixed << std::setprecision(4)
      << (history.test_accuracy.empty() ? 0.0 : history.test_accuracy.back()) << "\n";
  return history;
}

}  // namespace spmd::cli
