// The seed's torch-style Model written with spmd::nn, and the golden values of
// tools/goldens/gen_nn.py.
#pragma once

#include <spmd/spmd.h>

#include "support/support.h"

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace spmd_test {

// class Model(torch.nn.Module) of seed 002, its Linear layers drawn from split(key, n) in turn.
struct Model : spmd::nn::Module {
  spmd::nn::ModuleList layers;

  Model(const std::vector<int64_t>& sizes, const spmd::Array& key) {
    layers = register_module("layers", spmd::nn::ModuleList());
    spmd::Array keys = spmd::random::split(key, int64_t(sizes.size()) - 1);
    for (size_t i = 0; i + 1 < sizes.size(); ++i)
      layers.push_back(spmd::nn::Linear(sizes[i], sizes[i + 1], keys[int64_t(i)]));
  }

  spmd::Array forward(spmd::Array x) const override {
    for (const auto& layer : layers) x = spmd::maximum(layer(x), 0);
    return x;
  }
};

// The sizes gen_nn.py records the model at (the seed's four layers, small).
inline const std::vector<int64_t> kGoldenSizes = {8, 16, 16, 16, 4};

// The block `name` of tests/goldens/nn/values.txt as an Array (float32 or int32).
inline spmd::Array nn_golden(const std::string& name) {
  static const std::map<std::string, std::string> blocks = golden_blocks("nn/values.txt");
  auto it = blocks.find(name);
  if (it == blocks.end()) {
    ADD_FAILURE() << "no golden " << name;
    return spmd::Array();
  }
  std::istringstream in(it->second);
  std::string header, dtype;
  std::getline(in, header);
  std::istringstream dims_in(header);
  dims_in >> dtype;
  std::vector<int64_t> dims;
  for (int64_t d; dims_in >> d;) dims.push_back(d);
  std::vector<double> values;
  for (double v; in >> v;) values.push_back(v);
  spmd::Shape shape(dims);
  if (dtype == "int32")
    return spmd::array(std::vector<int32_t>(values.begin(), values.end()), shape);
  return spmd::array(std::vector<float>(values.begin(), values.end()), shape);
}

}  // namespace spmd_test
