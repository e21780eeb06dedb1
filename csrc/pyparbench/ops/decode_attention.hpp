// Attention of a decode step: the S new queries of each sequence against its
// P cached keys / values and the S new ones, with the new keys / values
// appended to the cache. One kernel for the three ways a step keeps its cache:
//
//   run          the past (B, Hkv, P, D) and the new rows (B, Hkv, S, D) read
//                where they are (a graph's node: its present keys / values
//                are a separate copy, which the attention does not wait for);
//   run_present  present (B, Hkv, P + S, D) written once (the past copied,
//                the new rows after it), the attention reading it (an ONNX
//                file's present outputs, as ONNX Runtime writes them);
//   run_in_place a cache preallocated to the context (B, Hkv, C, D) whose
//                first `length` rows are filled: the new rows written at
//                `length`, the attention over length + S rows (a decoder
//                that keeps its cache across steps).
//
// All three run the same loop (decode_attention_rows): key row j of a head is
// read from the past buffer for j < past and from the new buffer after it, so
// where both are one cache the loop is that of a cache in place.
//
// q (B, H, S, D), new k (B, Hkv, S, D), new v (B, Hkv, S, Dv) -> (B, H, S, Dv);
// H a multiple of Hkv (head h reads key / value head h / (H / Hkv), never
// repeated in memory). Query i sees the keys j <= past + i (the new rows are
// the last positions); a key it does not see scores causal_fill (as
// Attention's). The optional additive mask broadcasts into (B, H, S, keys),
// keys = P + S (run, run_present) or C (run_in_place: columns past
// length + S are not read). A row whose scores are all -inf is zero.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <vector>

namespace ppb {

// One step's data: rows of key / value head (b, kv) at
//   past_k + ((b * Hkv + kv) * past_stride + j) * D              for j < past,
//   new_k + ((b * Hkv + kv) * new_stride + new_offset + j - past) * D  after.
struct DecodeStep {
  int64_t b = 0, h = 0, hkv = 0, s = 0, d = 0, dv = 0;
  int64_t past = 0;
  const float* q = nullptr;
  const float* past_k = nullptr;
  const float* past_v = nullptr;
  int64_t past_stride = 0;
  const float* new_k = nullptr;
  const float* new_v = nullptr;
  int64_t new_stride = 0, new_offset = 0;
  const float* mask = nullptr;
  int64_t mask_strides[4] = {0, 0, 0, 0};  // 0 along broadcast axes
  float scale = 1.0f, causal_fill = 0.0f;
  float* y = nullptr;
};

// The attention rows of a step, shared by the calling OpenMP team (an omp
// for over batch x heads x new rows; call it inside a parallel region), in
// the kernel built for this CPU's ISA (decode_attention_kernel.hpp).
void decode_attention_rows(const DecodeStep& step);

// Copies rows [0, rows) of each (b, kv) head of src (stride src_stride rows)
// to rows [at, at + rows) of dst (stride dst_stride rows); an omp for over
// the heads, inside a parallel region.
void copy_head_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                    int64_t at, int64_t heads, int64_t rows, int64_t width);

class DecodeAttention : public Kernel {
 public:
  // keys: (B, Hkv, P, D), the past, or with in_place (B, Hkv, C, D), the
  // cache; mask empty for none.
  DecodeAttention(Shape q, Shape k_new, Shape v_new, Shape keys, Shape mask, bool in_place,
                  float scale, float causal_fill, std::optional<int> threads);
  const Shape& output_shape() const { return out_; }
  // (B, Hkv, P + S, D) of run_present's key output (Dv for the values').
  const Shape& present_shape() const { return present_k_; }

  // mask absent (data null) exactly when the kernel was made without one.
  void run(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new, ConstFloatView past_k,
           ConstFloatView past_v, ConstFloatView mask, FloatView out);
  // run's loop timed in C++ (the graph node's cost: overhead's kernel sum).
  std::vector<double> timeit(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                             ConstFloatView past_k, ConstFloatView past_v, ConstFloatView mask,
                             FloatView out, int repeats, int warmup);
  void run_present(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                   ConstFloatView past_k, ConstFloatView past_v, ConstFloatView mask,
                   FloatView out, FloatView present_k, FloatView present_v);
  // length + S must fit the cache; the new rows overwrite rows
  // [length, length + S).
  void run_in_place(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                    FloatView cache_k, FloatView cache_v, int64_t length, ConstFloatView mask,
                    FloatView out);

 protected:
  void execute() override;

 private:
  enum class Mode { graph, present, in_place };
  void bind_graph(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                  ConstFloatView past_k, ConstFloatView past_v, ConstFloatView mask,
                  FloatView out);
  void check_common(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                    ConstFloatView mask, FloatView out) const;

  Shape q_shape_, k_shape_, v_shape_, keys_shape_, values_shape_, mask_shape_, out_;
  Shape present_k_, present_v_;
  bool in_place_;
  float scale_, causal_fill_;
  Mode mode_ = Mode::graph;
  int64_t length_ = 0;
  ConstFloatView q_, k_new_, v_new_, past_k_, past_v_, mask_;
  FloatView y_, present_k_out_, present_v_out_;
};

}  // namespace ppb
