"""Claims of lesson 01_tokenization: what its text says its code cells show."""

from __future__ import annotations

import re

from tests.claims.common import (
    FLOAT,
    Break,
    Claim,
    Family,
    close,
    code_cell,
    excerpt,
    falling,
    literal,
    number,
    output,
    require,
    rows,
    tensors,
)

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

STORY = 'load_text("the-verdict.txt")'
SPLIT = "print(re.split(pattern, sample))"
SPLIT_WORDS = "print(ref.split_words(sample))"
VOCAB = "ref.build_vocab(text)"
SENTENCE = "sentence = '"
DOCUMENTS = "documents = ["
ACCENTS = 'word = "naïve café"'
MERGES = "merges learned"
STEPS = "bpe_encode_steps(phrase, merges)"
ANY_TEXT = 'euro_sign = "€"'
CURVE = "compression_table(curve_text, sizes)"
GPT2_IDS = "gpt2_ids = enc.encode(example"
GPT2_ADDITIONS = "bytes_to_unicode()"
TIKTOKEN = "identical to tiktoken"
COMPRESSION = "ours_per_char"
WINDOWS = "ref.sliding_window_pairs(story_ids"
LOADER = "ref.create_dataloader(text"


def tok_story_length(nb):
    n = number(output(nb, STORY), rf"^{FLOAT} characters", "length of the story")
    require(18_000 <= n <= 22_000, f"the story has {n:,.0f} characters, not 'about 20,000'")


def tok_split_keeps_separators(nb):
    text = output(nb, SPLIT)
    require("' '" in text and "''" in text, f"the split shows no spaces or no empty strings: {text}")


def tok_split_words(nb):
    lines = output(nb, SPLIT_WORDS).strip().splitlines()
    require(len(lines) == 2 and lines[0] == lines[1], f"the two cleaned lists differ:\n{lines}")
    require("''" not in lines[0] and "' '" not in lines[0], f"spaces or empty strings left: {lines[0]}")


def tok_special_tokens_last(nb):
    text = output(nb, VOCAB)
    size = number(text, rf"{FLOAT} distinct", "vocabulary size")
    last = text.strip().splitlines()[-1]
    specials = re.findall(r"\('(<\|[a-z]+\|>)', (\d+)\)", last)
    require(
        sorted(s for s, _ in specials) == ["<|endoftext|>", "<|unk|>"],
        f"the last entries are not the two special tokens: {last}",
    )
    ids = sorted(int(i) for _, i in specials)
    require(ids == [size - 2, size - 1], f"the special tokens do not get the last two ids of {size:.0f}: {last}")


def tok_round_trip_sentence(nb):
    written = re.search(r"^sentence = '(.*)'$", code_cell(nb, SENTENCE).source, re.M)
    require(written, f"no line `sentence = '...'` in the source of the cell containing {SENTENCE!r}")
    sentence = written.group(1)
    *_, decoded, verdict = output(nb, SENTENCE).strip().splitlines()
    require("<|unk|>" not in decoded, f"a word was lost: {decoded}")
    require("".join(decoded.split()) == "".join(sentence.split()), f"not the same words:\n{decoded}\n{sentence}")
    # The lesson says the only difference is the space after the opening quotation mark.
    require(
        decoded.startswith('" The') and decoded.replace('" The', '"The', 1) == sentence,
        f"the text says the sentence comes back as '\" The last ...', differing only there; it came back as\n{decoded}",
    )
    require(verdict == "the same text: False", f"the answer to the question is 'No', but the cell shows {verdict!r}")


def tok_unknown_words(nb):
    decoded = output(nb, DOCUMENTS).strip().splitlines()[-1]
    require("<|unk|>" in decoded and "<|endoftext|>" in decoded, f"no <|unk|> or <|endoftext|> in: {decoded}")
    require("coffee" not in decoded, f"'coffee' is not in the story and should be <|unk|>: {decoded}")


def tok_accents_two_bytes(nb):
    text = output(nb, ACCENTS)
    chars = literal(text, r"characters: (\[.*\])$", "the characters")
    n_bytes = number(text, r"^(\d+) bytes", "the byte count")
    encoded = literal(text, r"bytes:\s+(\[.*\])$", "the bytes")
    accented = sum(1 for c in chars if ord(c) > 127)
    require(
        accented == 2 and n_bytes == len(chars) + accented,
        f"{len(chars)} characters, {accented} of them accented, gave {n_bytes:.0f} bytes: not one extra byte per "
        "accented letter",
    )
    require(len(chars) == 10 and n_bytes == len(encoded) == 12, f"the text says 10 characters and 12 bytes:\n{text}")
    pairs = [encoded[i : i + 2] for i in range(len(encoded) - 1) if encoded[i] == 195]
    require(pairs == [[195, 175], [195, 169]], f"the text says ï is 195, 175 and é is 195, 169: {encoded}")


def tok_first_and_longest_merges(nb):
    text = output(nb, MERGES)
    for piece in ("b'e '", "b' t'"):
        require(piece in text, f"{piece} is not among the first merges printed:\n{excerpt(text)}")
    longest = literal(text, r"^longest tokens: (\[.*\])$", "the longest tokens")
    require("of the " in longest, f"'of the ' is not among the longest tokens: {longest}")
    require(any(re.search(r"\w \w", t) for t in longest), f"no longest token spans two words: {longest}")


def tok_phrase_shrinks(nb):
    lines = output(nb, STEPS).strip().splitlines()
    lengths = [len(literal(line, r"(\[.*\])$", "a step of the phrase")) for line in lines]
    require(
        len(lengths) > 2 and falling(lengths),
        f"the phrase does not shrink at every merge: lengths {lengths}",
    )


def tok_round_trips_any_text(nb):
    text = output(nb, ANY_TEXT)
    oks = re.findall(r"round trip ok: (\w+)", text)
    require(oks == ["True"] * 3, f"round trips: {oks}")
    japanese = re.search(r"^'トークン 🙂': (\d+) bytes -> (\d+) tokens", text, re.M)
    require(
        japanese and japanese.group(1) == japanese.group(2),
        f"the Japanese and emoji are not one token per byte:\n{text}",
    )
    require(japanese.group(2) == "17", f"the text says 17 tokens (4 × 3 bytes, a space, 4 for the emoji):\n{text}")
    story = re.search(r"^'The Verdict': (\d+) bytes -> (\d+) tokens", text, re.M)
    require(story and int(story.group(2)) < int(story.group(1)), f"the story's own words do not shrink:\n{text}")
    require(re.search(r"-> '\ufffd' \(half a character\)", text), f"half a character is not shown as U+FFFD:\n{text}")


def tok_diminishing_returns(nb):
    table = rows(
        output(nb, CURVE),
        rf"^vocab\s+(\d+): {FLOAT} tokens per character",
        "compression table",
        at_least=4,
    )
    sizes, ratios = [int(s) for s, _ in table], [float(r) for _, r in table]
    require(sizes[0] == 256 and close(ratios[0], 1.0, 1e-3), f"raw bytes should give 1.0 token per character: {table}")
    require(falling(ratios), f"bigger vocabularies not shorter: {table}")
    # Tokens per character saved by each added vocabulary entry, between consecutive sizes.
    gains = [(r0 - r1) / (s1 - s0) for s0, r0, s1, r1 in zip(sizes, ratios, sizes[1:], ratios[1:], strict=False)]
    require(falling(gains), f"the saving per added token does not fall: {[f'{g:.5f}' for g in gains]}")


def tok_gpt2_ids(nb):
    text = output(nb, GPT2_IDS)
    require(number(text, r"^(\d+) ids;", "vocabulary size") == 50_257, f"GPT-2 should have 50,257 ids:\n{text}")
    ids = literal(text, r"^(\[[\d, ]+\])$", "the ids")
    require(50256 in ids, f"<|endoftext|> should be id 50256: {ids}")


def tok_gpt2_additions(nb):
    text = output(nb, GPT2_ADDITIONS)
    pieces = literal(text, r"^(\[.*\])$", "the pre-split pieces")
    for piece in (" world", " 2024", "!!", "'s"):
        require(piece in pieces, f"pre-splitting should give the piece {piece!r}: {pieces}")
    table = literal(text, r"^(\{.*\})$", "the byte table")
    require(table.get("' '") == "Ġ" and table.get("'\\n'") == "Ċ", f"space/newline not drawn as Ġ/Ċ: {table}")
    require("'Ġworld'" in text, f"' world' is not stored as 'Ġworld':\n{text}")
    require(
        re.search(r"^ValueError:.*<\|endoftext\|>", text, re.M), f"tiktoken did not refuse the special token:\n{text}"
    )


def tok_same_as_tiktoken(nb):
    text = output(nb, TIKTOKEN)
    require("identical to tiktoken: True" in text, f"our GPT-2 tokenizer differs from tiktoken:\n{excerpt(text)}")


def tok_gpt2_compression(nb):
    text = output(nb, COMPRESSION)
    gpt2 = number(text, rf"^GPT-2:\s+{FLOAT} tokens per character", "GPT-2's tokens per character")
    size = number(text, r"^our (\d+)-token BPE", "our vocabulary size")
    ours = number(text, rf"-token BPE: {FLOAT} tokens per character", "our tokens per character")
    require(0.2 <= gpt2 <= 0.3, f"GPT-2 needs {gpt2} tokens per character, not 'about one for every four'")
    require(80 <= 50_257 / size <= 125, f"50,257 / {size:.0f} is not 'about 100 times larger'")
    require(ours > gpt2, f"our BPE ({ours}) is not longer than GPT-2's ({gpt2})")


def tok_window_example(nb):
    inputs, targets = tensors(output(nb, WINDOWS))[:2]
    require(
        inputs[0] == [40, 367, 2885, 1464] and targets[0] == [367, 2885, 1464, 1807],
        f"the text's example window is input [40, 367, 2885, 1464], target [367, 2885, 1464, 1807]; the "
        f"notebook shows {inputs[0]} and {targets[0]}",
    )
    for x, y in zip(inputs, targets, strict=True):
        require(x[1:] == y[:-1], f"target {y} is not input {x} moved by one")


def tok_dataloader(nb):
    text = output(nb, LOADER)
    require(re.search(r"x \(8, 32\), y \(8, 32\)", text), f"batches are not (B, T) = (8, 32):\n{text}")
    require("True — the targets are the inputs shifted by one" in text, f"targets not shifted:\n{excerpt(text)}")


CLAIMS = [
    Claim(
        "The Verdict: about 20,000 characters",
        tok_story_length,
        [Break(MARGIN, STORY, r"^[\d,]+(?= characters)", "24,479")],
    ),
    Claim(
        "The result still contains spaces and empty strings",
        tok_split_keeps_separators,
        [Break(SHOWN, SPLIT, r", ''", "")],
    ),
    Claim(
        "Stripping and dropping the empty ones leaves words and punctuation; ref.split_words does exactly this",
        tok_split_words,
        [Break(EXACT, SPLIT_WORDS, r", '\?'\]\n\Z", "]\n"), Break(SHOWN, SPLIT_WORDS, r"\]$", ", '']")],
    ),
    Claim(
        "build_vocab ... then appends two special tokens <|unk|> and <|endoftext|>",
        tok_special_tokens_last,
        [Break(EXACT, VOCAB, r"(?<='<\|unk\|>', )\d+", "2"), Break(MEMBERS, VOCAB, r"<\|endoftext\|>", "end")],
    ),
    Claim(
        "No. Every word comes back, but not the exact text ... comes back as '\" The last ...'",
        tok_round_trip_sentence,
        [
            Break(EXACT, SENTENCE, r'^" The', '"The'),
            Break(EXACT, SENTENCE, r"painted", "<|unk|>"),
            Break(SHOWN, SENTENCE, r"(?<=the same text: )False", "True"),
        ],
    ),
    Claim(
        "words the story never uses come back as <|unk|>",
        tok_unknown_words,
        [Break(EXACT, DOCUMENTS, r"(?<=some )<\|unk\|>", "coffee")],
    ),
    Claim(
        "12. The plain letters and the space take one byte each ... ï is 195, 175 and é is 195, 169",
        tok_accents_two_bytes,
        [Break(EXACT, ACCENTS, r"^\d+(?= bytes)", "11"), Break(EXACT, ACCENTS, r"195, 175", "195, 176")],
    ),
    Claim(
        "The first merges attach spaces to common letters ('e ', ' t'); some longest tokens span several words "
        "('of the ')",
        tok_first_and_longest_merges,
        [Break(MEMBERS, MERGES, r"'of the ', ", ""), Break(MEMBERS, MERGES, r"b' t'", "b'th'")],
    ),
    Claim(
        "Watch a phrase from the story shrink, one merge at a time",
        tok_phrase_shrinks,
        [Break(ORDER, STEPS, r"\A(.*\n)", r"\1\1")],  # the first step shown twice: no shrinking there
    ),
    Claim(
        "Encoding then decoding gives back the original text, for any text; Japanese and emoji stay one token per "
        "byte, 17 tokens; the story's own words shrink; half a character shows the replacement character",
        tok_round_trips_any_text,
        [
            Break(SHOWN, ANY_TEXT, r"(?<=round trip ok: )True(?=\n'na)", "False"),
            Break(EXACT, ANY_TEXT, r"(🙂': \d+ bytes -> )\d+", r"\g<1>9"),
            Break(EXACT, ANY_TEXT, r"(🙂': )\d+ bytes -> \d+", r"\g<1>18 bytes -> 18"),
            Break(ORDER, ANY_TEXT, r"(Verdict': (\d+) bytes -> )\d+", r"\g<1>\g<2>"),
            Break(SHOWN, ANY_TEXT, "\ufffd", "?"),
        ],
    ),
    Claim(
        "1.0 for raw bytes; the first merges help most, later ones each save less",
        tok_diminishing_returns,
        [
            Break(MARGIN, CURVE, r"(?<=vocab   256: )[\d.]+", "0.900"),
            Break(ORDER, CURVE, r"(?<=vocab   400: )[\d.]+", "0.600"),  # still shorter, but saves more than before
            Break(TABLE, CURVE, r"^vocab   [3-6]00: .*\n", ""),
        ],
    ),
    Claim(
        "50,257 ids ... <|endoftext|> = 50256",
        tok_gpt2_ids,
        [Break(EXACT, GPT2_IDS, r"^\d+(?= ids)", "50000"), Break(MEMBERS, GPT2_IDS, r"50256, ", "")],
    ),
    Claim(
        "pre-split pieces; a space becomes Ġ, a newline Ċ; ' world' is stored as 'Ġworld'; tiktoken refuses "
        "<|endoftext|> unless allowed",
        tok_gpt2_additions,
        [
            Break(MEMBERS, GPT2_ADDITIONS, r"' 2024'", "' ', '2024'"),
            Break(EXACT, GPT2_ADDITIONS, r"'Ċ'", "'\\\\n'"),
            Break(SHOWN, GPT2_ADDITIONS, r"^ValueError:.*\n", ""),
        ],
    ),
    Claim(
        "GPT2Tokenizer gives exactly tiktoken's ids",
        tok_same_as_tiktoken,
        [Break(SHOWN, TIKTOKEN, r"(?<=identical to tiktoken: )True", "False")],
    ),
    Claim(
        "GPT-2 uses a vocabulary 100 times larger ... about one token for every four characters",
        tok_gpt2_compression,
        [
            Break(MARGIN, COMPRESSION, r"(?<=GPT-2:)(\s+)[\d.]+", r"\g<1>0.351"),
            Break(MARGIN, COMPRESSION, r"(?<=our )\d+(?=-token)", "1024"),
            Break(ORDER, COMPRESSION, r"(?<=-token BPE: )[\d.]+", "0.200"),
        ],
    ),
    Claim(
        "input [40, 367, 2885, 1464] / target [367, 2885, 1464, 1807]; each column pairs a context with the token "
        "it should predict",
        tok_window_example,
        [
            Break(TENSOR, WINDOWS, r"\[\[  40,", "[[  41,"),
            Break(TENSOR, WINDOWS, r"(\[ 3619,\s+402,\s+)271", r"\g<1>272"),
        ],
    ),
    Claim(
        "Each batch is (inputs, targets) of shape (B, T); the targets are the inputs shifted by one",
        tok_dataloader,
        [
            Break(SHOWN, LOADER, r"y \(8, 32\)", "y (8, 31)"),
            Break(SHOWN, LOADER, r"^True(?= — the targets)", "False"),
        ],
    ),
]
