// Writes a few small valid GGUF files into a directory: the seed corpus for fuzz_gguf.
#include <cstdio>
#include <string>

#include "gguf/writer.h"

using namespace minfer;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_gguf_seeds <dir>\n");
    return 2;
  }
  const std::string dir = argv[1];
  for (int variant = 0; variant < 3; ++variant) {
    gguf::Writer w;
    w.metadata().set("general.architecture", gguf::Value::string("qwen2"));
    if (variant == 1) w.metadata().set("general.alignment", gguf::Value::u32(8));
    w.metadata().set("tokenizer.ggml.tokens", gguf::Value::array(gguf::Array::of_strings({"a", "b", "ab"})));
    w.metadata().set("x.scores", gguf::Value::array(gguf::Array::of<float>(gguf::ValueType::F32, {0.5f, 1.0f})));
    w.metadata().set("x.flag", gguf::Value::boolean(true));
    if (variant != 2) {
      (void)w.add_tensor("w", DType::F32, {4, 2}, std::vector<uint8_t>(32, 1));
      (void)w.add_tensor("q", DType::Q8_0, {32}, std::vector<uint8_t>(34, 2));
    }
    Status st = w.write(dir + "/seed" + std::to_string(variant) + ".gguf");
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  }
  return 0;
}
