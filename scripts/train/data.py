#!/usr/bin/python3
"""Assembles the training text from Debian packages (see README.md for each package and its licence).

Writes, in OUT_DIR:
  train.txt     documents joined by <|endoftext|> (tokenized by minfer with special tokens parsed)
  heldout.txt   the held-out documents as plain text, one blank line between them (for `minfer perplexity`)
  data.json     counts per source

Every 20th document of each source is held out. A share of the documents is wrapped as one chat turn in
the Qwen3 template's format, so that the default `minfer MODEL PROMPT` (which applies the model's chat
template) has something it was trained to answer.
"""
import base64
import glob
import gzip
import json
import os
import random
import re
import subprocess
import sys

# Fortune files kept: prose quotations and jokes. Left out: pictures (art, ascii-art), song lyrics, IRC logs
# and in-jokes (debian, linux*, knghtbrd, perl, zippy), and files built around one author's or show's text.
FORTUNE_FILES = [
    "computers", "definitions", "education", "food", "fortunes", "goedel", "humorists", "kids", "law",
    "literature", "love", "magic", "medicine", "men-women", "miscellaneous", "paradoxum", "people", "pets",
    "platitudes", "politics", "riddles", "science", "sports", "tao", "wisdom", "work",
]

BIBLE_BOOKS = [
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth", "1 Samuel",
    "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra", "Nehemiah", "Esther", "Job",
    "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon", "Isaiah", "Jeremiah", "Lamentations",
    "Ezekiel", "Daniel", "Hosea", "Joel", "Amos", "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk",
    "Zephaniah", "Haggai", "Zechariah", "Malachi", "Matthew", "Mark", "Luke", "John", "Acts", "Romans",
    "1 Corinthians", "2 Corinthians", "Galatians", "Ephesians", "Philippians", "Colossians",
    "1 Thessalonians", "2 Thessalonians", "1 Timothy", "2 Timothy", "Titus", "Philemon", "Hebrews", "James",
    "1 Peter", "2 Peter", "1 John", "2 John", "3 John", "Jude", "Revelation",
]

FORTUNE_ASKS = ["Tell me a fortune.", "Say something wise.", "Give me a quote.", "Tell me a joke."]


def chat(user, assistant):
    # One user turn and the assistant's answer, exactly as the Qwen3 template renders them.
    return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{assistant}<|im_end|>\n"


def bible_chapters():
    """The King James Version, one document per chapter, from `bible` (bible-kjv)."""
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True).stdout
    chapters, verses = [], []  # (book, chapter, [verse texts])
    book_index, last_key = -1, None
    for line in out.splitlines():
        m = re.match(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        abbrev, chap, verse, text = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4).strip()
        if (abbrev, chap) != last_key:
            if verses:
                chapters.append((BIBLE_BOOKS[book_index], last_key[1], verses))
            if last_key is None or abbrev != last_key[0]:
                book_index += 1
            last_key, verses = (abbrev, chap), []
        verses.append(text)
    chapters.append((BIBLE_BOOKS[book_index], last_key[1], verses))
    if book_index != len(BIBLE_BOOKS) - 1:
        sys.exit(f"data: expected {len(BIBLE_BOOKS)} books from `bible`, got {book_index + 1}")
    return chapters


def fortunes():
    docs = []
    for name in FORTUNE_FILES:
        path = f"/usr/share/games/fortunes/{name}"
        with open(path, encoding="utf-8", errors="replace") as f:
            for entry in f.read().split("\n%\n"):
                entry = entry.strip("\n%").rstrip()
                if entry and len(entry) < 2000:
                    docs.append(entry.replace("\t", "    "))
    return docs


def devils_dictionary():
    """Entries of Bierce's The Devil's Dictionary (dict-devil), through the dictd index."""
    data = gzip.open("/usr/share/dictd/devil.dict.dz").read()

    def b64(s):
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        n = 0
        for ch in s:
            n = n * 64 + alphabet.index(ch)
        return n

    entries = []
    for line in open("/usr/share/dictd/devil.index", encoding="utf-8"):
        word, off, size = line.rstrip("\n").split("\t")
        if word.startswith("00database"):
            continue
        text = data[b64(off):b64(off) + b64(size)].decode("utf-8", errors="replace").strip()
        if text:
            entries.append((word, text))
    return entries


def main():
    out_dir = sys.argv[1]
    rng = random.Random(1234)
    train, heldout, counts = [], [], {}

    def add(source, index, raw, chat_form=None):
        held = index % 20 == 19
        counts.setdefault(source, [0, 0])[held] += 1
        if held:
            heldout.append(raw)  # held-out text is always plain prose
        else:
            train.append(chat_form if chat_form is not None and rng.random() < 0.3 else raw)

    for i, (book, chap, verses) in enumerate(bible_chapters()):
        raw = f"{book} {chap}\n\n" + "\n".join(verses)
        add("bible-kjv-text", i, raw)
        if i % 20 != 19:  # single verses as answers, never from a held-out chapter
            for v in rng.sample(verses, min(2, len(verses))):
                train.append(chat(f"Quote a verse from {book}.", v))
    for i, text in enumerate(fortunes()):
        add("fortunes", i, text, chat(rng.choice(FORTUNE_ASKS), text))
    for i, (word, text) in enumerate(devils_dictionary()):
        add("dict-devil", i, text, chat(f"What is {word}?", text))

    rng.shuffle(train)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "train.txt"), "w", encoding="utf-8") as f:
        f.write("<|endoftext|>".join(train) + "<|endoftext|>")
    with open(os.path.join(out_dir, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write("\n\n".join(heldout) + "\n")
    summary = {k: {"train_docs": v[0], "heldout_docs": v[1]} for k, v in counts.items()}
    summary["train_chars"] = sum(len(t) for t in train)
    summary["heldout_chars"] = sum(len(t) for t in heldout)
    json.dump(summary, open(os.path.join(out_dir, "data.json"), "w"), indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
