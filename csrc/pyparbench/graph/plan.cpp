#include "pyparbench/graph/plan.hpp"

#include "pyparbench/core/aligned_array.hpp"
#include "pyparbench/core/checks.hpp"
#include "pyparbench/graph/buffer_plan.hpp"
#include "pyparbench/graph/executor.hpp"
#include "pyparbench/graph/node_work.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// The byte offset of slice `s` into its input `in`'s buffer; throws unless
// `s` is rows [start, start + shape[0]) of `in` along axis 0.
size_t slice_offset(const NodeSpec& s, const NodeSpec& in) {
  const std::string where = "slice node '" + s.name + "'";
  if (in.shape.empty() || s.shape.size() != in.shape.size() ||
      !std::equal(s.shape.begin() + 1, s.shape.end(), in.shape.begin() + 1))
    throw std::invalid_argument(where + " must keep every axis but the first of its input");
  if (s.start < 0 || s.start + s.shape[0] > in.shape[0])
    throw std::invalid_argument(where + ": rows [" + std::to_string(s.start) + ", " +
                                std::to_string(s.start + s.shape[0]) +
                                ") are not within its input's " + std::to_string(in.shape[0]));
  if (s.int64 != in.int64 || s.bf16 != in.bf16 || s.int8 != in.int8)
    throw std::invalid_argument(where + " must keep its input's element type");
  return static_cast<size_t>(s.start * (elements(in.shape) / in.shape[0])) * element_bytes(in);
}

// Throws unless the bf16 values of the plan flow as the bf16 plan has them
// (graph/passes/precision.py): a bf16 node is a reorder of an fp32 value (or
// a view of one) or a bf16 conv2d, read only by the bf16 matrix nodes'
// activation inputs.
void check_bf16(const NodeSpec& s, const std::vector<NodeSpec>& nodes) {
  const std::string where = "node '" + s.name + "' (" + op_name(s.op) + ")";
  if (s.precision == Precision::bf16 && s.op != OpKind::conv2d && s.op != OpKind::linear &&
      s.op != OpKind::matmul)
    throw std::invalid_argument(where + " has no bf16 kernel: only conv2d, linear and matmul do");
  if (s.bf16 && s.int64) throw std::invalid_argument(where + " cannot be both int64 and bf16");
  // A bf16 conv2d without a residual may write bf16 itself.
  const bool writes_bf16 = s.op == OpKind::reorder || s.op == OpKind::reshape ||
                           s.op == OpKind::slice ||
                           (s.op == OpKind::conv2d && s.precision == Precision::bf16 &&
                            s.inputs.size() == 1);
  if (s.bf16 && !writes_bf16)
    throw std::invalid_argument(where + " cannot write bf16: only a reorder, or a bf16 conv2d "
                                "without a residual, writes bf16");
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const NodeSpec& in = nodes[static_cast<size_t>(s.inputs[i])];
    const bool alias = (s.op == OpKind::reshape || s.op == OpKind::slice) && i == 0;
    const bool want = alias ? s.bf16 : reads_bf16(s, i);
    if (in.bf16 != want && !in.int64)
      throw std::invalid_argument(where + " reads '" + in.name + "' as " +
                                  (want ? "bf16" : "fp32") + " but it holds " +
                                  (in.bf16 ? "bf16" : "fp32"));
  }
}

}  // namespace

Plan::RunnersKey Plan::runners_key(const ExecSettings& s) {
  const PoolKind pool = s.op_mode == OperatorMode::framework ? s.pool : PoolKind::openmp;
  return {s.intra_op, s.op_mode, s.library, pool, s.alone_below_ns < 0 ? -1.0 : s.alone_below_ns};
}

Plan::Plan(std::vector<NodeSpec> nodes, std::vector<int> outputs, bool reuse_buffers,
           bool weights_in_place)
    : nodes_(std::move(nodes)), outputs_(std::move(outputs)), weights_in_place_(weights_in_place) {
  const int n = static_cast<int>(nodes_.size());
  if (n == 0) throw std::invalid_argument("a plan needs at least one node");
  consumers_.resize(nodes_.size());
  dependencies_.resize(nodes_.size());
  data_.resize(nodes_.size(), nullptr);
  std::vector<BufferNode> buffers(nodes_.size());
  // Per node: its byte offset into the buffer it shares (a slice's rows),
  // and the node that owns that buffer.
  std::vector<size_t> offset(nodes_.size(), 0);
  std::vector<int> root(nodes_.size());
  std::vector<std::string> byte_type(nodes_.size());  // an int8 node's bytes: uint8 / int8
  int64_t max_channels = 1;
  for (int i = 0; i < n; ++i) {
    NodeSpec& s = nodes_[i];
    require_positive_dims("node '" + s.name + "' shape", s.shape);
    std::set<int> distinct;
    s.length_input = -1;
    s.positions_input = -1;
    s.int8_inputs.assign(s.inputs.size(), std::string());
    // A max pool or a reshape of grid bytes keeps them on their grid.
    const bool keeps_grid = s.op == OpKind::reshape || (s.op == OpKind::pool2d && s.kind == "max");
    const bool int8_reader = s.op == OpKind::quantized_linear ||
                             s.op == OpKind::quantized_conv2d || s.op == OpKind::fake_quantize;
    if (s.int8 && !(s.op == OpKind::fake_quantize || keeps_grid ||
                    (int8_reader && s.mode != "float32")))
      throw std::invalid_argument("node '" + s.name + "' (" + op_name(s.op) +
                                  ") cannot hold int8 bytes: only a fake_quantize, an int8 "
                                  "node with an integer output, a max pool or a reshape "
                                  "writes them");
    for (size_t j = 0; j < s.inputs.size(); ++j) {
      const int in = s.inputs[j];
      if (in < 0 || in >= i)
        throw std::invalid_argument("node '" + s.name + "' reads node " + std::to_string(in) +
                                    ", which does not come before it");
      // An int64 node is read by an embedding lookup or by position_ids,
      // viewed by an int64 reshape, or is the (1,) length of a cache kept
      // across runs that a decode_attention (input 5) or rotary (input 1)
      // reads, or a rotary's (B, S) positions.
      const bool length = nodes_[in].shape == Shape{1} &&
                          ((s.op == OpKind::decode_attention && j == 5) ||
                           (s.op == OpKind::rotary && j == 1));
      // Or the (B, S) positions of a rotary node's rows.
      const bool positions = nodes_[in].shape.size() == 2 && s.op == OpKind::rotary && j == 1;
      if (nodes_[in].int64 && length) s.length_input = static_cast<int>(j);
      if (nodes_[in].int64 && positions) s.positions_input = static_cast<int>(j);
      if (nodes_[in].int64 && !length && !positions && s.op != OpKind::embedding_bag &&
          s.op != OpKind::position_ids && !(s.op == OpKind::reshape && s.int64))
        throw std::invalid_argument("node '" + s.name + "' (" + op_name(s.op) +
                                    ") cannot read the int64 node '" + nodes_[in].name + "'");
      if (nodes_[in].int8) {  // grid bytes: int8 nodes read them, a max pool / reshape keeps them
        if (!int8_reader && !(keeps_grid && s.int8))
          throw std::invalid_argument("node '" + s.name + "' (" + op_name(s.op) +
                                      ") cannot read the int8 bytes of node '" +
                                      nodes_[in].name + "'");
        s.int8_inputs[j] = byte_type[static_cast<size_t>(in)];
      }
      distinct.insert(in);
    }
    check_bf16(s, nodes_);
    if (s.int8)  // a max pool's or a reshape's bytes are its input's type
      byte_type[static_cast<size_t>(i)] = keeps_grid && !s.int8_inputs.empty() &&
                                                  !s.int8_inputs[0].empty()
                                              ? s.int8_inputs[0]
                                              : int8_type(s);
    for (int in : distinct) consumers_[in].push_back(i);
    dependencies_[i] = static_cast<int>(distinct.size());
    BufferNode& b = buffers[i];
    b.inputs.assign(distinct.begin(), distinct.end());
    b.bytes = (static_cast<size_t>(elements(s.shape)) * element_bytes(s) + 63) / 64 * 64;
    b.keep = s.op == OpKind::input;
    root[i] = i;
    if (s.op == OpKind::reshape) {
      if (s.inputs.size() != 1 || elements(nodes_[s.inputs[0]].shape) != elements(s.shape))
        throw std::invalid_argument("reshape node '" + s.name + "' changes the element count");
      if (s.int64 != nodes_[s.inputs[0]].int64 || s.bf16 != nodes_[s.inputs[0]].bf16 ||
          s.int8 != nodes_[s.inputs[0]].int8)
        throw std::invalid_argument("reshape node '" + s.name + "' must keep its input's element type");
      b.alias_of = s.inputs[0];
      offset[i] = offset[b.alias_of];
      root[i] = root[b.alias_of];
      continue;
    }
    if (s.op == OpKind::slice) {
      // Inputs past the first only order the slice after those nodes.
      if (s.inputs.empty())
        throw std::invalid_argument("slice node '" + s.name + "' has no inputs");
      b.alias_of = s.inputs[0];
      offset[i] = offset[b.alias_of] + slice_offset(s, nodes_[b.alias_of]);
      root[i] = root[b.alias_of];
      continue;
    }
    if (s.inplace >= 0) {
      if (s.inplace >= static_cast<int>(s.inputs.size()))
        throw std::invalid_argument("node '" + s.name + "' writes in place into input " +
                                    std::to_string(s.inplace) + " of " +
                                    std::to_string(s.inputs.size()));
      const NodeSpec& src = nodes_[s.inputs[s.inplace]];
      // Never into a graph input's buffer (nor a view of it): the caller's data.
      if (nodes_[root[s.inputs[s.inplace]]].op == OpKind::input || src.int64 || src.bf16 ||
          s.bf16 || elements(src.shape) != elements(s.shape))
        throw std::invalid_argument("node '" + s.name + "' cannot write in place into '" +
                                    src.name + "'");
      b.alias_of = s.inputs[s.inplace];
      offset[i] = offset[b.alias_of];
      root[i] = root[b.alias_of];
      continue;
    }
    if (s.op != OpKind::input && s.inputs.empty())
      throw std::invalid_argument("node '" + s.name + "' (" + op_name(s.op) + ") has no inputs");
    if (s.op == OpKind::batch_norm && s.shape.size() >= 2)
      max_channels = std::max(max_channels, s.shape[1]);
  }
  for (int o : outputs_) {
    if (o < 0 || o >= n) throw std::invalid_argument("output " + std::to_string(o) + " is not a node");
    buffers[o].keep = true;
  }
  const BufferPlan bp = plan_buffers(buffers, reuse_buffers);
  for (size_t bytes : bp.bytes) {
    // Rows of 16 floats start on a cache line; large buffers on huge pages.
    void* p = aligned_bytes(bytes);
    std::memset(p, 0, bytes);
    owned_.push_back(p);
    allocated_ += bytes;
  }
  for (int i = 0; i < n; ++i) data_[i] = static_cast<char*>(owned_[bp.slot[i]]) + offset[i];
  root_ = std::move(root);
  overwritten_ = bp.overwritten;
  slots_ = bp.slot;
  slot_bytes_ = bp.bytes;
  ones_.assign(static_cast<size_t>(max_channels), 1.f);
}

Plan::~Plan() {
  for (void* p : owned_) std::free(p);
}

size_t Plan::buffer_bytes(int node) const {
  const NodeSpec& s = nodes_.at(static_cast<size_t>(node));
  return static_cast<size_t>(elements(s.shape)) * element_bytes(s);
}

const void* Plan::buffer(int node) const { return data_.at(static_cast<size_t>(node)); }

void Plan::copy_outputs(const std::vector<int>& nodes, const std::vector<void*>& dst) const {
  if (nodes.size() != dst.size()) throw std::invalid_argument("one destination per node");
  for (int n : nodes) {
    buffer_bytes(n);  // std::out_of_range for a bad node, before copying
    if (overwritten_[static_cast<size_t>(n)])
      throw std::invalid_argument(
          "node '" + nodes_[static_cast<size_t>(n)].name +
          "' shares its buffer with later nodes (buffer reuse), so its value does not "
          "survive the run: only graph inputs and outputs can be read back");
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < nodes.size(); ++i)
    std::memcpy(dst[i], data_[static_cast<size_t>(nodes[i])], buffer_bytes(nodes[i]));
}

void Plan::set_input(int node, const void* data, size_t bytes) {
  const NodeSpec& s = nodes_.at(static_cast<size_t>(node));
  if (s.op != OpKind::input) throw std::invalid_argument("node '" + s.name + "' is not an input");
  if (bytes != buffer_bytes(node))
    throw std::invalid_argument("input '" + s.name + "' takes " +
                                std::to_string(buffer_bytes(node)) + " bytes, got " +
                                std::to_string(bytes));
  std::lock_guard<std::mutex> lock(mu_);
  std::memcpy(data_[static_cast<size_t>(node)], data, bytes);
}

void Plan::bind_input(int node, void* data, size_t bytes) {
  const NodeSpec& s = nodes_.at(static_cast<size_t>(node));
  if (s.op != OpKind::input) throw std::invalid_argument("node '" + s.name + "' is not an input");
  if (s.int64 || s.bf16)
    throw std::invalid_argument("input '" + s.name + "' is not float32: only a float32 input "
                                "can be bound to a caller's buffer");
  if (bytes != buffer_bytes(node))
    throw std::invalid_argument("input '" + s.name + "' takes " +
                                std::to_string(buffer_bytes(node)) + " bytes, got " +
                                std::to_string(bytes));
  if (!data) throw std::invalid_argument("input '" + s.name + "' bound to a null buffer");
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (static_cast<int>(i) != node && root_[i] == node)
      throw std::invalid_argument("input '" + s.name + "' is viewed by node '" + nodes_[i].name +
                                  "' (a reshape or slice): only an input read where it is "
                                  "can be bound");
  std::lock_guard<std::mutex> lock(mu_);
  // The input's own buffer (a graph input's is its own for good, and no
  // other node views it: checked above) is not read again: freed, so that
  // a bound cache is not held twice.
  void*& own = owned_[static_cast<size_t>(slots_[static_cast<size_t>(node)])];
  if (own != nullptr && own == data_[static_cast<size_t>(node)]) {
    std::free(own);
    own = nullptr;
    allocated_ -= slot_bytes_[static_cast<size_t>(slots_[static_cast<size_t>(node)])];
  }
  data_[static_cast<size_t>(node)] = data;
  // The prepared kernels hold the old address: they are made again.
  runners_.clear();
}

Plan::Prepared& Plan::prepared(const ExecSettings& settings) {
  const RunnersKey key = runners_key(settings);
  auto it = runners_.find(key);
  if (it != runners_.end()) return it->second;
  Prepared p;
  p.runners.resize(nodes_.size());
  p.threads.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeSpec& s = nodes_[i];
    std::vector<Tensor> ins;
    std::vector<Shape> shapes;
    for (int in : s.inputs) {
      ins.push_back({data_[in], nodes_[in].shape});
      shapes.push_back(nodes_[in].shape);
    }
    const bool computes = !is_alias(s.op);
    p.threads[i] = choose_threads(node_work(s, shapes), settings, computes);
    p.runners[i] = make_node_runner(s, ins, {data_[i], s.shape}, settings, ones_,
                                    std::max(p.threads[i].threads, 1), p.threads[i].direct,
                                    weights_in_place_);
    if (computes) p.team = std::max(p.team, p.threads[i].threads);
  }
  return runners_.emplace(key, std::move(p)).first->second;
}

std::vector<NodeThreads> Plan::node_threads(const ExecSettings& settings) {
  validate(settings, nodes_.size());
  std::lock_guard<std::mutex> lock(mu_);
  return prepared(settings).threads;
}

std::vector<double> Plan::time_node(const ExecSettings& settings, int node, int repeats,
                                    int warmup, int inner) {
  validate(settings, nodes_.size());
  require_at_least("repeats", repeats, 1);
  require_at_least("warmup", warmup, 0);
  require_at_least("inner", inner, 1);
  if (node < 0 || node >= static_cast<int>(nodes_.size()))
    throw std::out_of_range("node " + std::to_string(node) + " is not one of the plan's " +
                            std::to_string(nodes_.size()));
  std::lock_guard<std::mutex> lock(mu_);
  NodeRunner* r = prepared(settings).runners[static_cast<size_t>(node)].get();
  if (!r)
    throw std::invalid_argument("node '" + nodes_[static_cast<size_t>(node)].name + "' (" +
                                op_name(nodes_[static_cast<size_t>(node)].op) +
                                ") computes nothing: it has no kernel to time");
  return r->time_alone(repeats, warmup, inner);
}

std::vector<int> Plan::blocks(const ExecSettings& settings) {
  validate(settings, nodes_.size());
  std::lock_guard<std::mutex> lock(mu_);
  Runners& r = prepared(settings).runners;
  std::vector<int> b(r.size(), 0);
  for (size_t i = 0; i < r.size(); ++i) b[i] = r[i] ? r[i]->blocks() : 0;
  return b;
}

std::vector<bool> Plan::emulated(const ExecSettings& settings) {
  validate(settings, nodes_.size());
  std::lock_guard<std::mutex> lock(mu_);
  Runners& r = prepared(settings).runners;
  std::vector<bool> out(r.size(), false);
  for (size_t i = 0; i < r.size(); ++i) out[i] = r[i] && r[i]->emulated();
  return out;
}

std::vector<std::string> Plan::implementations(const ExecSettings& settings) {
  validate(settings, nodes_.size());
  std::lock_guard<std::mutex> lock(mu_);
  Runners& r = prepared(settings).runners;
  std::vector<std::string> names(r.size());
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i]) names[i] = r[i]->implementation();
  return names;
}

RunResult Plan::run(const ExecSettings& settings, int repeats, int warmup, bool trace,
                    const std::shared_ptr<Audit>& audit,
                    const std::function<void()>& before_repeat) {
  validate(settings, nodes_.size());
  require_at_least("repeats", repeats, 1);
  require_at_least("warmup", warmup, 0);
  std::lock_guard<std::mutex> lock(mu_);
  Prepared& p = prepared(settings);
  std::vector<NodeRunner*> raw(p.runners.size());
  for (size_t i = 0; i < p.runners.size(); ++i) raw[i] = p.runners[i].get();
  RunResult res = execute(raw, consumers_, dependencies_, settings, p.team, repeats, warmup,
                          trace, audit, before_repeat);
  for (TraceEvent& e : res.trace) e.threads = p.threads[static_cast<size_t>(e.node)].threads;
  return res;
}

}  // namespace ppb
