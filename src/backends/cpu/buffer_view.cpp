// Views are Buffers made with a deleter that holds their parent, so std::get_deleter tells them
// apart from allocations without making Buffer polymorphic.
#include "backends/cpu/buffer_view.h"

namespace spmd::cpu {
namespace {

// A Buffer of capacity 0 does not free its memory (runtime/buffer.cpp): the parent does.
class ViewBuffer : public Buffer {
 public:
  ViewBuffer(void* data, size_t nbytes) : Buffer(data, nbytes, 0) {}
};

struct ViewDeleter {
  ViewSource source;
  void operator()(Buffer* view) const { delete static_cast<ViewBuffer*>(view); }
};

}  // namespace

std::shared_ptr<Buffer> make_buffer_view(const std::shared_ptr<Buffer>& parent, size_t offset,
                                         size_t nbytes) {
  ViewSource source{parent, offset};
  if (const ViewSource* outer = view_source(parent))
    source = ViewSource{outer->parent, outer->offset + offset};
  void* data = static_cast<std::byte*>(source.parent->data()) + source.offset;
  return std::shared_ptr<Buffer>(new ViewBuffer(data, nbytes), ViewDeleter{std::move(source)});
}

const ViewSource* view_source(const std::shared_ptr<Buffer>& buffer) {
  const ViewDeleter* deleter = std::get_deleter<ViewDeleter>(buffer);
  return deleter ? &deleter->source : nullptr;
}

}  // namespace spmd::cpu
