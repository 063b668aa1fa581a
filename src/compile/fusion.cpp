// Elementwise fusion: the grouping pass and the kernel of `fusion` equations (generated code when
// fused_loop.h takes the chain, else the members' kernels tile by tile).
#include "compile/fusion.h"

#include "backends/cpu/parallel.h"
#include "compile/fused_loop.h"
#include "compile/passes.h"
#include "prims/families.h"
#include "prims/primitive.h"

#include <algorithm>
#include <optional>

namespace spmd {
namespace {

// Bytes of every tiled value of one tile together: half a core's L2, so a tile stays there.
constexpr int64_t kTileBytes = 512 << 10;
// Elements of the fused shape below which the tiles run on the calling thread alone.
constexpr int64_t kParallelElements = 1 << 15;
// Rows of dim 0 needed to tile by rows (when some operand broadcasts along trailing dims).
constexpr int64_t kMinRows = 16;

// How the fusion's shape is cut: element ranges of the flattened shape when every value has the
// full shape or is 0-d, else row ranges of dim 0 (operands of size 1 along dim 0 broadcast).
enum class Tiling : uint8_t { flat, rows };

struct FusionPlan {
  // One per body variable, then one per literal operand.
  struct Value {
    bool tiled = false;      // cut along the tiles; else the whole value is every tile's operand
    int64_t unit_bytes = 0;  // bytes per element (flat) or per row of dim 0 (rows), when tiled
    AbstractValue tile_type, last_tile_type;  // the operand type a full / the last tile sees
    int input = -1;                           // the fusion operand it is
    int output = -1;                          // the fusion result it is written to
    int64_t scratch = -1;        // offset of its tile in the scratch (values nothing outside reads)
    const void* data = nullptr;  // literals
  };
  struct Step {
    const Primitive* prim;
    const Params* params;
    std::vector<int> in;  // value indices
    int out;
  };
  ProgramRef body;
  std::vector<Array> literals;
  std::vector<Value> values;
  std::vector<Step> steps;
  int64_t extent = 0;  // elements (flat) or rows (rows) of the shape
  int64_t tile = 0;    // the same per tile
  int64_t tiles = 0;
  int64_t min_grain_tiles = 1;
  int64_t scratch_bytes = 0;
  // Per operand: the single output may be written over it.
  std::vector<bool> may_write_over;
  // Generated code for the whole chain, when it is float32 arithmetic (fused_loop.h), run over
  // element ranges (flat) or once per row.
  std::unique_ptr<FusedLoop> loop;
  int64_t row_elements = 1;  // elements of the fused shape per row (rows), 1 (flat)
};

// A plan as its equation holds it. The plan is a function of its body, tiling and fused shape,
// so it compares and hashes by those.
struct FusionPlanRef {
  std::shared_ptr<const FusionPlan> plan;
  Tiling tiling;
  Shape shape;
  bool operator==(const FusionPlanRef& o) const {
    return tiling == o.tiling && shape == o.shape && *plan->body == *o.plan->body;
  }
};

}  // namespace

template <>
struct ParamTraits<FusionPlanRef> {
  static constexpr std::string_view name = "fusion plan";
  static std::string str(const FusionPlanRef&) { return ""; }  // hidden in the jaxpr text
  static size_t hash(const FusionPlanRef& ref) {
    size_t h = ref.plan->body->hash();
    hash_combine(h, size_t(ref.tiling));
    for (int64_t d : ref.shape.dims()) hash_combine(h, std::hash<int64_t>{}(d));
    return h;
  }
};

namespace {

const FusionPlan& plan_of(const Params& p) {
  return *p.get_object<FusionPlanRef>("plan").plan;
}

Shape with_dim0(const Shape& s, int64_t d0) {
  std::vector<int64_t> dims = s.dims();
  dims[0] = d0;
  return Shape(dims);
}

// Row tiling with generated code: the loop runs once per row of dim 0, where every value is a
// row of the fusion's trailing shape (of the full shape, or a [1, ...] broadcast) or one element
// per row (a [d0, 1, ...] or [1, 1, ...] operand, read as a 0-d value). Other layouts, and rows
// too short to fill the loop's passes, keep the tiles.
constexpr int64_t kMinGeneratedRow = 64;
std::unique_ptr<FusedLoop> generated_row_loop(const Program& body, const Shape& shape) {
  const Shape row(std::vector<int64_t>(shape.dims().begin() + 1, shape.dims().end()));
  if (row.size() < kMinGeneratedRow) return nullptr;
  Program view = body;
  for (AbstractValue& t : view.types) {
    if (t.shape.ndim() == 0) continue;
    const Shape trailing(std::vector<int64_t>(t.shape.dims().begin() + 1, t.shape.dims().end()));
    if (trailing == row)
      t.shape = row;
    else if (trailing.size() == 1)
      t.shape = Shape{};
    else
      return nullptr;
  }
  return FusedLoop::compile(view, row);
}

std::shared_ptr<const FusionPlan> make_plan(ProgramRef body, Tiling tiling, const Shape& shape) {
  auto plan = std::make_shared<FusionPlan>();
  const Program& b = *body;
  plan->body = body;
  const int64_t numel = shape.size();
  plan->extent = tiling == Tiling::flat ? numel : shape[0];
  const int64_t per_unit = tiling == Tiling::flat ? 1 : numel / std::max<int64_t>(1, shape[0]);
  auto row_elements = [](const Shape& s) { return s.size() / std::max<int64_t>(1, s[0]); };

  plan->values.resize(b.types.size());
  for (size_t i = 0; i < b.invars.size(); ++i) plan->values[size_t(b.invars[i])].input = int(i);
  for (size_t k = 0; k < b.outputs.size(); ++k)
    plan->values[size_t(b.outputs[k].var)].output = int(k);
  int64_t bytes_per_unit = 0;
  for (size_t v = 0; v < b.types.size(); ++v) {
    const AbstractValue& t = b.types[v];
    FusionPlan::Value& value = plan->values[v];
    value.tiled =
        tiling == Tiling::flat ? t.shape == shape : t.shape.ndim() > 0 && t.shape[0] == shape[0];
    if (value.tiled) {
      value.unit_bytes =
          int64_t(itemsize(t.dtype)) * (tiling == Tiling::flat ? 1 : row_elements(t.shape));
      bytes_per_unit += value.unit_bytes;
    }
  }
  // Tiles of a multiple of 64 elements keep every tiled value's tiles 64-byte aligned.
  int64_t tile = std::max<int64_t>(1, kTileBytes / std::max<int64_t>(1, bytes_per_unit));
  if (tiling == Tiling::flat) tile = std::max<int64_t>(64, tile / 64 * 64);
  plan->tile = std::min(tile, std::max<int64_t>(1, plan->extent));
  plan->tiles = (plan->extent + plan->tile - 1) / plan->tile;
  const int64_t tile_elements = plan->tile * per_unit;
  plan->min_grain_tiles =
      std::max<int64_t>(1, kParallelElements / std::max<int64_t>(1, tile_elements));
  const int64_t last = plan->extent - (plan->tiles - 1) * plan->tile;

  for (size_t v = 0; v < b.types.size(); ++v) {
    const AbstractValue& t = b.types[v];
    FusionPlan::Value& value = plan->values[v];
    value.tile_type = value.last_tile_type = t;
    if (value.tiled) {
      value.tile_type.shape =
          tiling == Tiling::flat ? Shape{plan->tile} : with_dim0(t.shape, plan->tile);
      value.last_tile_type.shape = tiling == Tiling::flat ? Shape{last} : with_dim0(t.shape, last);
      if (value.input < 0 && value.output < 0) {
        value.scratch = plan->scratch_bytes;
        // Three cache lines between tiles: tiles a multiple of 4 KiB apart would alias in the
        // core's store-to-load checks, stalling every step that reads one tile and writes another.
        plan->scratch_bytes += (value.unit_bytes * plan->tile + 63) / 64 * 64 + 192;
      }
    }
  }

  for (const Equation& e : b.equations) {
    FusionPlan::Step step{e.primitive, &e.params, {}, e.outputs[0]};
    for (const Atom& a : e.inputs) {
      if (!a.is_literal()) {
        step.in.push_back(a.var);
        continue;
      }
      plan->literals.push_back(a.literal);
      FusionPlan::Value value;
      value.tile_type = value.last_tile_type = aval_of(a.literal);
      value.data = host_data(a.literal, "fusion");
      step.in.push_back(int(plan->values.size()));
      plan->values.push_back(std::move(value));
    }
    plan->steps.push_back(std::move(step));
  }

  plan->loop = tiling == Tiling::flat ? FusedLoop::compile(b, shape) : generated_row_loop(b, shape);
  plan->row_elements = tiling == Tiling::flat ? 1 : per_unit;
  // A single output is written by the last step, after every read of the tile's operands.
  plan->may_write_over.assign(b.invars.size(), false);
  if (b.outputs.size() == 1)
    for (size_t i = 0; i < b.invars.size(); ++i)
      plan->may_write_over[i] = plan->values[size_t(b.invars[i])].tiled;
  return plan;
}

// The generated loop: each thread runs its element range (flat) or each of its rows (rows).
void run_fused_loop(const FusionPlan& plan, const KernelArgs& a) {
  const Program& b = *plan.body;
  const int64_t grain = std::max<int64_t>(1, kParallelElements / plan.row_elements);
  cpu::parallel_for(plan.extent, grain, [&](int64_t begin, int64_t end) {
    thread_local std::vector<const void*> ins;
    thread_local std::vector<void*> outs;
    ins.resize(b.invars.size());
    outs.resize(b.outputs.size());
    const bool rows = plan.row_elements > 1;
    for (int64_t r = begin; r < end; r = rows ? r + 1 : end) {
      for (size_t i = 0; i < ins.size(); ++i) {
        const FusionPlan::Value& v = plan.values[size_t(b.invars[i])];
        ins[i] = static_cast<const std::byte*>(a.in[i].data) + (v.tiled ? r * v.unit_bytes : 0);
      }
      for (size_t k = 0; k < outs.size(); ++k)
        outs[k] = static_cast<std::byte*>(a.out[k].data) +
                  r * plan.row_elements * int64_t(itemsize(a.out[k].aval->dtype));
      plan.loop->run(rows ? plan.row_elements : end - begin, ins.data(), outs.data());
    }
  });
}

void fusion_kernel(const KernelArgs& a) {
  const FusionPlan& plan = plan_of(a.params);
  if (plan.loop) return run_fused_loop(plan, a);
  cpu::parallel_for(plan.tiles, plan.min_grain_tiles, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<std::byte> storage;
    thread_local std::vector<Operand> operands;
    if (int64_t(storage.size()) < plan.scratch_bytes + 64)
      storage.resize(size_t(plan.scratch_bytes + 64));
    std::byte* scratch = reinterpret_cast<std::byte*>(
        (reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63));
    for (int64_t t = t0; t < t1; ++t) {
      const bool last = t == plan.tiles - 1;
      // The address of value v's part of tile t.
      auto address = [&](int v) -> void* {
        const FusionPlan::Value& value = plan.values[size_t(v)];
        if (value.scratch >= 0) return scratch + value.scratch;
        const int64_t offset = value.tiled ? t * plan.tile * value.unit_bytes : 0;
        if (value.output >= 0)
          return static_cast<std::byte*>(a.out[size_t(value.output)].data) + offset;
        if (value.input >= 0)
          return const_cast<std::byte*>(
                     static_cast<const std::byte*>(a.in[size_t(value.input)].data)) +
                 offset;
        return const_cast<void*>(value.data);
      };
      auto type = [&](int v) {
        const FusionPlan::Value& value = plan.values[size_t(v)];
        return last ? &value.last_tile_type : &value.tile_type;
      };
      for (const FusionPlan::Step& step : plan.steps) {
        operands.clear();
        for (int v : step.in) operands.push_back({address(v), type(v)});
        const Result result{address(step.out), type(step.out)};
        step.prim->cpu_kernel(KernelArgs{operands, {&result, 1}, *step.params});
      }
    }
  });
}

// ---- the pass -----------------------------------------------------------------------------

// Whether equation `e` of `p` can join a fusion, and how its operands lie over its shape.
bool fusible(const Program& p, const Equation& e) {
  const Primitive& prim = *e.primitive;
  if (!prim.elementwise || prim.eager || !prim.cpu_kernel || prim.effectful ||
      prim.output_aliases_input || e.outputs.size() != 1)
    return false;
  const Shape& shape = p.types[size_t(e.outputs[0])].shape;
  if (shape.size() == 0) return false;
  for (const Atom& a : e.inputs) {
    const Shape& s = p.type_of(a).shape;
    if (s.ndim() == 0 || s == shape) continue;
    if (s.ndim() != shape.ndim() || (s[0] != 1 && s[0] != shape[0])) return false;
  }
  return true;
}

struct Group {
  Shape shape;
  std::vector<int> members;  // equation indices, ascending
  bool open = true;          // no equation outside it has read its outputs yet
};

// A group's sub-program, the fusion's operands and results, and its plan.
struct FusionBody {
  std::shared_ptr<const Program> program;
  std::vector<Atom> inputs;
  std::vector<int> outputs;
  Tiling tiling = Tiling::flat;
  std::shared_ptr<const FusionPlan> plan;
  bool reads_scalars = false;  // some operand is a broadcast's 0-d value
};

// The sub-program of `group`, whose values read outside it become its outputs. Given the
// `producer` of each variable, an operand that broadcasts a 0-d value (the 1 and 2 of max's
// gradient, adam's bias corrections) is read as that value: generated code holds it in a register
// where a broadcast operand is a full array written and read again. Those programs run only as
// generated code (their 0-d operands stand where the members expect the full shape). nullopt
// when the operands' layouts fit neither tiling.
std::optional<FusionBody> build_fusion_body(const Program& p, const Group& group,
                                            const std::vector<int>& uses_outside,
                                            const std::vector<int>* producer) {
  const Shape& shape = group.shape;
  Program body;
  FusionBody out;
  std::vector<int> local(p.types.size(), -1);
  bool flat = true, rows_ok = shape.ndim() > 0 && shape[0] >= kMinRows;
  auto note_layout = [&](const Shape& s) {
    flat = flat && (s.ndim() == 0 || s == shape);
    rows_ok =
        rows_ok && (s.ndim() == 0 || (s.ndim() == shape.ndim() && (s[0] == 1 || s[0] == shape[0])));
  };
  for (int i : group.members) {
    const Equation& e = p.equations[size_t(i)];
    Equation local_e{e.primitive, e.params, {}, {}};
    for (Atom a : e.inputs) {
      if (!a.is_literal() && producer) {
        std::optional<Atom> scalar = scalar_broadcast_source(p, *producer, a.var);
        out.reads_scalars = out.reads_scalars || scalar.has_value();
        a = scalar.value_or(a);
      }
      if (a.is_literal()) {
        local_e.inputs.push_back(a);
        continue;
      }
      if (local[size_t(a.var)] < 0) {
        local[size_t(a.var)] = body.new_var(p.types[size_t(a.var)]);
        body.invars.push_back(local[size_t(a.var)]);
        out.inputs.push_back(a);
        note_layout(p.types[size_t(a.var)].shape);
      }
      local_e.inputs.push_back(Atom::of_var(local[size_t(a.var)]));
    }
    const int v = e.outputs[0];
    local[size_t(v)] = body.new_var(p.types[size_t(v)]);
    local_e.outputs.push_back(local[size_t(v)]);
    body.equations.push_back(std::move(local_e));
    if (uses_outside[size_t(v)] > 0) {
      body.outputs.push_back(Atom::of_var(local[size_t(v)]));
      out.outputs.push_back(v);
    }
  }
  if (!flat && !rows_ok) return std::nullopt;
  out.program = std::make_shared<const Program>(std::move(body));
  out.tiling = flat ? Tiling::flat : Tiling::rows;
  out.plan = make_plan(out.program, out.tiling, shape);
  return out;
}

// The group's fusion, reading broadcast scalars as scalars when generated code takes that.
std::optional<FusionBody> fusion_body(const Program& p, const Group& group,
                                      const std::vector<int>& uses_outside,
                                      const std::vector<int>& producer) {
  std::optional<FusionBody> direct = build_fusion_body(p, group, uses_outside, &producer);
  if (!direct || !direct->reads_scalars || direct->plan->loop) return direct;
  return build_fusion_body(p, group, uses_outside, nullptr);
}

}  // namespace

Program fuse_elementwise(const Program& p) {
  const size_t n = p.equations.size();
  std::vector<Group> groups;
  std::vector<int> group_of_var(p.types.size(), -1), group_of_eqn(n, -1);
  std::vector<int> parent;  // union-find over group ids
  auto find = [&](int g) {
    while (g >= 0 && parent[size_t(g)] != g)
      g = parent[size_t(g)] = parent[size_t(parent[size_t(g)])];
    return g;
  };
  auto group_of = [&](const Atom& a) {
    return a.is_literal() ? -1 : find(group_of_var[size_t(a.var)]);
  };

  for (size_t i = 0; i < n; ++i) {
    const Equation& e = p.equations[i];
    int g = -1;
    if (fusible(p, e)) {
      const Shape& shape = p.types[size_t(e.outputs[0])].shape;
      for (const Atom& a : e.inputs) {
        int h = group_of(a);
        if (h < 0 || h == g || !groups[size_t(h)].open || !(groups[size_t(h)].shape == shape))
          continue;
        if (g < 0) {
          g = h;
          continue;
        }
        // Both groups are open: nothing outside has read either, so both can run here.
        parent[size_t(h)] = g;
        auto& into = groups[size_t(g)].members;
        into.insert(into.end(), groups[size_t(h)].members.begin(), groups[size_t(h)].members.end());
      }
      if (g < 0) {
        g = int(groups.size());
        groups.push_back({shape, {}, true});
        parent.push_back(g);
      }
      groups[size_t(g)].members.push_back(int(i));
      group_of_var[size_t(e.outputs[0])] = g;
      group_of_eqn[i] = g;
    }
    // A group read by an equation outside it must have run before that equation.
    for (const Atom& a : e.inputs) {
      int h = group_of(a);
      if (h >= 0 && h != g) groups[size_t(h)].open = false;
    }
  }

  std::vector<int> producer(p.types.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (int v : p.equations[i].outputs) producer[size_t(v)] = int(i);
  std::vector<int> uses_outside(p.types.size(), 0);  // reads by other groups' or unfused equations
  for (int& g : group_of_eqn) g = find(g);
  for (size_t i = 0; i < n; ++i)
    for (const Atom& a : p.equations[i].inputs)
      if (!a.is_literal() && (group_of_eqn[i] < 0 || group_of(a) != group_of_eqn[i]))
        ++uses_outside[size_t(a.var)];
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) ++uses_outside[size_t(a.var)];

  // Each group worth fusing, as the fusion equation that replaces its last member.
  std::vector<std::optional<Equation>> fused_at(n);
  std::vector<bool> drop(n, false);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (find(int(g)) != int(g)) continue;
    Group& group = groups[g];
    if (group.members.size() < 2) continue;
    std::sort(group.members.begin(), group.members.end());
    const Shape& shape = group.shape;

    const std::optional<FusionBody> fused = fusion_body(p, group, uses_outside, producer);
    if (!fused) continue;
    Params params;
    params.set("jaxpr", ProgramRef(fused->program));
    params.set("plan", object_param(FusionPlanRef{fused->plan, fused->tiling, shape}));
    fused_at[size_t(group.members.back())] =
        Equation{&primitive("fusion"), std::move(params), fused->inputs, fused->outputs};
    for (int i : group.members) drop[size_t(i)] = true;
  }

  // Fusions read broadcast scalars directly, which can leave a broadcast with no reader: from
  // the last equation back, one nothing reads any more goes.
  std::vector<int> reads(p.types.size(), 0);
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) ++reads[size_t(a.var)];
  std::vector<const Equation*> kept(n, nullptr);
  for (size_t i = n; i-- > 0;) {
    const Equation* e = fused_at[i] ? &*fused_at[i] : drop[i] ? nullptr : &p.equations[i];
    if (!e) continue;
    bool read = e->outputs.empty() || e->primitive->effectful || e->primitive->device_dependent;
    for (int v : e->outputs) read = read || reads[size_t(v)] > 0;
    if (!read) continue;
    kept[i] = e;
    for (const Atom& a : e->inputs)
      if (!a.is_literal()) ++reads[size_t(a.var)];
  }
  Program out = p;
  out.equations.clear();
  for (const Equation* e : kept)
    if (e) out.equations.push_back(*e);
  return out;
}

bool fusion_may_write_over(const Params& params, size_t input) {
  const FusionPlan& plan = plan_of(params);
  return input < plan.may_write_over.size() && plan.may_write_over[input];
}

bool fusion_runs_generated_loop(const Params& params) {
  return plan_of(params).loop != nullptr;
}

void register_fusion_primitive(PrimitiveRegistry& r) {
  Primitive& fusion = r.define(
      "fusion",
      [](std::span<const AbstractValue>, const Params& p) {
        return p.get<ProgramRef>("jaxpr")->out_types();
      },
      fusion_kernel);
  fusion.hides_param = [](std::string_view key, const ParamValue&) { return key == "plan"; };
  // Replicated: a fusion's plan is made for its operands' global shapes.
  fusion.sharding_rule = [](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                            const Params&) { return replicated_sharding_rule(in, out); };
}

}  // namespace spmd
