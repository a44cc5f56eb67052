#!/usr/bin/env python3
"""Writes the tokenizer benchmark corpus: several MB of mixed English, code, CJK and emoji text.

Deterministic on Debian 12: English is the shared spec (../shared/spec/minfer-reference.txt), code is
libstdc++ 12 headers, CJK and emoji are drawn with a fixed seed from common characters. Blocks of
each kind alternate, so every part of the pre-tokenizer and the word cache is exercised.

usage: bench/tokenizer/make_corpus.py OUT.txt [--mb 4]   (run from the repository root)
"""
import argparse
import pathlib
import random

CODE_FILES = [
    "/usr/include/c++/12/bits/stl_algo.h",
    "/usr/include/c++/12/bits/basic_string.h",
    "/usr/include/c++/12/bits/regex_compiler.tcc",
    "/usr/include/c++/12/bits/hashtable.h",
]
HANZI = ("的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可"
         "她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已"
         "老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力"
         "机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军")
KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテト"
HANGUL = "가나다라마바사아자차카타파하한국어는이가을를에서의도고와과요니다습니까세계안녕하세요"
CJK_PUNCT = "，。、！？：；「」（）"
EMOJI = ["😀", "😂", "🥲", "😍", "👍", "👍🏽", "🙏", "🔥", "✅", "❤️", "🚀", "🦙", "🇺🇸", "🇯🇵",
         "👨‍👩‍👧‍👦", "😶‍🌫️", "1️⃣", "🎉", "🤖", "☕"]
CHAT_WORDS = ["ok", "lol", "thanks", "see you", "great", "wow", "really?", "haha", "nice", "sure", "no way",
              "good morning", "let's go", "I'm in", "done"]


def cjk_paragraph(rng, n_sentences):
    out = []
    for _ in range(n_sentences):
        kind = rng.random()
        n = rng.randint(6, 30)
        if kind < 0.6:
            s = "".join(rng.choice(HANZI) for _ in range(n))
        elif kind < 0.8:
            s = "".join(rng.choice(KANA + HANZI[:80]) for _ in range(n))
        else:
            s = " ".join("".join(rng.choice(HANGUL) for _ in range(rng.randint(2, 5))) for _ in range(n // 3 + 1))
        if rng.random() < 0.2:
            s += str(rng.randint(1, 2025))
        out.append(s + rng.choice(CJK_PUNCT))
    return "".join(out) + "\n"


def emoji_chat(rng, n_lines):
    lines = []
    for _ in range(n_lines):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(CHAT_WORDS) if rng.random() < 0.6 else "".join(
                rng.choice(EMOJI) for _ in range(rng.randint(1, 3))))
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=4.0)
    args = ap.parse_args()
    rng = random.Random(20261129)
    english = pathlib.Path("../shared/spec/minfer-reference.txt").read_text(encoding="utf-8")
    code = "".join(pathlib.Path(p).read_text(encoding="utf-8", errors="replace")
                   for p in CODE_FILES if pathlib.Path(p).exists())
    target = int(args.mb * 1_000_000)
    chunks, size, e_pos, c_pos = [], 0, 0, 0
    while size < target:
        # about 40% English, 30% code, 20% CJK, 10% emoji chat by bytes
        for kind in ("en", "code", "cjk", "en", "code", "emoji", "en", "cjk"):
            if kind == "en":
                block = english[e_pos:e_pos + 6000]
                e_pos = (e_pos + 6000) % max(1, len(english) - 6000)
            elif kind == "code":
                block = code[c_pos:c_pos + 6000]
                c_pos = (c_pos + 6000) % max(1, len(code) - 6000)
            elif kind == "cjk":
                block = cjk_paragraph(rng, 60)
            else:
                block = emoji_chat(rng, 80)
            chunks.append(block)
            size += len(block.encode("utf-8"))
    data = "".join(chunks).encode("utf-8")[:target]
    data = data.decode("utf-8", errors="ignore").encode("utf-8")  # never cut a character in two
    pathlib.Path(args.out).write_bytes(data)
    print(f"{args.out}: {len(data)} bytes")


if __name__ == "__main__":
    main()
