// The Pmap Cookbook in C++: every code cell of JAX's notebook, in order, printing what the
// notebook prints. Run on 8 virtual CPU devices (the default here).
//
// Differences from the notebook: plt.plot(y) is not drawn, and np.sin(y) (NumPy on a sharded
// array) brings the values to the host as float64 and takes std::sin of each. Set
// SPMD_EXAMPLE_CELLS=1 to print a marker line before each cell's output.
#include <spmd/spmd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

namespace sp = spmd;

namespace {

void cell(const char* id) {
  if (std::getenv("SPMD_EXAMPLE_CELLS")) std::cout << "## cell " << id << "\n";
}

}  // namespace

// What processes other than 0 print: formatted in full (reads of spread values are collectives
// every process must make), then dropped.
struct DiscardOutput : std::streambuf {
  int overflow(int c) override { return c; }
};

int main() {
  // Eight devices in all: one process of eight, or several processes under mpirun that share
  // them. There, every process prints the same values (reading a value gathers the blocks of
  // the other processes, a collective) and process 0 shows them.
  if (!std::getenv("SPMD_CPU_DEVICES"))
    sp::config::set_cpu_device_count(8 / sp::distributed::launched_process_count());
  sp::distributed::initialize();
  sp::distributed::set_collective_reads(true);
  static DiscardOutput discard;
  if (sp::process_index() != 0) std::cout.rdbuf(&discard);

  // ---- Pure maps, with no communication
  cell("02");
  sp::Array result = sp::pmap([](sp::Array x) { return sp::power(x, 2); })(sp::arange(7));
  std::cout << result << "\n";

  cell("03");
  sp::Array x = sp::array({1.f, 2.f, 3.f});
  sp::Array y = sp::array({2.f, 4.f, 6.f});
  std::cout << sp::vmap([](sp::Array a, sp::Array b) { return sp::add(a, b); })(x, y) << "\n";
  std::cout << sp::pmap([](sp::Array a, sp::Array b) { return sp::add(a, b); })(x, y) << "\n";

  cell("04");
  auto f = [](sp::Array x, sp::Array y) {
    sp::Array a = sp::dot(x, y);
    sp::Array b = sp::tanh(a);
    return b;
  };
  sp::Array xs = sp::ones({8, 2, 3});
  sp::Array ys = sp::ones({8, 3, 4});
  std::cout << "f jaxpr\n" << sp::make_jaxpr(f)(xs[0], ys[0]) << "\n";
  std::cout << "vmap(f) jaxpr\n" << sp::make_jaxpr(sp::vmap(f))(xs, ys) << "\n";
  std::cout << "pmap(f) jaxpr\n" << sp::make_jaxpr(sp::pmap(f))(xs, ys) << "\n";

  cell("05");
  y = sp::pmap([](sp::Array x) { return sp::power(x, 2); })(sp::arange(8));
  sp::Array z = y / 2;
  std::cout << z << "\n";

  cell("07");
  std::cout << sp::repr(y) << "\n";
  cell("08");
  std::cout << sp::repr(y / 2) << "\n";

  cell("09");
  // NumPy works on the host: np.sin(y) gathers y and computes in float64.
  std::vector<double> on_host = y.to_vector<double>();
  for (double& v : on_host) v = std::sin(v);
  std::cout << sp::numpy_repr(on_host) << "\n";

  // ---- Random matrices made and multiplied where they live
  cell("10");
  // create 8 random keys
  sp::Array keys = sp::random::split(sp::random::key(0), 8);
  // create a 5000 x 6000 matrix on each device by mapping over keys
  sp::Array mats = sp::pmap([](sp::Array key) {
    return sp::random::normal(key, {5000, 6000});
  })(keys);
  // the stack of matrices is represented logically as a single array
  std::cout << mats.shape() << "\n";

  cell("11");
  // run a local matmul on each device in parallel (no data transfer)
  result = sp::pmap([](sp::Array x) { return sp::dot(x, x.T()); })(mats);
  std::cout << result.shape() << "\n";

  cell("12");
  // compute the mean on each device in parallel and print the results
  std::cout << sp::pmap([](sp::Array x) { return sp::mean(x); })(result) << "\n";

  // ---- Collective communication
  cell("13");
  auto normalize = [](sp::Array x) { return x / sp::lax::psum(x, "i"); };
  result = sp::pmap(normalize, {.axis_name = "i"})(sp::arange(4.0f));
  std::cout << result << "\n";

  cell("14");
  auto normalize2 =
      sp::pmap([](sp::Array x) { return x / sp::lax::psum(x, "i"); }, {.axis_name = "i"});
  std::cout << normalize2(sp::arange(4.0f)) << "\n";

  cell("15");
  auto f2 = sp::pmap(sp::pmap(
                         [](sp::Array x) {
                           sp::Array row_normed = x / sp::lax::psum(x, "rows");
                           sp::Array col_normed = x / sp::lax::psum(x, "cols");
                           sp::Array doubly_normed = x / sp::lax::psum(x, sp::axes("rows", "cols"));
                           return std::make_tuple(row_normed, col_normed, doubly_normed);
                         },
                         {.axis_name = "cols"}),
                     {.axis_name = "rows"});
  x = sp::arange(8.0f).reshape({4, 2});
  auto [a, b, c] = f2(x);
  std::cout << a << "\n";
  std::cout << a.sum({0}) << "\n";

  cell("16");
  const int device_count = sp::device_count();
  auto send_right = [&](sp::Array x, const char* axis_name) {
    std::vector<std::pair<int, int>> left_perm;
    for (int i = 0; i < device_count; ++i) left_perm.push_back({i, (i + 1) % device_count});
    return sp::lax::ppermute(x, axis_name, left_perm);
  };
  auto send_left = [&](sp::Array x, const char* axis_name) {
    std::vector<std::pair<int, int>> left_perm;
    for (int i = 0; i < device_count; ++i) left_perm.push_back({(i + 1) % device_count, i});
    return sp::lax::ppermute(x, axis_name, left_perm);
  };
  auto update_board = [](sp::Array board) {
    int64_t n = board.shape()[0];
    sp::Array left = sp::lax::slice(board, {0}, {n - 2});
    sp::Array right = sp::lax::slice(board, {2}, {n});
    sp::Array center = sp::lax::slice(board, {1}, {n - 1});
    return sp::bitwise_xor(left, sp::bitwise_or(center, right));
  };
  auto step = sp::pmap(
      [&](sp::Array board_slice) {
        int64_t n = board_slice.shape()[0];
        sp::Array left = sp::lax::slice(board_slice, {0}, {1});
        sp::Array right = sp::lax::slice(board_slice, {n - 1}, {n});
        std::tie(right, left) = std::make_pair(send_left(left, "i"), send_right(right, "i"));
        sp::Array enlarged_board_slice = sp::concatenate({left, board_slice, right});
        return update_board(enlarged_board_slice);
      },
      {.axis_name = "i"});
  auto print_board = [](const sp::Array& board) {
    std::string line;
    for (bool cell : board.ravel().to_vector<bool>()) line += cell ? '*' : ' ';
    std::cout << line << "\n";
  };
  sp::Array board = sp::arange(40) == 40 / 2;
  sp::Array reshaped_board = board.reshape({device_count, -1});
  print_board(reshaped_board);
  for (int i = 0; i < 20; ++i) {
    reshaped_board = step(reshaped_board);
    print_board(reshaped_board);
  }

  // ---- Composing with differentiation
  cell("17");
  auto f3 = sp::pmap([](sp::Array x) {
    sp::Array y = sp::sin(x);
    auto g =
        sp::pmap([&](sp::Array z) { return sp::cos(z) * sp::tan(y.sum()) * sp::tanh(x).sum(); });
    return sp::grad([&](sp::Array w) { return sp::sum(g(w)); })(x);
  });
  std::cout << sp::repr(f3(x)) << "\n";

  cell("18");
  std::cout << sp::repr(sp::grad([&](sp::Array x) { return sp::sum(f3(x)); })(x)) << "\n";
  return 0;
}
