// Readers for the sharding goldens recorded by tools/goldens/gen_sharding.py
// (tests/goldens/sharding/*.txt): the meshes, spec and shape codes, and the line-oriented files.
#pragma once

#include <spmd/array.h>
#include <spmd/device.h>
#include <spmd/error.h>
#include <spmd/placement.h>
#include <spmd/sharding.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace sharding_test {

namespace sp = spmd;

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  return split(text, '\n');
}

// The bytes each device sends in the collectives `explain`'s account lists (its lines ending
// "; each device sends <n> bytes"), summed: what XLA's hlo goldens count for the same kinds.
inline int64_t bytes_sent(const std::string& explained) {
  const std::string marker = "; each device sends ";
  int64_t total = 0;
  for (const std::string& line : lines_of(explained)) {
    const size_t at = line.find(marker);
    if (at != std::string::npos) total += std::stoll(line.substr(at + marker.size()));
  }
  return total;
}

// "8,2" → (8, 2); "-" → ().
inline sp::Shape decode_shape(const std::string& code) {
  sp::Shape shape;
  if (code == "-") return shape;
  for (const std::string& d : split(code, ',')) shape.push_back(std::stoll(d));
  return shape;
}

// "x/-/y+z" → P('x', None, ('y', 'z')); "_" → P().
inline sp::PartitionSpec decode_spec(const std::string& code) {
  std::vector<sp::PartitionSpec::Entry> entries;
  if (code == "_") return sp::PartitionSpec(entries);
  for (const std::string& e : split(code, '/')) {
    if (e == "-")
      entries.push_back(std::nullopt);
    else if (e.find('+') != std::string::npos)
      entries.push_back(sp::AxisNames(split(e, '+')));
    else
      entries.push_back(sp::AxisNames(e));
  }
  return sp::PartitionSpec(entries);
}

// CPU devices by id, independent of how many devices the process has; a device of the job
// keeps its process (under mpirun, ctest's spmd_mpi_suites, the other process owns some).
inline std::vector<sp::Device> cpu_devices(const std::vector<int>& ids) {
  std::vector<sp::Device> out;
  for (int id : ids)
    out.push_back(id < sp::device_count() ? sp::devices()[size_t(id)] : sp::Device{id, "cpu", 0});
  return out;
}

struct GoldenMesh {
  std::shared_ptr<sp::Mesh> mesh;
  std::string repr, str;
};

// The meshes listed at the top of layouts.txt, by name.
inline const std::map<std::string, GoldenMesh>& golden_meshes() {
  static const std::map<std::string, GoldenMesh> meshes = [] {
    std::map<std::string, GoldenMesh> out;
    std::string current;
    for (const std::string& line : lines_of(spmd_test::golden_text("sharding/layouts.txt"))) {
      std::vector<std::string> f = split(line, ' ');
      if (f[0] == "mesh") {
        std::vector<int> ids;
        for (const std::string& id : split(f[4], ',')) ids.push_back(std::stoi(id));
        current = f[1];
        out[current].mesh =
            std::make_shared<sp::Mesh>(cpu_devices(ids), decode_shape(f[2]), split(f[3], ','));
      } else if (f[0] == "mesh_repr") {
        out[current].repr = line.substr(10);
      } else if (f[0] == "mesh_str") {
        out[current].str = line.substr(9);
      } else if (f[0] == "case") {
        break;
      }
    }
    return out;
  }();
  return meshes;
}

inline const sp::Mesh& golden_mesh(const std::string& name) {
  return *golden_meshes().at(name).mesh;
}

// "0:2,0:4" → {{0, 2}, {0, 4}}; "-" → {}.
inline std::vector<sp::Slice> decode_slices(const std::string& code) {
  std::vector<sp::Slice> out;
  if (code == "-") return out;
  for (const std::string& s : split(code, ',')) {
    auto colon = s.find(':');
    out.push_back(sp::Slice{std::stoll(s.substr(0, colon)), std::stoll(s.substr(colon + 1))});
  }
  return out;
}

// One recorded error: `kind mesh spec shape` and JAX's message.
struct GoldenError {
  std::string kind, mesh, spec, shape, message;
};

inline std::vector<GoldenError> golden_errors(const std::string& kind) {
  std::vector<GoldenError> out;
  std::vector<std::string> lines = lines_of(spmd_test::golden_text("sharding/errors.txt"));
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    std::vector<std::string> f = split(lines[i], ' ');
    if (f[1] == kind) out.push_back({f[1], f[2], f[3], f[4], lines[i + 1]});
  }
  EXPECT_FALSE(out.empty()) << "no recorded errors of kind " << kind;
  return out;
}

// The message of the ShardingError `fn` throws ("" if it throws none).
template <class F>
std::string sharding_error(F fn) {
  try {
    fn();
  } catch (const sp::ShardingError& e) {
    return e.what();
  }
  return "";
}

// "<repr(spec)>|<shard shapes in device order>" per result leaf, as gen_uneven.py and
// gen_cf_partition.py write them.
inline std::string placed(const std::vector<sp::Array>& leaves) {
  std::string out;
  for (const sp::Array& x : leaves) {
    if (!out.empty()) out += '\n';
    const auto* named = dynamic_cast<const sp::NamedSharding*>(x.sharding().get());
    out += (named ? named->spec().repr() : x.sharding()->repr()) + "|";
    const std::vector<sp::Shard> shards = x.addressable_shards();
    for (size_t i = 0; i < shards.size(); ++i) {
      if (i) out += ';';
      const sp::Shape& shape = shards[i].data.shape();
      for (int d = 0; d < shape.ndim(); ++d) {
        if (d) out += ',';
        out += std::to_string(shape[d]);
      }
    }
  }
  return out;
}

// placed(), and the device ids of each leaf's mesh after a '|', as gen_partition_gaps.py and
// gen_reduce_scatter_donation.py write them.
inline std::string placed_on_devices(const std::vector<sp::Array>& leaves) {
  std::string out;
  for (const sp::Array& x : leaves) {
    if (!out.empty()) out += '\n';
    out += placed({x}) + "|";
    const auto* named = dynamic_cast<const sp::NamedSharding*>(x.sharding().get());
    const std::vector<sp::Device>& devices =
        named ? named->mesh().devices() : x.sharding()->device_list();
    for (size_t i = 0; i < devices.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(devices[i].id);
    }
  }
  return out;
}

// `golden`, in placed()'s format, with only the shards of this process's devices: under mpirun
// (ctest's spmd_mpi_suites) a process holds and lists only those; in one process, all of them.
inline std::string placed_here(const std::string& golden, const std::vector<sp::Array>& leaves) {
  const std::vector<std::string> lines = spmd_test::split_fields(golden, '\n');
  if (lines.size() != leaves.size()) return golden;
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    const size_t bar = lines[i].rfind('|');
    const std::vector<sp::Device>& devices = leaves[i].sharding()->device_list();
    const std::vector<std::string> shapes =
        bar == std::string::npos ? std::vector<std::string>{}
                                 : spmd_test::split_fields(lines[i].substr(bar + 1), ';');
    if (shapes.size() != devices.size()) {
      out += lines[i];
      continue;
    }
    out += lines[i].substr(0, bar + 1);
    bool first = true;
    for (size_t k = 0; k < shapes.size(); ++k) {
      if (!sp::is_addressable(devices[k])) continue;
      out += (first ? "" : ";") + shapes[k];
      first = false;
    }
  }
  return out;
}

}  // namespace sharding_test
