// In-process collectives between the devices of one launch: a rendezvous over shared memory.
// Each participant publishes its buffers and waits on a condition variable until its group has
// arrived; the members then claim pieces of the work (reading their peers' buffers directly and
// writing any member's output) until none are left, and return once every piece is finished. Small
// inputs (64 KiB or less) are copied into the collective on arrival instead, so one rendezvous
// suffices. When the launch has no more devices than cores, a member polls for up to 50 µs before
// it sleeps (a wakeup on a sleeping core costs more than a small collective); otherwise nothing
// polls.
//
// A launch (one run of a per-device program on N devices) owns one Communicator; the device
// threads call it with their rank. Collectives run over a *group*: a list of ranks (for a mesh
// axis, the devices that share the other mesh coordinates). Members of a group are matched by
// call order: the k-th collective a rank joins on a group meets the k-th collective of every
// other member on that group. Group order is rank order of the result (member j of the group is
// instance j along the named axis).
//
// Errors: when a group does not complete within the timeout, or members disagree on the
// operation, dtype or shapes, every member that arrived throws CollectiveError naming the
// devices that arrived and those that did not; later arrivals at that collective throw too.
// A member left waiting by a device whose program failed (abort) throws PeerFailure, so a launch
// can report the failure itself rather than its consequences.
#pragma once

#include <spmd/dtype.h>
#include <spmd/error.h>
#include <spmd/shape.h>

#include "core/buffer.h"

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace spmd::runtime {

// The CollectiveError of a member whose collective could not complete because another device's
// program failed: a consequence of that failure, which launch() reports only when no device has
// an error of its own.
class PeerFailure : public CollectiveError {
  using CollectiveError::CollectiveError;
};

enum class ReduceOp { sum, max, min };

// Default wait before a collective gives up: env SPMD_COLLECTIVE_TIMEOUT_MS (an integer from 1 to
// 86400000, a day; anything else raises ValueError), else 60 s.
std::chrono::milliseconds default_collective_timeout();

// inout[k] = in[k] ⊕ inout[k] for k < n, `in` first, with the element rules of all_reduce (NaN
// wins max and min, 16-bit floats round after each step). The reduction between processes uses it.
void combine_into(ReduceOp op, DType dtype, const void* in, void* inout, int64_t n);
// out[k] = a[k] ⊕ b[k], `a` first; `out` may be `a` or `b`.
void combine(ReduceOp op, DType dtype, const void* a, const void* b, void* out, int64_t n);

class Communicator {
 public:
  // `device_ids[r]` is the device id of rank r (used in error messages).
  explicit Communicator(std::vector<int> device_ids,
                        std::chrono::milliseconds timeout = default_collective_timeout());
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int size() const;
  // How long a collective waits before it gives up.
  std::chrono::milliseconds timeout() const;

  // Marks the launch as failed on `rank` (its program threw): every collective that waits for
  // `rank`, now or later, throws CollectiveError at once instead of waiting for the timeout.
  void abort(int rank, const std::string& reason);

  // In every call: `group` lists the member ranks in instance order, `me` is the caller's
  // position in `group`, `shape`/`dtype` describe the caller's block (the same on every member),
  // `in` and `out` are the caller's row-major buffers; `api` names the collective for messages
  // ("psum"). Output shapes are the caller's business: the kernels compute them from the shape
  // rules and pass correctly sized buffers.

  // out = reduction over members of in (elementwise, members combined in group order 0..n-1,
  // each step rounded to `dtype`; bool is not accepted: callers convert).
  void all_reduce(const char* api, std::span<const int> group, int me, ReduceOp op, DType dtype,
                  const Shape& shape, const void* in, void* out);

  // As all_reduce, with one result for the whole group: above the size that is copied on
  // arrival, the members write their shares of one buffer that all of them receive, instead of
  // every share into every member's output (1/n of the writes). Smaller results are computed by
  // each member into a buffer of its own. The result is read-only: Arrays are immutable, and a
  // buffer shared by several Arrays is never written over in place (compile/executable.cpp).
  // `in_owner`, when given, holds `in`: a reduction between processes may then send straight from
  // it (keeping it past a wait given up) instead of copying what it sends.
  std::shared_ptr<Buffer> all_reduce_shared(const char* api, std::span<const int> group, int me,
                                            ReduceOp op, DType dtype, const Shape& shape,
                                            const void* in,
                                            std::shared_ptr<Buffer> in_owner = nullptr);

  // out = the members' blocks stacked along a new axis `axis` (tiled = false; out has shape
  // shape[:axis] + [n] + shape[axis:]) or concatenated along `axis` (tiled = true).
  void all_gather(const char* api, std::span<const int> group, int me, DType dtype,
                  const Shape& shape, int axis, bool tiled, const void* in, void* out);

  // As all_gather, with one result buffer for the group as all_reduce_shared has.
  std::shared_ptr<Buffer> all_gather_shared(const char* api, std::span<const int> group, int me,
                                            DType dtype, const Shape& shape, int axis, bool tiled,
                                            const void* in);

  // S = sum over members of in. tiled: out = the me-th of n equal chunks of S along `dim`
  // (shape[dim] % n == 0). Untiled: shape[dim] == n and out = S[me] with `dim` removed
  // (the same bytes as the tiled chunk).
  void reduce_scatter(const char* api, std::span<const int> group, int me, ReduceOp op, DType dtype,
                      const Shape& shape, int dim, const void* in, void* out);

  // Splits `in` into n chunks along split_axis; chunk j goes to member j; member i concatenates
  // the chunks it receives (from members 0..n-1) along concat_axis. Shapes are those of the
  // tiled form (shape[split_axis] % n == 0); callers express the untiled form by reshaping.
  void all_to_all(const char* api, std::span<const int> group, int me, DType dtype,
                  const Shape& shape, int split_axis, int concat_axis, const void* in, void* out);

  // perm: (source, destination) pairs of group positions; sources unique, destinations unique.
  // out = the block of the member whose (source → me) pair exists, else zeros.
  void permute(const char* api, std::span<const int> group, int me,
               std::span<const std::pair<int, int>> perm, DType dtype, const Shape& shape,
               const void* in, void* out);

  // ---- combined collectives: several operands of one kind over one group, met once ----------
  // Operand k is the caller's block `blocks[k]`, and its result is what the call of one operand
  // gives (in group order, with the same bits); the members must give the same number of
  // operands with the same dtypes and shapes. Within this process the operands share one
  // rendezvous: their work is split into pieces claimed from one counter, and inputs small
  // together (64 KiB) are copied on arrival together. A group that spans processes runs the
  // operands one after another.
  struct Block {
    DType dtype;
    Shape shape;
    const void* in;
    void* out = nullptr;
    // all_reduce and all_gather: when set, `out` is ignored and the result is handed back here,
    // one buffer for the group as all_reduce_shared and all_gather_shared give.
    std::shared_ptr<Buffer>* result = nullptr;
    std::shared_ptr<Buffer> in_owner = nullptr;  // as all_reduce_shared's
  };
  void all_reduce(const char* api, std::span<const int> group, int me, ReduceOp op,
                  std::span<const Block> blocks);
  void all_gather(const char* api, std::span<const int> group, int me, int axis, bool tiled,
                  std::span<const Block> blocks);
  void reduce_scatter(const char* api, std::span<const int> group, int me, ReduceOp op, int dim,
                      std::span<const Block> blocks);
  void all_to_all(const char* api, std::span<const int> group, int me, int split_axis,
                  int concat_axis, std::span<const Block> blocks);

  // Waits until every member of `group` has arrived (used by debug printing to keep order).
  void barrier(const char* api, std::span<const int> group, int me);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace spmd::runtime
