// A small Wadler/Lindig-style pretty printer with JAX's semantics: a group prints flat when its
// own content fits in the remaining width, otherwise its breaks become newlines.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace spmd::pp {

struct Node;
using Doc = std::shared_ptr<const Node>;

Doc nil();
Doc text(std::string s);
Doc brk(std::string s = " ");
Doc concat(std::vector<Doc> docs);
Doc group(Doc d);
Doc nest(int n, Doc d);
Doc join(const Doc& separator, const std::vector<Doc>& docs);
inline Doc operator+(Doc a, Doc b) {
  return concat({std::move(a), std::move(b)});
}

std::string format(const Doc& d, int width = 80);

}  // namespace spmd::pp
