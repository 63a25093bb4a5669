// lowp's ggml-shaped test tree: not ggml's code. The two interfaces of ggml's CPU extra buffer types, whose key
// functions (the destructors) lowp's repack stub defines, as ggml's traits.cpp does.
#pragma once

namespace ggml::cpu {
class tensor_traits {
  public:
    virtual ~tensor_traits();
};
class extra_buffer_type {
  public:
    virtual ~extra_buffer_type();
};
}  // namespace ggml::cpu
