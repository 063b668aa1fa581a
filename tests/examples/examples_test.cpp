// The C++ twins of the seed programs print what JAX printed for each notebook cell
// (tests/goldens/seeds, recorded by tools/goldens/gen_seeds.py and gen_seed002.py). Each example
// runs once with SPMD_EXAMPLE_CELLS=1, which marks where every cell's output starts.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::string run(const std::string& program) {
  std::string command = "SPMD_EXAMPLE_CELLS=1 SPMD_CPU_DEVICES=8 " + program;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(pipe), 0) << program << " failed";
  return out;
}

// Cell id → the text printed by the cell.
std::map<std::string, std::string> split_cells(const std::string& out) {
  std::map<std::string, std::string> cells;
  std::istringstream in(out);
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.rfind("## cell ", 0) == 0) {
      current = line.substr(8);
      cells[current];
      continue;
    }
    cells[current] += line + "\n";
  }
  return cells;
}

std::map<std::string, std::string> goldens(const std::string& seed) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::directory_iterator(fs::path(SPMD_GOLDEN_DIR) / "seeds")) {
    std::string name = entry.path().filename().string();
    if (name.rfind(seed + "_", 0) != 0 || entry.path().extension() != ".txt") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    out[name.substr(seed.size() + 1, 2)] = ss.str();
  }
  return out;
}

std::vector<double> numbers(const std::string& text) {
  static const std::regex number(R"([-+]?\d+\.?\d*(e[-+]?\d+)?)");
  std::vector<double> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number);
       it != std::sregex_iterator(); ++it)
    out.push_back(std::stod(it->str()));
  return out;
}

// A %timeit golden is IPython's line with <mean> and <std> for the times ("1.89 s", "13.5 ms",
// "0 ns", and "1e+03 ms" when "%.3g" rounds up to the next power of ten): the line's form as a
// regex.
std::regex timing_form(const std::string& golden) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  std::string pattern = std::regex_replace(golden, special, R"(\$&)");
  const std::string time = R"(\d+(\.\d+)?(e[+-]\d+)? (s|ms|µs|ns))";
  for (const char* slot : {"<mean>", "<std>"})
    pattern.replace(pattern.find(slot), std::string(slot).size(), time);
  return std::regex(pattern);
}

// Compares every cell: exactly, for `close` cells number by number within a relative 1e-5
// (float32 sums in another order), for `timing` cells by the form of the line, and reports cells
// printed without a golden or missing.
void check_example(const std::string& program, const std::string& seed,
                   const std::set<std::string>& close, const std::set<std::string>& not_ported,
                   const std::set<std::string>& timing = {}) {
  std::map<std::string, std::string> want = goldens(seed);
  ASSERT_FALSE(want.empty());
  std::map<std::string, std::string> got = split_cells(run(program));
  EXPECT_EQ(got[""], "") << "output before the first cell";
  got.erase("");
  for (const auto& [id, text] : want) {
    if (not_ported.count(id)) {
      EXPECT_FALSE(got.count(id)) << "cell " << id << " is listed as not ported";
      continue;
    }
    if (!got.count(id)) {
      EXPECT_EQ(text, "") << seed << " cell " << id << " is not in the example";
      continue;
    }
    if (timing.count(id)) {
      EXPECT_TRUE(std::regex_match(got[id], timing_form(text))) << seed << " cell " << id << ":\n"
                                                                << got[id];
      continue;
    }
    if (!close.count(id)) {
      EXPECT_EQ(got[id], text) << seed << " cell " << id;
      continue;
    }
    std::vector<double> a = numbers(got[id]), b = numbers(text);
    ASSERT_EQ(a.size(), b.size()) << seed << " cell " << id << ":\n" << got[id];
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-5 * std::max(1.0, std::abs(b[i])))
          << seed << " cell " << id << " number " << i;
  }
  for (const auto& [id, text] : got)
    EXPECT_TRUE(want.count(id)) << "cell " << id << " has no golden";
}

TEST(Examples, PmapCookbookPrintsWhatJaxPrints) {
  // 12: means of 25M float32 products, 17/18: nested maps; both summed in another order.
  check_example(SPMD_EXAMPLES_DIR "/pmap_cookbook", "000", {"12", "17", "18"}, {});
}

TEST(Examples, ShardMapBasicsPrintsWhatJaxPrints) {
  check_example(SPMD_EXAMPLES_DIR "/shard_map_basics", "001", {}, {});
}

// At the small size (--small: every size divided by 16, each %timeit once), where the goldens
// were recorded; the full size draws the same pictures.
TEST(Examples, DistributedArraysPrintsWhatJaxPrints) {
  check_example(SPMD_EXAMPLES_DIR "/distributed_arrays --small", "002",
                // the model's outputs and losses: float32 sums in another order
                {"43", "48", "49", "60", "61", "62"}, {},
                {"08", "09", "25", "26", "50", "52", "64"});
}

// Each SGD step lowers the seed's loss by about 5e-6, below the cells' 1e-5 tolerance: the
// steps themselves must match JAX's, so a missing or wrong update fails here.
TEST(Examples, DistributedArraysSgdStepsLowerTheLossAsJax) {
  std::map<std::string, std::string> want = goldens("002");
  std::map<std::string, std::string> got =
      split_cells(run(SPMD_EXAMPLES_DIR "/distributed_arrays --small"));
  for (const char* id : {"49", "61"}) {
    // "i loss is L" five times, then the loss after the loop.
    std::vector<double> a = numbers(got[id]), b = numbers(want[id]);
    ASSERT_EQ(a.size(), 11u) << "cell " << id << ":\n" << got[id];
    ASSERT_EQ(b.size(), 11u) << "cell " << id;
    std::vector<double> la, lb;
    for (size_t i = 1; i < 11; i += 2) la.push_back(a[i]), lb.push_back(b[i]);
    la.push_back(a[10]);
    lb.push_back(b[10]);
    for (size_t k = 1; k < la.size(); ++k)
      EXPECT_NEAR(la[k] - la[k - 1], lb[k] - lb[k - 1], 1.5e-6) << "cell " << id << " step " << k;
  }
}

}  // namespace
