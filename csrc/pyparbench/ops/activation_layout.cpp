#include "pyparbench/ops/activation_layout.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/core/engine.hpp"
#include "pyparbench/dnnl_compat.hpp"

#include <stdexcept>

namespace ppb {

namespace {

using tag = dnnl::memory::format_tag;

tag format_of(ActLayout layout) {
  switch (layout) {
    case ActLayout::nhwc: return tag::nhwc;
    case ActLayout::nchw8c: return tag::nChw8c;
    case ActLayout::nchw16c: return tag::nChw16c;
    case ActLayout::nchw: break;
  }
  return tag::nchw;
}

void require_4d(const Shape& nchw, ActLayout layout) {
  if (nchw.size() != 4)
    throw std::invalid_argument(std::string(act_layout_name(layout)) +
                                " data must be 4-D, got shape " + shape_str(nchw));
  const int64_t b = channel_block(layout);
  if (nchw[1] % b)
    throw std::invalid_argument(std::string(act_layout_name(layout)) + " data needs channels " +
                                "in whole blocks of " + std::to_string(b) + ", got " +
                                std::to_string(nchw[1]) + " channels (shape " +
                                shape_str(nchw) + ")");
}

}  // namespace

ActLayout parse_act_layout(const std::string& name) {
  for (ActLayout l : {ActLayout::nchw, ActLayout::nhwc, ActLayout::nchw8c, ActLayout::nchw16c})
    if (name == act_layout_name(l)) return l;
  throw std::invalid_argument("layout must be 'nchw', 'nhwc', 'nchw8c' or 'nchw16c', got '" +
                              name + "'");
}

const char* act_layout_name(ActLayout layout) {
  switch (layout) {
    case ActLayout::nhwc: return "nhwc";
    case ActLayout::nchw8c: return "nchw8c";
    case ActLayout::nchw16c: return "nchw16c";
    case ActLayout::nchw: break;
  }
  return "nchw";
}

int64_t channel_block(ActLayout layout) {
  return layout == ActLayout::nchw8c ? 8 : layout == ActLayout::nchw16c ? 16 : 1;
}

dnnl::memory::desc act_md(const Shape& nchw, ActLayout layout, dnnl::memory::data_type type) {
  require_4d(nchw, layout);
  return dnnl::memory::desc(dnnl::memory::dims(nchw.begin(), nchw.end()), type,
                            format_of(layout));
}

Shape stored_shape(const Shape& nchw, ActLayout layout) {
  if (layout == ActLayout::nchw || nchw.size() != 4) return nchw;
  require_4d(nchw, layout);
  if (layout == ActLayout::nhwc) return {nchw[0], nchw[2], nchw[3], nchw[1]};
  const int64_t b = channel_block(layout);
  return {nchw[0], nchw[1] / b, nchw[2], nchw[3], b};
}

ActLayout preferred_conv_layout() {
  static const ActLayout chosen = [] {
    // A mid-network 3x3 convolution (ResNet-50's 28x28 stage) with both
    // activation layouts left to the primitive.
    const dnnl::memory::dims src{1, 128, 28, 28}, wei{128, 128, 3, 3}, dst{1, 128, 28, 28};
    const auto f32 = dnnl::memory::data_type::f32;
    const auto pd = compat::conv_pd(cpu_engine(), {src, f32, tag::any}, {wei, f32, tag::any},
                                    {}, {dst, f32, tag::any}, {1, 1}, {0, 0}, {1, 1}, {1, 1},
                                    dnnl::primitive_attr());
    for (ActLayout l : {ActLayout::nchw16c, ActLayout::nchw8c, ActLayout::nhwc})
      if (pd.src_desc() == act_md({1, 128, 28, 28}, l)) return l;
    return ActLayout::nchw;
  }();
  return chosen;
}

}  // namespace ppb
