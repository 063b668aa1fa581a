// The pretty printer behind Program::str(); see pretty.h.
#include "ir/pretty.h"

#include <utility>

namespace spmd::pp {

enum class Kind { nil, text, brk, concat, group, nest };
struct Node {
  Kind kind;
  std::string text;  // text, or a break's flat text
  std::vector<Doc> children;
  int indent = 0;
};

namespace {
Doc make(Kind k, std::string s = {}, std::vector<Doc> children = {}, int indent = 0) {
  return std::make_shared<const Node>(Node{k, std::move(s), std::move(children), indent});
}

enum class Mode { flat, broken };
struct Item {
  int indent;
  Mode mode;
  const Node* node;
};

// Whether `node` printed flat takes at most `width` columns.
bool fits(const Node* node, int width) {
  std::vector<const Node*> agenda{node};
  while (width >= 0 && !agenda.empty()) {
    const Node* n = agenda.back();
    agenda.pop_back();
    switch (n->kind) {
      case Kind::text:
      case Kind::brk:
        width -= int(n->text.size());
        break;
      case Kind::concat:
        for (auto it = n->children.rbegin(); it != n->children.rend(); ++it)
          agenda.push_back(it->get());
        break;
      case Kind::group:
      case Kind::nest:
        agenda.push_back(n->children[0].get());
        break;
      case Kind::nil:
        break;
    }
  }
  return width >= 0;
}
}  // namespace

Doc nil() {
  return make(Kind::nil);
}
Doc text(std::string s) {
  return make(Kind::text, std::move(s));
}
Doc brk(std::string s) {
  return make(Kind::brk, std::move(s));
}
Doc concat(std::vector<Doc> docs) {
  return make(Kind::concat, {}, std::move(docs));
}
Doc group(Doc d) {
  return make(Kind::group, {}, {std::move(d)});
}
Doc nest(int n, Doc d) {
  return make(Kind::nest, {}, {std::move(d)}, n);
}
Doc join(const Doc& separator, const std::vector<Doc>& docs) {
  std::vector<Doc> out;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i) out.push_back(separator);
    out.push_back(docs[i]);
  }
  return concat(std::move(out));
}

std::string format(const Doc& d, int width) {
  std::string out;
  int column = 0;
  std::vector<Item> agenda{{0, Mode::broken, d.get()}};
  while (!agenda.empty()) {
    Item item = agenda.back();
    agenda.pop_back();
    const Node* n = item.node;
    switch (n->kind) {
      case Kind::nil:
        break;
      case Kind::text:
        out += n->text;
        column += int(n->text.size());
        break;
      case Kind::brk:
        if (item.mode == Mode::flat) {
          out += n->text;
          column += int(n->text.size());
        } else {
          out += '\n';
          out.append(size_t(item.indent), ' ');
          column = item.indent;
        }
        break;
      case Kind::concat:
        for (auto it = n->children.rbegin(); it != n->children.rend(); ++it)
          agenda.push_back({item.indent, item.mode, it->get()});
        break;
      case Kind::nest:
        agenda.push_back({item.indent + n->indent, item.mode, n->children[0].get()});
        break;
      case Kind::group: {
        Mode m = fits(n->children[0].get(), width - column) ? Mode::flat : Mode::broken;
        agenda.push_back({item.indent, m, n->children[0].get()});
        break;
      }
    }
  }
  return out;
}

}  // namespace spmd::pp
