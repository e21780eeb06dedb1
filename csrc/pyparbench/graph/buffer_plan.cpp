#include "pyparbench/graph/buffer_plan.hpp"

#include <cstdint>

namespace ppb {

namespace {

// ancestors[j] as a bit set over the nodes: every node j waits for.
class Ancestors {
 public:
  explicit Ancestors(const std::vector<BufferNode>& nodes)
      : words_((nodes.size() + 63) / 64), bits_(nodes.size() * words_, 0) {
    for (size_t j = 0; j < nodes.size(); ++j)
      for (int in : nodes[j].inputs) {
        for (size_t w = 0; w < words_; ++w) bits_[j * words_ + w] |= bits_[in * words_ + w];
        bits_[j * words_ + in / 64] |= uint64_t{1} << (in % 64);
      }
  }
  bool has(size_t j, int u) const { return (bits_[j * words_ + u / 64] >> (u % 64)) & 1; }

 private:
  size_t words_;
  std::vector<uint64_t> bits_;
};

struct Buffer {
  size_t bytes = 0;
  std::vector<int> owners;  // the nodes whose outputs it holds, in order
};

}  // namespace

BufferPlan plan_buffers(const std::vector<BufferNode>& nodes, bool reuse) {
  const size_t n = nodes.size();
  std::vector<int> owner(n);  // the node whose buffer a node writes
  for (size_t i = 0; i < n; ++i)
    owner[i] = nodes[i].alias_of >= 0 ? owner[nodes[i].alias_of] : static_cast<int>(i);

  // Who touches each owner's contents: the aliases writing into it and
  // every reader of one of them. A kept output pins its buffer.
  std::vector<std::vector<int>> users(n);
  std::vector<bool> pinned(n, false);
  for (size_t i = 0; i < n; ++i) {
    users[owner[i]].push_back(static_cast<int>(i));
    if (nodes[i].keep) pinned[owner[i]] = true;
    for (int in : nodes[i].inputs) users[owner[in]].push_back(static_cast<int>(i));
  }

  const Ancestors before(reuse ? nodes : std::vector<BufferNode>{});
  std::vector<Buffer> buffers;
  std::vector<int> buffer_of(n, -1);
  for (size_t j = 0; j < n; ++j) {
    if (owner[j] != static_cast<int>(j)) continue;
    const size_t need = nodes[j].bytes;
    int pick = -1;
    if (reuse) {
      for (size_t b = 0; b < buffers.size(); ++b) {
        const int holder = buffers[b].owners.back();
        if (pinned[holder]) continue;
        bool free = true;
        for (int u : users[holder]) free = free && before.has(j, u);
        if (!free) continue;
        // The smallest that fits; else the largest, which then grows.
        if (pick < 0) { pick = static_cast<int>(b); continue; }
        const size_t have = buffers[b].bytes, best = buffers[pick].bytes;
        const bool fits = have >= need, best_fits = best >= need;
        if (fits ? (!best_fits || have < best) : (!best_fits && have > best))
          pick = static_cast<int>(b);
      }
    }
    if (pick < 0) {
      pick = static_cast<int>(buffers.size());
      buffers.emplace_back();
    }
    Buffer& b = buffers[pick];
    if (b.bytes < need) b.bytes = need;
    b.owners.push_back(static_cast<int>(j));
    buffer_of[j] = pick;
  }

  BufferPlan plan;
  plan.slot.resize(n);
  plan.overwritten.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = buffers[buffer_of[owner[i]]];
    plan.slot[i] = buffer_of[owner[i]];
    plan.overwritten[i] = b.owners.back() != owner[i];
  }
  for (const Buffer& b : buffers) plan.bytes.push_back(b.bytes);
  return plan;
}

}  // namespace ppb
