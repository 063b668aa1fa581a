// Tests of the in-process collectives: every operation against a reference computed here from
// the members' inputs, groups and subgroups over 8 device threads, and the error paths (timeout,
// mismatch, abort). The file also builds into spmd_tsan_tests, so it uses only the runtime.
#include "runtime/communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <thread>

namespace spmd::runtime {
namespace {

using namespace std::chrono_literals;

std::vector<int> iota_ids(int n, int first = 0) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

// Runs fn(rank) on `n` threads; returns each rank's exception message ("" if none).
std::vector<std::string> run_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "(empty message)";
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Deterministic per-(rank, salt) test data of any dtype; small integers for the integer types
// and values with fractional bits for the floats, so rounding order shows.
template <class T>
std::vector<T> make_data(int64_t count, int rank, int salt = 0) {
  std::mt19937 gen(uint32_t(rank * 7919 + salt * 104729 + 1));
  std::vector<T> v(static_cast<size_t>(count));
  for (auto& x : v) {
    if constexpr (std::is_same_v<T, bool>)
      x = gen() % 2;
    else if constexpr (std::is_integral_v<T>)
      x = T(int64_t(gen() % 251) - (std::is_signed_v<T> ? 125 : 0));
    else
      x = T(float(std::uniform_real_distribution<double>(-8, 8)(gen)));
  }
  return v;
}

template <class T>
double as_double(T x) {
  if constexpr (std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>)
    return double(float(x));
  else
    return double(x);
}

// The reference reduction: members combined in order, each step rounded to T; sums of signed
// integers wrap; max/min let NaN win.
template <class T>
T ref_combine(T a, T b, ReduceOp op) {
  constexpr bool half = std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>;
  if constexpr (half) {
    float x = float(a), y = float(b);
    if (op == ReduceOp::sum) return T(x + y);
    if (std::isnan(x)) return a;
    if (std::isnan(y)) return b;
    return (op == ReduceOp::max ? x > y : x < y) ? a : b;
  } else if constexpr (std::is_integral_v<T>) {
    if (op == ReduceOp::sum) {
      using U = std::make_unsigned_t<T>;
      return T(U(U(a) + U(b)));
    }
    return op == ReduceOp::max ? std::max(a, b) : std::min(a, b);
  } else {
    if (op == ReduceOp::sum) return T(a + b);
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    return op == ReduceOp::max ? std::max(a, b) : std::min(a, b);
  }
}

template <class T>
std::vector<T> ref_reduce(const std::vector<std::vector<T>>& ins, ReduceOp op) {
  std::vector<T> r = ins[0];
  for (size_t j = 1; j < ins.size(); ++j)
    for (size_t k = 0; k < r.size(); ++k) r[k] = ref_combine(r[k], ins[j][k], op);
  return r;
}

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0) return;
  for (size_t k = 0; k < got.size(); ++k)
    if (std::memcmp(&got[k], &want[k], sizeof(T)) != 0) {
      ADD_FAILURE() << what << ": element " << k << " is " << as_double(got[k]) << ", expected "
                    << as_double(want[k]);
      return;
    }
}

// all_reduce over `group` (ranks of an 8-device launch), checked on every member.
template <class T>
void check_all_reduce(const std::vector<int>& group, ReduceOp op, const Shape& shape) {
  Communicator comm(iota_ids(8));
  const int n = int(group.size());
  std::vector<std::vector<T>> ins(n), outs(n);
  for (int j = 0; j < n; ++j) {
    ins[j] = make_data<T>(shape.size(), group[j]);
    outs[j].assign(size_t(shape.size()), T{});
  }
  auto errors = run_ranks(n, [&](int j) {
    comm.all_reduce("psum", group, j, op, dtype_of_v<T>, shape, ins[j].data(), outs[j].data());
  });
  expect_no_errors(errors);
  auto want = ref_reduce(ins, op);
  for (int j = 0; j < n; ++j)
    expect_same_bits(outs[j], want,
                     std::string(dtype_name(dtype_of_v<T>)) + " member " + std::to_string(j) +
                         " of " + std::to_string(n));
}

TEST(CommunicatorAllReduce, SumsFloat32InGroupOrderForGroupsOf1To8) {
  for (int n = 1; n <= 8; ++n) {
    std::vector<int> group;
    for (int j = 0; j < n; ++j) group.push_back((j * 3 + 5) % 8);  // not in rank order
    check_all_reduce<float>(group, ReduceOp::sum, Shape{3, 37});
  }
}

template <class T>
void check_all_ops() {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    check_all_reduce<T>(iota_ids(8), op, Shape{1000});
    check_all_reduce<T>({6, 1, 3}, op, Shape{5, 7});
  }
}

TEST(CommunicatorAllReduce, EveryDTypeAndReduction) {
  check_all_ops<int8_t>();
  check_all_ops<int16_t>();
  check_all_ops<int32_t>();
  check_all_ops<int64_t>();
  check_all_ops<uint8_t>();
  check_all_ops<uint16_t>();
  check_all_ops<uint32_t>();
  check_all_ops<uint64_t>();
  check_all_ops<bfloat16_t>();
  check_all_ops<float16_t>();
  check_all_ops<float>();
  check_all_ops<double>();
}

TEST(CommunicatorAllReduce, Bfloat16RoundsAfterEveryAdd) {
  // 1 + 2^-9 + 2^-9 ... : each add rounds back to 1 in bfloat16 (8 bits of mantissa), whereas a
  // float accumulator rounded once at the end would give 1 + 7·2^-9 ≈ 1.0137 → 1.015625.
  Communicator comm(iota_ids(8));
  std::vector<bfloat16_t> ins(8, bfloat16_t(std::ldexp(1.0f, -9))), outs(8);
  ins[0] = bfloat16_t(1.0f);
  auto errors = run_ranks(8, [&](int r) {
    comm.all_reduce("psum", iota_ids(8), r, ReduceOp::sum, bfloat16, Shape{}, &ins[r], &outs[r]);
  });
  expect_no_errors(errors);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(float(outs[r]), 1.0f) << r;
}

TEST(CommunicatorAllReduce, SignedIntegerSumWraps) {
  Communicator comm(iota_ids(2));
  int8_t in[2] = {100, 100}, out[2] = {0, 0};
  auto errors = run_ranks(2, [&](int r) {
    comm.all_reduce("psum", iota_ids(2), r, ReduceOp::sum, int8, Shape{}, &in[r], &out[r]);
  });
  expect_no_errors(errors);
  EXPECT_EQ(out[0], int8_t(-56));
  EXPECT_EQ(out[1], int8_t(-56));
}

TEST(CommunicatorAllReduce, MaxAndMinPropagateNaN) {
  for (ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
    Communicator comm(iota_ids(4));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // Element k has its NaN on member k (and none in element 4).
    std::vector<std::vector<float>> ins(4, std::vector<float>{1, 2, 3, 4, 5});
    for (int j = 0; j < 4; ++j) ins[j][j] = nan;
    std::vector<std::vector<float>> outs(4, std::vector<float>(5));
    std::vector<bfloat16_t> bin = {bfloat16_t(1.0f), bfloat16_t(nan), bfloat16_t(3.0f),
                                   bfloat16_t(-1.0f)};
    std::vector<bfloat16_t> bout(4);
    auto errors = run_ranks(4, [&](int r) {
      comm.all_reduce("pmax", iota_ids(4), r, op, float32, Shape{5}, ins[r].data(), outs[r].data());
      comm.all_reduce("pmax", iota_ids(4), r, op, bfloat16, Shape{}, &bin[r], &bout[r]);
    });
    expect_no_errors(errors);
    for (int r = 0; r < 4; ++r) {
      for (int k = 0; k < 4; ++k) EXPECT_TRUE(std::isnan(outs[r][k])) << r << " " << k;
      EXPECT_EQ(outs[r][4], 5.0f);
      EXPECT_TRUE(std::isnan(float(bout[r])));
    }
  }
}

TEST(CommunicatorAllReduce, InPlaceBuffers) {
  Communicator comm(iota_ids(8));
  std::vector<std::vector<int32_t>> bufs(8);
  for (int r = 0; r < 8; ++r) bufs[r] = make_data<int32_t>(4099, r);
  auto want = ref_reduce(bufs, ReduceOp::sum);
  auto errors = run_ranks(8, [&](int r) {
    comm.all_reduce("psum", iota_ids(8), r, ReduceOp::sum, int32, Shape{4099}, bufs[r].data(),
                    bufs[r].data());
  });
  expect_no_errors(errors);
  for (int r = 0; r < 8; ++r) expect_same_bits(bufs[r], want, "rank " + std::to_string(r));
}

TEST(CommunicatorAllReduce, RejectsBool) {
  Communicator comm(iota_ids(1));
  bool in = true, out = false;
  try {
    comm.all_reduce("psum", iota_ids(1), 0, ReduceOp::sum, bool_, Shape{}, &in, &out);
    FAIL() << "no error";
  } catch (const TypeError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[psum] ", 0), 0u) << e.what();
  }
}

TEST(CommunicatorAllReduce, WorkedValuesFromJax) {
  // x = [3,1,4,1,5,9,2,6,5,3,5,8,9,7,1,2] over 4 devices: psum gives [22 20 12 17] everywhere.
  const std::vector<int32_t> x = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2};
  Communicator comm(iota_ids(4));
  std::vector<std::vector<int32_t>> outs(4, std::vector<int32_t>(4));
  auto errors = run_ranks(4, [&](int r) {
    comm.all_reduce("psum", iota_ids(4), r, ReduceOp::sum, int32, Shape{4}, x.data() + 4 * r,
                    outs[r].data());
  });
  expect_no_errors(errors);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(outs[r], (std::vector<int32_t>{22, 20, 12, 17}));
}

TEST(CommunicatorAllReduce, LargeBuffers) {
  // 8 MiB of float32 per member, so every member's share spans many chunks.
  const int64_t count = (8 << 20) / 4;
  Communicator comm(iota_ids(8));
  std::vector<std::vector<float>> ins(8), outs(8);
  for (int r = 0; r < 8; ++r) {
    ins[r].resize(size_t(count));
    for (int64_t k = 0; k < count; ++k) ins[r][k] = float((k * 31 + r * 17) % 1024) * 0.25f;
    outs[r].assign(size_t(count), -1.0f);
  }
  auto errors = run_ranks(8, [&](int r) {
    comm.all_reduce("psum", iota_ids(8), r, ReduceOp::sum, float32, Shape{count}, ins[r].data(),
                    outs[r].data());
  });
  expect_no_errors(errors);
  auto want = ref_reduce(ins, ReduceOp::sum);
  for (int r = 0; r < 8; ++r) expect_same_bits(outs[r], want, "rank " + std::to_string(r));
}

// ---- all_gather --------------------------------------------------------------------------------

// Expected all_gather output: blocks stacked (untiled) or concatenated (tiled) along `axis`.
template <class T>
std::vector<T> ref_all_gather(const std::vector<std::vector<T>>& ins, const Shape& shape,
                              int axis) {
  // Both forms have the layout [outer][member][rest] with outer = prod(shape[:axis]).
  int64_t outer = 1, rest = 1;
  for (int d = 0; d < shape.ndim(); ++d) (d < axis ? outer : rest) *= shape[d];
  std::vector<T> out;
  for (int64_t o = 0; o < outer; ++o)
    for (const auto& in : ins)
      for (int64_t k = 0; k < rest; ++k) out.push_back(in[size_t(o * rest + k)]);
  return out;
}

TEST(CommunicatorAllGather, StacksAndConcatenatesOnEveryAxis) {
  const Shape shape{2, 3, 5};
  const std::vector<int> group = {4, 0, 7};  // member j is instance j, whatever its rank
  for (bool tiled : {false, true})
    for (int axis = 0; axis <= shape.ndim() - (tiled ? 1 : 0); ++axis) {
      Communicator comm(iota_ids(8));
      std::vector<std::vector<int16_t>> ins(3), outs(3);
      for (int j = 0; j < 3; ++j) {
        ins[j] = make_data<int16_t>(shape.size(), group[j]);
        outs[j].assign(size_t(shape.size() * 3), int16_t(-1));
      }
      auto errors = run_ranks(3, [&](int j) {
        comm.all_gather("all_gather", group, j, int16, shape, axis, tiled, ins[j].data(),
                        outs[j].data());
      });
      expect_no_errors(errors);
      auto want = ref_all_gather(ins, shape, axis);
      for (int j = 0; j < 3; ++j)
        expect_same_bits(outs[j], want,
                         "axis " + std::to_string(axis) + " tiled " + std::to_string(tiled));
    }
}

TEST(CommunicatorAllGather, ExplicitValues) {
  // Two members with [[0,1],[2,3]] and [[4,5],[6,7]]; tiled on axis 1 gives
  // [[0,1,4,5],[2,3,6,7]].
  Communicator comm(iota_ids(2));
  std::vector<std::vector<int32_t>> ins = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  std::vector<std::vector<int32_t>> outs(2, std::vector<int32_t>(8));
  auto errors = run_ranks(2, [&](int r) {
    comm.all_gather("all_gather", iota_ids(2), r, int32, Shape{2, 2}, 1, true, ins[r].data(),
                    outs[r].data());
  });
  expect_no_errors(errors);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(outs[r], (std::vector<int32_t>{0, 1, 4, 5, 2, 3, 6, 7}));
}

TEST(CommunicatorAllGather, BoolAndLargeBuffers) {
  Communicator comm(iota_ids(8));
  const int64_t count = (8 << 20) / 8;  // 1 MiB of float64 per member, 8 MiB gathered
  std::vector<std::vector<double>> ins(8), outs(8);
  std::vector<std::vector<bool>> bool_src(8);
  std::vector<std::unique_ptr<bool[]>> bins(8), bouts(8);
  for (int r = 0; r < 8; ++r) {
    ins[r].resize(size_t(count));
    for (int64_t k = 0; k < count; ++k) ins[r][k] = double(k) + 0.5 * r;
    outs[r].assign(size_t(count * 8), -1);
    bins[r] = std::make_unique<bool[]>(3);
    bouts[r] = std::make_unique<bool[]>(24);
    for (int k = 0; k < 3; ++k) bins[r][k] = (r + k) % 3 == 0;
  }
  auto errors = run_ranks(8, [&](int r) {
    comm.all_gather("all_gather", iota_ids(8), r, float64, Shape{count}, 0, false, ins[r].data(),
                    outs[r].data());
    comm.all_gather("all_gather", iota_ids(8), r, bool_, Shape{3}, 0, true, bins[r].get(),
                    bouts[r].get());
  });
  expect_no_errors(errors);
  auto want = ref_all_gather(ins, Shape{count}, 0);
  for (int r = 0; r < 8; ++r) {
    expect_same_bits(outs[r], want, "rank " + std::to_string(r));
    for (int k = 0; k < 24; ++k) EXPECT_EQ(bouts[r][k], (k / 3 + k % 3) % 3 == 0) << r << " " << k;
  }
}

// ---- reduce_scatter ----------------------------------------------------------------------------

TEST(CommunicatorReduceScatter, GivesEachMemberItsChunkOfTheSum) {
  const Shape shape{3, 8, 5};
  const std::vector<int> group = {2, 5, 1, 6};
  for (int dim = 0; dim < 3; ++dim) {
    if (shape[dim] % 4 != 0) continue;
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
      Communicator comm(iota_ids(8));
      std::vector<std::vector<float16_t>> ins(4), outs(4);
      for (int j = 0; j < 4; ++j) {
        ins[j] = make_data<float16_t>(shape.size(), group[j]);
        outs[j].assign(size_t(shape.size() / 4), float16_t(-1.0f));
      }
      auto errors = run_ranks(4, [&](int j) {
        comm.reduce_scatter("psum_scatter", group, j, op, float16, shape, dim, ins[j].data(),
                            outs[j].data());
      });
      expect_no_errors(errors);
      auto sum = ref_reduce(ins, op);
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < dim; ++d) outer *= shape[d];
      for (int d = dim + 1; d < 3; ++d) inner *= shape[d];
      const int64_t chunk = shape[dim] / 4 * inner;
      for (int j = 0; j < 4; ++j) {
        std::vector<float16_t> want;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t k = 0; k < chunk; ++k)
            want.push_back(sum[size_t(o * shape[dim] * inner + j * chunk + k)]);
        expect_same_bits(outs[j], want,
                         "dim " + std::to_string(dim) + " member " + std::to_string(j));
      }
    }
  }
}

TEST(CommunicatorReduceScatter, UntiledTakesOneRowAndMiddleDims) {
  // Untiled form: shape[dim] == n, member i gets S[i] along dim. dim 1 of (2, 4, 3) with n = 4.
  Communicator comm(iota_ids(4));
  const Shape shape{2, 4, 3};
  std::vector<std::vector<int64_t>> ins(4), outs(4, std::vector<int64_t>(6, -1));
  for (int r = 0; r < 4; ++r) ins[r] = make_data<int64_t>(24, r);
  auto errors = run_ranks(4, [&](int r) {
    comm.reduce_scatter("psum_scatter", iota_ids(4), r, ReduceOp::sum, int64, shape, 1,
                        ins[r].data(), outs[r].data());
  });
  expect_no_errors(errors);
  auto sum = ref_reduce(ins, ReduceOp::sum);
  for (int r = 0; r < 4; ++r)
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(outs[r][a * 3 + c], sum[a * 12 + r * 3 + c]);
}

// ---- all_to_all --------------------------------------------------------------------------------

TEST(CommunicatorAllToAll, WorkedValuesFromJax) {
  // Tiled, split = concat = 0 over 4 devices: [3 5 5 9 | 1 9 3 7 | 4 2 5 1 | 1 6 8 2].
  const std::vector<int32_t> x = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2};
  Communicator comm(iota_ids(4));
  std::vector<int32_t> out(16);
  auto errors = run_ranks(4, [&](int r) {
    comm.all_to_all("all_to_all", iota_ids(4), r, int32, Shape{4}, 0, 0, x.data() + 4 * r,
                    out.data() + 4 * r);
  });
  expect_no_errors(errors);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 5, 5, 9, 1, 9, 3, 7, 4, 2, 5, 1, 1, 6, 8, 2}));
}

TEST(CommunicatorAllToAll, EverySplitAndConcatAxis) {
  const Shape shape{4, 6, 2};
  const int n = 2;
  const std::vector<int> group = {3, 6};
  for (int split = 0; split < 3; ++split)
    for (int concat = 0; concat < 3; ++concat) {
      if (shape[split] % n != 0) continue;
      Communicator comm(iota_ids(8));
      std::vector<std::vector<uint32_t>> ins(n), outs(n);
      for (int j = 0; j < n; ++j) {
        ins[j] = make_data<uint32_t>(shape.size(), group[j], split * 3 + concat);
        outs[j].assign(size_t(shape.size()), 0xdeadbeef);
      }
      auto errors = run_ranks(n, [&](int j) {
        comm.all_to_all("all_to_all", group, j, uint32, shape, split, concat, ins[j].data(),
                        outs[j].data());
      });
      expect_no_errors(errors);
      // Reference: out_i[idx] with idx[concat] = j·c + t is in_j at idx with
      // idx[concat] = t and idx[split] += i·(shape[split]/n).
      std::vector<int64_t> cdims = shape.dims();
      cdims[split] /= n;
      std::vector<int64_t> odims = cdims;
      odims[concat] *= n;
      for (int i = 0; i < n; ++i) {
        std::vector<uint32_t> want(static_cast<size_t>(shape.size()));
        for (int64_t flat = 0; flat < shape.size(); ++flat) {
          int64_t rest = flat;
          int64_t idx[3];
          for (int d = 2; d >= 0; --d) idx[d] = rest % odims[d], rest /= odims[d];
          const int64_t j = idx[concat] / cdims[concat];
          idx[concat] %= cdims[concat];
          idx[split] += i * cdims[split];
          want[size_t(flat)] = ins[j][size_t((idx[0] * shape[1] + idx[1]) * shape[2] + idx[2])];
        }
        expect_same_bits(outs[i], want,
                         "split " + std::to_string(split) + " concat " + std::to_string(concat) +
                             " member " + std::to_string(i));
      }
    }
}

// ---- permute -----------------------------------------------------------------------------------

TEST(CommunicatorPermute, ShiftAndPartialPermutationsGiveZeros) {
  // Shift +1 of arange(8) over 4 devices: [6 7 | 0 1 | 2 3 | 4 5].
  const std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7};
  Communicator comm(iota_ids(4));
  std::vector<float> shifted(8, -1), partial(8, -1);
  const std::vector<std::pair<int, int>> shift = {{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  const std::vector<std::pair<int, int>> some = {{0, 2}, {2, 1}};
  auto errors = run_ranks(4, [&](int r) {
    comm.permute("ppermute", iota_ids(4), r, shift, float32, Shape{2}, x.data() + 2 * r,
                 shifted.data() + 2 * r);
    comm.permute("ppermute", iota_ids(4), r, some, float32, Shape{2}, x.data() + 2 * r,
                 partial.data() + 2 * r);
  });
  expect_no_errors(errors);
  EXPECT_EQ(shifted, (std::vector<float>{6, 7, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(partial, (std::vector<float>{0, 0, 4, 5, 0, 1, 0, 0}));
}

TEST(CommunicatorPermute, RejectsRepeatedDestinations) {
  Communicator comm(iota_ids(2));
  float x = 1, y = 0;
  const std::vector<std::pair<int, int>> bad = {{0, 1}, {1, 1}};
  EXPECT_THROW(comm.permute("ppermute", iota_ids(2), 0, bad, float32, Shape{}, &x, &y), ValueError);
}

// ---- groups ------------------------------------------------------------------------------------

// Inputs of 64 KiB or less are copied on arrival and each member computes its own output; larger
// ones are read in place, each member doing a share for everyone. Both sides of the threshold,
// with polling (2 devices on 2 cores) and without (a launch of 8), in place and out of place.
TEST(CommunicatorPaths, EveryCollectiveAgreesOnBothSidesOfTheStagingThreshold) {
  for (int launch : {2, 8})
    for (int64_t count : {int64_t(16384), int64_t(17920)})
      for (bool in_place : {false, true}) {
        const int n = 2;
        const std::string what = "launch " + std::to_string(launch) + " count " +
                                 std::to_string(count) + (in_place ? " in place" : "");
        Communicator comm(iota_ids(launch));
        const std::vector<int> group = iota_ids(n);
        std::vector<std::vector<float>> ins(n), reduced(n), gathered(n), scattered(n), exchanged(n),
            shifted(n);
        for (int j = 0; j < n; ++j) {
          ins[j] = make_data<float>(count, j, int(count));
          reduced[j] = in_place ? ins[j] : std::vector<float>(size_t(count), -1.0f);
          gathered[j].assign(size_t(count * n), -1.0f);
          scattered[j].assign(size_t(count / n), -1.0f);
          exchanged[j].assign(size_t(count), -1.0f);
          shifted[j].assign(size_t(count), -1.0f);
        }
        const std::vector<std::pair<int, int>> perm = {{0, 1}, {1, 0}};
        auto errors = run_ranks(n, [&](int j) {
          const float* in = ins[j].data();
          comm.all_reduce("psum", group, j, ReduceOp::sum, float32, Shape{count},
                          in_place ? reduced[j].data() : in, reduced[j].data());
          comm.all_gather("all_gather", group, j, float32, Shape{count}, 0, true, in,
                          gathered[j].data());
          comm.reduce_scatter("psum_scatter", group, j, ReduceOp::sum, float32, Shape{count}, 0, in,
                              scattered[j].data());
          comm.all_to_all("all_to_all", group, j, float32, Shape{n, count / n}, 0, 0, in,
                          exchanged[j].data());
          comm.permute("ppermute", group, j, perm, float32, Shape{count}, in, shifted[j].data());
        });
        expect_no_errors(errors);
        const auto sum = ref_reduce(ins, ReduceOp::sum);
        const auto all = ref_all_gather(ins, Shape{count}, 0);
        const int64_t half = count / n;
        for (int j = 0; j < n; ++j) {
          expect_same_bits(reduced[j], sum, what + " all_reduce");
          expect_same_bits(gathered[j], all, what + " all_gather");
          expect_same_bits(scattered[j],
                           std::vector<float>(sum.begin() + j * half, sum.begin() + (j + 1) * half),
                           what + " reduce_scatter");
          std::vector<float> want;
          for (int k = 0; k < n; ++k)
            want.insert(want.end(), ins[k].begin() + j * half, ins[k].begin() + (j + 1) * half);
          expect_same_bits(exchanged[j], want, what + " all_to_all");
          expect_same_bits(shifted[j], ins[1 - j], what + " ppermute");
        }
      }
}

// The shared-result forms: above the staging threshold every member receives the same buffer,
// below it a buffer of its own; the values are those of the ordinary forms either way. 8-way
// groups of an 8-device launch and 2-way subgroups of it, with outputs on every axis.
TEST(CommunicatorShared, OneResultBufferForTheGroupAboveTheStagingThreshold) {
  for (int64_t count : {int64_t(5), int64_t(16384), int64_t(16385), int64_t(300001)})
    for (const std::vector<int>& group : {iota_ids(8), std::vector<int>{6, 1}}) {
      const int n = int(group.size());
      const std::string what = "count " + std::to_string(count) + " group of " + std::to_string(n);
      Communicator comm(iota_ids(8));
      std::vector<std::vector<float>> ins(n);
      for (int j = 0; j < n; ++j) ins[j] = make_data<float>(count, group[j], 3);
      std::vector<std::shared_ptr<Buffer>> sums(n), maxes(n), stacked(n), tiled(n);
      auto errors = run_ranks(n, [&](int j) {
        sums[j] = comm.all_reduce_shared("psum", group, j, ReduceOp::sum, float32, Shape{count},
                                         ins[j].data());
        maxes[j] = comm.all_reduce_shared("pmax", group, j, ReduceOp::max, float32, Shape{count},
                                          ins[j].data());
        stacked[j] = comm.all_gather_shared("all_gather", group, j, float32, Shape{count}, 1,
                                            false, ins[j].data());
        tiled[j] = comm.all_gather_shared("all_gather", group, j, float32, Shape{count}, 0, true,
                                          ins[j].data());
      });
      expect_no_errors(errors);
      const bool shared = count * 4 > (64 << 10);
      auto floats = [](const std::shared_ptr<Buffer>& b) {
        const float* f = static_cast<const float*>(b->data());
        return std::vector<float>(f, f + b->nbytes() / sizeof(float));
      };
      // Stacked on a new last axis: element k of member j at k * n + j.
      std::vector<float> interleaved(size_t(count * n));
      for (int j = 0; j < n; ++j)
        for (int64_t k = 0; k < count; ++k) interleaved[size_t(k * n + j)] = ins[j][size_t(k)];
      for (int j = 0; j < n; ++j) {
        expect_same_bits(floats(sums[j]), ref_reduce(ins, ReduceOp::sum), what + " psum");
        expect_same_bits(floats(maxes[j]), ref_reduce(ins, ReduceOp::max), what + " pmax");
        expect_same_bits(floats(stacked[j]), interleaved, what + " stacked");
        expect_same_bits(floats(tiled[j]), ref_all_gather(ins, Shape{count}, 0), what + " tiled");
        for (const auto* results : {&sums, &maxes, &stacked, &tiled})
          EXPECT_EQ((*results)[j] == (*results)[0], shared || j == 0) << what << " member " << j;
      }
    }
}

TEST(CommunicatorShared, MembersMustAllAskForTheSharedForm) {
  Communicator comm(iota_ids(2), 20s);
  std::vector<float> in(1 << 15, 1.0f), out(1 << 15);
  auto errors = run_ranks(2, [&](int r) {
    if (r == 0)
      comm.all_reduce_shared("psum", iota_ids(2), r, ReduceOp::sum, float32, Shape{1 << 15},
                             in.data());
    else
      comm.all_reduce("psum", iota_ids(2), r, ReduceOp::sum, float32, Shape{1 << 15}, in.data(),
                      out.data());
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("disagree on the operation"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("one shared result"), std::string::npos) << errors[r];
  }
  auto rejected = run_ranks(1, [&](int r) {
    comm.all_gather_shared("all_gather", iota_ids(1), r, float32, Shape{4}, 2, true, in.data());
  });
  EXPECT_NE(rejected[0].find("[all_gather] axis 2 is out of bounds"), std::string::npos)
      << rejected[0];
}

// ---- combined collectives: several operands in one meeting ----------------------------------

// Bytes of every dtype, distinct per member and operand.
std::vector<unsigned char> operand_bytes(DType dtype, int64_t count, int rank, int salt) {
  std::vector<unsigned char> bytes(size_t(count * itemsize(dtype)));
  auto fill = [&](auto values) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  };
  if (dtype == float32) fill(make_data<float>(count, rank, salt));
  if (dtype == int32) fill(make_data<int32_t>(count, rank, salt));
  if (dtype == bfloat16) fill(make_data<bfloat16_t>(count, rank, salt));
  if (dtype == float64) fill(make_data<double>(count, rank, salt));
  return bytes;
}

// A combined collective's operands on every member, run once combined and once operand by
// operand (the calls of one operand, checked against references above), in a launch of 8: each
// member's results must have the same bits either way. `call(comm, j, blocks)` makes the
// combined call; `out_count(shape)` is an operand's output size in elements.
struct CombinedCase {
  std::vector<int> group;
  std::vector<std::pair<DType, Shape>> operands;
  bool group_results = false;  // all_reduce and all_gather: results handed back for the group
};

using CombinedCall =
    std::function<void(Communicator&, int me, std::span<const Communicator::Block>)>;

void check_combined(const CombinedCase& c, const CombinedCall& call,
                    const std::function<int64_t(const Shape&)>& out_count,
                    const std::string& what) {
  const int n = int(c.group.size());
  const size_t m = c.operands.size();
  // ins[j][k]: member j's operand k; outs[pass][j][k] its output (pass 0 combined, 1 alone).
  std::vector<std::vector<std::vector<unsigned char>>> ins(static_cast<size_t>(n));
  std::vector<std::vector<std::vector<unsigned char>>> outs[2];
  std::vector<std::vector<std::shared_ptr<Buffer>>> results[2];
  for (int pass = 0; pass < 2; ++pass) {
    outs[pass].assign(size_t(n), {});
    results[pass].assign(size_t(n), std::vector<std::shared_ptr<Buffer>>(m));
  }
  for (int j = 0; j < n; ++j)
    for (size_t k = 0; k < m; ++k) {
      const auto& [dtype, shape] = c.operands[k];
      ins[j].push_back(operand_bytes(dtype, shape.size(), c.group[j], int(k)));
      for (int pass = 0; pass < 2; ++pass)
        outs[pass][j].push_back(
            std::vector<unsigned char>(size_t(out_count(shape) * itemsize(dtype)), 0xab));
    }
  Communicator comm(iota_ids(8));
  auto errors = run_ranks(n, [&](int j) {
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<Communicator::Block> blocks;
      for (size_t k = 0; k < m; ++k) {
        Communicator::Block b{c.operands[k].first, c.operands[k].second, ins[j][k].data(),
                              outs[pass][j][k].data()};
        if (c.group_results) b.result = &results[pass][j][k];
        blocks.push_back(b);
      }
      if (pass == 0) {
        call(comm, j, blocks);
      } else {
        for (const Communicator::Block& b : blocks) call(comm, j, {&b, 1});
      }
    }
  });
  expect_no_errors(errors);
  auto bytes_of = [&](int pass, int j, size_t k) {
    if (!c.group_results) return outs[pass][j][k];
    const auto* data = static_cast<const unsigned char*>(results[pass][j][k]->data());
    return std::vector<unsigned char>(data, data + results[pass][j][k]->nbytes());
  };
  for (int j = 0; j < n; ++j)
    for (size_t k = 0; k < m; ++k)
      expect_same_bits(bytes_of(0, j, k), bytes_of(1, j, k),
                       what + ", member " + std::to_string(j) + ", operand " + std::to_string(k));
}

// Operands of different dtypes and shapes, small (staged together) and large (one above the
// staging size: the pieces of all operands claimed from one counter), on a group of 8 and on a
// subgroup out of rank order.
std::vector<CombinedCase> combined_cases(const std::function<Shape(int n, int k)>& shape_of,
                                         bool group_results) {
  std::vector<CombinedCase> cases;
  for (const std::vector<int>& group : {iota_ids(8), std::vector<int>{6, 1, 3}}) {
    const int n = int(group.size());
    const DType dtypes[] = {float32, int32, bfloat16, float32};
    for (size_t count : {size_t(2), size_t(3), size_t(4)}) {
      CombinedCase c{group, {}, group_results};
      for (size_t k = 0; k < count; ++k) c.operands.emplace_back(dtypes[k], shape_of(n, int(k)));
      cases.push_back(c);
    }
  }
  return cases;
}

TEST(CommunicatorCombined, AllReduceOfSeveralOperandsGivesEachOperandsBits) {
  // Operand 3 (count 4) is 80 KiB: above the staging size.
  auto shape_of = [](int, int k) {
    const Shape shapes[] = {Shape{3, 37}, Shape{1000}, Shape{5, 7}, Shape{20480}};
    return shapes[k];
  };
  for (bool group_results : {false, true})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max})
      for (const CombinedCase& c : combined_cases(shape_of, group_results))
        check_combined(
            c,
            [&](Communicator& comm, int me, std::span<const Communicator::Block> blocks) {
              comm.all_reduce("psum", c.group, me, op, blocks);
            },
            [](const Shape& s) { return s.size(); },
            "all_reduce of " + std::to_string(c.operands.size()) + " over " +
                std::to_string(c.group.size()) + (group_results ? ", one result" : ""));
}

TEST(CommunicatorCombined, AllGatherOfSeveralOperandsGivesEachOperandsBits) {
  auto shape_of = [](int, int k) {
    const Shape shapes[] = {Shape{3, 5}, Shape{7, 5}, Shape{2, 9}, Shape{6000, 4}};
    return shapes[k];
  };
  for (bool group_results : {false, true})
    for (bool tiled : {true, false})
      for (const CombinedCase& c : combined_cases(shape_of, group_results)) {
        const int64_t n = int64_t(c.group.size());
        check_combined(
            c,
            [&](Communicator& comm, int me, std::span<const Communicator::Block> blocks) {
              comm.all_gather("all_gather", c.group, me, 1, tiled, blocks);
            },
            [&](const Shape& s) { return s.size() * n; },
            "all_gather of " + std::to_string(c.operands.size()) + " over " +
                std::to_string(n) + (tiled ? " tiled" : " stacked"));
      }
}

TEST(CommunicatorCombined, ReduceScatterOfSeveralOperandsGivesEachOperandsBits) {
  auto shape_of = [](int n, int k) {
    const Shape shapes[] = {Shape{3, 2 * n}, Shape{4, n}, Shape{2, 3 * n}, Shape{5, 1200 * n}};
    return shapes[k];
  };
  for (const CombinedCase& c : combined_cases(shape_of, false)) {
    const int64_t n = int64_t(c.group.size());
    check_combined(
        c,
        [&](Communicator& comm, int me, std::span<const Communicator::Block> blocks) {
          comm.reduce_scatter("psum_scatter", c.group, me, ReduceOp::sum, 1, blocks);
        },
        [&](const Shape& s) { return s.size() / n; },
        "reduce_scatter of " + std::to_string(c.operands.size()) + " over " + std::to_string(n));
  }
}

TEST(CommunicatorCombined, AllToAllOfSeveralOperandsGivesEachOperandsBits) {
  auto shape_of = [](int n, int k) {
    const Shape shapes[] = {Shape{2 * n, 3}, Shape{n, 7}, Shape{3 * n, 2}, Shape{64 * n, 320}};
    return shapes[k];
  };
  for (const CombinedCase& c : combined_cases(shape_of, false)) {
    check_combined(
        c,
        [&](Communicator& comm, int me, std::span<const Communicator::Block> blocks) {
          comm.all_to_all("all_to_all", c.group, me, 0, 1, blocks);
        },
        [](const Shape& s) { return s.size(); },
        "all_to_all of " + std::to_string(c.operands.size()) + " over " +
            std::to_string(c.group.size()));
  }
}

TEST(CommunicatorCombined, MembersMustGiveTheSameOperands) {
  Communicator comm(iota_ids(2), 20s);
  std::vector<float> in(8, 1.0f), out(16);
  auto errors = run_ranks(2, [&](int r) {
    std::vector<Communicator::Block> blocks(size_t(2 + r),
                                            Communicator::Block{float32, Shape{4}, in.data(),
                                                                out.data() + 8 * r});
    comm.all_reduce("psum", iota_ids(2), r, ReduceOp::sum, blocks);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r].rfind("[psum] ", 0), 0u) << errors[r];
    EXPECT_NE(errors[r].find("disagree on the number of operands: device 0 has 2, device 1 has 3"),
              std::string::npos)
        << errors[r];
  }
  errors = run_ranks(2, [&](int r) {
    const Communicator::Block blocks[] = {
        {float32, Shape{4}, in.data(), out.data() + 8 * r},
        {float32, r == 0 ? Shape{4} : Shape{2, 2}, in.data(), out.data() + 8 * r + 4}};
    comm.all_to_all("all_to_all", iota_ids(2), r, 0, 0, blocks);
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[r].find("disagree on the operand 1's shape"), std::string::npos)
        << errors[r];
  auto none = run_ranks(1, [&](int r) {
    comm.all_gather("all_gather", iota_ids(1), r, 0, true, std::span<const Communicator::Block>());
  });
  EXPECT_NE(none[0].find("[all_gather] a combined collective needs at least one operand"),
            std::string::npos)
      << none[0];
}

TEST(CommunicatorGroups, MeshRowsAndColumnsRunConcurrently) {
  // A 2 x 4 mesh: each device alternates psums over its row and its column, 50 times, so the
  // rows' and columns' collectives interleave and the k-th calls must match per group.
  Communicator comm(iota_ids(8));
  const int rounds = 50;
  std::vector<std::vector<int64_t>> results(8);
  auto errors = run_ranks(8, [&](int r) {
    const int row = r / 4, col = r % 4;
    std::vector<int> row_group = {row * 4, row * 4 + 1, row * 4 + 2, row * 4 + 3};
    std::vector<int> col_group = {col, 4 + col};
    int64_t v = r + 1;
    for (int k = 0; k < rounds; ++k) {
      int64_t s = 0;
      if (k % 2 == 0)
        comm.all_reduce("psum", row_group, col, ReduceOp::sum, int64, Shape{}, &v, &s);
      else
        comm.all_reduce("psum", col_group, row, ReduceOp::sum, int64, Shape{}, &v, &s);
      v = s % 1000003 + r;
      results[r].push_back(v);
    }
  });
  expect_no_errors(errors);
  // Replay sequentially.
  std::vector<int64_t> v(8);
  for (int r = 0; r < 8; ++r) v[r] = r + 1;
  for (int k = 0; k < rounds; ++k) {
    std::vector<int64_t> nv(8);
    for (int r = 0; r < 8; ++r) {
      int64_t s = 0;
      if (k % 2 == 0)
        for (int c = 0; c < 4; ++c) s += v[(r / 4) * 4 + c];
      else
        for (int w = 0; w < 2; ++w) s += v[w * 4 + r % 4];
      nv[r] = s % 1000003 + r;
    }
    v = nv;
    for (int r = 0; r < 8; ++r) ASSERT_EQ(results[r][k], v[r]) << "round " << k << " rank " << r;
  }
}

TEST(CommunicatorGroups, DisjointGroupsDoNotWaitForEachOther) {
  // Ranks 0-1 finish many collectives while ranks 2-3 are blocked in a collective that only
  // completes after 0-1 are done: a shared rendezvous would deadlock (and time out).
  Communicator comm(iota_ids(4), 20s);
  std::atomic<bool> first_done{false};
  int32_t sink[4] = {0, 0, 0, 0};
  auto errors = run_ranks(4, [&](int r) {
    int32_t one = 1;
    if (r < 2) {
      const std::vector<int> g = {0, 1};
      for (int k = 0; k < 100; ++k)
        comm.all_reduce("psum", g, r, ReduceOp::sum, int32, Shape{}, &one, &sink[r]);
      if (r == 0) {
        first_done = true;
        first_done.notify_all();
      }
    } else {
      const std::vector<int> g = {2, 3};
      if (r == 3) first_done.wait(false);
      comm.all_reduce("psum", g, r - 2, ReduceOp::sum, int32, Shape{}, &one, &sink[r]);
    }
  });
  expect_no_errors(errors);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(sink[r], 2);
}

TEST(CommunicatorGroups, BarrierAndMixedOperationsOnOneGroup) {
  Communicator comm(iota_ids(3));
  std::vector<std::vector<uint8_t>> gathered(3, std::vector<uint8_t>(3));
  std::vector<uint16_t> maxed(3);
  auto errors = run_ranks(3, [&](int r) {
    const std::vector<int> g = {0, 1, 2};
    uint8_t mine = uint8_t(10 * r + 1);
    comm.barrier("print", g, r);
    comm.all_gather("all_gather", g, r, uint8, Shape{}, 0, false, &mine, gathered[r].data());
    comm.barrier("print", g, r);
    uint16_t v = uint16_t(7 - r);
    comm.all_reduce("pmax", g, r, ReduceOp::max, uint16, Shape{}, &v, &maxed[r]);
  });
  expect_no_errors(errors);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(gathered[r], (std::vector<uint8_t>{1, 11, 21}));
    EXPECT_EQ(maxed[r], 7);
  }
}

// ---- errors ------------------------------------------------------------------------------------

TEST(CommunicatorErrors, TimeoutNamesMissingAndArrivedDevicesOnEveryMember) {
  Communicator comm(iota_ids(8), 100ms);
  std::atomic<int> threw{0};
  std::vector<float> in(8, 1), out(8);
  auto errors = run_ranks(8, [&](int r) {
    if (r == 3) return;  // never arrives
    if (r == 5) {
      // Arrives after everyone else has given up: throws too.
      while (threw.load() < 6) threw.wait(threw.load());
    }
    try {
      comm.all_reduce("psum", iota_ids(8), r, ReduceOp::sum, float32, Shape{}, &in[r], &out[r]);
    } catch (...) {
      if (r != 5) {
        ++threw;
        threw.notify_all();
      }
      throw;
    }
  });
  const std::string msg =
      "[psum] timed out after 100 ms waiting for devices [3, 5]; arrived: [0, 1, 2, 4, 6, 7]";
  for (int r = 0; r < 8; ++r)
    if (r != 3) {
      EXPECT_EQ(errors[r], msg) << "rank " << r;
    }
  EXPECT_EQ(errors[3], "");
}

TEST(CommunicatorErrors, TimeoutUsesDeviceIds) {
  Communicator comm({10, 11, 12}, 50ms);
  float in = 1, out = 0;
  auto errors = run_ranks(2, [&](int r) {
    const std::vector<int> g = {2, r};  // groups {2, 0} and {2, 1}: rank 2 never comes
    comm.all_gather("all_gather", g, 1, float32, Shape{}, 0, false, &in, &out);
  });
  EXPECT_EQ(errors[0],
            "[all_gather] timed out after 50 ms waiting for devices [12]; arrived: [10]");
  EXPECT_EQ(errors[1],
            "[all_gather] timed out after 50 ms waiting for devices [12]; arrived: [11]");
}

TEST(CommunicatorErrors, MismatchedDTypeThrowsOnEveryMemberNamingIt) {
  Communicator comm(iota_ids(4), 20s);
  std::vector<double> in(4, 1), out(4);
  auto errors = run_ranks(4, [&](int r) {
    comm.all_reduce("psum", iota_ids(4), r, ReduceOp::sum, r == 2 ? int64 : float64, Shape{},
                    &in[r], &out[r]);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(errors[r].rfind("[psum] ", 0), 0u) << errors[r];
    EXPECT_NE(errors[r].find("dtype"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("device 2 has int64"), std::string::npos) << errors[r];
  }
}

TEST(CommunicatorErrors, MismatchedShapeOrOperationThrowsOnEveryMember) {
  Communicator comm(iota_ids(2), 20s);
  std::vector<float> in(8, 1), out(16);
  auto errors = run_ranks(2, [&](int r) {
    comm.all_gather("all_gather", iota_ids(2), r, float32, r == 0 ? Shape{4} : Shape{2, 2}, 0, true,
                    in.data(), out.data() + 8 * r);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("shape"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("(2, 2)"), std::string::npos) << errors[r];
  }
  Communicator comm2(iota_ids(2), 20s);
  errors = run_ranks(2, [&](int r) {
    if (r == 0)
      comm2.all_reduce("psum", iota_ids(2), r, ReduceOp::sum, float32, Shape{}, in.data(),
                       out.data());
    else
      comm2.barrier("print", iota_ids(2), r);
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[r].find("disagree on the operation"), std::string::npos) << errors[r];
}

TEST(CommunicatorErrors, AbortWakesWaitersAtOnce) {
  // Without abort the waiters would give up only after 30 s, with a timeout message.
  Communicator comm(iota_ids(4), 30s);
  std::atomic<int> arrived_hint{0};
  int32_t in[4] = {1, 1, 1, 1}, out[4] = {};
  auto errors = run_ranks(4, [&](int r) {
    if (r == 3) {
      // Abort after the others are about to wait; correctness does not depend on it.
      while (arrived_hint.load() < 3) arrived_hint.wait(arrived_hint.load());
      comm.abort(3, "boom");
      return;
    }
    ++arrived_hint;
    arrived_hint.notify_all();
    comm.all_reduce("psum", iota_ids(4), r, ReduceOp::sum, int32, Shape{}, &in[r], &out[r]);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r].rfind("[psum] device 3 failed (boom)", 0), 0u) << errors[r];
    // Rank 3 never arrives; whether the others had arrived before the abort depends on timing.
    const auto waiting = errors[r].find("while waiting for devices [");
    ASSERT_NE(waiting, std::string::npos) << errors[r];
    const auto list_end = errors[r].find(']', waiting);
    EXPECT_EQ(errors[r].substr(list_end - 1, 2), "3]") << errors[r];
  }
  // Later collectives that need rank 3 fail at once too; those without it still work.
  auto later = run_ranks(3, [&](int r) {
    const std::vector<int> g = {0, 1, 2};
    comm.all_reduce("psum", g, r, ReduceOp::sum, int32, Shape{}, &in[r], &out[r]);
  });
  expect_no_errors(later);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r], 3);
  try {
    const std::vector<int> g = {1, 3};
    comm.all_gather("all_gather", g, 0, int32, Shape{}, 0, false, in, out);
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("device 3 failed (boom)"), std::string::npos);
  }
}

TEST(CommunicatorErrors, DefaultTimeoutReadsTheEnvironment) {
  const char* saved = std::getenv("SPMD_COLLECTIVE_TIMEOUT_MS");
  std::string saved_value = saved ? saved : "";
  setenv("SPMD_COLLECTIVE_TIMEOUT_MS", "1234", 1);
  EXPECT_EQ(default_collective_timeout(), 1234ms);
  unsetenv("SPMD_COLLECTIVE_TIMEOUT_MS");
  EXPECT_EQ(default_collective_timeout(), 60s);
  if (saved) setenv("SPMD_COLLECTIVE_TIMEOUT_MS", saved_value.c_str(), 1);
}

// Members that only sleep (no yielding) and members that yield for a second before sleeping both
// give the sums, over several meetings in a row on 8 threads (more than the cores here, where the
// yield budget applies).
TEST(CommunicatorWaits, YieldBudgetFromTheEnvironmentKeepsTheResults) {
  const char* saved = std::getenv("SPMD_COLLECTIVE_YIELD_US");
  std::string saved_value = saved ? saved : "";
  for (const char* budget : {"0", "1000000"}) {
    setenv("SPMD_COLLECTIVE_YIELD_US", budget, 1);
    Communicator comm(iota_ids(8));
    std::vector<std::vector<float>> ins(8), outs(8);
    for (int r = 0; r < 8; ++r) {
      ins[r] = make_data<float>(1000, r, 3);
      outs[r].assign(1000, -1.0f);
    }
    auto errors = run_ranks(8, [&](int r) {
      for (int round = 0; round < 5; ++round)
        comm.all_reduce("psum", iota_ids(8), r, ReduceOp::sum, float32, Shape{1000}, ins[r].data(),
                        outs[r].data());
    });
    expect_no_errors(errors);
    auto want = ref_reduce(ins, ReduceOp::sum);
    for (int r = 0; r < 8; ++r)
      expect_same_bits(outs[r], want,
                       std::string("budget ") + budget + ", rank " + std::to_string(r));
  }
  unsetenv("SPMD_COLLECTIVE_YIELD_US");
  if (saved) setenv("SPMD_COLLECTIVE_YIELD_US", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace spmd::runtime
