// StreamDecoder: characters split across tokens are held until complete; invalid bytes become U+FFFD.
#include <gtest/gtest.h>

#include "tiny_vocab.h"
#include "tokenizer/stream_decoder.h"

namespace minfer::tokenizer {
namespace {

TEST(StreamDecoderTest, HoldsSplitCharacters) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(259), "hello");
  EXPECT_EQ(dec.push(0xe4), "");  // 中 = e4 b8 ad
  EXPECT_EQ(dec.pending_bytes(), 1u);
  EXPECT_EQ(dec.push(0xb8), "");
  EXPECT_EQ(dec.push(0xad), "\xe4\xb8\xad");
  EXPECT_EQ(dec.push(0xf0), "");  // 😀 = f0 9f 98 80
  EXPECT_EQ(dec.push(0x9f), "");
  EXPECT_EQ(dec.push(0x98), "");
  EXPECT_EQ(dec.push(0x80), "\xf0\x9f\x98\x80");
  EXPECT_EQ(dec.push(tok_test::kImEnd), "<|im_end|>");
  EXPECT_EQ(dec.finish(), "");
  EXPECT_EQ(dec.dropped_bytes(), 0u);
}

TEST(StreamDecoderTest, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(0xff), "\xef\xbf\xbd");
  EXPECT_EQ(dec.push(0x80), "\xef\xbf\xbd");  // stray continuation byte
  EXPECT_EQ(dec.push(0xe4), "");
  EXPECT_EQ(dec.push('a'),
            "\xef\xbf\xbd"
            "a");  // the sequence broke off
  EXPECT_EQ(dec.push(0xed), "");
  EXPECT_EQ(dec.push(0xa0), "\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate can never complete
}

TEST(StreamDecoderTest, FinishDropsAndCountsIncompleteBytes) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push('a'), "a");
  EXPECT_EQ(dec.push(0xf0), "");
  EXPECT_EQ(dec.push(0x9f), "");
  EXPECT_EQ(dec.finish(), "");
  EXPECT_EQ(dec.dropped_bytes(), 2u);
  EXPECT_EQ(dec.push('b'), "b");  // reusable after finish
}

TEST(StreamDecoderTest, ConcatenationEqualsDecodeForValidText) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  const std::string text = "hello \xe4\xb8\xad\xe6\x96\x87 w\xc3\xb6rld \xf0\x9f\xa6\x99<|im_end|>";
  const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false, true);
  StreamDecoder dec(tok);
  std::string streamed;
  for (const int32_t id : ids) streamed += dec.push(id);
  streamed += dec.finish();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(dec.dropped_bytes(), 0u);
}

}  // namespace
}  // namespace minfer::tokenizer
