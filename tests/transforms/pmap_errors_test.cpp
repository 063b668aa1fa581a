// pmap's argument errors, worded as JAX words them where JAX 0.10.2 has a message of its own
// (tests/goldens/errors/api_errors.txt, written by tools/goldens/gen_errors.py), and spmd's own
// messages, compared in full, where it has none.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

namespace sp = spmd;
using sp::Array;
using spmd_test::error_message;

namespace {

std::string api_error(const std::string& name) {
  return spmd_test::jax_error("errors/api_errors.txt", name);
}

Array twice(const Array& x) {
  return x * 2;
}

// JAX 0.10.2's pmap fails here with an IndexError ("tuple index out of range"); older pmap shared
// vmap's check, whose wording spmd uses with pmap's name.
TEST(PmapErrors, InAxisBeyondTheRankAsJaxVmap) {
  std::string want = api_error("vmap_in_axes_out_of_range");
  ASSERT_EQ(want.rfind("vmap ", 0), 0u) << want;
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::pmap(twice, {.in_axes = {2}})(sp::ones({8, 3}));
            }),
            "[pmap] pmap " + want.substr(5));
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::pmap(twice, {.in_axes = {-3}})(sp::ones({8, 3}));
            }),
            "[pmap] pmap was requested to map its argument along axis -3, which implies that its "
            "rank should be at least 3, but is only 2 (its shape is (8, 3))");
}

// JAX 0.10.2 fails while placing the second argument (an IndivisibleError about its internal
// sharding), so spmd keeps its own message.
TEST(PmapErrors, InconsistentMappedSizes) {
  auto add = [](const Array& x, const Array& y) { return x + y; };
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::pmap(add)(sp::ones({4}), sp::ones({2, 3}));
            }),
            "[pmap] pmap got inconsistent sizes for array axes to be mapped: 4, 2");
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::pmap(add, {.in_axes = {0, 1}})(sp::ones({4, 2}), sp::ones({4, 2}));
            }),
            "[pmap] pmap got inconsistent sizes for array axes to be mapped: 4, 2");
}

TEST(PmapErrors, AllInAxesNoneAsJax) {
  std::string want = "[pmap] " + api_error("pmap_all_in_axes_none");
  EXPECT_EQ(error_message<sp::ValueError>(
                [] { sp::pmap(twice, {.in_axes = {sp::None}})(sp::ones({8})); }),
            want);
  auto add = [](const Array& x, const Array& y) { return x + y; };
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::pmap(add, {.in_axes = {sp::None, sp::None}})(sp::ones({8}), sp::ones({8}));
            }),
            want);
}

TEST(PmapErrors, InAxesCountAsJax) {
  auto add = [](const Array& x, const Array& y) { return x + y; };
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::pmap(add, {.in_axes = {0, 0, 0}})(sp::ones({8}), sp::ones({8}));
            }),
            "[pmap] " + api_error("pmap_in_axes_count"));
}

// JAX names the prefix in this message by an internal name ('broadcast_prefix prefix_tree');
// spmd names it 'pmap out_axes'.
TEST(PmapErrors, OutAxesCountAsJax) {
  std::string want = api_error("pmap_out_axes_count");
  for (const std::string internal = "broadcast_prefix prefix_tree";;) {
    size_t at = want.find(internal);
    if (at == std::string::npos) break;
    want.replace(at, internal.size(), "pmap out_axes");
  }
  auto pair = [](const Array& x) { return std::make_tuple(x, x); };
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::pmap(pair, {.out_axes = {0, 0, 0}})(sp::ones({8}));
            }),
            "[pmap] " + want);
}

// JAX 0.10.2 has no message here: with more elements than devices it cannot squeeze the
// blocks, with fewer it runs on the first devices of the list. spmd wants one device per
// instance (more instances than devices is the device-count error below).
TEST(PmapErrors, DevicesListLongerThanTheMappedAxis) {
  std::vector<sp::Device> all = sp::devices();
  std::vector<sp::Device> four(all.begin(), all.begin() + 4);
  EXPECT_EQ(
      error_message<sp::ValueError>([&] { sp::pmap(twice, {.devices = four})(sp::ones({2})); }),
      "[pmap] the mapped axis has size 2 but `devices` lists 4 devices; give one device per "
      "instance");
  EXPECT_EQ(
      error_message<sp::ValueError>([&] { sp::pmap(twice, {.devices = four})(sp::ones({8})); }),
      "[pmap] compiling computation that requires 8 logical devices, but only 4 devices are "
      "available (num_replicas=8)");
  EXPECT_TRUE(spmd_test::arrays_equal(sp::pmap(twice, {.devices = four})(sp::arange(4.0f)),
                                      sp::array<float>({0, 2, 4, 6})));
}

// JAX 0.10.2 raises an IndivisibleError while placing the input on its internal
// '_internal_pmap_axis_name' mesh (seeds/extra_errors.txt, pmap_more_elements_than_devices): a
// message about its implementation, not the user's mistake. spmd keeps the wording of older
// JAX's compile-time check ("compiling computation that requires 9 logical devices, but only 8
// XLA devices are available (num_replicas=9, num_partitions=1)") without the XLA details.
TEST(PmapErrors, MoreElementsThanDevices) {
  std::string jax =
      spmd_test::jax_error("seeds/extra_errors.txt", "pmap_more_elements_than_devices");
  EXPECT_NE(jax.find("the dimension size is 9"), std::string::npos) << jax;
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::pmap(twice)(sp::arange(9.0f)); }),
            "[pmap] compiling computation that requires 9 logical devices, but only 8 devices "
            "are available (num_replicas=9)");
}

}  // namespace
