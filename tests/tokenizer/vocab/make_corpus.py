#!/usr/bin/env python3
"""Writes corpus.<family>.json ({"texts": [...]}) for make_vectors.mjs: the 314 strings of the shared Qwen
corpus (../shared/fixtures/tokenizer/corpus.inp: code, CJK, emoji, whitespace runs, Qwen special tokens)
followed by strings for each family's own special tokens, space handling and detokenization rules.
   python3 tests/tokenizer/vocab/make_corpus.py ../shared/fixtures/tokenizer/corpus.inp"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
base = open(sys.argv[1], "rb").read().decode("utf-8").split("\n__ggml_vocab_test__\n")[:-1]

common = [
    "  two leading spaces", "trailing spaces  ", " ", "  ", "\t", "\n", " \n ", "a\u2581b literal U+2581",
    "\u2581\u2581", "<0x41> is not a byte token in text", "x<0x0A>y", "Hello World", " Hello World", "\u00a0nbsp",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9", "\U0001F468\u200D\U0001F469\u200D\U0001F467 family", "\u4f60\u597d\uff0c\u4e16\u754c",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "don't won't it's I'm you're we've they'll she'd", "spaces before punctuation , . ! ?", "a ' b",
    "1234567890 3.14159 -42 1e10", "def f(x):\n    return x * 2\n", "    indented\n\tand tabbed\n",
    "\U0001F600\U0001F601\U0001F602", "\U00010000\U0010FFFD rare planes", "mixed\r\nline\rendings\n",
]
extra = {
    "llama2": [
        "<s>", "</s>", "<unk>", "<s>hello", "hello</s>", " <s> spaced </s> ", "<s><s></s></s>",
        "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHi there [/INST] Hello! </s><s>[INST] Again [/INST]",
        "[INST] no bos [/INST]", "<s> leading space after bos", "</s>trailing", "<unk>unknown<unk>",
        "[AVAILABLE_TOOLS] [TOOL_CALLS] mistral-style text", "\u2581<s>",
    ],
    "gemma3": [
        "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", "<bos>", "<eos>", "<pad>", "<unk>",
        "<mask>", "[multimodal]", "<unused0>", "<unused42>", "<start_of_image>", "<end_of_image>",
        "<bos><start_of_turn>system\nBe brief.<end_of_turn>\n", "<table><tr><td>a</td><td>b</td></tr></table>",
        "<h1>Title</h1>\n<h2>Sub</h2>", "a  b   c    d     e", "x\n\ny\n\n\nz", "\n\n\n\n", "        eight spaces",
        "> </ close", "<end_of_turn>trailing", " <start_of_turn> spaced",
    ],
    "llama3": [
        "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>",
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|reserved_special_token_5|>", "<|finetune_right_pad_id|>", "hello ? world ! end .", "it 's they 're we 've I 'm",
        "don 't she 'd we 'll", "quote ' alone", "123 1234 12345 123456", "<|eot_id|>after", " <|eot_id|> spaced",
    ],
}
for fam, more in extra.items():
    texts = base + common + more
    with open(os.path.join(here, f"corpus.{fam}.json"), "w", encoding="utf-8") as f:
        json.dump({"texts": texts}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(fam, len(texts))
