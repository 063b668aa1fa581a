// Bad arguments across the public API, one row each: the call, the exact exception type it must
// raise and the exact message. Shapes, dtypes, axes, indexing, matmul shapes, meshes and partition
// specs, shard_map specs, files and random keys. A row that crashes, hangs, raises another type
// or says something else fails on its own, named after the row.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <cxxabi.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

namespace sp = spmd;
namespace fs = std::filesystem;
using sp::Array;
using sp::P;

namespace {

struct HostileRow {
  std::string name;  // the test's name: letters, digits and underscores
  std::function<void()> call;
  const std::type_info* error;  // the exact dynamic type of the exception
  std::string message;
};

template <class E>
HostileRow raises(std::string name, std::function<void()> call, std::string message) {
  return {std::move(name), std::move(call), &typeid(E), std::move(message)};
}

std::string type_name(const std::type_info& t) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> s(abi::__cxa_demangle(t.name(), nullptr, nullptr, &status),
                                           std::free);
  return status == 0 ? s.get() : t.name();
}

// The directory of the file rows, made by the suite's SetUpTestSuite.
const std::string& file_dir() {
  static const std::string dir =
      (fs::path(::testing::TempDir()) / ("spmd_hostile_" + std::to_string(::getpid()))).string();
  return dir;
}
std::string file(const std::string& name) {
  return file_dir() + "/" + name;
}

sp::Mesh mesh42() {
  return sp::make_mesh({4, 2}, {"x", "y"});
}

Array same(const Array& x) {
  return x;
}
Array psum_over_z(const Array& x) {
  return sp::psum(x, "z");
}
void shard_map_on_mesh42(Array (*body)(const Array&), const P& in, const P& out, const Array& x) {
  sp::shard_map(body, mesh42(), in, out)(x);
}

using UnaryFn = std::function<Array(const Array&)>;
Array psum_over_x_twice(const Array& x) {
  return sp::psum(x, sp::axes("x", "x"));
}
Array all_gather_over_y_x_y(const Array& x) {
  return sp::all_gather(x, sp::axes("y", "x", "y"));
}
Array times_axis_index_x_x(const Array& x) {
  return x * sp::axis_index(sp::axes("x", "x"));
}
std::string visualize_8_by_4(sp::VisualizeOptions options) {
  return sp::sharding_to_string(sp::Shape({8, 4}), sp::NamedSharding(mesh42(), P("x", "y")),
                                options);
}

// The tables are laid out by hand, one row in three lines: clang-format 14 spreads a lambda whose
// body holds a braced list over three lines of its own.
// clang-format off
std::vector<HostileRow> shape_rows() {
  return {
      raises<sp::ValueError>(
          "zeros_negative_dim", [] { sp::zeros({-1, 2}); },
          "[zeros] negative dimensions are not allowed, got shape (-1, 2)"),
      raises<sp::ValueError>(
          "full_negative_dim", [] { sp::full({2, -3}, 1.0); },
          "[full] negative dimensions are not allowed, got shape (2, -3)"),
      raises<sp::ValueError>(
          "array_count_mismatch", [] { sp::array({1.f, 2.f, 3.f}, sp::Shape{2, 2}); },
          "[array] got 3 values for shape (2, 2), which holds 4"),
      raises<sp::ValueError>(
          "array_ragged_rows", [] { sp::array({{1, 2}, {3}}); },
          "[array] rows must have equal lengths, got 2 and 1"),
      raises<sp::ValueError>(
          "array_from_bytes_negative_dim", [] { sp::array_from_bytes(nullptr, sp::int8, {-2}); },
          "[array_from_bytes] negative dimensions are not allowed, got shape (-2,)"),
      raises<sp::ShapeError>(
          "reshape_size_mismatch", [] { sp::ones({2, 3}).reshape({4}); },
          "[reshape] cannot reshape array of shape (2, 3) into shape (4,)"),
      raises<sp::ValueError>(
          "reshape_two_unknown_dims", [] { sp::ones({2, 3}).reshape({-1, -1}); },
          "[reshape] can only specify one unknown axis size with a `-1` value, got (-1, -1)"),
      raises<sp::ShapeError>(
          "reshape_unknown_dim_indivisible", [] { sp::ones({2, 3}).reshape({-1, 4}); },
          "[reshape] cannot reshape array of shape (2, 3) into shape (-1, 4) because the product "
          "of the specified axis sizes (4) does not evenly divide 6"),
      raises<sp::ValueError>(
          "reshape_negative_dim", [] { sp::ones({2, 3}).reshape({-2, -3}); },
          "[reshape] negative dimensions are not allowed, got shape (-2, -3)"),
      raises<sp::ShapeError>(
          "reshape_unknown_dim_next_to_zero", [] { sp::ones({0, 3}).reshape({0, -1}); },
          "[reshape] cannot reshape array of shape (0, 3) into shape (0, -1) because the product "
          "of the specified axis sizes (0) does not evenly divide 0"),
      raises<sp::ShapeError>(
          "lax_reshape_unknown_dim", [] { sp::lax::reshape(sp::ones({6}), {-1, 3}); },
          "[reshape] cannot reshape array of shape (6,) into shape (-1, 3)"),
      raises<sp::ShapeError>(
          "broadcast_to_incompatible", [] { sp::broadcast_to(sp::ones({3}), {4}); },
          "[broadcast_to] cannot broadcast an array of shape (3,) to shape (4,)"),
      raises<sp::ShapeError>(
          "broadcast_to_lower_rank", [] { sp::broadcast_to(sp::ones({2, 3}), {3}); },
          "[broadcast_to] cannot broadcast to a shape with fewer dimensions: array shape (2, 3), "
          "requested shape (3,)"),
      raises<sp::ShapeError>(
          "broadcast_shapes_incompatible", [] { sp::broadcast_shapes({2, 3}, {3, 2}); },
          "[broadcast_shapes] operands could not be broadcast together with shapes (2, 3) (3, 2)"),
      raises<sp::ShapeError>(
          "add_incompatible", [] { sp::ones({3}) + sp::ones({4}); },
          "[add] operands could not be broadcast together with shapes (3,) (4,)"),
      raises<sp::ShapeError>(
          "where_incompatible", [] { sp::where(sp::ones({2}) > 0, sp::ones({3}), 0.0); },
          "[where] operands could not be broadcast together with shapes (2,) (3,) ()"),
      raises<sp::ShapeError>(
          "concatenate_rank_mismatch", [] { sp::concatenate({sp::ones({2, 3}), sp::ones({3})}); },
          "[concatenate] cannot concatenate arrays with different numbers of dimensions: "
          "got (2, 3), (3,)"),
      raises<sp::ShapeError>(
          "concatenate_dim_mismatch",
          [] { sp::concatenate({sp::ones({2, 3}), sp::ones({2, 4})}, 0); },
          "[concatenate] cannot concatenate arrays with shapes that differ in dimensions other "
          "than the one being concatenated: concatenating along dimension 0 for shapes "
          "(2, 3), (2, 4)"),
      raises<sp::ValueError>(
          "concatenate_nothing", [] { sp::concatenate({}); },
          "[concatenate] need at least one array to concatenate"),
      raises<sp::ShapeError>(
          "stack_shape_mismatch", [] { sp::stack({sp::ones({2}), sp::ones({3})}); },
          "[stack] all input arrays must have the same shape, got (2,), (3,)"),
      raises<sp::ShapeError>(
          "split_indivisible", [] { sp::split(sp::ones({5}), 2); },
          "[split] array split does not result in an equal division: an axis of size 5 cannot be "
          "split into 2 sections (rest is 1)"),
      raises<sp::ShapeError>(
          "squeeze_dim_not_one", [] { sp::squeeze(sp::ones({2, 3}), {0}); },
          "[squeeze] cannot select an axis to squeeze out which has size not equal to one, got "
          "shape=(2, 3) and axis 0"),
      raises<sp::ValueError>(
          "tile_negative_reps", [] { sp::tile(sp::ones({2}), {-1}); },
          "[tile] reps must be nonnegative, got -1"),
      raises<sp::ValueError>(
          "repeat_negative", [] { sp::repeat(sp::ones({2}), -1); },
          "[repeat] repeats must be nonnegative, got -1"),
      raises<sp::ValueError>(
          "pad_negative_width", [] { sp::pad(sp::ones({2}), {{-1, 0}}); },
          "[pad] index can't contain negative values, got (-1, 0)"),
      raises<sp::ValueError>(
          "pad_width_count", [] { sp::pad(sp::ones({2, 2}), {{1, 1}, {1, 1}, {1, 1}}); },
          "[pad] pad_width must have one (before, after) pair per dimension or a single pair for "
          "all, got 3 pairs for an array of shape (2, 2)"),
      raises<sp::ValueError>(
          "eye_negative", [] { sp::eye(-1); },
          "[eye] negative dimensions are not allowed, got N=-1 and M=-1"),
      raises<sp::ValueError>(
          "arange_zero_step", [] { sp::arange(0, 5, 0); },
          "[arange] step must not be zero"),
      raises<sp::ValueError>(
          "linspace_negative_num", [] { sp::linspace(0, 1, -1); },
          "[linspace] number of samples must be non-negative, got -1"),
      raises<sp::IndexError>(
          "lax_slice_past_the_end", [] { sp::lax::slice(sp::ones({4}), {1}, {5}); },
          "[slice] indices must satisfy 0 <= start <= limit <= size, got start (1,) and limit (5,) "
          "for operand shape (4,)"),
      raises<sp::IndexError>(
          "lax_slice_start_after_limit", [] { sp::lax::slice(sp::ones({4}), {3}, {1}); },
          "[slice] indices must satisfy 0 <= start <= limit <= size, got start (3,) and limit (1,) "
          "for operand shape (4,)"),
      raises<sp::ValueError>(
          "lax_slice_zero_stride", [] { sp::lax::slice(sp::ones({4}), {0}, {4}, {0}); },
          "[slice] strides must be positive, got (0,)"),
      raises<sp::ValueError>(
          "lax_slice_rank_mismatch", [] { sp::lax::slice(sp::ones({4, 4}), {0}, {4}); },
          "[slice] start_indices, limit_indices and strides must have one entry per operand "
          "dimension, got (0,), (4,) and (1,) for operand shape (4, 4)"),
      raises<sp::ShapeError>(
          "lax_broadcast_in_dim_bad_dims",
          [] { sp::lax::broadcast_in_dim(sp::ones({3}), {2, 4}, {1}); },
          "[broadcast_in_dim] operand dimension sizes must either be 1, or be equal to their "
          "corresponding dimensions in the target broadcast shape; got operand of shape (3,), "
          "target shape (2, 4), broadcast_dimensions (1,)"),
      raises<sp::ShapeError>(
          "lax_dynamic_slice_too_big",
          [] { sp::lax::dynamic_slice(sp::ones({4}), {Array(0)}, {5}); },
          "[dynamic_slice] slice_sizes must be nonnegative and at most the operand shape, got "
          "slice_sizes (5,) for operand shape (4,)"),
      raises<sp::ValueError>(
          "lax_pad_negative_interior", [] { sp::lax::pad(sp::ones({2}), 0.0f, {{0, 0, -1}}); },
          "[pad] interior padding must be nonnegative, got -1 for dimension 0"),
  };
}

std::vector<HostileRow> dtype_rows() {
  return {
      raises<sp::TypeError>(
          "bitwise_and_floats", [] { sp::bitwise_and(sp::ones({2}), sp::ones({2})); },
          "[bitwise_and] expected an integer or boolean array, got float32"),
      raises<sp::TypeError>(
          "bitwise_not_float", [] { sp::bitwise_not(sp::ones({2})); },
          "[bitwise_not] expected an integer or boolean array, got float32"),
      raises<sp::TypeError>(
          "left_shift_float", [] { sp::left_shift(sp::ones({2}), 1); },
          "[left_shift] expected integer arrays, got float32"),
      raises<sp::TypeError>(
          "subtract_bools", [] { sp::ones({2}, sp::bool_) - sp::ones({2}, sp::bool_); },
          "[subtract] not supported for boolean arrays; use logical_not/logical_xor or convert "
          "with astype"),
      raises<sp::TypeError>(
          "sign_bool", [] { sp::sign(sp::ones({2}, sp::bool_)); },
          "[sign] does not accept dtype bool"),
      raises<sp::TypeError>(
          "integer_pow_negative_int", [] { sp::lax::integer_pow(sp::arange(3), -1); },
          "[integer_pow] Integers cannot be raised to negative powers, got integer_pow(int32[3], "
          "-1)"),
      raises<sp::TypeError>(
          "population_count_float", [] { sp::lax::population_count(sp::ones({2})); },
          "[population_count] expected an integer dtype, got float32"),
      raises<sp::TypeError>(
          "clz_float", [] { sp::lax::clz(sp::ones({2})); },
          "[clz] expected an integer dtype, got float32"),
      raises<sp::TypeError>(
          "shift_left_mixed_ints",
          [] { sp::lax::shift_left(sp::arange(2), sp::arange(2).astype(sp::int8)); },
          "[shift_left] operands must have the same dtype, got int32 and int8"),
      raises<sp::TypeError>(
          "lax_rem_mixed_dtypes", [] { sp::lax::rem(sp::ones({2}), sp::arange(2)); },
          "[rem] operands must have the same dtype, got float32 and int32"),
      raises<sp::ShapeError>(
          "bitcast_to_wider_type",
          [] { sp::lax::bitcast_convert_type(sp::arange(3).astype(sp::int8), sp::int32); },
          "[bitcast_convert_type] converting int8 to int32 needs a last dimension of size 4, got "
          "shape (3,)"),
      raises<sp::TypeError>(
          "reduce_and_float", [] { sp::lax::reduce_and(sp::ones({2}), {0}); },
          "[reduce_and] logical reduction requires operand dtype bool or int, got float32."),
      raises<sp::TypeError>(
          "cumlogsumexp_int", [] { sp::lax::cumlogsumexp(sp::arange(3), 0); },
          "[cumlogsumexp] expected a floating-point dtype, got int32"),
      raises<sp::TypeError>(
          "select_n_float_selector",
          [] { sp::lax::select_n(sp::ones({2}), {sp::ones({2}), sp::ones({2})}); },
          "[select_n] the selector must be bool or int32, got float32"),
      raises<sp::TypeError>(
          "take_float_indices", [] { sp::take(sp::ones({3}), sp::ones({1})); },
          "[take] indices must have an integer type, got float32"),
      raises<sp::TypeError>(
          "clamp_mixed_dtypes", [] { sp::lax::clamp(sp::arange(2), sp::ones({2}), sp::ones({2})); },
          "[clamp] operands must have the same dtype, got int32 and float32"),
  };
}

std::vector<HostileRow> axis_rows() {
  return {
      raises<sp::AxisError>(
          "sum_axis_out_of_range", [] { sp::sum(sp::ones({2, 3}), {2}); },
          "[sum] axis 2 is out of bounds for array of dimension 2"),
      raises<sp::AxisError>(
          "sum_negative_axis_out_of_range", [] { sp::sum(sp::ones({2, 3}), {-3}); },
          "[sum] axis -3 is out of bounds for array of dimension 2"),
      raises<sp::ValueError>(
          "sum_duplicate_axes", [] { sp::sum(sp::ones({2, 3}), {0, 0}); },
          "[sum] duplicate value in 'axis': (0, 0)"),
      raises<sp::ValueError>(
          "sum_duplicate_axes_negative", [] { sp::sum(sp::ones({2, 3}), {1, -1}); },
          "[sum] duplicate value in 'axis': (1, -1)"),
      raises<sp::AxisError>(
          "argmax_axis_out_of_range", [] { sp::argmax(sp::ones({2, 3}), 2); },
          "[argmax] axis 2 is out of bounds for array of dimension 2"),
      raises<sp::AxisError>(
          "cumsum_axis_out_of_range", [] { sp::cumsum(sp::ones({2, 3}), 5); },
          "[cumsum] axis 5 is out of bounds for array of dimension 2"),
      raises<sp::AxisError>(
          "squeeze_axis_out_of_range", [] { sp::squeeze(sp::ones({1, 3}), {2}); },
          "[squeeze] axis 2 is out of bounds for array of dimension 2"),
      raises<sp::AxisError>(
          "swapaxes_out_of_range", [] { sp::swapaxes(sp::ones({2, 3}), 0, 2); },
          "[swapaxes] axis 2 is out of bounds for array of dimension 2"),
      raises<sp::ValueError>(
          "moveaxis_duplicate_source", [] { sp::moveaxis(sp::ones({2, 3}), {0, 0}, {0, 1}); },
          "[moveaxis] repeated axis in source or destination"),
      raises<sp::AxisError>(
          "expand_dims_out_of_range", [] { sp::expand_dims(sp::ones({2}), {3}); },
          "[expand_dims] axis 3 is out of bounds for array of dimension 2"),
      raises<sp::ValueError>(
          "expand_dims_duplicate", [] { sp::expand_dims(sp::ones({2}), {0, 0}); },
          "[expand_dims] repeated axis in dimensions (0, 0)"),
      raises<sp::AxisError>(
          "flip_axis_out_of_range", [] { sp::flip(sp::ones({2}), {1}); },
          "[flip] axis 1 is out of bounds for array of dimension 1"),
      raises<sp::AxisError>(
          "concatenate_axis_out_of_range",
          [] { sp::concatenate({sp::ones({2}), sp::ones({2})}, 1); },
          "[concatenate] axis 1 is out of bounds for array of dimension 1"),
      raises<sp::AxisError>(
          "sort_axis_out_of_range", [] { sp::sort(sp::ones({2}), 1); },
          "[sort] axis 1 is out of bounds for array of dimension 1"),
      raises<sp::ValueError>(
          "transpose_repeated_axis", [] { sp::transpose(sp::ones({2, 3}), {0, 0}); },
          "[transpose] permutation isn't a permutation of operand dimensions, got permutation "
          "(0, 0) for operand shape (2, 3)"),
      raises<sp::ValueError>(
          "transpose_wrong_length", [] { sp::transpose(sp::ones({2, 3}), {0}); },
          "[transpose] axes don't match array: got 1 axes for an array of dimension 2"),
      raises<sp::AxisError>(
          "stack_axis_out_of_range", [] { sp::stack({sp::ones({2})}, 3); },
          "[stack] axis 3 is out of bounds for array of dimension 2"),
      raises<sp::AxisError>(
          "lax_reduce_sum_axis_out_of_range", [] { sp::lax::reduce_sum(sp::ones({2}), {1}); },
          "[reduce_sum] axis 1 is out of bounds for array of dimension 1"),
  };
}

std::vector<HostileRow> indexing_rows() {
  return {
      raises<sp::IndexError>(
          "index_past_the_end", [] { sp::arange(3)[3]; },
          "[Array::operator[]] index 3 is out of bounds for axis 0 with size 3"),
      raises<sp::IndexError>(
          "negative_index_past_the_start", [] { sp::arange(3)[-4]; },
          "[Array::operator[]] index -4 is out of bounds for axis 0 with size 3"),
      raises<sp::IndexError>(
          "index_a_scalar", [] { Array(1.0f)[0]; },
          "[Array::operator[]] too many indices for a 0-d array"),
      raises<sp::IndexError>(
          "take_out_of_range", [] { sp::take(sp::arange(3), sp::array({0, 3})); },
          "[take] index 3 is out of bounds for axis 0 with size 3"),
      raises<sp::ShapeError>(
          "take_along_axis_rank_mismatch",
          [] { sp::take_along_axis(sp::ones({2, 3}), sp::array({0}), 1); },
          "[take_along_axis] indices and arr must have the same number of dimensions; 1 vs. 2"),
      raises<sp::ValueError>(
          "item_of_many", [] { sp::arange(3).item<int>(); },
          "[item] can only convert an array of size 1 to a scalar, got shape (3,)"),
      raises<sp::ValueError>(
          "one_hot_negative_classes", [] { sp::one_hot(sp::arange(3), -1); },
          "[one_hot] num_classes must be nonnegative, got -1"),
      raises<sp::ValueError>(
          "empty_handle_shape", [] { Array().shape(); },
          "[Array] use of an empty Array handle"),
      raises<sp::ValueError>(
          "empty_handle_add", [] { Array() + 1.0f; },
          "[Array] use of an empty Array handle"),
  };
}

std::vector<HostileRow> matmul_rows() {
  return {
      raises<sp::ShapeError>(
          "matmul_inner_mismatch", [] { sp::matmul(sp::ones({2, 3}), sp::ones({4, 5})); },
          "[matmul] input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
          "(n?,k),(k,m?)->(n?,m?) (size 4 is different from 3), got shapes (2, 3) and (4, 5)"),
      raises<sp::ValueError>(
          "matmul_scalar", [] { sp::matmul(Array(1.0f), sp::ones({2})); },
          "[matmul] input operand 0 must have ndim at least 1, but it has ndim 0"),
      raises<sp::ShapeError>(
          "matmul_batch_mismatch", [] { sp::matmul(sp::ones({2, 2, 3}), sp::ones({3, 3, 4})); },
          "[matmul] incompatible shapes for matmul arguments: (2, 2, 3) and (3, 3, 4) (batch "
          "dimensions 2 and 3 cannot be broadcast)"),
      raises<sp::ShapeError>(
          "dot_mismatch", [] { sp::dot(sp::ones({3}), sp::ones({4})); },
          "[dot] shapes (3,) and (4,) not aligned: 3 (dim 0) != 4 (dim 0)"),
      raises<sp::ShapeError>(
          "vdot_size_mismatch", [] { sp::vdot(sp::ones({3}), sp::ones({4})); },
          "[vdot] the arrays must have the same number of elements, got shapes (3,) and (4,)"),
      raises<sp::ShapeError>(
          "dot_general_contracting_mismatch",
          [] { sp::lax::dot_general(sp::ones({2, 3}), sp::ones({4, 2}), {{1}, {0}, {}, {}}); },
          "[dot_general] requires contracting dimensions to have the same shape, "
          "got (3,) and (4,)"),
      raises<sp::AxisError>(
          "dot_general_dim_out_of_range",
          [] { sp::lax::dot_general(sp::ones({2, 3}), sp::ones({3, 2}), {{2}, {0}, {}, {}}); },
          "[dot_general] requires lhs dimension numbers to be nonnegative and less than the number "
          "of axes of the lhs value, got lhs_batch of () and lhs_contracting of (2,) for lhs of "
          "rank 2"),
      raises<sp::ShapeError>(
          "dot_general_batch_mismatch",
          [] { sp::lax::dot_general(sp::ones({2, 3}), sp::ones({4, 3}), {{1}, {1}, {0}, {0}}); },
          "[dot_general] requires lhs batch dimensions and rhs batch dimensions to have the same "
          "shape, got (2,) and (4,)"),
      raises<sp::ValueError>(
          "tensordot_too_many_axes", [] { sp::tensordot(sp::ones({2}), sp::ones({2}), 2); },
          "[tensordot] number of tensordot axes (axes 2) exceeds input ranks ((2,) and (2,))"),
  };
}

std::vector<HostileRow> sharding_rows() {
  return {
      raises<sp::ShardingError>(
          "named_sharding_unknown_axis", [] { sp::NamedSharding(mesh42(), P("z")); },
          "[NamedSharding] Resource axis: z of P('z',) is not found in mesh: ('x', 'y')."),
      raises<sp::ShardingError>(
          "named_sharding_duplicate_axis", [] { sp::NamedSharding(mesh42(), P("x", "x")); },
          "[NamedSharding] A single NamedSharding spec specification can map every mesh axis to at "
          "most one positional dimension, but P('x', 'x') has duplicate entries for `x`"),
      raises<sp::ShardingError>(
          "device_put_indivisible",
          [] { sp::device_put(sp::ones({3}), sp::NamedSharding(mesh42(), P("x"))); },
          "[device_put] Sharding NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), "
          "spec=P('x',), memory_kind=device) implies that array axis 0 is partitioned 4 times, but "
          "the dimension size is 3 (full shape: (3,), per-dimension tiling factors: [4] should "
          "evenly divide the shape)"),
      raises<sp::ShardingError>(
          "device_put_spec_longer_than_rank",
          [] { sp::device_put(sp::ones({8}), sp::NamedSharding(mesh42(), P("x", "y"))); },
          "[device_put] Sharding NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), "
          "spec=P('x', 'y'), memory_kind=device) is only valid for values of rank at least 2, but "
          "was applied to a value of rank 1."),
      raises<sp::ShardingError>(
          "mesh_names_count", [] { sp::Mesh(sp::create_device_mesh({4, 2}), {"x"}); },
          "[Mesh] Mesh requires the ndim of its first argument (`devices`) to equal the length of "
          "its second argument (`axis_names`), but got devices.ndim == 2 and "
          "len(axis_names) == 1."),
      raises<sp::ShardingError>(
          "mesh_duplicate_names", [] { sp::Mesh(sp::create_device_mesh({4, 2}), {"x", "x"}); },
          "[Mesh] axis names must be unique, got ('x', 'x')"),
      raises<sp::ShardingError>(
          "mesh_unknown_axis_size", [] { mesh42().axis_size("z"); },
          "[Mesh] axis name 'z' is not in the mesh: ('x', 'y')"),
      raises<sp::ShardingError>(
          "shard_map_unknown_axis",
          [] { shard_map_on_mesh42(same, P("z"), P(), sp::ones({8})); },
          "[shard_map] Resource axis: z of P('z',) is not found in mesh: ('x', 'y')."),
      raises<sp::ShardingError>(
          "shard_map_indivisible",
          [] { shard_map_on_mesh42(same, P("x"), P("x"), sp::ones({6})); },
          "[shard_map] shard_map applied to the function '<lambda>' was given argument arrays with "
          "axis sizes that are not evenly divisible by the corresponding mesh axis sizes:\n"
          "\n"
          "The mesh given has shape (4, 2) with corresponding axis names ('x', 'y').\n"
          "\n"
          "the passed args[0] of shape float32[6] corresponds to in_specs of value P('x',), which "
          "maps array axis 0 (of size 6) to mesh axis 'x' (of size 4), but 4 does not evenly "
          "divide 6\n"
          "\n"
          "Array arguments' axis sizes must be evenly divisible by the mesh axis or axes indicated "
          "by the corresponding elements of the argument's in_specs entry. Consider checking that "
          "in_specs are correct, and if so consider changing the mesh axis sizes or else padding "
          "the input and adapting '<lambda>' appropriately."),
      raises<sp::ShardingError>(
          "shard_map_spec_longer_than_rank",
          [] { shard_map_on_mesh42(same, P("x", "y"), P("x"), sp::ones({8})); },
          "[shard_map] shard_map applied to the function '<lambda>' was given an in_specs entry "
          "which is too long to be compatible with the corresponding input value from the "
          "function:\n"
          "\n"
          "in_specs is P('x', 'y') which has length 2, but the passed args[0] has shape "
          "float32[8], which has rank 1 (and 1 < 2)\n"
          "\n"
          "Entries in in_specs must be of length no greater than the number of axes in the "
          "corresponding input value.\n"
          "\n"
          "Either revise the spec to be shorter, or modify '<lambda>' so that its inputs have "
          "sufficient rank."),
      raises<sp::ShardingError>(
          "shard_map_out_spec_unknown_axis",
          [] { shard_map_on_mesh42(same, P("x"), P("z"), sp::ones({8})); },
          "[shard_map] Resource axis: z of P('z',) is not found in mesh: ('x', 'y')."),
      raises<sp::NameError>(
          "psum_outside_any_map", [] { sp::psum(sp::ones({2}), "i"); },
          "[psum] unbound axis name: i"),
      raises<sp::NameError>(
          "psum_over_axis_the_mesh_lacks",
          [] { shard_map_on_mesh42(psum_over_z, P("x"), P(), sp::ones({8})); },
          "[psum] Found an unbound axis name: z. To fix this, please call psum under "
          "`sp::shard_map`."),
      raises<sp::ShardingError>(
          "named_sharding_empty_mesh", [] { sp::NamedSharding(sp::Mesh(), P()); },
          "[NamedSharding] NamedSharding requires a non-empty mesh. Got Mesh()"),
      raises<sp::ValueError>(
          "shard_map_empty_mesh", [] { sp::shard_map(same, sp::Mesh(), P(), P())(sp::ones({2})); },
          "[shard_map] shard_map requires a non-empty mesh. Got Mesh()"),
      raises<sp::ShardingError>(
          "make_mesh_negative_dim", [] { sp::make_mesh({-1, 2}, {"x", "y"}); },
          "[make_mesh] every mesh axis needs at least one device, got mesh shape (-1, 2)"),
      raises<sp::ShardingError>(
          "create_device_mesh_two_negative_dims", [] { sp::create_device_mesh({-2, -4}); },
          "[create_device_mesh] every mesh axis needs at least one device, got mesh shape (-2, -4)"),
      raises<sp::ShardingError>(
          "auto_axes_axis_the_mesh_lacks",
          [] { sp::auto_axes(same, {"z"}, sp::NamedSharding(mesh42(), P("x")))(sp::ones({8})); },
          "[auto_axes] axis name 'z' is not in the mesh: ('x', 'y')"),
      raises<sp::ShardingError>(
          "visualize_rank_3", [] { sp::sharding_to_string(sp::ones({2, 2, 2})); },
          "[visualize_sharding] `visualize_sharding` only works for shapes with 1 and 2 "
          "dimensions. Got shape (2, 2, 2); pass VisualizeOptions::dims to draw two of its dims."),
  };
}

std::vector<HostileRow> file_rows() {
  return {
      raises<sp::IOError>(
          "load_npy_missing", [] { sp::load_npy(file("missing.npy")); },
          "[load_npy] '" + file("missing.npy") +
          "': cannot open for reading: No such file or directory"),
      raises<sp::IOError>(
          "load_npy_directory", [] { sp::load_npy(file_dir()); },
          "[load_npy] '" + file_dir() + "': is a directory"),
      raises<sp::IOError>(
          "load_npy_wrong_magic", [] { sp::load_npy(file("text.npy")); },
          "[load_npy] '" + file("text.npy") + "': not a .npy file (bad magic string)"),
      raises<sp::IOError>(
          "load_npy_truncated_data", [] { sp::load_npy(file("truncated.npy")); },
          "[load_npy] '" + file("truncated.npy") +
          "': data size mismatch: shape (2, 3) of int32 needs 24 bytes, the file has 20"),
      raises<sp::IOError>(
          "load_npy_truncated_header", [] { sp::load_npy(file("header_cut.npy")); },
          "[load_npy] '" + file("header_cut.npy") + "': header length 118 exceeds the file"),
      raises<sp::IOError>(
          "load_npy_of_an_archive", [] { sp::load_npy(file("good.npz")); },
          "[load_npy] '" + file("good.npz") +
          "': not a .npy file (it is a zip archive; use load_npz)"),
      raises<sp::IOError>(
          "load_npz_missing", [] { sp::load_npz(file("missing.npz")); },
          "[load_npz] '" + file("missing.npz") +
          "': cannot open for reading: No such file or directory"),
      raises<sp::IOError>(
          "load_npz_of_an_npy", [] { sp::load_npz(file("good.npy")); },
          "[load_npz] '" + file("good.npy") +
          "': not a zip archive (it is a .npy file; use load_npy)"),
      raises<sp::IOError>(
          "load_npz_truncated", [] { sp::load_npz(file("truncated.npz")); },
          "[load_npz] '" + file("truncated.npz") +
          "': not a zip archive (no end of central directory record)"),
      raises<sp::IOError>(
          "save_npy_missing_directory",
          [] { sp::save_npy(file("no/such/dir.npy"), sp::ones({2})); },
          "[save_npy] '" + file("no/such/dir.npy") +
          "': cannot open for writing: No such file or directory"),
      raises<sp::ValueError>(
          "save_npy_empty_handle", [] { sp::save_npy(file("x.npy"), Array()); },
          "[save_npy] the array is an empty Array handle"),
  };
}

std::vector<HostileRow> random_rows() {
  return {
      raises<sp::TypeError>(
          "split_key_of_three", [] { sp::random::split(sp::array<uint32_t>({1, 2, 3})); },
          "[random.split] expected a key array of shape (2,) and dtype uint32, got an array of "
          "shape (3,) and dtype uint32"),
      raises<sp::TypeError>(
          "split_float_key", [] { sp::random::split(sp::ones({2})); },
          "[random.split] expected a key array of shape (2,) and dtype uint32, got an array of "
          "shape (2,) and dtype float32"),
      raises<sp::TypeError>(
          "bits_key_of_shape_2x2", [] { sp::random::bits(sp::ones({2, 2}, sp::uint32)); },
          "[random.bits] expected a key array of shape (2,) and dtype uint32, got an array of "
          "shape (2, 2) and dtype uint32"),
      raises<sp::TypeError>(
          "uniform_key_of_shape_1", [] { sp::random::uniform(sp::array<uint32_t>({1})); },
          "[random.uniform] expected a key array of shape (2,) and dtype uint32, got an array of "
          "shape (1,) and dtype uint32"),
      raises<sp::ValueError>(
          "bits_float_dtype", [] { sp::random::bits(sp::random::key(0), {2}, sp::float32); },
          "[random.bits] dtype argument must be an unsigned int dtype, got float32"),
      raises<sp::ValueError>(
          "uniform_int_dtype", [] { sp::random::uniform(sp::random::key(0), {2}, sp::int32); },
          "[random.uniform] dtype argument must be a float dtype, got int32"),
      raises<sp::TypeError>(
          "randint_float_dtype",
          [] { sp::random::randint(sp::random::key(0), {2}, 0, 5, sp::float32); },
          "[random.randint] randint only accepts integer dtypes, got float32"),
      raises<sp::ValueError>(
          "split_negative_num", [] { sp::random::split(sp::random::key(0), -1); },
          "[random.split] num must be non-negative, got -1"),
      raises<sp::AxisError>(
          "permutation_axis_out_of_range",
          [] { sp::random::permutation(sp::random::key(0), sp::ones({3}), 1); },
          "[random.permutation] axis 1 is out of bounds for array of dimension 1"),
      raises<sp::ValueError>(
          "normal_negative_dim", [] { sp::random::normal(sp::random::key(0), {-1}); },
          "[random.normal] shape dimensions must be non-negative, got (-1,)"),
  };
}

Array twice(const Array& x) {
  return x * 2.0f;
}

// A jitted function that calls itself with the arguments it was called with.
Array jit_calling_itself(const Array& x) {
  auto self = std::make_shared<std::function<Array(const Array&)>>();
  auto jitted = sp::jit([self](const Array& y) { return (*self)(y); });
  *self = [&jitted](const Array& y) { return jitted(y); };
  return jitted(x);
}

// sin with a fwd rule whose primal output is `wrong_out` and a bwd rule passing cotangents on.
std::function<Array(const Array&)> custom_vjp_fwd_of(const Array& wrong_out) {
  return sp::custom_vjp([](const Array& x) { return sp::sin(x); },
                        [wrong_out](const Array& x) { return std::make_pair(wrong_out, x); },
                        [](const Array&, const Array& ct) { return std::make_tuple(ct); });
}

std::vector<HostileRow> transform_rows() {
  return {
      raises<sp::ValueError>(
          "vmap_in_axis_out_of_range", [] { sp::vmap(twice, {.in_axes = {2}})(sp::zeros({8, 3})); },
          "[vmap] vmap was requested to map its argument along axis 2, which implies that its rank "
          "should be at least 3, but is only 2 (its shape is (8, 3))"),
      raises<sp::ValueError>(
          "vmap_inconsistent_sizes",
          [] { sp::vmap(sp::add)(sp::ones({3}), sp::ones({4})); },
          "[vmap] vmap got inconsistent sizes for array axes to be mapped:\n"
          "  * one axis had size 3: axis 0 of argument 0 of type float32(3,);\n"
          "  * one axis had size 4: axis 0 of argument 1 of type float32(4,)"),
      raises<sp::TypeError>(
          "grad_of_non_scalar_output", [] { sp::grad(twice)(sp::ones({3})); },
          "[grad] Gradient only defined for scalar-output functions. Output had shape: (3,)."),
      raises<sp::TypeError>(
          "grad_of_integer_input",
          [] { sp::grad([](const Array& x) { return sp::sum(x); })(sp::arange(3)); },
          "[grad] grad requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
          "np.inexact), but got int32. If you want to use Boolean- or integer-valued inputs, use "
          "vjp or set allow_int to True."),
      raises<sp::TypeError>(
          "grad_of_integer_output",
          [] { sp::grad([](const Array& x) { return sp::sum(x).astype(sp::int32); })(sp::ones({3})); },
          "[grad] grad requires real-valued outputs (output dtype that is a sub-dtype of "
          "np.floating), but got int32. For differentiation of functions with integer outputs, use "
          "jax.vjp directly."),
      raises<sp::TypeError>(
          "grad_of_two_outputs",
          [] { sp::grad([](const Array& x) { return std::vector<Array>{sp::sum(x), sp::sum(x)}; })(sp::ones({3})); },
          "[grad] Gradient only defined for scalar-output functions. Output was PyTreeDef([*, *]), "
          "not a single Array."),
      raises<sp::TypeError>(
          "value_and_grad_of_no_output",
          [] { sp::value_and_grad([](const Array&) { return std::vector<Array>{}; })(sp::ones({3})); },
          "[value_and_grad] Gradient only defined for scalar-output functions. Output was "
          "PyTreeDef([]), not a single Array."),
      raises<sp::TypeError>(
          "grad_argnums_past_the_arguments",
          [] { sp::grad([](const Array& x) { return sp::sum(x); }, {.argnums = {1}})(sp::ones({3})); },
          "[grad] differentiating with respect to argnums=1 requires at least 2 positional "
          "arguments to be passed by the caller, but got only 1 positional arguments."),
      raises<sp::ValueError>(
          "vmap_out_axis_out_of_range", [] { sp::vmap(twice, {.out_axes = {2}})(sp::zeros({8, 3})); },
          "[vmap] axis 2 is out of bounds for array of dimension 2"),
      raises<sp::ValueError>(
          "vmap_negative_out_axis_out_of_range", [] { sp::vmap(twice, {.out_axes = {-3}})(sp::zeros({8, 3})); },
          "[vmap] axis -3 is out of bounds for array of dimension 2"),
      raises<sp::ValueError>(
          "vmap_axis_size_disagrees", [] { sp::vmap(twice, {.axis_size = 5})(sp::zeros({4, 3})); },
          "[vmap] vmap got inconsistent sizes for array axes to be mapped:\n"
          "  * the `axis_size` argument was 5;\n"
          "  * one axis had size 4: axis 0 of argument 0 of type float32(4, 3)"),
      raises<sp::ValueError>(
          "vmap_negative_axis_size", [] { sp::vmap(twice, {.in_axes = {sp::None}, .axis_size = -1})(sp::zeros({4})); },
          "[vmap] axis_size must be non-negative, got -1"),
      raises<sp::ValueError>(
          "jit_static_argnums_out_of_range", [] { sp::jit(twice, {.static_argnums = {3}})(sp::ones({3})); },
          "[jit] Jitted function has static_argnums=(3,), but only accepts 1 positional arguments."),
      raises<sp::ValueError>(
          "jit_static_argnums_of_an_array", [] { sp::jit(twice, {.static_argnums = {0}})(sp::ones({3})); },
          "[jit] Non-hashable static arguments are not supported: static_argnums names argument 0, "
          "which holds an Array of type f32[3]. Arrays are traced; arguments that are not Arrays "
          "are always static."),
      raises<sp::RuntimeError>(
          "jit_calls_itself", [] { jit_calling_itself(sp::ones({3})); },
          "[jit] Recursively calling jit: the function calls itself with the signature it is being "
          "traced for, so its trace would never end. Make the value that ends the recursion a "
          "static argument."),
      raises<sp::TypeError>(
          "custom_vjp_fwd_output_shape",
          [] { sp::grad([](const Array& x) { return sp::sum(custom_vjp_fwd_of(sp::ones({4}))(x)); })(sp::ones({3})); },
          "[custom_vjp] Custom VJP fwd rule <lambda> for function <lambda> must produce a pair (list "
          "or tuple of length two) where the first element represents the primal output (equal to "
          "the output of the custom_vjp-decorated function <lambda>) and the second element "
          "represents residuals (i.e. values stored from the forward pass for use on the backward "
          "pass), but instead the fwd rule output's first element had shapes/dtypes of:\n"
          "    f32[4]\n"
          "while the custom_vjp-decorated function <lambda> had output shapes/dtypes of:\n"
          "    f32[3]"),
      raises<sp::TypeError>(
          "custom_vjp_fwd_output_tree",
          [] {
            auto f = sp::custom_vjp([](const Array& x) { return sp::sin(x); },
                                    [](const Array& x) { return std::make_pair(std::make_tuple(x, x), x); },
                                    [](const Array&, const Array& ct) { return std::make_tuple(ct); });
            sp::grad([&](const Array& x) { return sp::sum(f(x)); })(sp::ones({3}));
          },
          "[custom_vjp] Custom VJP fwd rule <lambda> for function <lambda> must produce a pair (list "
          "or tuple of length two) where the first element represents the primal output (equal to "
          "the output of the custom_vjp-decorated function <lambda>) and the second element "
          "represents residuals (i.e. values stored from the forward pass for use on the backward "
          "pass), but instead the fwd rule output's first element had container/pytree "
          "structure:\n"
          "    PyTreeDef((*, *))\n"
          "while the custom_vjp-decorated function <lambda> had output container/pytree "
          "structure:\n"
          "    PyTreeDef(*)."),
  };
}

// Loops whose bodies, lengths or bounds do not fit.
std::vector<HostileRow> control_flow_rows() {
  namespace lax = sp::lax;
  using Carry = std::vector<Array>;
  return {
      raises<sp::ValueError>(
          "scan_xs_of_different_lengths",
          [] { lax::scan([](const Array& c, const std::pair<Array, Array>& x) { return std::make_pair(c, x.first); }, Array(0.f), std::make_pair(sp::ones({5}), sp::ones({4}))); },
          "[scan] scan got values with different leading axis sizes: 5, 4."),
      raises<sp::ValueError>(
          "scan_length_disagrees_with_xs",
          [] { lax::scan([](const Array& c, const Array& x) { return std::make_pair(c, x); }, Array(0.f), sp::ones({5}), 3); },
          "[scan] scan got `length` argument of 3 which disagrees with leading axis sizes [5]."),
      raises<sp::ValueError>(
          "scan_negative_length",
          [] { lax::scan([](const Array& c, const std::tuple<>&) { return std::make_pair(c, c); }, Array(0.f), std::tuple<>(), -2); },
          "[scan] scan got a negative `length` argument: -2."),
      raises<sp::ResourceExhaustedError>(
          "scan_of_2_50_steps_keeping_outputs",
          [] { lax::scan([](const Array& c, const std::tuple<>&) { return std::make_pair(c, c); }, Array(0.f), std::tuple<>(), int64_t(1) << 50); },
          "[scan] RESOURCE_EXHAUSTED: Out of memory keeping the outputs of 1125899906842624 steps."),
      raises<sp::TypeError>(
          "scan_carry_changes_tree",
          [] { lax::scan([](const Carry& c, const Array& x) { return std::make_pair(Carry{c[0], c[0]}, x); }, Carry{Array(0.f)}, sp::ones({3})); },
          "[scan] scan body function carry input and carry output must have the same pytree "
          "structure, but they differ: the input carry is PyTreeDef([*]) but the output carry is "
          "PyTreeDef([*, *]).\n\nRevise the function so that the carry output has the same pytree "
          "structure as the carry input."),
      raises<sp::ValueError>(
          "fori_loop_bounds_past_int32",
          [] { lax::fori_loop(int64_t(1) << 31, (int64_t(1) << 31) + 3, [](const Array& i, const Array&) { return i; }, Array(0)); },
          "[fori_loop] the C++ integer 2147483648 is too large to convert to int32 (enable x64 for "
          "64-bit integers)"),
  };
}


// Shapes no array can have (NumPy's limit: the nonzero dims times the itemsize fit in int64) and
// allocations no machine can give (2^48 float32 elements are 1 PiB).
const std::string kTooBig =
    "array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size, "
    "got shape ";
const std::string kPiB = "RESOURCE_EXHAUSTED: Out of memory allocating 1125899906842624 bytes.";
constexpr int64_t k2_31 = int64_t(1) << 31, k2_32 = int64_t(1) << 32, k2_62 = int64_t(1) << 62;

std::vector<HostileRow> size_rows() {
  return {
      raises<sp::ValueError>(
          "ones_2_62", [] { sp::ones({k2_62}); },
          "[ones] " + kTooBig + "(4611686018427387904,) of float32"),
      raises<sp::ValueError>(
          "zeros_2_32_squared", [] { sp::zeros({k2_32, k2_32}); },
          "[zeros] " + kTooBig + "(4294967296, 4294967296) of float32"),
      raises<sp::ValueError>(
          "zeros_empty_but_too_big", [] { sp::zeros({0, int64_t(1) << 56, int64_t(1) << 56}); },
          "[zeros] " + kTooBig + "(0, 72057594037927936, 72057594037927936) of float32"),
      raises<sp::ValueError>(
          "broadcast_to_2_31_squared", [] { sp::broadcast_to(sp::ones({1}), {k2_31, k2_31}); },
          "[broadcast_to] " + kTooBig + "(2147483648, 2147483648) of float32"),
      raises<sp::ValueError>(
          "arange_2_62_int32", [] { sp::arange(int64_t(0), k2_62, int64_t(1), sp::int32); },
          "[arange] " + kTooBig + "(4611686018427387904,) of int32"),
      raises<sp::ValueError>(
          "arange_float_1e300", [] { sp::arange(0.0, 1e300, 1.0); },
          "[arange] " + kTooBig + "(9223372036854775807,) of float32"),
      raises<sp::ValueError>(
          "iota_2_62", [] { sp::lax::iota(sp::float32, k2_62); },
          "[iota] " + kTooBig + "(4611686018427387904,) of float32"),
      raises<sp::ValueError>(
          "lax_reshape_2_32_squared", [] { sp::lax::reshape(sp::arange(4), {k2_32, k2_32}); },
          "[reshape] " + kTooBig + "(4294967296, 4294967296) of int32"),
      raises<sp::ShapeError>(
          "reshape_2_32_squared", [] { sp::arange(4).reshape({k2_32, k2_32}); },
          "[reshape] cannot reshape array of shape (4,) into shape (4294967296, 4294967296)"),
      raises<sp::ValueError>(
          "random_normal_2_32_squared", [] { sp::random::normal(sp::random::key(0), {k2_32, k2_32}); },
          "[random.normal] " + kTooBig + "(4294967296, 4294967296)"),
      raises<sp::ResourceExhaustedError>(
          "ones_one_pebibyte", [] { sp::ones({int64_t(1) << 48}); },
          "[broadcast_in_dim] " + kPiB + " The array has shape (281474976710656,) and dtype float32."),
      raises<sp::ResourceExhaustedError>(
          "jit_one_pebibyte", [] { sp::jit([](const Array& x) { return sp::broadcast_to(x, {int64_t(1) << 48}); })(sp::ones({1})); },
          "[broadcast_in_dim] " + kPiB + " The array has shape (281474976710656,) and dtype float32."),
  };
}

// Devices that do not exist (the suite runs on 8).
const std::string kEight = "; this process has 8 CPU devices, with ids 0 to 7";
std::string no_device(int id) {
  return "No matching device found for local_device_id " + std::to_string(id) + kEight;
}

std::vector<HostileRow> device_rows() {
  using sp::Device;
  return {
      raises<sp::ValueError>(
          "device_put_id_42", [] { sp::device_put(sp::ones({2}), Device{.id = 42}); },
          "[device_put] CpuDevice(id=42): " + no_device(42)),
      raises<sp::ValueError>(
          "device_put_negative_id", [] { sp::device_put(sp::ones({2}), Device{.id = -1}); },
          "[device_put] CpuDevice(id=-1): " + no_device(-1)),
      raises<sp::ValueError>(
          "pmap_devices_99_100", [] { sp::pmap(same, {.devices = {Device{.id = 99}, Device{.id = 100}}})(sp::ones({2})); },
          "[pmap] CpuDevice(id=99): " + no_device(99)),
      raises<sp::ValueError>(
          "mesh_of_devices_50_51", [] { sp::Mesh({Device{.id = 50}, Device{.id = 51}}, {2}, {"x"}); },
          "[Mesh] CpuDevice(id=50): " + no_device(50)),
      raises<sp::ValueError>(
          "single_device_sharding_8", [] { sp::SingleDeviceSharding(Device{.id = 8}); },
          "[SingleDeviceSharding] CpuDevice(id=8): " + no_device(8)),
      raises<sp::ValueError>(
          "set_cpu_device_count_0", [] { sp::config::set_cpu_device_count(0); },
          "[set_cpu_device_count] expected a device count from 1 to 4096, got 0"),
      raises<sp::ValueError>(
          "set_cpu_device_count_4097", [] { sp::config::set_cpu_device_count(4097); },
          "[set_cpu_device_count] expected a device count from 1 to 4096, got 4097"),
  };
}

// JAX raises TypeError for a function that is not callable ("Expected a callable value, got
// None", "lax.switch: branches argument should be a sequence of callables."); an empty
// std::function or a null function pointer threw std::bad_function_call or crashed.
std::vector<HostileRow> callable_rows() {
  namespace lax = sp::lax;
  return {
      raises<sp::TypeError>(
          "switch_with_an_empty_branch", [] { lax::switch_(Array(1), std::vector<UnaryFn>{same, nullptr}, sp::ones({2})); },
          "[switch] branches argument should be a sequence of callables, got an empty function at index 1"),
      raises<sp::TypeError>(
          "switch_with_a_null_function_pointer", [] { lax::switch_(Array(0), std::vector<Array (*)(const Array&)>{nullptr}, sp::ones({2})); },
          "[switch] branches argument should be a sequence of callables, got an empty function at index 0"),
      raises<sp::TypeError>(
          "cond_with_an_empty_false_fun", [] { lax::cond(Array(true), same, UnaryFn(), sp::ones({2})); },
          "[cond] true_fun and false_fun arguments should be callable, got an empty false_fun"),
      raises<sp::TypeError>(
          "while_loop_with_an_empty_body", [] { lax::while_loop([](const Array& c) { return c < 3; }, UnaryFn(), Array(0)); },
          "[while_loop] body_fun and cond_fun arguments should be callable, got an empty body_fun"),
      raises<sp::TypeError>(
          "fori_loop_with_an_empty_body", [] { lax::fori_loop(0, 3, std::function<Array(const Array&, const Array&)>(), Array(0)); },
          "[fori_loop] body_fun argument should be callable, got an empty function"),
      raises<sp::TypeError>(
          "scan_with_an_empty_body", [] { lax::scan(std::function<std::pair<Array, Array>(const Array&, const Array&)>(), Array(0.f), sp::ones({3})); },
          "[scan] f argument should be a callable, got an empty function"),
      raises<sp::TypeError>(
          "jit_of_an_empty_function", [] { sp::jit(UnaryFn()); },
          "[jit] Expected a callable value, got an empty function"),
      raises<sp::TypeError>(
          "grad_of_an_empty_function", [] { sp::grad(UnaryFn()); },
          "[grad] Expected a callable value, got an empty function"),
      raises<sp::TypeError>(
          "vmap_of_an_empty_function", [] { sp::vmap(UnaryFn()); },
          "[vmap] Expected a callable value, got an empty function"),
      raises<sp::TypeError>(
          "shard_map_of_an_empty_function", [] { sp::shard_map(UnaryFn(), mesh42(), P("x"), P("x")); },
          "[shard_map] Expected a callable value, got an empty function"),
      raises<sp::TypeError>(
          "tree_map_of_an_empty_function", [] { sp::tree_map(UnaryFn(), std::vector<Array>{sp::ones({2})}); },
          "[tree_map] Expected a callable value, got an empty function"),
  };
}

// Other calls that crashed or answered silently: an axis name given twice (JAX: "repeated axis
// in `source` argument", NumPy's error from its moveaxis), a visualisation width that draws
// nothing or a scale that is not a number of lines, padding past int64, printing an empty handle
// and sharding trees nested past Python's recursion limit; file names with a NUL, which the C
// library cut short (Python: "ValueError: embedded null byte").
std::vector<HostileRow> misuse_rows() {
  return {
      raises<sp::ValueError>(
          "psum_over_an_axis_named_twice", [] { shard_map_on_mesh42(psum_over_x_twice, P("x"), P(), sp::ones({8})); },
          "[psum] repeated axis in `axis_name` argument, got ('x', 'x')"),
      raises<sp::ValueError>(
          "all_gather_over_an_axis_named_twice", [] { shard_map_on_mesh42(all_gather_over_y_x_y, P("x"), P(), sp::ones({8})); },
          "[all_gather] repeated axis in `axis_name` argument, got ('y', 'x', 'y')"),
      raises<sp::ValueError>(
          "axis_index_of_an_axis_named_twice", [] { shard_map_on_mesh42(times_axis_index_x_x, P("x"), P("x"), sp::ones({8})); },
          "[axis_index] repeated axis in `axis_name` argument, got ('x', 'x')"),
      raises<sp::ValueError>(
          "visualize_max_width_0", [] { visualize_8_by_4({.max_width = 0}); },
          "[visualize_sharding] expected max_width of at least 1, got 0"),
      raises<sp::ValueError>(
          "visualize_max_width_negative", [] { visualize_8_by_4({.max_width = -5}); },
          "[visualize_sharding] expected max_width of at least 1, got -5"),
      raises<sp::ValueError>(
          "visualize_scale_nan", [] { visualize_8_by_4({.scale = std::nan("")}); },
          "[visualize_sharding] expected a finite scale of at most 1e17, got nan"),
      raises<sp::ValueError>(
          "pad_past_int64", [] { sp::pad(sp::ones({4}), {{int64_t(1) << 62, int64_t(1) << 62}}); },
          "[pad] array is too big; dimension 0 after padding has more than 2^63 - 1 elements, got padding (low=4611686018427387904, high=4611686018427387904, interior=0) of operand shape (4,)"),
      raises<sp::ValueError>(
          "save_npy_to_a_name_with_a_nul", [] { sp::save_npy(file(std::string("a\0b.npy", 7)), sp::ones({2})); },
          "[save_npy] '" + file("a\\0b.npy") + "': embedded null byte"),
      raises<sp::ValueError>(
          "load_safetensors_from_a_name_with_a_nul", [] { sp::load_safetensors(std::string("good\0.npy", 9)); },
          "[load_safetensors] 'good\\0.npy': embedded null byte"),
      raises<sp::ValueError>(
          "print_an_empty_array", [] { sp::str(Array()); },
          "[print] use of an empty Array handle"),
      raises<sp::ValueError>(
          "sharding_tree_1001_levels_deep", [] { sp::ShardingTree t = sp::NamedSharding(mesh42(), P()); for (int k = 0; k < 1001; ++k) t = sp::ShardingTree({t}); },
          "[ShardingTree] expected a tree nested at most 1000 levels deep, got 1001 levels"),
  };
}

// clang-format on

std::vector<HostileRow> all_rows() {
  std::vector<HostileRow> rows;
  for (auto part : {shape_rows, dtype_rows, axis_rows, indexing_rows, matmul_rows, sharding_rows,
                    file_rows, random_rows, transform_rows, control_flow_rows, size_rows,
                    device_rows, callable_rows, misuse_rows}) {
    std::vector<HostileRow> more = part();
    rows.insert(rows.end(), more.begin(), more.end());
  }
  return rows;
}

void write_file(const std::string& name, const std::string& bytes) {
  std::ofstream(file(name), std::ios::binary) << bytes;
}

std::string read_file(const std::string& name) {
  std::ifstream f(file(name), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void PrintTo(const HostileRow& row, std::ostream* os) {
  *os << row.name;
}

class HostileInput : public ::testing::TestWithParam<HostileRow> {
 public:
  // The files the file rows read: a good .npy and .npz, and damaged copies.
  static void SetUpTestSuite() {
    fs::create_directories(file_dir());
    sp::save_npy(file("good.npy"), sp::arange(6).reshape({2, 3}));
    sp::save_npz(file("good.npz"), {{"a", sp::arange(6)}});
    const std::string npy = read_file("good.npy"), npz = read_file("good.npz");
    write_file("text.npy", "this is not a NumPy file at all");
    write_file("truncated.npy", npy.substr(0, npy.size() - 4));
    write_file("header_cut.npy", npy.substr(0, 40));
    write_file("truncated.npz", npz.substr(0, npz.size() - 10));
  }
  static void TearDownTestSuite() { fs::remove_all(file_dir()); }
};

TEST_P(HostileInput, RaisesTheExpectedErrorAndMessage) {
  const HostileRow& row = GetParam();
  try {
    row.call();
  } catch (const std::exception& e) {
    EXPECT_EQ(type_name(typeid(e)), type_name(*row.error));
    EXPECT_EQ(std::string(e.what()), row.message);
    return;
  }
  ADD_FAILURE() << "no error raised";
}

INSTANTIATE_TEST_SUITE_P(Api, HostileInput, ::testing::ValuesIn(all_rows()),
                         [](const ::testing::TestParamInfo<HostileRow>& info) {
                           return info.param.name;
                         });

}  // namespace
