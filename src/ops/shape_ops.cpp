// jnp and lax shape functions: reshape, transpose, broadcasting, squeeze/expand_dims, joining and
// splitting, flip, pad, tile, repeat, roll and the triangles. Each validates in the user's terms,
// then lowers to the shape primitives the way jax.numpy does, so traced programs match JAX's.
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ops/op_util.h"
#include "sharding/type_sharding.h"

#include <algorithm>
#include <numeric>

namespace spmd {
namespace {

std::string shapes_str(const std::vector<Array>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + xs[i].shape().str();
  return s;
}

std::vector<int64_t> identity_perm(int n) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  return perm;
}

// `s` with the size of dimension `axis` replaced.
Shape with_dim(Shape s, int axis, int64_t size) {
  s[axis] = size;
  return s;
}

std::vector<Array> split_primitive(const Array& x, const std::vector<int64_t>& sizes, int axis) {
  return ops::apply_multi("split", {x}, Params{{"sizes", sizes}, {"axis", int64_t(axis)}});
}

Array atleast_1d(const Array& x) {
  return x.ndim() == 0 ? lax::expand_dims(x, {0}) : x;
}

Array atleast_2d(const Array& x) {
  if (x.ndim() == 0) return lax::expand_dims(x, {0, 1});
  return x.ndim() == 1 ? lax::expand_dims(x, {0}) : x;
}

}  // namespace

// ---- lax ----------------------------------------------------------------------------------------
namespace lax {

Array broadcast_in_dim(const Array& x, const Shape& shape,
                       const std::vector<int64_t>& broadcast_dimensions,
                       const OutSharding& out_sharding_arg) {
  const std::optional<NamedSharding> out_sharding = out_sharding_arg.resolve("broadcast_in_dim");
  Array out = ops::apply(
      "broadcast_in_dim", {x},
      Params{{"shape", shape.dims()},
             {"broadcast_dimensions", broadcast_dimensions},
             {"sharding", ops::out_sharding_value("broadcast_in_dim", out_sharding, shape)}});
  return ops::with_out_sharding(out, out_sharding, {x});
}

Array reshape(const Array& x, const Shape& new_sizes, const OutSharding& out_sharding_arg) {
  const std::optional<NamedSharding> out_sharding = out_sharding_arg.resolve("reshape");
  if (x.ndim() > 0 && x.shape() == new_sizes && !out_sharding) return x;
  Array out =
      ops::apply("reshape", {x},
                 Params{{"new_sizes", new_sizes.dims()},
                        {"dimensions", NoneParam{}},
                        {"sharding", ops::out_sharding_value("reshape", out_sharding, new_sizes)}});
  return ops::with_out_sharding(out, out_sharding, {x});
}

Array transpose(const Array& x, const std::vector<int64_t>& permutation) {
  if (permutation == identity_perm(x.ndim())) return x;
  return ops::apply("transpose", {x}, Params{{"permutation", permutation}});
}

Array squeeze(const Array& x, const std::vector<int64_t>& dimensions) {
  if (dimensions.empty()) return x;
  std::vector<int64_t> dims;
  for (int64_t d : dimensions) dims.push_back(ops::canonicalize_axis("squeeze", int(d), x.ndim()));
  std::sort(dims.begin(), dims.end());
  return ops::apply("squeeze", {x}, Params{{"dimensions", dims}});
}

Array expand_dims(const Array& x, const std::vector<int64_t>& dimensions) {
  const int out_rank = x.ndim() + int(dimensions.size());
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t d : dimensions) {
    const int axis = ops::canonicalize_axis("expand_dims", int(d), out_rank);
    if (inserted[size_t(axis)])
      throw ValueError("[expand_dims] repeated axis in dimensions " +
                       Shape(dimensions.begin(), dimensions.end()).str());
    inserted[size_t(axis)] = true;
  }
  std::vector<int64_t> shape, bdims;
  int k = 0;
  for (int i = 0; i < out_rank; ++i) {
    if (inserted[size_t(i)]) {
      shape.push_back(1);
    } else {
      shape.push_back(x.shape()[k++]);
      bdims.push_back(i);
    }
  }
  return broadcast_in_dim(x, Shape(shape), bdims);
}

Array rev(const Array& x, const std::vector<int64_t>& dimensions) {
  return ops::apply("rev", {x}, Params{{"dimensions", dimensions}});
}

Array concatenate(const std::vector<Array>& xs, int64_t dimension) {
  if (xs.empty()) throw ValueError("[concatenate] requires a non-empty sequence of arrays");
  if (xs.size() == 1) return xs[0];
  const int64_t dim = ops::canonicalize_axis("concatenate", int(dimension), xs[0].ndim());
  return ops::apply("concatenate", xs, Params{{"dimension", dim}});
}

Array pad(const Array& x, const Array& padding_value, const std::vector<PadConfig>& config) {
  return ops::apply("pad", {x, padding_value}, Params{{"padding_config", config}});
}

}  // namespace lax

Array ops::broadcast_in_dim(const Array& x, const Shape& shape, const std::vector<int64_t>& dims,
                            const std::optional<TypeSharding>& sharding) {
  ParamValue given = NoneParam{};
  if (sharding) given = object_param(*sharding);
  return ops::apply(
      "broadcast_in_dim", {x},
      Params{
          {"shape", shape.dims()}, {"broadcast_dimensions", dims}, {"sharding", std::move(given)}});
}

Array ops::reshape(const Array& x, const Shape& new_sizes,
                   const std::optional<TypeSharding>& sharding) {
  if (!sharding) return lax::reshape(x, new_sizes);
  return ops::apply("reshape", {x},
                    Params{{"new_sizes", new_sizes.dims()},
                           {"dimensions", NoneParam{}},
                           {"sharding", object_param(*sharding)}});
}

// ---- jnp: reshape and transpose
// -------------------------------------------------------------------
Array reshape(const Array& x, const Shape& new_shape, const OutSharding& out_sharding_arg) {
  const std::optional<NamedSharding> out_sharding = out_sharding_arg.resolve("reshape");
  std::vector<int64_t> dims = new_shape.dims();
  auto fail = [&](const std::string& why) -> Array {
    throw ShapeError("[reshape] cannot reshape array of shape " + x.shape().str() + " into shape " +
                     new_shape.str() + why);
  };
  int64_t known = 1;
  bool overflow = false;  // the known sizes multiply past int64: no array has that many elements
  int unknown = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1 && unknown >= 0)
      throw ValueError("[reshape] can only specify one unknown axis size with a `-1` value, got " +
                       new_shape.str());
    if (dims[i] == -1) {
      unknown = int(i);
    } else if (dims[i] < 0) {
      throw ValueError("[reshape] negative dimensions are not allowed, got shape " +
                       new_shape.str());
    } else {
      overflow |= __builtin_mul_overflow(known, dims[i], &known);
    }
  }
  if (overflow && std::find(dims.begin(), dims.end(), 0) != dims.end()) {
    known = 0;
  } else if (overflow) {
    return fail("");
  }
  if (unknown >= 0) {
    if (known == 0 || x.size() % known != 0)
      return fail(" because the product of the specified axis sizes (" + std::to_string(known) +
                  ") does not evenly divide " + std::to_string(x.size()));
    dims[size_t(unknown)] = x.size() / known;
  } else if (known != x.size()) {
    return fail("");
  }
  return lax::reshape(x, Shape(dims), out_sharding);
}

Array ravel(const Array& x) {
  return lax::reshape(x, Shape{x.size()});
}

Array transpose(const Array& x, const Axes& axes) {
  std::vector<int64_t> perm;
  if (axes.empty()) {
    for (int i = x.ndim() - 1; i >= 0; --i) perm.push_back(i);
  } else {
    if (int(axes.size()) != x.ndim())
      throw ValueError("[transpose] axes don't match array: got " + std::to_string(axes.size()) +
                       " axes for an array of dimension " + std::to_string(x.ndim()));
    for (int a : axes) perm.push_back(ops::canonicalize_axis("transpose", a, x.ndim()));
  }
  return lax::transpose(x, perm);
}

Array swapaxes(const Array& x, int axis1, int axis2) {
  std::vector<int64_t> perm = identity_perm(x.ndim());
  std::swap(perm[size_t(ops::canonicalize_axis("swapaxes", axis1, x.ndim()))],
            perm[size_t(ops::canonicalize_axis("swapaxes", axis2, x.ndim()))]);
  return lax::transpose(x, perm);
}

Array moveaxis(const Array& x, int source, int destination) {
  return moveaxis(x, Axes{source}, Axes{destination});
}

Array moveaxis(const Array& x, const Axes& source, const Axes& destination) {
  if (source.size() != destination.size())
    throw ValueError(
        "[moveaxis] source and destination must have the same number of elements, "
        "got " +
        std::to_string(source.size()) + " and " + std::to_string(destination.size()));
  const int n = x.ndim();
  std::vector<std::pair<int64_t, int64_t>> moves;  // (destination, source)
  std::vector<bool> src_seen(size_t(n), false), dst_seen(size_t(n), false);
  for (size_t i = 0; i < source.size(); ++i) {
    const int s = ops::canonicalize_axis("moveaxis", source[i], n);
    const int d = ops::canonicalize_axis("moveaxis", destination[i], n);
    if (src_seen[size_t(s)] || dst_seen[size_t(d)])
      throw ValueError("[moveaxis] repeated axis in source or destination");
    src_seen[size_t(s)] = dst_seen[size_t(d)] = true;
    moves.emplace_back(d, s);
  }
  std::vector<int64_t> perm;
  for (int i = 0; i < n; ++i)
    if (!src_seen[size_t(i)]) perm.push_back(i);
  std::sort(moves.begin(), moves.end());
  for (auto [d, s] : moves) perm.insert(perm.begin() + d, s);
  return lax::transpose(x, perm);
}

// ---- jnp: adding and removing unit dims
// -----------------------------------------------------------
Array expand_dims(const Array& x, const Axes& axes) {
  return lax::expand_dims(x, std::vector<int64_t>(axes.begin(), axes.end()));
}

Array squeeze(const Array& x, const Axes& axes) {
  std::vector<int64_t> dims;
  if (axes.empty()) {
    for (int i = 0; i < x.ndim(); ++i)
      if (x.shape()[i] == 1) dims.push_back(i);
  } else {
    dims = ops::canonicalize_axes("squeeze", axes, x.ndim());
    for (int64_t d : dims)
      if (x.shape()[int(d)] != 1)
        throw ShapeError(
            "[squeeze] cannot select an axis to squeeze out which has size not "
            "equal to one, got shape=" +
            x.shape().str() + " and axis " + std::to_string(d));
  }
  return lax::squeeze(x, dims);
}

// ---- jnp: broadcasting
// ----------------------------------------------------------------------------
Array broadcast_to(const Array& x, const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0)
      throw ValueError("[broadcast_to] shape must have every element be nonnegative, got " +
                       shape.str());
  if (shape.ndim() < x.ndim())
    throw ShapeError(
        "[broadcast_to] cannot broadcast to a shape with fewer dimensions: array "
        "shape " +
        x.shape().str() + ", requested shape " + shape.str());
  return ops::broadcast_to("broadcast_to", x, shape);
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  return ops::broadcast_shapes("broadcast_shapes", {a, b});
}

std::vector<Array> broadcast_arrays(const std::vector<Array>& xs) {
  return ops::broadcast_arrays("broadcast_arrays", xs);
}

// ---- jnp: joining and splitting
// -------------------------------------------------------------------
Array concatenate(const std::vector<Array>& xs, int axis) {
  if (xs.empty()) throw ValueError("[concatenate] need at least one array to concatenate");
  const int rank = xs[0].ndim();
  if (rank == 0) throw ValueError("[concatenate] zero-dimensional arrays cannot be concatenated");
  for (const Array& x : xs)
    if (x.ndim() != rank)
      throw ShapeError(
          "[concatenate] cannot concatenate arrays with different numbers of "
          "dimensions: got " +
          shapes_str(xs));
  const int dim = ops::canonicalize_axis("concatenate", axis, rank);
  for (const Array& x : xs)
    for (int d = 0; d < rank; ++d)
      if (d != dim && x.shape()[d] != xs[0].shape()[d])
        throw ShapeError(
            "[concatenate] cannot concatenate arrays with shapes that differ in "
            "dimensions other than the one being concatenated: concatenating along "
            "dimension " +
            std::to_string(dim) + " for shapes " + shapes_str(xs));
  std::vector<Array> parts = ops::promote_dtypes(xs);
  // Groups of 16 operands per primitive, as jnp does, to bound the operand count.
  constexpr size_t kGroup = 16;
  while (parts.size() > 1) {
    std::vector<Array> next;
    for (size_t i = 0; i < parts.size(); i += kGroup) {
      std::vector<Array> group(parts.begin() + long(i),
                               parts.begin() + long(std::min(parts.size(), i + kGroup)));
      next.push_back(lax::concatenate(group, dim));
    }
    parts = std::move(next);
  }
  return parts[0];
}

Array stack(const std::vector<Array>& xs, int axis) {
  if (xs.empty()) throw ValueError("[stack] need at least one array to stack");
  for (const Array& x : xs)
    if (!(x.shape() == xs[0].shape()))
      throw ShapeError("[stack] all input arrays must have the same shape, got " + shapes_str(xs));
  const int dim = ops::canonicalize_axis("stack", axis, xs[0].ndim() + 1);
  return ops::apply("stack", ops::promote_dtypes(xs), Params{{"axis", int64_t(dim)}});
}

Array hstack(const std::vector<Array>& xs) {
  if (xs.empty()) throw ValueError("[hstack] need at least one array to concatenate");
  std::vector<Array> parts;
  for (const Array& x : xs) parts.push_back(atleast_1d(x));
  return concatenate(parts, parts[0].ndim() == 1 ? 0 : 1);
}

Array vstack(const std::vector<Array>& xs) {
  if (xs.empty()) throw ValueError("[vstack] need at least one array to concatenate");
  std::vector<Array> parts;
  for (const Array& x : xs) parts.push_back(atleast_2d(x));
  return concatenate(parts, 0);
}

std::vector<Array> split(const Array& x, int n, int axis) {
  if (x.ndim() == 0) throw ValueError("[split] cannot split a zero-dimensional array");
  const int dim = ops::canonicalize_axis("split", axis, x.ndim());
  if (n <= 0)
    throw ValueError("[split] number of sections must be larger than 0, got " + std::to_string(n));
  const int64_t size = x.shape()[dim];
  if (size % n != 0)
    throw ShapeError("[split] array split does not result in an equal division: an axis of size " +
                     std::to_string(size) + " cannot be split into " + std::to_string(n) +
                     " sections (rest is " + std::to_string(size % n) + ")");
  return split_primitive(x, std::vector<int64_t>(size_t(n), size / n), dim);
}

std::vector<Array> split(const Array& x, const std::vector<int64_t>& indices, int axis) {
  if (x.ndim() == 0) throw ValueError("[split] cannot split a zero-dimensional array");
  const int dim = ops::canonicalize_axis("split", axis, x.ndim());
  const int64_t size = x.shape()[dim];
  std::vector<int64_t> sizes;
  int64_t prev = 0;
  for (size_t i = 0; i <= indices.size(); ++i) {
    const int64_t next = i < indices.size() ? indices[i] : size;
    if (next < prev || next > size)
      throw ValueError("[split] split indices must be nondecreasing and within [0, " +
                       std::to_string(size) + "], got " + std::to_string(next) + " after " +
                       std::to_string(prev));
    sizes.push_back(next - prev);
    prev = next;
  }
  return split_primitive(x, sizes, dim);
}

// ---- jnp: reordering and padding
// ------------------------------------------------------------------
Array flip(const Array& x, const Axes& axes) {
  return lax::rev(x, ops::canonicalize_axes("flip", axes, x.ndim()));
}

Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& pad_width,
          const Array& constant_value) {
  const size_t rank = size_t(x.ndim());
  if (pad_width.size() != rank && pad_width.size() != 1)
    throw ValueError(
        "[pad] pad_width must have one (before, after) pair per dimension or a "
        "single pair for all, got " +
        std::to_string(pad_width.size()) + " pairs for an array of shape " + x.shape().str());
  if (constant_value.ndim() != 0)
    throw ShapeError("[pad] constant_value must be a scalar, got shape " +
                     constant_value.shape().str());
  std::vector<lax::PadConfig> config;
  for (size_t d = 0; d < rank; ++d) {
    auto [before, after] = pad_width.size() == 1 ? pad_width[0] : pad_width[d];
    if (before < 0 || after < 0)
      throw ValueError("[pad] index can't contain negative values, got (" + std::to_string(before) +
                       ", " + std::to_string(after) + ")");
    config.push_back({before, after, 0});
  }
  return lax::pad(x, ops::convert(constant_value, x.dtype(), x.weak_type()), config);
}

Array tile(const Array& x, const std::vector<int64_t>& reps) {
  for (int64_t r : reps)
    if (r < 0) throw ValueError("[tile] reps must be nonnegative, got " + std::to_string(r));
  std::vector<int64_t> full(reps);
  if (int(full.size()) < x.ndim()) full.insert(full.begin(), size_t(x.ndim()) - full.size(), 1);
  Array a = x;
  if (int(full.size()) > x.ndim()) {
    std::vector<int64_t> lead(full.size() - size_t(x.ndim()));
    std::iota(lead.begin(), lead.end(), 0);
    a = lax::expand_dims(x, lead);
  }
  return ops::apply("tile", {a}, Params{{"reps", full}});
}

Array repeat(const Array& x, int64_t repeats, std::optional<int> axis) {
  if (repeats < 0)
    throw ValueError("[repeat] repeats must be nonnegative, got " + std::to_string(repeats));
  Array a = axis ? x : ravel(x);
  const int dim = axis ? ops::canonicalize_axis("repeat", *axis, x.ndim()) : 0;
  // (…, n, …) → (…, n, repeats, …) by broadcasting, then merge the two dims.
  std::vector<int64_t> shape, bdims;
  for (int d = 0; d < a.ndim(); ++d) {
    bdims.push_back(int64_t(shape.size()));
    shape.push_back(a.shape()[d]);
    if (d == dim) shape.push_back(repeats);
  }
  Array b = lax::broadcast_in_dim(a, Shape(shape), bdims);
  return lax::reshape(b, with_dim(a.shape(), dim, a.shape()[dim] * repeats));
}

Array roll(const Array& x, int64_t shift, std::optional<int> axis) {
  if (!axis) return lax::reshape(roll(ravel(x), shift, 0), x.shape());
  const int dim = ops::canonicalize_axis("roll", *axis, x.ndim());
  const int64_t n = x.shape()[dim];
  if (n == 0) return x;
  const int64_t i = ((-shift) % n + n) % n;
  return lax::concatenate({lax::slice_in_dim(x, i, n, 1, dim), lax::slice_in_dim(x, 0, i, 1, dim)},
                          dim);
}

// ---- jnp: triangles -----------------------------------------------------------------------------
namespace {

// Where row + k >= column over the last two dims of x, broadcast to x's shape.
Array lower_mask(const char* api, const Array& x, int64_t k) {
  if (x.ndim() < 2)
    throw ValueError(ops::prefix(api) + "argument must be at least 2-D, got shape " +
                     x.shape().str());
  const int r = x.ndim();
  const Shape plane{x.shape()[r - 2], x.shape()[r - 1]};
  Array rows = lax::broadcasted_iota(int32, plane, 0);
  Array cols = lax::broadcasted_iota(int32, plane, 1);
  Array mask = greater_equal(add(rows, ops::scalar(double(k), int32)), cols);
  if (r == 2) return mask;
  return lax::broadcast_in_dim(mask, x.shape(), {r - 2, r - 1});
}

Array zeros_as(const Array& x) {
  return lax::broadcast_in_dim(ops::scalar(0, x.dtype()), x.shape(), {});
}

}  // namespace

Array tril(const Array& x, int64_t k) {
  return lax::select_n(lower_mask("tril", x, k), {zeros_as(x), x});
}

Array triu(const Array& x, int64_t k) {
  return lax::select_n(lower_mask("triu", x, k - 1), {x, zeros_as(x)});
}

}  // namespace spmd
