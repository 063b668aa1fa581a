// In-process collectives: a rendezvous over shared memory between the device threads of a launch.
// Each collective is an Op record on the channel of its group; members publish their buffers in
// it (small inputs as copies) and wait until all arrived. With copied inputs each member then
// computes its own output; otherwise the members claim pieces of the copying or reducing, done
// straight from their peers' buffers, and wait until every piece is finished.
#include "runtime/communicator.h"

#include "backends/cpu/clones.h"
#include "backends/cpu/poll.h"
#include "core/env.h"
#include "runtime/devices.h"
#include "runtime/fault_injection.h"
#include "runtime/mpi.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>

#include <spmd/config.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <unistd.h>

namespace spmd::runtime {
namespace {
// The largest values the environment may give: a day, and a second of polling.
constexpr int64_t kMaxCollectiveTimeoutMs = int64_t(24) * 3600 * 1000;
constexpr int64_t kMaxPollUs = 1000000;
}  // namespace

std::chrono::milliseconds default_collective_timeout() {
  // Never destroyed: a device thread may still launch while the process exits.
  static const CachedEnvInt& timeout =
      *new CachedEnvInt("SPMD_COLLECTIVE_TIMEOUT_MS", 1, kMaxCollectiveTimeoutMs);
  return std::chrono::milliseconds(timeout.get().value_or(60000));
}

namespace {

using Byte = unsigned char;

enum class Kind { all_reduce, all_gather, reduce_scatter, all_to_all, permute, barrier };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::all_reduce:
      return "all_reduce";
    case Kind::all_gather:
      return "all_gather";
    case Kind::reduce_scatter:
      return "reduce_scatter";
    case Kind::all_to_all:
      return "all_to_all";
    case Kind::permute:
      return "permute";
    case Kind::barrier:
      return "barrier";
  }
  return "?";
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

// What a member asks for; every member of a collective must ask for the same.
struct Params {
  Kind kind = Kind::barrier;
  std::string api;
  ReduceOp op = ReduceOp::sum;
  DType dtype = DType::float32;
  Shape shape;
  int axis = 0;         // all_gather axis, reduce_scatter dim, all_to_all split axis
  int concat_axis = 0;  // all_to_all
  bool tiled = false;   // all_gather
  std::vector<std::pair<int, int>> perm;
  bool shared = false;  // one result buffer for the group (all_reduce_shared, all_gather_shared)
};

// A member's share of a meeting: per operand (a combined collective has several, each its own
// collective of the same kind) its buffers and what it asks for.
struct Member {
  std::vector<const void*> in;
  std::vector<void*> out;
  std::unique_ptr<unsigned char[]> staged;  // a copy of the inputs, back to back, when small
  std::vector<Params> params;
};

// One collective on one group: the k-th call of every member. `ready`, `failed` and `done`
// are written under the channel's lock and may be polled without it.
struct Op {
  explicit Op(size_t n) : members(n), arrived_flags(n, false) {}
  std::vector<Member> members;
  std::vector<bool> arrived_flags;
  int arrived = 0;
  int departed = 0;
  std::atomic<int64_t> next_piece{0};  // the next piece of the work to claim
  std::atomic<int64_t> finished{0};    // pieces done
  std::atomic<bool> ready{false};
  std::atomic<bool> failed{false};
  std::string error;         // without the "[api] " prefix, which is each thrower's own
  bool peer_failed = false;  // the error is another device's failure (Communicator::abort)
  std::vector<std::shared_ptr<Buffer>> shared_out;  // per operand, the group's one result
  std::mutex piece_mu;                 // guards piece_error
  std::exception_ptr piece_error;      // the first error a piece of the work threw

  void set_error(std::string e, bool because_peer_failed = false) {
    error = std::move(e);
    peer_failed = because_peer_failed;
    failed.store(true, std::memory_order_release);
    fault::wake_stalls();  // a stall injected in front of this collective ends now
  }
};

// The state of one group (an ordered list of ranks): its own lock, so disjoint groups never
// contend, and its per-member call counters that match the k-th calls.
struct Channel {
  std::vector<int> ranks;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint64_t> next_seq;
  std::map<uint64_t, std::shared_ptr<Op>> ops;
};

std::string id_list(const std::vector<int>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

std::string params_str(const Params& p, const std::string& field) {
  if (field == "operation")
    return p.api + " (" + kind_name(p.kind) + (p.shared ? ", one shared result" : "") + ")";
  if (field == "reduction") return op_name(p.op);
  if (field == "dtype") return std::string(dtype_name(p.dtype));
  if (field == "shape") return p.shape.str();
  if (field == "axis") return std::to_string(p.axis);
  if (field == "concat axis") return std::to_string(p.concat_axis);
  if (field == "tiled") return p.tiled ? "true" : "false";
  std::string s = "[";
  for (size_t i = 0; i < p.perm.size(); ++i)
    s += (i ? ", (" : "(") + std::to_string(p.perm[i].first) + ", " +
         std::to_string(p.perm[i].second) + ")";
  return s + "]";
}

// The first field in which `b` differs from `a`, or nothing.
std::optional<std::string> first_difference(const Params& a, const Params& b) {
  if (a.kind != b.kind || a.api != b.api || a.shared != b.shared) return "operation";
  if (a.kind == Kind::barrier) return std::nullopt;
  if ((a.kind == Kind::all_reduce || a.kind == Kind::reduce_scatter) && a.op != b.op)
    return "reduction";
  if (a.dtype != b.dtype) return "dtype";
  if (a.shape != b.shape) return "shape";
  if (a.axis != b.axis) return "axis";
  if (a.concat_axis != b.concat_axis) return "concat axis";
  if (a.tiled != b.tiled) return "tiled";
  if (a.perm != b.perm) return "permutation";
  return std::nullopt;
}

// The first field in which member `b`'s operands differ from member `a`'s, and the message's
// words for each side, or nothing.
struct Difference {
  std::string field, a, b;
};
std::optional<Difference> first_difference(const std::vector<Params>& a,
                                           const std::vector<Params>& b) {
  if (a.size() != b.size())
    return Difference{"number of operands", std::to_string(a.size()), std::to_string(b.size())};
  for (size_t k = 0; k < a.size(); ++k)
    if (auto field = first_difference(a[k], b[k])) {
      const std::string operand = a.size() > 1 ? "operand " + std::to_string(k) + "'s " : "";
      return Difference{operand + *field, params_str(a[k], *field), params_str(b[k], *field)};
    }
  return std::nullopt;
}

// ---- element kernels --------------------------------------------------------------------------

template <class T>
constexpr bool kHalf = std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>;

// Arithmetic type of the running reduction: float for the 16-bit floats (rounded to T after
// every step), unsigned for signed integers so sums wrap instead of overflowing.
template <class T>
struct Acc {
  using type = T;
};
template <>
struct Acc<bfloat16_t> {
  using type = float;
};
template <>
struct Acc<float16_t> {
  using type = float;
};
template <class T>
requires(std::is_integral_v<T>&& std::is_signed_v<T>) struct Acc<T> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using AccOf = typename Acc<T>::type;

template <class T>
AccOf<T> load(const T& x) {
  if constexpr (kHalf<T>)
    return float(x);
  else
    return AccOf<T>(x);
}

template <class T>
T store(AccOf<T> a) {
  return T(a);
}

// The float32 sums, the common case, as loops compiled for AVX2 too (the templates below are
// baseline code): out = a + b, and out += b.
SPMD_VECTOR_CLONES void add_f32(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = a[k] + b[k];
}
SPMD_VECTOR_CLONES void accumulate_f32(float* out, const float* b, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] += b[k];
}

template <class T, ReduceOp kOp>
AccOf<T> combine(AccOf<T> a, AccOf<T> b) {
  using A = AccOf<T>;
  if constexpr (std::is_same_v<T, bool>) {
    return kOp == ReduceOp::min ? (a && b) : (a || b);
  } else if constexpr (kOp == ReduceOp::sum) {
    A s = A(a + b);
    if constexpr (kHalf<T>) s = float(T(s));  // round to T after each add, as XLA does
    return s;
  } else if constexpr (std::is_integral_v<T>) {
    // Compare in T: the accumulator of a signed type is unsigned.
    T x = T(a), y = T(b);
    return (kOp == ReduceOp::max ? x > y : x < y) ? a : b;
  } else {
    // NaN wins, as XLA's max/min.
    if (a != a) return a;
    if (b != b) return b;
    return (kOp == ReduceOp::max ? a > b : a < b) ? a : b;
  }
}

// Copies n bytes to dst with non-temporal stores when both are 16-byte aligned: results written
// to other members' outputs are not read again by this core, so streaming them past the cache
// saves the read-for-ownership of every written line (a third of the memory traffic of a large
// all_reduce). The caller issues the store fence (stream_fence) before the rendezvous that
// publishes the data.
void stream_copy(Byte* dst, const Byte* src, size_t n) {
#if defined(__SSE2__)
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % 16 == 0) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm_load_si128(reinterpret_cast<const __m128i*>(src + i)));
    if (i < n) std::memcpy(dst + i, src + i, n - i);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Output runs from this many bytes are written with streaming stores, when the collective as a
// whole writes more than fits in half the last-level cache (below that its outputs stay in the
// cache, where the next kernel reads them faster than from memory).
constexpr int64_t kStreamBytes = int64_t(1) << 20;

bool outputs_exceed_cache(int64_t total_output_bytes) {
  static const int64_t half_cache = [] {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? int64_t(l3) / 2 : int64_t(16) << 20;
  }();
  return total_output_bytes > half_cache;
}

// Inputs up to this size are copied into the collective on arrival, so it completes in one
// rendezvous: every member computes its own output from the copies and leaves without waiting
// for the others to finish reading its buffers.
constexpr int64_t kStagedBytes = int64_t(64) << 10;

// How long a member polls before sleeping: env SPMD_COLLECTIVE_POLL_US (an integer from 0 to
// 1000000; 0 turns polling off), else 50 µs; zero when the launch has more devices than there are
// cores, where a polling member would take the core a peer needs.
std::chrono::microseconds poll_budget(size_t devices) {
  // Read before the core check, so a malformed value raises on every machine.
  const int64_t env = env_int("SPMD_COLLECTIVE_POLL_US", 0, kMaxPollUs).value_or(50);
  if (devices > size_t(config::num_threads())) return std::chrono::microseconds(0);
  return std::chrono::microseconds(env);
}

// How long a member yields its core before sleeping: env SPMD_COLLECTIVE_YIELD_US (an integer from
// 0 to 1000000; 0 turns yielding off), else 2 ms, when the launch has more devices than there are
// cores (where it does not poll); else none. A sleeping member is woken by the last arriver, and
// on an oversubscribed machine the wake-up waits for a core; a yielding one stays runnable, lets
// its peers have the core, and sees the meeting complete at its next turn.
std::chrono::microseconds yield_budget(size_t devices) {
  // Read before the core check, so a malformed value raises on every machine.
  const int64_t env = env_int("SPMD_COLLECTIVE_YIELD_US", 0, kMaxPollUs).value_or(2000);
  if (devices > size_t(config::num_threads())) return std::chrono::microseconds(env);
  return std::chrono::microseconds(0);
}

// Whether [a, a + n) and [b, b + n) share a byte.
bool overlap(const Byte* a, const Byte* b, size_t n) {
  return a < b + n && b < a + n;
}

// For elements [begin, end) of the flat inputs: reduces srcs[0..n) in order, and writes the
// result at `dst_offset` of every dst. A single destination that overlaps no input is reduced
// into directly; otherwise the work goes chunkwise through a small buffer, so a dst may alias
// the caller's own input.
// Spans, so that a caller with one or two buffers passes them from the stack: a small reduction
// between processes does this once per element block, and each allocation counts there.
template <class T, ReduceOp kOp>
void reduce_range(std::span<const Byte* const> srcs, int64_t begin, int64_t end,
                  std::span<Byte* const> dsts, int64_t dst_offset, bool may_stream) {
  using A = AccOf<T>;
  constexpr int64_t kChunk = 2048;
  alignas(64) A acc[kChunk];
  alignas(64) [[maybe_unused]] T res[kChunk];
  const bool stream = may_stream && (end - begin) * int64_t(sizeof(T)) >= kStreamBytes;
  for (int64_t c = begin; c < end; c += kChunk) {
    const int64_t len = std::min(kChunk, end - c);
    const size_t bytes = size_t(len) * sizeof(T);
    Byte* first_dst = dsts[0] + (dst_offset + c - begin) * int64_t(sizeof(T));
    bool direct = sizeof(A) == sizeof(T) && dsts.size() == 1 && !stream;
    // Each element of the first two sources is read before that element of the output is
    // written, so the output may be one of them exactly (a combine in place, as between
    // processes); any other overlap goes through `acc`.
    for (size_t j = 0; j < srcs.size() && direct; ++j) {
      const Byte* src = srcs[j] + c * int64_t(sizeof(T));
      direct = !overlap(first_dst, src, bytes) || (j < 2 && src == first_dst);
    }
    A* out = direct ? reinterpret_cast<A*>(first_dst) : acc;
    const T* s0 = reinterpret_cast<const T*>(srcs[0]) + c;
    size_t next = 1;
    constexpr bool kF32Sum = std::is_same_v<T, float> && kOp == ReduceOp::sum;
    if (srcs.size() > 1) {
      // The first two sources in one pass.
      const T* s1 = reinterpret_cast<const T*>(srcs[1]) + c;
      if constexpr (kF32Sum)
        add_f32(s0, s1, out, len);
      else
        for (int64_t k = 0; k < len; ++k) out[k] = combine<T, kOp>(load(s0[k]), load(s1[k]));
      next = 2;
    } else {
      for (int64_t k = 0; k < len; ++k) out[k] = load(s0[k]);
    }
    for (size_t j = next; j < srcs.size(); ++j) {
      const T* sj = reinterpret_cast<const T*>(srcs[j]) + c;
      if constexpr (kF32Sum)
        accumulate_f32(out, sj, len);
      else
        for (int64_t k = 0; k < len; ++k) out[k] = combine<T, kOp>(out[k], load(sj[k]));
    }
    if (direct) continue;
    // The unsigned accumulator of a signed type has the same bits: copy it as it is.
    const void* result = acc;
    if constexpr (sizeof(A) != sizeof(T)) {
      for (int64_t k = 0; k < len; ++k) res[k] = store<T>(acc[k]);
      result = res;
    }
    for (Byte* d : dsts) {
      Byte* to = d + (dst_offset + c - begin) * int64_t(sizeof(T));
      if (stream)
        stream_copy(to, static_cast<const Byte*>(result), bytes);
      else
        std::memcpy(to, result, bytes);
    }
  }
  if (stream) stream_fence();
}

void reduce_range(ReduceOp op, DType dtype, std::span<const Byte* const> srcs, int64_t begin,
                  int64_t end, std::span<Byte* const> dsts, int64_t dst_offset, bool may_stream) {
  if (begin >= end) return;
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    switch (op) {
      case ReduceOp::sum:
        return reduce_range<T, ReduceOp::sum>(srcs, begin, end, dsts, dst_offset, may_stream);
      case ReduceOp::max:
        return reduce_range<T, ReduceOp::max>(srcs, begin, end, dsts, dst_offset, may_stream);
      case ReduceOp::min:
        return reduce_range<T, ReduceOp::min>(srcs, begin, end, dsts, dst_offset, may_stream);
    }
  });
}

// reduce_range into the one destination `dst`.
void reduce_range(ReduceOp op, DType dtype, std::span<const Byte* const> srcs, int64_t begin,
                  int64_t end, Byte* dst, int64_t dst_offset, bool may_stream) {
  reduce_range(op, dtype, srcs, begin, end, std::span<Byte* const>(&dst, 1), dst_offset,
               may_stream);
}

// The [begin, end) share of `total` items of member `i` of `n`, with boundaries on multiples of
// `align` so members never write the same cache line.
std::pair<int64_t, int64_t> share(int64_t total, int i, int n, int64_t align) {
  int64_t units = (total + align - 1) / align;
  int64_t b = units * i / n * align, e = units * (i + 1) / n * align;
  return {std::min(b, total), std::min(e, total)};
}

int64_t prod(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; ++d) p *= s[d];
  return p;
}

// Copies a block of shape `dims` between two row-major strided layouts (strides in bytes);
// the trailing dims that are contiguous in both become one memcpy.
void copy_block(const Byte* src, const std::vector<int64_t>& src_strides, Byte* dst,
                const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& dims,
                int64_t itemsize, bool may_stream) {
  int nd = int(dims.size());
  int64_t run = itemsize;
  while (nd > 0 && src_strides[nd - 1] == run && dst_strides[nd - 1] == run) run *= dims[--nd];
  for (int64_t d : dims)
    if (d == 0) return;
  std::vector<int64_t> idx(size_t(nd), 0);
  const bool stream = may_stream && run >= kStreamBytes;
  while (true) {
    int64_t so = 0, dof = 0;
    for (int d = 0; d < nd; ++d) so += idx[d] * src_strides[d], dof += idx[d] * dst_strides[d];
    if (stream)
      stream_copy(dst + dof, src + so, size_t(run));
    else
      std::memcpy(dst + dof, src + so, size_t(run));
    int d = nd - 1;
    while (d >= 0 && ++idx[d] == dims[d]) idx[d--] = 0;
    if (d < 0) break;
  }
  if (stream) stream_fence();
}

std::vector<int64_t> byte_strides(const std::vector<int64_t>& dims, int64_t itemsize) {
  std::vector<int64_t> s(dims.size());
  int64_t acc = itemsize;
  for (int d = int(dims.size()) - 1; d >= 0; --d) s[d] = acc, acc *= dims[d];
  return s;
}

// The distinct output buffers of a collective's members: one when the group shares its result.
std::vector<Byte*> distinct(const std::vector<Byte*>& outs) {
  for (Byte* o : outs)
    if (o != outs[0]) return outs;
  return {outs[0]};
}

using Ins = std::vector<const Byte*>;
using Outs = std::vector<Byte*>;

// The work of one collective once every member has arrived, as `pieces` independent pieces:
// each member claims pieces from a shared counter until none are left, so the members that have
// a core do the work while others are still waking up (8 devices on 2 cores), and a member that
// arrives at an exhausted counter has nothing to wait for. A piece reads any member's input and
// writes any member's output. `own` is the staged path instead: the caller's whole output from
// the copied inputs, with no piece shared. `after`, when set, is run once all pieces are done
// by the member that finished the last one, before any member leaves (not on the staged path,
// nor for a group of one): a step that needs every piece's result, such as the exchange between
// processes of a local reduction, without a second meeting.
struct Work {
  int64_t pieces = 0;
  std::function<void(const Ins&, const Outs&, int64_t piece)> piece;
  std::function<void(const Ins&, const Outs&)> own;
  bool stage = true;  // small inputs may be copied on arrival (see kStagedBytes)
  std::function<void(const Ins&, const Outs&)> after = nullptr;
};

// Pieces of about this many output bytes, and at least one per member.
constexpr int64_t kPieceBytes = int64_t(128) << 10;

int64_t piece_count(int64_t bytes, int64_t units, int n) {
  return std::max<int64_t>(1, std::min(units, std::max<int64_t>(n, bytes / kPieceBytes)));
}

// all_reduce: piece k reduces its range of the elements once and writes it into every distinct
// output (one when the group shares its result).
Work all_reduce_work(ReduceOp op, DType dtype, int64_t total, int n, int me) {
  const int64_t item = itemsize(dtype), align = std::max<int64_t>(1, 64 / item);
  const int64_t pieces = piece_count(total * item, (total + align - 1) / align, n);
  return {pieces,
          [=](const Ins& ins, const Outs& outs, int64_t k) {
            const Outs dsts = distinct(outs);
            auto [b, e] = share(total, int(k), int(pieces), align);
            reduce_range(op, dtype, ins, b, e, dsts, b,
                         outputs_exceed_cache(int64_t(dsts.size()) * total * item));
          },
          [=](const Ins& ins, const Outs& outs) {
            reduce_range(op, dtype, ins, 0, total, outs[me], 0, false);
          }};
}

// all_gather. Stacked or concatenated along `axis`, the output is, for each of `outer` leading
// indices, the n members' blocks of `block` bytes one after another: the same bytes either way.
// Piece k copies its range of the output bytes into every distinct output.
Work all_gather_work(int64_t outer, int64_t block, int n, int me) {
  const int64_t row = block * n, total = outer * row;
  auto copy = [=](const Ins& ins, const Outs& dsts, int64_t b, int64_t e) {
    const bool may_stream = outputs_exceed_cache(int64_t(dsts.size()) * total);
    bool streamed = false;
    for (int64_t pos = b; pos < e;) {
      const int64_t o = pos / row, j = (pos % row) / block, off = pos % block;
      const int64_t len = std::min(block - off, e - pos);
      const Byte* src = ins[j] + o * block + off;
      const bool stream = may_stream && len >= kStreamBytes;
      streamed |= stream;
      for (Byte* d : dsts) {
        if (d + pos == src) continue;
        if (stream)
          stream_copy(d + pos, src, size_t(len));
        else
          std::memcpy(d + pos, src, size_t(len));
      }
      pos += len;
    }
    if (streamed) stream_fence();
  };
  const int64_t pieces = piece_count(total, (total + 63) / 64, n);
  return {pieces,
          [=](const Ins& ins, const Outs& outs, int64_t k) {
            auto [b, e] = share(total, int(k), int(pieces), 64);
            copy(ins, distinct(outs), b, e);
          },
          [=](const Ins& ins, const Outs& outs) { copy(ins, {outs[me]}, 0, total); }};
}

void check_reducible(const char* api, DType dtype) {
  if (dtype == DType::bool_)
    throw TypeError(std::string("[") + api + "] bool is not accepted; convert to int32 first");
}

void check_gather_axis(const char* api, const Shape& shape, int axis, bool tiled) {
  if (axis < 0 || axis > shape.ndim() - (tiled ? 1 : 0))
    throw AxisError(std::string("[") + api + "] axis " + std::to_string(axis) +
                    " is out of bounds for the gathered shape " + shape.str());
}

[[noreturn]] void fail(const char* api, const Op& op) {
  std::string msg = std::string("[") + api + "] " + op.error;
  if (op.peer_failed) throw PeerFailure(msg);
  throw CollectiveError(msg);
}

[[noreturn]] void invalid(const char* api, const std::string& msg) {
  throw ValueError(std::string("[") + api + "] " + msg);
}

}  // namespace

void combine_into(ReduceOp op, DType dtype, const void* in, void* inout, int64_t n) {
  combine(op, dtype, in, inout, inout, n);
}

void combine(ReduceOp op, DType dtype, const void* a, const void* b, void* out, int64_t n) {
  const Byte* const srcs[] = {static_cast<const Byte*>(a), static_cast<const Byte*>(b)};
  reduce_range(op, dtype, srcs, 0, n, static_cast<Byte*>(out), 0,
               outputs_exceed_cache(n * itemsize(dtype)));
}

struct Communicator::State {
  std::vector<int> device_ids;
  std::chrono::milliseconds timeout;
  std::chrono::microseconds poll{0};   // see poll_budget
  std::chrono::microseconds yield{0};  // see yield_budget

  std::mutex channels_mu;  // guards `channels`; taken before a channel's lock, never after
  std::map<std::vector<int>, std::unique_ptr<Channel>> channels;

  std::unique_ptr<std::atomic<bool>[]> aborted;
  mutable std::mutex abort_mu;  // guards abort_reasons; a leaf lock
  std::vector<std::string> abort_reasons;

  // The channel of `group`, or of `key` when given (a group's local members meeting on behalf of
  // a group that spans processes have a channel of their own).
  Channel& channel(std::span<const int> group, std::span<const int> key = {});
  // One operand of a meeting: what the member asks for, its buffers and the work. With
  // `result` set, `out` is ignored: the output of `out_bytes` is allocated here and handed back
  // through `result`, one buffer for the whole group unless the inputs are staged (then each
  // member writes a buffer of its own).
  struct Part {
    const Params* params;
    const void* in;
    void* out;
    const Work* work;
    std::shared_ptr<Buffer>* result = nullptr;
    size_t out_bytes = 0;
  };
  // The rendezvous around the parts' work: arrival, mismatch check, work, done-reading. Several
  // parts are several collectives of one group met once: their pieces are claimed from one
  // counter, and they are staged together when their inputs are small together.
  void run(std::span<const Part> parts, std::span<const int> group, int me,
           std::span<const int> key = {});
  void run(const Params& p, std::span<const int> group, int me, const void* in, void* out,
           const Work& work, std::shared_ptr<Buffer>* result = nullptr, size_t out_bytes = 0,
           std::span<const int> key = {}) {
    const Part part{&p, in, out, &work, result, out_bytes};
    run(std::span<const Part>(&part, 1), group, me, key);
  }

  // Groups with members in other processes (see "Between processes" below).
  std::vector<bool> local;  // per rank: whether this process runs it
  bool any_remote = false;  // whether some rank runs in another process
  struct Cross;
  // What `group` needs between processes, seen from member `me`; null when the whole group is in
  // this process.
  const Cross* cross(const char* api, std::span<const int> group, int me);
  // Per rank, the Cross of every group it has met in this launch: a collective on a group met
  // before finds it here (a chain of collectives in one program) instead of making it again, the
  // last one met first. Only the rank's own share uses its entry (its collectives name it as
  // `group[me]`), and a device runs one share at a time, so the entry needs no lock: a share on
  // another thread later (a kept Communicator) starts after this one ended (the device's claim).
  struct Plans {
    std::vector<std::unique_ptr<const Cross>> known;
    const Cross* last = nullptr;
  };
  std::unique_ptr<Plans[]> plans;
  const Cross& plan(const char* api, std::span<const int> group, int me);
  std::unique_ptr<const Cross> make_cross(const char* api, std::span<const int> group,
                                          int me) const;
  // What the member that gathers makes of the blocks (in group order) for this process's members,
  // into a result of `bytes`.
  struct Finish {
    int64_t bytes;
    std::function<void(const Ins& blocks, Byte* result)> fn;
  };
  std::shared_ptr<Buffer> gather_one_each(const char* api, const Cross& c, const void* in,
                                          int64_t bytes, std::shared_ptr<Buffer>* reuse = nullptr);
  // A reduction of `count` elements (at most the staging size) over a group with one member in
  // each process, in group order: the blocks gathered into the Cross's kept buffer, then reduced
  // into a result of their own.
  std::shared_ptr<Buffer> reduce_one_each(const char* api, const Cross& c, ReduceOp op, DType dtype,
                                          int64_t count, const void* in);
  std::shared_ptr<Buffer> cross_gather(const Params& p, const Cross& c, const void* in,
                                       int64_t bytes, const Finish* finish = nullptr);
  void cross_reduce_gathered(const Params& p, const Cross& c, const void* in, void* out);
  std::shared_ptr<Buffer> cross_reduce_in_parts(const Params& p, const Cross& c, const void* in);
  std::shared_ptr<Buffer> cross_all_reduce(const Params& p, const Cross& c, const void* in,
                                           std::shared_ptr<Buffer> in_owner = nullptr);
  // The blocks a collective moves from member to member, where each member's output needs only
  // some blocks of the others (ppermute, all_to_all): see cross_exchange.
  struct Route;
  void cross_exchange(const Params& p, const Cross& c, const void* in, void* out,
                      const Route& route);
  // reduce_scatter's chunks: member i's output is, for each of `outer` leading indices, the
  // reduction of the `chunk` elements at i·chunk of a `row` of every member's input.
  struct Scatter {
    int64_t outer = 0, row = 0, chunk = 0;
  };
  void cross_reduce_scatter(const Params& p, const Cross& c, const void* in, void* out,
                            const Scatter& s);
  mpi::Wait wait_of(std::span<const int> group) const;
  // `work` over `group` in this process, or, when the group spans processes, the caller's output
  // computed from every member's `in_bytes` of input gathered here.
  void run_anywhere(const Params& p, std::span<const int> group, int me, const void* in, void* out,
                    const Work& work, int64_t in_bytes);
  // Whether `group` has members in other processes (validated when it has).
  bool spans_processes(const char* api, std::span<const int> group, int me);
  // What a block of a combined collective asks for, its work, and the size of its output when
  // the call hands the result back.
  struct Described {
    Params params;
    Work work;
    size_t out_bytes = 0;
  };
  // The blocks of a combined collective met once, each as `describe` gives it.
  void run_blocks(std::span<const Communicator::Block> blocks, std::span<const int> group, int me,
                  const std::function<Described(const Communicator::Block&)>& describe);
  void validate_group(const char* api, std::span<const int> group, int me) const;
  std::string missing_message(const Op& op, const Channel& ch, const std::string& head) const;
  std::optional<int> aborted_missing(const Op& op, const Channel& ch) const;
  // The Op that `me`'s next collective on `group` joins (created if no member has come yet).
  std::shared_ptr<Op> next_op(Channel& ch, int me) const;
  void inject_fault(const char* api, std::span<const int> group, int me);
};

Channel& Communicator::State::channel(std::span<const int> group, std::span<const int> key) {
  std::lock_guard lock(channels_mu);
  if (key.empty()) key = group;
  auto& slot = channels[std::vector<int>(key.begin(), key.end())];
  if (!slot) {
    slot = std::make_unique<Channel>();
    slot->ranks.assign(group.begin(), group.end());
    slot->next_seq.assign(slot->ranks.size(), 0);
  }
  return *slot;
}

void Communicator::State::validate_group(const char* api, std::span<const int> group,
                                         int me) const {
  const int size = int(device_ids.size());
  if (group.empty()) invalid(api, "empty group");
  if (me < 0 || me >= int(group.size()))
    invalid(api, "position " + std::to_string(me) + " outside a group of " +
                     std::to_string(group.size()));
  std::vector<bool> seen(size_t(size), false);
  for (int r : group) {
    if (r < 0 || r >= size)
      invalid(api, "rank " + std::to_string(r) + " outside a launch of " + std::to_string(size));
    if (seen[r]) invalid(api, "rank " + std::to_string(r) + " appears twice in the group");
    seen[r] = true;
  }
}

std::optional<int> Communicator::State::aborted_missing(const Op& op, const Channel& ch) const {
  for (size_t j = 0; j < ch.ranks.size(); ++j)
    if (!op.arrived_flags[j] && aborted[ch.ranks[j]].load(std::memory_order_acquire))
      return ch.ranks[j];
  return std::nullopt;
}

std::string Communicator::State::missing_message(const Op& op, const Channel& ch,
                                                 const std::string& head) const {
  std::vector<int> waiting, arrived;
  for (size_t j = 0; j < ch.ranks.size(); ++j)
    (op.arrived_flags[j] ? arrived : waiting).push_back(device_ids[ch.ranks[j]]);
  return head + " waiting for devices " + id_list(waiting) + "; arrived: " + id_list(arrived);
}

std::shared_ptr<Op> Communicator::State::next_op(Channel& ch, int me) const {
  auto& slot = ch.ops[ch.next_seq[me]];
  if (!slot) slot = std::make_shared<Op>(ch.ranks.size());
  return slot;
}

// A fault injected for tests (runtime/fault_injection.h) on entry to a collective: a throw, or a
// stall that lasts until the members that came have given up on this collective (it failed) or
// a member's program failed, as a device that hangs here would be seen.
void Communicator::State::inject_fault(const char* api, std::span<const int> group, int me) {
  std::optional<std::chrono::milliseconds> bound =
      fault::check(fault::Where::collective, device_ids[group[me]], api);
  if (!bound) return;
  std::shared_ptr<Op> op;
  if (group.size() > 1) {
    Channel& ch = channel(group);
    std::lock_guard lock(ch.mu);
    op = next_op(ch, me);
  }
  fault::stall(*bound, [&] {
    if (op && op->failed.load(std::memory_order_acquire)) return true;
    return std::any_of(group.begin(), group.end(),
                       [&](int r) { return aborted[r].load(std::memory_order_acquire); });
  });
}

void Communicator::State::run(std::span<const Part> parts, std::span<const int> group, int me,
                              std::span<const int> key) {
  const Params& first = *parts[0].params;
  const char* api = first.api.c_str();
  validate_group(api, group, me);
  if (fault::armed()) inject_fault(api, group, me);
  const int n = int(group.size());
  const size_t m = parts.size();
  // The operands' inputs are staged together, back to back, when they are small together.
  std::vector<int64_t> staged_at(m + 1, 0);
  bool staged = true;
  for (size_t k = 0; k < m; ++k) {
    const Part& part = parts[k];
    const Params& p = *part.params;
    staged = staged && part.work->stage && part.in != nullptr && p.kind != Kind::barrier;
    staged_at[k + 1] =
        staged_at[k] + (p.kind == Kind::barrier ? 0 : p.shape.size() * itemsize(p.dtype));
  }
  staged = staged && staged_at[m] <= kStagedBytes;
  Member mine;
  mine.in.resize(m);
  mine.out.resize(m);
  std::vector<bool> share_out(m, false);
  for (size_t k = 0; k < m; ++k) {
    const Part& part = parts[k];
    mine.in[k] = part.in;
    mine.out[k] = part.out;
    share_out[k] = part.result && n > 1 && !staged;
    if (part.result && !share_out[k]) {
      *part.result = Buffer::allocate(part.out_bytes);
      mine.out[k] = (*part.result)->data();
    }
  }
  if (n == 1) {
    for (size_t k = 0; k < m; ++k)
      if (parts[k].work->own)
        parts[k].work->own({static_cast<const Byte*>(mine.in[k])},
                           {static_cast<Byte*>(mine.out[k])});
    return;
  }
  mine.params.reserve(m);
  for (const Part& part : parts) mine.params.push_back(*part.params);
  if (staged) {
    mine.staged.reset(new Byte[size_t(std::max<int64_t>(staged_at[m], 1))]);
    for (size_t k = 0; k < m; ++k)
      std::memcpy(mine.staged.get() + staged_at[k], mine.in[k],
                  size_t(staged_at[k + 1] - staged_at[k]));
  }

  Channel& ch = channel(group, key);
  std::unique_lock lock(ch.mu);
  const uint64_t seq = ch.next_seq[me];
  std::shared_ptr<Op> op = next_op(ch, me);
  ++ch.next_seq[me];
  if (op->failed.load(std::memory_order_relaxed)) fail(api, *op);

  op->members[me] = std::move(mine);
  op->arrived_flags[me] = true;
  if (++op->arrived == n) {
    for (int j = 1; j < n && op->error.empty(); ++j) {
      if (auto d = first_difference(op->members[0].params, op->members[j].params))
        op->set_error("collective mismatch: the members disagree on the " + d->field +
                      ": device " + std::to_string(device_ids[group[0]]) + " has " + d->a +
                      ", device " + std::to_string(device_ids[group[j]]) + " has " + d->b);
    }
    if (op->error.empty()) {
      op->shared_out.resize(m);
      for (size_t k = 0; k < m; ++k)
        if (share_out[k]) op->shared_out[k] = Buffer::allocate(parts[k].out_bytes);
      op->ready.store(true, std::memory_order_release);
    }
    // Notify after unlocking, so the woken members do not block again on the mutex. Nobody
    // writes the Op's members or error once it is ready or failed.
    lock.unlock();
    ch.cv.notify_all();
    if (!op->ready.load(std::memory_order_relaxed)) fail(api, *op);
  } else {
    lock.unlock();
    auto arrived_all = [&] {
      return op->ready.load(std::memory_order_acquire) ||
             op->failed.load(std::memory_order_acquire);
    };
    cpu::poll_until(arrived_all, poll) || cpu::yield_until(arrived_all, yield);
    lock.lock();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!op->ready.load(std::memory_order_relaxed) && op->error.empty()) {
      if (auto r = aborted_missing(*op, ch)) {
        std::string reason;
        {
          std::lock_guard alock(abort_mu);
          reason = abort_reasons[*r];
        }
        op->set_error(missing_message(*op, ch,
                                      "device " + std::to_string(device_ids[*r]) + " failed (" +
                                          reason + ") while"),
                      true);
        ch.cv.notify_all();
        break;
      }
      if (ch.cv.wait_until(lock, deadline) == std::cv_status::timeout &&
          !op->ready.load(std::memory_order_relaxed) && op->error.empty()) {
        op->set_error(
            missing_message(*op, ch, "timed out after " + std::to_string(timeout.count()) + " ms"));
        ch.cv.notify_all();
      }
    }
    if (!op->error.empty()) fail(api, *op);
    lock.unlock();
  }

  // Everyone arrived and agrees: the published buffers stay valid until every piece is done
  // (staged inputs live as long as the Op). ins[k][j] is member j's input of operand k.
  std::vector<Ins> ins(m, Ins(size_t(n)));
  std::vector<Outs> outs(m, Outs(size_t(n)));
  for (size_t k = 0; k < m; ++k) {
    for (int j = 0; j < n; ++j) {
      const Member& member = op->members[j];
      ins[k][j] = staged ? member.staged.get() + staged_at[k]
                         : static_cast<const Byte*>(member.in[k]);
      outs[k][j] = static_cast<Byte*>(share_out[k] ? op->shared_out[k]->data() : member.out[k]);
    }
    if (share_out[k]) *parts[k].result = op->shared_out[k];
  }
  if (staged) {
    for (size_t k = 0; k < m; ++k) parts[k].work->own(ins[k], outs[k]);
    lock.lock();
    if (++op->departed == n) ch.ops.erase(seq);
    return;
  }
  // Claim pieces until none are left; then wait until every claimed piece is finished, after
  // which nobody reads the inputs or writes the outputs any more. The member that finishes the
  // last piece takes the lock before notifying, so a waiter that saw unfinished pieces under
  // the lock is asleep by then and gets the wakeup. The operands' pieces are numbered one after
  // another.
  auto record_error = [&] {
    std::lock_guard elock(op->piece_mu);
    if (!op->piece_error) op->piece_error = std::current_exception();
  };
  int64_t pieces = 0, afters = 0;
  for (const Part& part : parts) {
    pieces += part.work->pieces;
    afters += part.work->after ? 1 : 0;
  }
  int64_t done_here = 0;
  for (int64_t k; (k = op->next_piece.fetch_add(1, std::memory_order_relaxed)) < pieces;
       ++done_here) {
    size_t operand = 0;
    while (k >= parts[operand].work->pieces) k -= parts[operand++].work->pieces;
    try {
      parts[operand].work->piece(ins[operand], outs[operand], k);
    } catch (...) {
      record_error();
    }
  }
  // An `after` counts as one more piece, run by the member that finished the last of the others.
  const int64_t total = pieces + afters;
  const bool finished_last =
      done_here > 0 &&
      op->finished.fetch_add(done_here, std::memory_order_acq_rel) + done_here == pieces;
  if (finished_last)
    for (size_t k = 0; k < m; ++k) {
      if (!parts[k].work->after) continue;
      try {
        parts[k].work->after(ins[k], outs[k]);
      } catch (...) {
        record_error();
      }
      op->finished.fetch_add(1, std::memory_order_acq_rel);
    }
  auto all_finished = [&] { return op->finished.load(std::memory_order_acquire) == total; };
  if (!finished_last && !all_finished()) {
    cpu::poll_until(all_finished, poll) || cpu::yield_until(all_finished, yield);
    lock.lock();
    ch.cv.wait(lock, all_finished);
  } else {
    lock.lock();
  }
  std::exception_ptr error;
  {
    std::lock_guard elock(op->piece_mu);
    error = op->piece_error;
  }
  if (++op->departed == n) ch.ops.erase(seq);
  lock.unlock();
  if (finished_last) ch.cv.notify_all();
  // A piece that failed (the step between processes) fails the collective on every member.
  if (error) std::rethrow_exception(error);
}

// ---- Between processes ------------------------------------------------------------------------
//
// A group with members in other processes (after distributed::initialize) meets in two steps:
// this process's members meet as a group of their own (on a channel keyed apart from any group
// of the launch), and one of them, whichever claims the step's one piece, makes the group's MPI
// call for all of them while the others wait (a member alone in its process makes it without
// meeting). So each process makes one MPI call per collective, and the calls of one group follow
// each other in call order, on the group's own communicator.
//
// Reductions of more than the staging size reduce locally first, then across processes (their
// floats are associated differently from one process's left-to-right order, as any hierarchical
// reduction is). ppermute and all_to_all send only the blocks whose source and destination are in
// different processes (cross_exchange), and reduce_scatter only the chunks each process's members
// keep (cross_reduce_scatter). Small reductions give the bits of a single process: over
// processes with several members each, from 1 KiB, every process reduces its part of the
// elements over all blocks in group order and the parts are then gathered
// (cross_reduce_in_parts); otherwise, as everything else, they gather every member's input on
// every process and compute the output from them exactly as one process would (a small
// reduction once per process, by the member that gathers), so all_gather needs no code of its
// own.

struct Communicator::State::Cross {
  std::vector<int> group;
  int me = 0;
  std::vector<int> local;                   // the ranks of this process's members, in group order
  int me_local = 0;                         // `me`'s position among them
  std::vector<int> key;                     // their channel: local ranks, -1, the group
  std::shared_ptr<mpi::GroupComm> comm;     // null when the whole group is in this process
  std::vector<std::vector<int>> positions;  // per process of the communicator: its members
  bool one_each = false;                    // every process has one member
  mpi::Wait wait;                           // gives up when a member of the group failed
  // With one member in each process, the buffer its small reductions gather into, kept from one
  // to the next (only that member's thread uses this Cross).
  mutable std::shared_ptr<Buffer> gathered;
};

const Communicator::State::Cross* Communicator::State::cross(const char* api,
                                                             std::span<const int> group, int me) {
  if (!any_remote) return nullptr;  // one process: run() validates the group
  const Cross& c = plan(api, group, me);
  if (!c.comm) return nullptr;
  if (fault::armed()) inject_fault(api, group, me);
  return &c;
}

const Communicator::State::Cross& Communicator::State::plan(const char* api,
                                                            std::span<const int> group, int me) {
  const bool in_range = me >= 0 && me < int(group.size()) && group[size_t(me)] >= 0 &&
                        group[size_t(me)] < int(device_ids.size());
  // Compared element by element: a group is a few ranks, for which a call of memcmp costs more.
  auto is = [&](const Cross& c) {
    if (c.me != me || c.group.size() != group.size()) return false;
    for (size_t j = 0; j < group.size(); ++j)
      if (c.group[j] != group[j]) return false;
    return true;
  };
  if (in_range) {
    Plans& mine = plans[size_t(group[size_t(me)])];
    if (mine.last && is(*mine.last)) return *mine.last;
    for (const auto& c : mine.known)
      if (is(*c)) return *(mine.last = c.get());
  }
  validate_group(api, group, me);
  Plans& mine = plans[size_t(group[size_t(me)])];
  mine.known.push_back(make_cross(api, group, me));
  return *(mine.last = mine.known.back().get());
}

namespace {

// Whether every process has one member of the group.
bool one_each(const std::vector<std::vector<int>>& positions) {
  return std::all_of(positions.begin(), positions.end(),
                     [](const std::vector<int>& pos) { return pos.size() == 1; });
}

}  // namespace

std::unique_ptr<const Communicator::State::Cross> Communicator::State::make_cross(
    const char* api, std::span<const int> group, int me) const {
  auto made = std::make_unique<Cross>();
  Cross& c = *made;
  c.group.assign(group.begin(), group.end());
  c.me = me;
  bool all_local = true;
  for (int r : group) all_local = all_local && local[size_t(r)];
  if (all_local) return made;
  std::vector<int> ids;
  for (size_t j = 0; j < group.size(); ++j) {
    ids.push_back(device_ids[size_t(group[j])]);
    if (!local[size_t(group[j])]) continue;
    if (int(j) == me) c.me_local = int(c.local.size());
    c.local.push_back(group[j]);
  }
  c.comm = mpi::find_group(ids);
  if (!c.comm)
    throw NotImplementedError(std::string("[") + api +
                              "] a collective between processes runs over the groups of mesh "
                              "axes and axis_index_groups of its program; this group of devices " +
                              id_list(ids) + " has no communicator");
  const std::vector<int>& procs = mpi::processes(*c.comm);
  c.positions.resize(procs.size());
  for (size_t j = 0; j < ids.size(); ++j) {
    const int p = runtime::process_of_device(ids[j]);
    c.positions[size_t(std::find(procs.begin(), procs.end(), p) - procs.begin())].push_back(int(j));
  }
  c.one_each = one_each(c.positions);
  c.key = c.local;
  c.key.push_back(-1);
  c.key.insert(c.key.end(), group.begin(), group.end());
  c.wait = wait_of(group);
  return made;
}

mpi::Wait Communicator::State::wait_of(std::span<const int> group) const {
  std::vector<int> ranks(group.begin(), group.end());
  return mpi::Wait{timeout, [this, ranks]() -> std::optional<std::string> {
                     for (int r : ranks)
                       if (aborted[size_t(r)].load(std::memory_order_acquire)) {
                         std::lock_guard alock(abort_mu);
                         return "device " + std::to_string(device_ids[size_t(r)]) + " failed (" +
                                abort_reasons[size_t(r)] + ")";
                       }
                     return std::nullopt;
                   }};
}

namespace {

// Runs an MPI step, naming the collective in its error as the in-process ones do.
template <class F>
void between_processes(const char* api, F&& step) {
  try {
    step();
  } catch (const CollectiveError& e) {
    throw CollectiveError(std::string("[") + api + "] " + e.what());
  }
}

}  // namespace

namespace {

// The n members' blocks of `bytes` in a gathered buffer.
Ins blocks_of(const Buffer& all, int n, int64_t bytes) {
  Ins ins;
  for (int j = 0; j < n; ++j) ins.push_back(static_cast<const Byte*>(all.data()) + j * bytes);
  return ins;
}

// Small reductions from this size, over processes with several members, are reduced in parts
// (cross_reduce_in_parts): 2 processes of 4 devices took 1.1 × (local psum + raw MPI) at 1 to
// 64 KiB against 1.25 to 1.7 × gathering every block. Below it both take the same time, and
// gathering makes one exchange.
constexpr int64_t kPartsBytes = int64_t(1) << 10;

bool reduces_in_parts(const std::vector<std::vector<int>>& positions, int64_t bytes) {
  return bytes >= kPartsBytes && !one_each(positions);
}

// The two buffers of one mpi::alltoallv, sized by its counts (a byte at least), and what keeps
// them (and `also`, when given) alive past a wait given up.
struct ExchangeBuffers {
  std::shared_ptr<Buffer> send, recv;
  std::shared_ptr<void> keep;
};
ExchangeBuffers exchange_buffers(const std::vector<int64_t>& send_counts,
                                 const std::vector<int64_t>& recv_counts,
                                 std::shared_ptr<Buffer> also = nullptr) {
  auto sized = [](const std::vector<int64_t>& counts) {
    return Buffer::allocate(
        size_t(std::max<int64_t>(1, std::accumulate(counts.begin(), counts.end(), int64_t(0)))));
  };
  ExchangeBuffers b{sized(send_counts), sized(recv_counts), nullptr};
  b.keep = std::make_shared<std::vector<std::shared_ptr<Buffer>>>(
      std::vector<std::shared_ptr<Buffer>>{b.send, b.recv, std::move(also)});
  return b;
}

// The process (of the communicator) whose members include group position `me`.
int process_holding(const std::vector<std::vector<int>>& positions, int me) {
  for (size_t q = 0; q < positions.size(); ++q)
    if (std::find(positions[q].begin(), positions[q].end(), me) != positions[q].end())
      return int(q);
  return -1;
}

}  // namespace

// With one member in each process, none needs a meeting here, and the blocks arrive in group
// order (processes are numbered by their first member), so they go straight into the buffer,
// which outlives a wait given up. With `reuse`, the buffer it holds is used again unless it is
// too small or the MPI module holds it too (a wait given up on it, which MPI may still write):
// a small reduction chained in one program then allocates nothing here.
std::shared_ptr<Buffer> Communicator::State::gather_one_each(const char* api, const Cross& c,
                                                             const void* in, int64_t bytes,
                                                             std::shared_ptr<Buffer>* reuse) {
  const size_t size = size_t(std::max<int64_t>(1, int64_t(c.group.size()) * bytes));
  std::shared_ptr<Buffer> all;
  if (reuse && *reuse && (*reuse).use_count() == 1 && (*reuse)->nbytes() >= size)
    all = *reuse;
  else
    all = Buffer::allocate(size);
  if (reuse) *reuse = all;
  Byte* mine = static_cast<Byte*>(all->data()) + int64_t(c.me) * bytes;
  std::memcpy(mine, in, size_t(bytes));
  between_processes(api, [&] { mpi::allgather(*c.comm, mine, bytes, all->data(), all, c.wait); });
  return all;
}

// Every member's `bytes` of input, in group order, in one buffer the local members share (or
// what `finish` makes of them). MPI writes into buffers of the step's own, which outlive a wait
// given up (MPI may still write).
std::shared_ptr<Buffer> Communicator::State::cross_gather(const Params& p, const Cross& c,
                                                          const void* in, int64_t bytes,
                                                          const Finish* finish) {
  const int n = int(c.group.size());
  if (c.one_each) {
    auto all = gather_one_each(p.api.c_str(), c, in, bytes);
    if (!finish) return all;
    auto result = Buffer::allocate(size_t(std::max<int64_t>(1, finish->bytes)));
    finish->fn(blocks_of(*all, n, bytes), static_cast<Byte*>(result->data()));
    return result;
  }
  std::vector<int64_t> counts;
  for (const auto& pos : c.positions) counts.push_back(int64_t(pos.size()) * bytes);
  const mpi::Wait& wait = c.wait;
  // Blocks arrive process by process: `arrival[k]` is the group position of the k-th.
  std::vector<int> arrival;
  for (const auto& pos : c.positions) arrival.insert(arrival.end(), pos.begin(), pos.end());
  // Only the member that runs the step uses it, within its own call of run().
  auto step = [&](const Ins& ins, const Outs& outs) {
    auto send = Buffer::allocate(size_t(std::max<int64_t>(1, int64_t(ins.size()) * bytes)));
    for (size_t j = 0; j < ins.size(); ++j)
      std::memcpy(static_cast<Byte*>(send->data()) + int64_t(j) * bytes, ins[j], size_t(bytes));
    auto recv = Buffer::allocate(size_t(std::max<int64_t>(1, n * bytes)));
    auto keep = std::make_shared<std::vector<std::shared_ptr<Buffer>>>(
        std::vector<std::shared_ptr<Buffer>>{send, recv});
    between_processes(p.api.c_str(), [&] {
      mpi::allgatherv(*c.comm, send->data(), int64_t(ins.size()) * bytes, recv->data(), counts,
                      keep, wait);
    });
    Ins blocks(static_cast<size_t>(n), nullptr);
    for (int k = 0; k < n; ++k)
      blocks[size_t(arrival[size_t(k)])] = static_cast<const Byte*>(recv->data()) + k * bytes;
    if (finish) return finish->fn(blocks, outs[0]);
    for (int j = 0; j < n; ++j) std::memcpy(outs[0] + j * bytes, blocks[size_t(j)], size_t(bytes));
  };
  Work work{1, [&](const Ins& ins, const Outs& outs, int64_t) { step(ins, outs); }, step, false};
  Params q = p;
  q.api += " (gather between processes)";
  std::shared_ptr<Buffer> all;
  run(q, c.local, c.me_local, in, nullptr, work, &all, size_t(finish ? finish->bytes : n * bytes),
      c.key);
  return all;
}

std::shared_ptr<Buffer> Communicator::State::reduce_one_each(const char* api, const Cross& c,
                                                             ReduceOp op, DType dtype,
                                                             int64_t count, const void* in) {
  const int64_t bytes = count * itemsize(dtype);
  auto result = Buffer::allocate(size_t(std::max<int64_t>(1, bytes)));
  auto all = gather_one_each(api, c, in, bytes, &c.gathered);
  const int n = int(c.group.size());
  constexpr int kOnStack = 16;
  const Byte* on_stack[kOnStack];
  std::vector<const Byte*> on_heap(size_t(n > kOnStack ? n : 0));
  const Byte** blocks = n > kOnStack ? on_heap.data() : on_stack;
  for (int j = 0; j < n; ++j) blocks[j] = static_cast<const Byte*>(all->data()) + j * bytes;
  reduce_range(op, dtype, std::span<const Byte* const>(blocks, size_t(n)), 0, count,
               static_cast<Byte*>(result->data()), 0, false);
  return result;
}

// out = the reduction of every member's `in` (p.shape of p.dtype, at most the staging size) in
// group order, the bits one process computes. The blocks are gathered and reduced once in each
// process, by the member that gathers them, rather than by every member over all n blocks.
void Communicator::State::cross_reduce_gathered(const Params& p, const Cross& c, const void* in,
                                                void* out) {
  const int64_t count = p.shape.size(), bytes = count * itemsize(p.dtype);
  auto reduce = [&](const Ins& blocks, Byte* to) {
    reduce_range(p.op, p.dtype, blocks, 0, count, to, 0, false);
  };
  if (reduces_in_parts(c.positions, bytes)) {
    auto result = cross_reduce_in_parts(p, c, in);
    std::memcpy(out, result->data(), size_t(bytes));
    return;
  }
  if (c.one_each) {
    auto result = reduce_one_each(p.api.c_str(), c, p.op, p.dtype, count, in);
    std::memcpy(out, result->data(), size_t(bytes));
    return;
  }
  const Finish finish{bytes, reduce};
  auto result = cross_gather(p, c, in, bytes, &finish);
  std::memcpy(out, result->data(), size_t(bytes));
}

namespace {

// How cross_reduce_in_parts splits the elements: process q of the communicator reduces
// [bounds[q], bounds[q + 1]). Every element is reduced left to right over the group's blocks, so
// the process holding group positions 0 to `prefix` − 1 (the lead; a run of at least two) can
// send the others the reduction of those blocks, which every element's reduction starts with,
// instead of the blocks themselves. The parts are then sized so that every process receives
// about as many bytes: the lead, which receives every other process's blocks of its part, gets
// the smaller part. With 2 processes of 4 members each process receives 0.8 blocks' bytes in
// the exchange instead of 2.
struct PartsPlan {
  std::vector<int64_t> bounds;
  int lead = -1;  // no lead when position 0's process does not also hold position 1
  int prefix = 0;
  // The blocks process q sends another for its part.
  int sent_blocks(const std::vector<std::vector<int>>& positions, int q) const {
    return int(positions[size_t(q)].size()) - (q == lead ? prefix - 1 : 0);
  }
};

PartsPlan parts_plan(const std::vector<std::vector<int>>& positions, int64_t count) {
  PartsPlan plan;
  const int procs = int(positions.size());
  const int lead = process_holding(positions, 0);
  const std::vector<int>& first = positions[size_t(lead)];
  int run = 0;
  while (run < int(first.size()) && first[size_t(run)] == run) ++run;
  if (run >= 2) {
    plan.lead = lead;
    plan.prefix = run;
  }
  // Each part in inverse proportion to the blocks its process receives (at least one: every
  // process has a member the others lack). The same arithmetic on every process.
  std::vector<double> weight;
  double total = 0;
  for (int q = 0; q < procs; ++q) {
    int received = 0;
    for (int r = 0; r < procs; ++r)
      if (r != q) received += plan.sent_blocks(positions, r);
    weight.push_back(1.0 / double(received));
    total += weight.back();
  }
  plan.bounds.push_back(0);
  double sum = 0;
  for (int q = 0; q + 1 < procs; ++q) {
    sum += weight[size_t(q)];
    plan.bounds.push_back(std::min(count, int64_t(double(count) * sum / total)));
  }
  plan.bounds.push_back(count);
  return plan;
}

}  // namespace

// The result of cross_reduce_gathered, computed in parts: process q of the communicator reduces
// part q of the elements (parts_plan), over every member's block in group order (the bits one
// process computes, element by element). Each process sends every other one that part of its
// members' blocks (the lead its prefix reduced to one block), reduces its own part, and the
// reduced parts are then gathered (a reduce-scatter, then an all-gather). Against gathering
// every block on every process, with 2 processes of 4 members a process receives 1 to 1.6
// blocks' bytes in all instead of 4 (2.5 with equal parts and every block sent). This process's
// members meet first, and whichever claims the step's one piece makes both exchanges into the
// members' shared result.
std::shared_ptr<Buffer> Communicator::State::cross_reduce_in_parts(const Params& p, const Cross& c,
                                                                   const void* in) {
  const int procs = int(c.positions.size());
  const int64_t count = p.shape.size(), item = itemsize(p.dtype);
  const int mine = process_holding(c.positions, c.me);
  const PartsPlan plan = parts_plan(c.positions, count);
  auto part = [&](int q) { return std::pair{plan.bounds[size_t(q)], plan.bounds[size_t(q) + 1]}; };
  const auto [lo, hi] = part(mine);
  const int64_t len = hi - lo;
  std::shared_ptr<Buffer> result;
  // The lead's blocks of part q as it sends them: its prefix reduced to one, then the others.
  auto pack_lead = [&](const Ins& ins, int q, Byte* at) {
    const auto [qlo, qhi] = part(q);
    const Ins prefix(ins.begin(), ins.begin() + plan.prefix);
    reduce_range(p.op, p.dtype, prefix, qlo, qhi, at, 0, false);
    at += (qhi - qlo) * item;
    for (size_t j = size_t(plan.prefix); j < ins.size(); ++j, at += (qhi - qlo) * item)
      std::memcpy(at, ins[j] + qlo * item, size_t((qhi - qlo) * item));
  };
  // Only the member that runs the step uses it, within its own call of run(), which has set
  // `result` (the buffer MPI gathers into, kept alive by it) before any work.
  auto step = [&](const Ins& ins, const Outs& outs) {
    std::vector<int64_t> send_counts(size_t(procs), 0), recv_counts(size_t(procs), 0), parts;
    for (int q = 0; q < procs; ++q) {
      const auto [qlo, qhi] = part(q);
      parts.push_back((qhi - qlo) * item);
      if (q == mine) continue;
      send_counts[size_t(q)] = plan.sent_blocks(c.positions, mine) * parts.back();
      recv_counts[size_t(q)] = plan.sent_blocks(c.positions, q) * len * item;
    }
    const ExchangeBuffers x = exchange_buffers(send_counts, recv_counts, result);
    Byte* at = static_cast<Byte*>(x.send->data());
    for (int q = 0; q < procs; ++q) {
      if (q == mine) continue;
      if (mine == plan.lead) {
        pack_lead(ins, q, at);
      } else {
        for (size_t j = 0; j < ins.size(); ++j)
          std::memcpy(at + int64_t(j) * parts[size_t(q)], ins[j] + part(q).first * item,
                      size_t(parts[size_t(q)]));
      }
      at += send_counts[size_t(q)];
    }
    between_processes(p.api.c_str(), [&] {
      mpi::alltoallv(*c.comm, x.send->data(), send_counts, x.recv->data(), recv_counts, x.keep,
                     c.wait);
    });
    // Every position's block of this part, in group order; the lead's prefix stands for its
    // first `prefix` positions when it comes from the lead.
    Ins by_position(c.group.size());
    const Byte* prefix = nullptr;
    const Byte* got = static_cast<const Byte*>(x.recv->data());
    for (int q = 0; q < procs; ++q) {
      const std::vector<int>& held = c.positions[size_t(q)];
      size_t j = 0;
      if (q != mine && q == plan.lead) {
        prefix = got;
        got += len * item;
        j = size_t(plan.prefix);
      }
      for (; j < held.size(); ++j) {
        if (q == mine) {
          by_position[size_t(held[j])] = ins[j] + lo * item;
        } else {
          by_position[size_t(held[j])] = got;
          got += len * item;
        }
      }
    }
    Ins blocks = by_position;
    if (prefix) {
      blocks.assign(by_position.begin() + plan.prefix, by_position.end());
      blocks.insert(blocks.begin(), prefix);
    }
    reduce_range(p.op, p.dtype, blocks, 0, len, outs[0], lo, false);
    between_processes(p.api.c_str(), [&] {
      mpi::allgatherv(*c.comm, outs[0] + lo * item, parts[size_t(mine)], outs[0], parts, x.keep,
                      c.wait);
    });
  };
  Work work{1, [&](const Ins& ins, const Outs& outs, int64_t) { step(ins, outs); }, step, false};
  Params q = p;
  q.api += " (reduction in parts between processes)";
  run(q, c.local, c.me_local, in, nullptr, work, &result, size_t(count * item), c.key);
  return result;
}

// The reduction of every member's `in` (p.shape of p.dtype) into a buffer of the step's own, so
// that it can outlive a wait given up: a member alone in its process reduces its input across
// processes straight into it (MPI reading `in` itself when `in_owner` keeps it alive); several
// reduce into it first (one buffer they share, written once rather than into every member's
// output), and one of them then reduces it across processes in place, in the same meeting
// (a second meeting for that step cost as much as a local psum of small inputs).
std::shared_ptr<Buffer> Communicator::State::cross_all_reduce(const Params& p, const Cross& c,
                                                              const void* in,
                                                              std::shared_ptr<Buffer> in_owner) {
  const int64_t count = p.shape.size(), bytes = count * itemsize(p.dtype);
  const mpi::Wait& wait = c.wait;
  std::shared_ptr<Buffer> partial;
  auto across = [&](const void* from, std::shared_ptr<void> keep, bool in_kept) {
    between_processes(p.api.c_str(), [&] {
      mpi::allreduce(*c.comm, p.op, p.dtype, from, partial->data(), count, std::move(keep), wait,
                     in_kept);
    });
  };
  if (c.local.size() == 1) {
    partial = Buffer::allocate(size_t(bytes));
    if (!in_owner) {
      across(in, partial, false);
      return partial;
    }
    auto both = std::make_shared<std::pair<std::shared_ptr<Buffer>, std::shared_ptr<Buffer>>>(
        partial, std::move(in_owner));
    across(in, std::move(both), true);
    return partial;
  }
  // The member that finishes the local reduction's last piece reduces `partial` across processes
  // in place (run() has set it before any work) while the others wait in the same meeting.
  Work work = all_reduce_work(p.op, p.dtype, count, int(c.local.size()), c.me_local);
  work.after = [&](const Ins&, const Outs&) { across(partial->data(), partial, false); };
  run(p, c.local, c.me_local, in, nullptr, work, &partial, size_t(bytes), c.key);
  return partial;
}

// The blocks of `block` bytes a collective moves, each (from, to) in `moves` taking a block of
// member `from`'s input (group positions) into member `to`'s output, listed alike on every
// process. `pack` copies a move's block from its source's input into contiguous bytes, `unpack`
// from those into its destination's output, and `move` does both at once within this process.
// `fill`, when set, writes the output of a member no move reaches (ppermute's zeros).
struct Communicator::State::Route {
  int64_t block = 0;
  std::vector<std::pair<int, int>> moves;
  std::function<void(const Byte* in, int from, int to, Byte* packed)> pack;
  std::function<void(const Byte* packed, int from, int to, Byte* out)> unpack;
  std::function<void(const Byte* in, int from, int to, Byte* out)> move;
  std::function<void(int to, Byte* out)> fill;
};

// Only the blocks whose source and destination are in different processes cross, one message
// per pair of processes that has any (mpi::alltoallv); the moves within this process copy from
// the members' buffers. This process's members meet first, and whichever claims the step's one
// piece makes the exchange and writes every local member's output; a member alone in its
// process does it without meeting. MPI reads and writes buffers of the step's own, which
// outlive a wait given up.
void Communicator::State::cross_exchange(const Params& p, const Cross& c, const void* in, void* out,
                                         const Route& route) {
  const size_t procs = c.positions.size();
  std::vector<int> process_of(c.group.size());
  for (size_t r = 0; r < procs; ++r)
    for (int pos : c.positions[r]) process_of[size_t(pos)] = int(r);
  const int mine = process_of[size_t(c.me)];
  const std::vector<int>& here = c.positions[size_t(mine)];  // in the order of c.local
  auto local_index = [&](int pos) {
    return size_t(std::find(here.begin(), here.end(), pos) - here.begin());
  };
  std::vector<std::vector<std::pair<int, int>>> sends(procs), receives(procs);
  std::vector<std::pair<int, int>> within;
  std::vector<bool> reached(c.group.size(), false);
  for (const auto& m : route.moves) {
    const int from = process_of[size_t(m.first)], to = process_of[size_t(m.second)];
    reached[size_t(m.second)] = true;
    if (from == mine && to == mine)
      within.push_back(m);
    else if (from == mine)
      sends[size_t(to)].push_back(m);
    else if (to == mine)
      receives[size_t(from)].push_back(m);
  }
  std::vector<int64_t> send_counts(procs), recv_counts(procs);
  for (size_t r = 0; r < procs; ++r) {
    send_counts[r] = int64_t(sends[r].size()) * route.block;
    recv_counts[r] = int64_t(receives[r].size()) * route.block;
  }
  // Only the member that runs the step uses it, within its own call of run().
  auto step = [&](const Ins& ins, const Outs& outs) {
    const ExchangeBuffers x = exchange_buffers(send_counts, recv_counts);
    Byte* at = static_cast<Byte*>(x.send->data());
    for (const auto& moves : sends)
      for (auto [from, to] : moves) {
        route.pack(ins[local_index(from)], from, to, at);
        at += route.block;
      }
    between_processes(p.api.c_str(), [&] {
      mpi::alltoallv(*c.comm, x.send->data(), send_counts, x.recv->data(), recv_counts, x.keep,
                     c.wait);
    });
    for (auto [from, to] : within)
      route.move(ins[local_index(from)], from, to, outs[local_index(to)]);
    if (route.fill)
      for (size_t k = 0; k < here.size(); ++k)
        if (!reached[size_t(here[k])]) route.fill(here[k], outs[k]);
    const Byte* got = static_cast<const Byte*>(x.recv->data());
    for (const auto& moves : receives)
      for (auto [from, to] : moves) {
        route.unpack(got, from, to, outs[local_index(to)]);
        got += route.block;
      }
  };
  Work work{1, [&](const Ins& ins, const Outs& outs, int64_t) { step(ins, outs); }, step, false};
  Params q = p;
  q.api += " (exchange between processes)";
  run(q, c.local, c.me_local, in, out, work, nullptr, 0, c.key);
}

// Member i's output needs chunk i of every member's input, so a process receives from each other
// one only the chunks of its own members, one message per pair of processes (mpi::alltoallv),
// rather than every member's whole input. The member that claims the step then reduces every
// local member's output from the local inputs and the chunks received, element by element in
// group order: the bits one process computes, whatever the sizes. MPI reads and writes buffers
// of the step's own, which outlive a wait given up.
void Communicator::State::cross_reduce_scatter(const Params& p, const Cross& c, const void* in,
                                               void* out, const Scatter& s) {
  const int n = int(c.group.size());
  const int64_t item = itemsize(p.dtype), piece = s.chunk * item, block = s.outer * piece;
  const size_t procs = c.positions.size();
  size_t mine = 0;
  while (std::find(c.positions[mine].begin(), c.positions[mine].end(), c.me) ==
         c.positions[mine].end())
    ++mine;
  const std::vector<int>& here = c.positions[mine];  // in the order of c.local
  std::vector<int64_t> send_counts(procs, 0), recv_counts(procs, 0);
  for (size_t r = 0; r < procs; ++r)
    if (r != mine)
      send_counts[r] = recv_counts[r] = int64_t(c.positions[r].size() * here.size()) * block;
  // Only the member that runs the step uses it, within its own call of run().
  auto step = [&](const Ins& ins, const Outs& outs) {
    // To each process: for each of its members i, chunk i of each local input, rows packed.
    const ExchangeBuffers x = exchange_buffers(send_counts, recv_counts);
    Byte* at = static_cast<Byte*>(x.send->data());
    for (size_t r = 0; r < procs; ++r)
      for (int i = 0; r != mine && i < int(c.positions[r].size()); ++i)
        for (const Byte* from : ins)
          for (int64_t o = 0; o < s.outer; ++o, at += piece)
            std::memcpy(at, from + (o * s.row + c.positions[r][size_t(i)] * s.chunk) * item,
                        size_t(piece));
    between_processes(p.api.c_str(), [&] {
      mpi::alltoallv(*c.comm, x.send->data(), send_counts, x.recv->data(), recv_counts, x.keep,
                     c.wait);
    });
    // Where row 0 of each member's chunk for local member k starts, and the step to the next row.
    std::vector<std::vector<const Byte*>> first(here.size(), Ins(size_t(n)));
    std::vector<int64_t> step_of(size_t(n), piece);
    for (size_t k = 0; k < here.size(); ++k)
      for (size_t l = 0; l < here.size(); ++l) first[k][size_t(here[l])] = ins[l] + here[k] * piece;
    for (int j : here) step_of[size_t(j)] = s.row * item;
    const Byte* got = static_cast<const Byte*>(x.recv->data());
    for (size_t r = 0; r < procs; ++r)
      for (size_t k = 0; r != mine && k < here.size(); ++k)
        for (int j : c.positions[r]) {
          first[k][size_t(j)] = got;
          got += block;
        }
    Ins rows(static_cast<size_t>(n));
    for (size_t k = 0; k < here.size(); ++k)
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int j = 0; j < n; ++j) rows[size_t(j)] = first[k][size_t(j)] + o * step_of[size_t(j)];
        reduce_range(p.op, p.dtype, rows, 0, s.chunk, outs[k] + o * piece, 0, false);
      }
  };
  Work work{1, [&](const Ins& ins, const Outs& outs, int64_t) { step(ins, outs); }, step, false};
  Params q = p;
  q.api += " (scatter between processes)";
  run(q, c.local, c.me_local, in, out, work, nullptr, 0, c.key);
}

namespace {

// An output list with only the caller's entry, for a Work's `own`.
Outs only_mine(int n, int me, void* out) {
  Outs outs(size_t(n), nullptr);
  outs[size_t(me)] = static_cast<Byte*>(out);
  return outs;
}

}  // namespace

void Communicator::State::run_anywhere(const Params& p, std::span<const int> group, int me,
                                       const void* in, void* out, const Work& work,
                                       int64_t in_bytes) {
  if (auto c = cross(p.api.c_str(), group, me)) {
    const int n = int(group.size());
    auto all = cross_gather(p, *c, in, in_bytes);
    work.own(blocks_of(*all, n, in_bytes), only_mine(n, me, out));
    return;
  }
  run(p, group, me, in, out, work);
}

Communicator::Communicator(std::vector<int> device_ids, std::chrono::milliseconds timeout)
    : state_(std::make_unique<State>()) {
  const size_t n = device_ids.size();
  state_->device_ids = std::move(device_ids);
  state_->timeout = timeout;
  state_->poll = poll_budget(n);
  state_->yield = yield_budget(n);
  state_->aborted = std::make_unique<std::atomic<bool>[]>(n);
  for (size_t i = 0; i < n; ++i) state_->aborted[i].store(false);
  state_->abort_reasons.resize(n);
  state_->plans = std::make_unique<State::Plans[]>(n);
  for (int id : state_->device_ids) {
    state_->local.push_back(is_local_device(id));
    state_->any_remote = state_->any_remote || !state_->local.back();
  }
}

Communicator::~Communicator() = default;

int Communicator::size() const {
  return int(state_->device_ids.size());
}

std::chrono::milliseconds Communicator::timeout() const {
  return state_->timeout;
}

void Communicator::abort(int rank, const std::string& reason) {
  State& s = *state_;
  if (rank < 0 || rank >= size()) return;
  {
    std::lock_guard alock(s.abort_mu);
    s.abort_reasons[rank] = reason;
  }
  s.aborted[rank].store(true, std::memory_order_release);
  // Wake the waiters of every group that contains `rank`. Taking each channel's lock before
  // notifying means a waiter either sees the flag or is already waiting and gets the wakeup.
  std::lock_guard lock(s.channels_mu);
  for (auto& [ranks, ch] : s.channels) {
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) continue;
    std::lock_guard clock(ch->mu);
    ch->cv.notify_all();
  }
  fault::wake_stalls();
}

void Communicator::all_reduce(const char* api, std::span<const int> group, int me, ReduceOp op,
                              DType dtype, const Shape& shape, const void* in, void* out) {
  check_reducible(api, dtype);
  Params p{Kind::all_reduce, api, op, dtype, shape, 0, 0, false, {}};
  const int n = int(group.size());
  if (auto c = state_->cross(api, group, me)) {
    const int64_t bytes = shape.size() * itemsize(dtype);
    if (bytes <= kStagedBytes) {
      state_->cross_reduce_gathered(p, *c, in, out);
      return;
    }
    auto result = state_->cross_all_reduce(p, *c, in);
    std::memcpy(out, result->data(), size_t(bytes));
    return;
  }
  state_->run(p, group, me, in, out, all_reduce_work(op, dtype, shape.size(), n, me));
}

std::shared_ptr<Buffer> Communicator::all_reduce_shared(const char* api, std::span<const int> group,
                                                        int me, ReduceOp op, DType dtype,
                                                        const Shape& shape, const void* in,
                                                        std::shared_ptr<Buffer> in_owner) {
  check_reducible(api, dtype);
  const int64_t bytes = shape.size() * itemsize(dtype);
  const State::Cross* c = state_->cross(api, group, me);
  // The common small reduction between processes, first: it needs no Params (a copy of the
  // shape) and meets no member of this process.
  if (c && c->one_each && bytes <= kStagedBytes)
    return state_->reduce_one_each(api, *c, op, dtype, shape.size(), in);
  Params p{Kind::all_reduce, api, op, dtype, shape, 0, 0, false, {}, true};
  std::shared_ptr<Buffer> result;
  if (c) {
    if (bytes <= kStagedBytes && reduces_in_parts(c->positions, bytes))
      return state_->cross_reduce_in_parts(p, *c, in);
    if (bytes <= kStagedBytes) {
      result = Buffer::allocate(size_t(bytes));
      state_->cross_reduce_gathered(p, *c, in, result->data());
      return result;
    }
    return state_->cross_all_reduce(p, *c, in, std::move(in_owner));
  }
  state_->run(p, group, me, in, nullptr,
              all_reduce_work(op, dtype, shape.size(), int(group.size()), me), &result,
              size_t(shape.size() * itemsize(dtype)));
  return result;
}

void Communicator::all_gather(const char* api, std::span<const int> group, int me, DType dtype,
                              const Shape& shape, int axis, bool tiled, const void* in, void* out) {
  check_gather_axis(api, shape, axis, tiled);
  Params p{Kind::all_gather, api, ReduceOp::sum, dtype, shape, axis, 0, tiled, {}};
  const int64_t item = itemsize(dtype);
  const int n = int(group.size());
  Work work = all_gather_work(prod(shape, 0, axis), prod(shape, axis, shape.ndim()) * item, n, me);
  state_->run_anywhere(p, group, me, in, out, work, shape.size() * item);
}

std::shared_ptr<Buffer> Communicator::all_gather_shared(const char* api, std::span<const int> group,
                                                        int me, DType dtype, const Shape& shape,
                                                        int axis, bool tiled, const void* in) {
  check_gather_axis(api, shape, axis, tiled);
  Params p{Kind::all_gather, api, ReduceOp::sum, dtype, shape, axis, 0, tiled, {}, true};
  const int64_t item = itemsize(dtype);
  const int n = int(group.size());
  const int64_t outer = prod(shape, 0, axis);
  Work work = all_gather_work(outer, prod(shape, axis, shape.ndim()) * item, n, me);
  std::shared_ptr<Buffer> result;
  if (auto c = state_->cross(api, group, me)) {
    const int64_t bytes = shape.size() * item;
    auto all = state_->cross_gather(p, *c, in, bytes);
    // Along the leading axis the gathered blocks are the result as they are.
    if (outer == 1) return all;
    result = Buffer::allocate(size_t(n * bytes));
    work.own(blocks_of(*all, n, bytes), only_mine(n, me, result->data()));
    return result;
  }
  state_->run(p, group, me, in, nullptr, work, &result, size_t(shape.size() * item) * n);
  return result;
}

namespace {

void check_scatter(const char* api, const Shape& shape, int dim, int n) {
  if (dim < 0 || dim >= shape.ndim())
    throw AxisError(std::string("[") + api + "] scatter dimension " + std::to_string(dim) +
                    " is out of bounds for shape " + shape.str());
  if (n > 0 && shape[dim] % n != 0)
    invalid(api, "scatter dimension " + std::to_string(dim) + " of shape " + shape.str() +
                     " is not divisible by the axis size " + std::to_string(n));
}

// reduce_scatter of `shape` along `dim` (checked). Member j's output is, for each of `outer`
// leading indices, the j-th of n chunks of a row of the sum. Its elements, member after member,
// are the units the pieces split.
Work reduce_scatter_work(ReduceOp op, DType dtype, const Shape& shape, int dim, int n, int me) {
  const int64_t outer = prod(shape, 0, dim);
  const int64_t inner = prod(shape, dim + 1, shape.ndim());
  const int64_t row = n > 0 ? shape[dim] * inner : 0, chunk = n > 0 ? row / n : 0;
  const int64_t per_member = outer * chunk, item = itemsize(dtype);
  const bool may_stream = outputs_exceed_cache(shape.size() * item);
  auto reduce_units = [=](const Ins& ins, const Outs& outs, int64_t b, int64_t e) {
    for (int64_t u = b; u < e;) {
      const int64_t j = u / per_member, o = (u % per_member) / chunk, off = u % chunk;
      const int64_t len = std::min(chunk - off, e - u);
      const int64_t from = o * row + j * chunk + off;
      reduce_range(op, dtype, ins, from, from + len, outs[j], o * chunk + off, may_stream);
      u += len;
    }
  };
  const int64_t align = std::max<int64_t>(1, 64 / item), total = n * per_member;
  const int64_t pieces = piece_count(total * item, (total + align - 1) / align, n);
  return {pieces,
          [=](const Ins& ins, const Outs& outs, int64_t k) {
            auto [b, e] = share(total, int(k), int(pieces), align);
            reduce_units(ins, outs, b, e);
          },
          [=](const Ins& ins, const Outs& outs) {
            reduce_units(ins, outs, me * per_member, (me + 1) * per_member);
          }};
}

void check_all_to_all(const char* api, const Shape& shape, int split_axis, int concat_axis,
                      int n) {
  const int nd = shape.ndim();
  if (split_axis < 0 || split_axis >= nd || concat_axis < 0 || concat_axis >= nd)
    throw AxisError(std::string("[") + api + "] split_axis " + std::to_string(split_axis) +
                    " or concat_axis " + std::to_string(concat_axis) +
                    " is out of bounds for shape " + shape.str());
  if (n > 0 && shape[split_axis] % n != 0)
    invalid(api, "split axis " + std::to_string(split_axis) + " of shape " + shape.str() +
                     " is not divisible by the axis size " + std::to_string(n));
}

// all_to_all's blocks: member i's output is chunk i of every member's input, in member order.
struct AllToAllBlocks {
  std::vector<int64_t> chunk, src_strides, dst_strides;
  int64_t item = 0;
  int split_axis = 0, concat_axis = 0;
  bool may_stream = false;
  AllToAllBlocks(DType dtype, const Shape& shape, int split, int concat, int n)
      : chunk(shape.dims()), item(itemsize(dtype)), split_axis(split), concat_axis(concat) {
    if (n > 0) chunk[size_t(split)] /= n;
    std::vector<int64_t> out_dims = chunk;
    out_dims[size_t(concat)] *= n;
    src_strides = byte_strides(shape.dims(), item);
    dst_strides = byte_strides(out_dims, item);
    may_stream = outputs_exceed_cache(n * shape.size() * item);
  }
  const Byte* chunk_of(const Byte* in, int64_t to) const {
    return in + to * chunk[size_t(split_axis)] * src_strides[size_t(split_axis)];
  }
  Byte* place_of(Byte* out, int64_t from) const {
    return out + from * chunk[size_t(concat_axis)] * dst_strides[size_t(concat_axis)];
  }
  // Chunk `to` of member `from`'s input into its place in member `to`'s output.
  void copy(const Byte* in, int64_t from, int64_t to, Byte* out, bool stream) const {
    copy_block(chunk_of(in, to), src_strides, place_of(out, from), dst_strides, chunk, item,
               stream);
  }
};

// all_to_all: piece i·n + j copies chunk i of member j's input into member i's output.
Work all_to_all_work(const AllToAllBlocks& blocks, int n, int me) {
  return {int64_t(n) * n,
          [=](const Ins& ins, const Outs& outs, int64_t k) {
            blocks.copy(ins[k % n], k % n, k / n, outs[k / n], blocks.may_stream);
          },
          [=](const Ins& ins, const Outs& outs) {
            for (int64_t j = 0; j < n; ++j) blocks.copy(ins[j], j, me, outs[me], blocks.may_stream);
          }};
}

}  // namespace

void Communicator::reduce_scatter(const char* api, std::span<const int> group, int me, ReduceOp op,
                                  DType dtype, const Shape& shape, int dim, const void* in,
                                  void* out) {
  const int n = int(group.size());
  check_scatter(api, shape, dim, n);
  Params p{Kind::reduce_scatter, api, op, dtype, shape, dim, 0, false, {}};
  if (auto c = state_->cross(api, group, me)) {
    const int64_t outer = prod(shape, 0, dim);
    const int64_t row = n > 0 ? prod(shape, dim, shape.ndim()) : 0, chunk = n > 0 ? row / n : 0;
    state_->cross_reduce_scatter(p, *c, in, out, State::Scatter{outer, row, chunk});
    return;
  }
  state_->run(p, group, me, in, out, reduce_scatter_work(op, dtype, shape, dim, n, me));
}

void Communicator::all_to_all(const char* api, std::span<const int> group, int me, DType dtype,
                              const Shape& shape, int split_axis, int concat_axis, const void* in,
                              void* out) {
  const int n = int(group.size());
  check_all_to_all(api, shape, split_axis, concat_axis, n);
  Params p{Kind::all_to_all, api, ReduceOp::sum, dtype, shape, split_axis, concat_axis, false, {}};
  const AllToAllBlocks blocks(dtype, shape, split_axis, concat_axis, n);
  if (auto c = state_->cross(api, group, me)) {
    // Between processes a chunk travels alone, packed: row-major in the chunk's own shape.
    const auto packed_strides = byte_strides(blocks.chunk, blocks.item);
    State::Route route;
    route.block = blocks.item;
    for (int64_t d : blocks.chunk) route.block *= d;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) route.moves.emplace_back(j, i);
    route.pack = [&](const Byte* from_in, int, int to, Byte* packed) {
      copy_block(blocks.chunk_of(from_in, to), blocks.src_strides, packed, packed_strides,
                 blocks.chunk, blocks.item, false);
    };
    route.unpack = [&](const Byte* packed, int from, int, Byte* to_out) {
      copy_block(packed, packed_strides, blocks.place_of(to_out, from), blocks.dst_strides,
                 blocks.chunk, blocks.item, false);
    };
    route.move = [&](const Byte* from_in, int from, int to, Byte* to_out) {
      blocks.copy(from_in, from, to, to_out, blocks.may_stream);
    };
    state_->cross_exchange(p, *c, in, out, route);
    return;
  }
  state_->run(p, group, me, in, out, all_to_all_work(blocks, n, me));
}

bool Communicator::State::spans_processes(const char* api, std::span<const int> group, int me) {
  return any_remote && plan(api, group, me).comm != nullptr;
}

void Communicator::State::run_blocks(
    std::span<const Communicator::Block> blocks, std::span<const int> group, int me,
    const std::function<Described(const Communicator::Block&)>& describe) {
  std::vector<Described> described;
  for (const Communicator::Block& b : blocks) described.push_back(describe(b));
  std::vector<Part> parts;
  for (size_t k = 0; k < blocks.size(); ++k)
    parts.push_back(Part{&described[k].params, blocks[k].in, blocks[k].out, &described[k].work,
                         blocks[k].result, described[k].out_bytes});
  run(parts, group, me);
}

namespace {

void check_operands(const char* api, size_t count, bool results_allowed,
                    std::span<const Communicator::Block> blocks) {
  if (count == 0) invalid(api, "a combined collective needs at least one operand");
  if (!results_allowed)
    for (const Communicator::Block& b : blocks)
      if (b.result) invalid(api, "this collective writes its results into the callers' buffers");
}

}  // namespace

void Communicator::all_reduce(const char* api, std::span<const int> group, int me, ReduceOp op,
                              std::span<const Block> blocks) {
  check_operands(api, blocks.size(), true, blocks);
  if (blocks.size() == 1 || state_->spans_processes(api, group, me)) {
    for (const Block& b : blocks) {
      if (b.result)
        *b.result = all_reduce_shared(api, group, me, op, b.dtype, b.shape, b.in, b.in_owner);
      else
        all_reduce(api, group, me, op, b.dtype, b.shape, b.in, b.out);
    }
    return;
  }
  const int n = int(group.size());
  state_->run_blocks(blocks, group, me, [&](const Block& b) {
    check_reducible(api, b.dtype);
    return State::Described{
        Params{Kind::all_reduce, api, op, b.dtype, b.shape, 0, 0, false, {}, b.result != nullptr},
        all_reduce_work(op, b.dtype, b.shape.size(), n, me),
        size_t(b.shape.size() * itemsize(b.dtype))};
  });
}

void Communicator::all_gather(const char* api, std::span<const int> group, int me, int axis,
                              bool tiled, std::span<const Block> blocks) {
  check_operands(api, blocks.size(), true, blocks);
  if (blocks.size() == 1 || state_->spans_processes(api, group, me)) {
    for (const Block& b : blocks) {
      if (b.result)
        *b.result = all_gather_shared(api, group, me, b.dtype, b.shape, axis, tiled, b.in);
      else
        all_gather(api, group, me, b.dtype, b.shape, axis, tiled, b.in, b.out);
    }
    return;
  }
  const int n = int(group.size());
  state_->run_blocks(blocks, group, me, [&](const Block& b) {
    check_gather_axis(api, b.shape, axis, tiled);
    const int64_t item = itemsize(b.dtype);
    return State::Described{Params{Kind::all_gather, api, ReduceOp::sum, b.dtype, b.shape, axis, 0,
                                   tiled, {}, b.result != nullptr},
                            all_gather_work(prod(b.shape, 0, axis),
                                            prod(b.shape, axis, b.shape.ndim()) * item, n, me),
                            size_t(b.shape.size() * item) * size_t(n)};
  });
}

void Communicator::reduce_scatter(const char* api, std::span<const int> group, int me, ReduceOp op,
                                  int dim, std::span<const Block> blocks) {
  check_operands(api, blocks.size(), false, blocks);
  if (blocks.size() == 1 || state_->spans_processes(api, group, me)) {
    for (const Block& b : blocks)
      reduce_scatter(api, group, me, op, b.dtype, b.shape, dim, b.in, b.out);
    return;
  }
  const int n = int(group.size());
  state_->run_blocks(blocks, group, me, [&](const Block& b) {
    check_scatter(api, b.shape, dim, n);
    return State::Described{
        Params{Kind::reduce_scatter, api, op, b.dtype, b.shape, dim, 0, false, {}},
        reduce_scatter_work(op, b.dtype, b.shape, dim, n, me)};
  });
}

void Communicator::all_to_all(const char* api, std::span<const int> group, int me, int split_axis,
                              int concat_axis, std::span<const Block> blocks) {
  check_operands(api, blocks.size(), false, blocks);
  if (blocks.size() == 1 || state_->spans_processes(api, group, me)) {
    for (const Block& b : blocks)
      all_to_all(api, group, me, b.dtype, b.shape, split_axis, concat_axis, b.in, b.out);
    return;
  }
  const int n = int(group.size());
  state_->run_blocks(blocks, group, me, [&](const Block& b) {
    check_all_to_all(api, b.shape, split_axis, concat_axis, n);
    return State::Described{Params{Kind::all_to_all, api, ReduceOp::sum, b.dtype, b.shape,
                                   split_axis, concat_axis, false, {}},
                            all_to_all_work(AllToAllBlocks(b.dtype, b.shape, split_axis,
                                                           concat_axis, n),
                                            n, me)};
  });
}

void Communicator::permute(const char* api, std::span<const int> group, int me,
                           std::span<const std::pair<int, int>> perm, DType dtype,
                           const Shape& shape, const void* in, void* out) {
  const int n = int(group.size());
  Params p{
      Kind::permute, api, ReduceOp::sum, dtype, shape, 0, 0, false, {perm.begin(), perm.end()}};
  std::vector<bool> src_seen(size_t(std::max(n, 0)), false), dst_seen(src_seen);
  for (auto [s, d] : perm) {
    if (s < 0 || s >= n || d < 0 || d >= n)
      invalid(api, "permutation pair (" + std::to_string(s) + ", " + std::to_string(d) +
                       ") is outside an axis of size " + std::to_string(n));
    if (src_seen[s] || dst_seen[d])
      invalid(api, "ppermute sources and destinations must be unique, got " +
                       params_str(p, "permutation"));
    src_seen[s] = dst_seen[d] = true;
  }
  const size_t bytes = size_t(shape.size() * itemsize(dtype));
  std::vector<int> source(size_t(std::max(n, 0)), -1);
  for (auto [s, d] : perm) source[size_t(d)] = s;
  // Piece i fills member i's output.
  auto fill = [=](const Ins& ins, const Outs& outs, int64_t i) {
    const int s = source[size_t(i)];
    if (s < 0)
      std::memset(outs[i], 0, bytes);
    else if (outs[i] != ins[s])
      std::memcpy(outs[i], ins[s], bytes);
  };
  if (auto c = state_->cross(api, group, me)) {
    State::Route route;
    route.block = int64_t(bytes);
    route.moves.assign(perm.begin(), perm.end());
    route.pack = [&](const Byte* from_in, int, int, Byte* packed) {
      std::memcpy(packed, from_in, bytes);
    };
    route.unpack = [&](const Byte* packed, int, int, Byte* to_out) {
      std::memcpy(to_out, packed, bytes);
    };
    route.move = [&](const Byte* from_in, int, int, Byte* to_out) {
      if (to_out != from_in) std::memcpy(to_out, from_in, bytes);
    };
    route.fill = [&](int, Byte* to_out) { std::memset(to_out, 0, bytes); };
    state_->cross_exchange(p, *c, in, out, route);
    return;
  }
  Work work{n, fill, [=](const Ins& ins, const Outs& outs) { fill(ins, outs, me); }};
  state_->run(p, group, me, in, out, work);
}

void Communicator::barrier(const char* api, std::span<const int> group, int me) {
  Params p;
  p.kind = Kind::barrier;
  p.api = api;
  if (auto c = state_->cross(api, group, me)) {
    // One byte from every member: nobody has it before everybody has sent.
    const Byte token = 0;
    state_->cross_gather(p, *c, &token, 1);
    return;
  }
  state_->run(p, group, me, nullptr, nullptr, Work{});
}

}  // namespace spmd::runtime
