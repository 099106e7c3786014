"""What the lessons' texts say their code cells show, checked against the executed notebooks.

The markdown of a lesson makes claims about computed results: "the attention mix is far closer to *village* than
to *city*", a list of neighbours, "masked positions get zero weight". A claim that the outputs do not show is a
bug in the lesson. `CLAIMS[lesson]` lists each claim (a short description quoting the lesson) with a check that
reads the printed outputs (stream and text/plain) of an executed notebook and raises AssertionError when they do
not support it. `tests/test_notebooks_execute.py` calls `check_claims` on every lesson it executes.

Cells are found by a piece of their source, not by position, so adding a cell elsewhere breaks nothing. Checks
leave room for float noise but must be able to fail: orderings are asserted as orderings, "equal" as a tolerance
far below the effect. Timings are never asserted (a shared 2-core machine is too noisy); for speed, only that the
table of medians and ratios is printed. The numbers are those of a normal run: under nbgrader the lessons use
smaller settings, and these tests do not run then.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from nbformat import NotebookNode

FLOAT = r"(-?\d[\d,]*(?:\.\d*)?(?:e[+-]?\d+)?)"  # 1.5, -0.2, 20,479, 5.9e-08


@dataclass(frozen=True)
class Claim:
    text: str  # the lesson's words, shortened
    check: Callable[[NotebookNode], None]  # raises AssertionError when the outputs do not support `text`


# ------------------------------------------------------------------------------------------------------------
# Reading outputs
# ------------------------------------------------------------------------------------------------------------


def expect(condition: object, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _excerpt(text: str, limit: int = 800) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."


def code_cell(nb: NotebookNode, marker: str) -> NotebookNode:
    """The one code cell whose source contains `marker`."""
    cells = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    expect(len(cells) == 1, f"expected exactly one code cell containing {marker!r}, found {len(cells)}")
    return cells[0]


def output(nb: NotebookNode, marker: str) -> str:
    """What the code cell containing `marker` printed: its stream text and text/plain results, in order."""
    parts = []
    for out in code_cell(nb, marker).get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", "") + "\n")
    text = "".join(parts)
    expect(text.strip(), f"the cell containing {marker!r} shows no output (was the notebook executed?)")
    return text


def number(text: str, pattern: str, what: str) -> float:
    """Group 1 of the first match of `pattern` (a line-anchored regex may use ^ and $) as a float."""
    match = re.search(pattern, text, re.M)
    expect(match, f"{what}: nothing matches /{pattern}/ in the output:\n{_excerpt(text)}")
    return float(match.group(1).replace(",", ""))


def rows(text: str, pattern: str, what: str, at_least: int = 1) -> list[tuple[str, ...]]:
    """All matches of `pattern` (one per line), at least `at_least` of them."""
    found = re.findall(pattern, text, re.M)
    expect(
        len(found) >= at_least,
        f"{what}: {len(found)} lines match /{pattern}/, expected {at_least} or more:\n{_excerpt(text)}",
    )
    return [m if isinstance(m, tuple) else (m,) for m in found]


def tensors(text: str) -> list:
    """Every `tensor(...)` printed in `text`, in order, as (nested lists of) numbers or bools."""
    found = []
    for match in re.finditer(r"tensor\(", text):
        start = match.end()
        if text[start : start + 1] == "[":
            depth = 0
            for end in range(start, len(text)):
                depth += {"[": 1, "]": -1}.get(text[end], 0)
                if depth == 0:
                    break
            body = text[start : end + 1]
        else:
            body = re.match(r"[^,)]*", text[start:]).group(0)
        try:
            found.append(ast.literal_eval(re.sub(r"\binf\b", "1e999", body)))
        except (ValueError, SyntaxError) as error:
            raise AssertionError(f"cannot read the printed tensor {body!r}: {error}") from None
    return found


def literal(text: str, pattern: str, what: str):
    """Group 1 of `pattern`, read as a Python literal (a printed list or dict)."""
    match = re.search(pattern, text, re.M)
    expect(match, f"{what}: nothing matches /{pattern}/ in the output:\n{_excerpt(text)}")
    return ast.literal_eval(match.group(1))


def close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol


# ------------------------------------------------------------------------------------------------------------
# 00_welcome
# ------------------------------------------------------------------------------------------------------------


def welcome_versions(nb):
    text = output(nb, "platform.python_version()")
    for label in ("Python", "PyTorch", "course_lib", "GPU"):
        expect(re.search(rf"^{label}\s+\S", text, re.M), f"no '{label} <version>' line in:\n{text}")


def welcome_row_sums(nb):
    text = output(nb, 'print("row sums:"')
    sums = tensors(text.split("row sums:")[-1])[0]
    expect(len(sums) == 3 and all(close(s, 1.0, 1e-3) for s in sums), f"row sums are {sums}, not all 1")


WELCOME = [
    Claim("The next cell shows the versions you are running and whether a GPU is visible", welcome_versions),
    Claim("normalize_rows: divide each row by its sum so that every row sums to 1", welcome_row_sums),
]

# ------------------------------------------------------------------------------------------------------------
# 01_tokenization
# ------------------------------------------------------------------------------------------------------------


def tok_story_length(nb):
    n = number(output(nb, 'load_text("the-verdict.txt")'), rf"^{FLOAT} characters", "length of the story")
    expect(18_000 <= n <= 22_000, f"the story has {n:,.0f} characters, not 'about 20,000'")


def tok_split_keeps_separators(nb):
    text = output(nb, "print(re.split(pattern, sample))")
    expect("' '" in text and "''" in text, f"the split shows no spaces or no empty strings: {text}")


def tok_split_words(nb):
    lines = output(nb, "print(ref.split_words(sample))").strip().splitlines()
    expect(len(lines) == 2 and lines[0] == lines[1], f"the two cleaned lists differ:\n{lines}")
    expect("''" not in lines[0] and "' '" not in lines[0], f"spaces or empty strings left: {lines[0]}")


def tok_special_tokens_last(nb):
    text = output(nb, "ref.build_vocab(text)")
    size = number(text, rf"{FLOAT} distinct", "vocabulary size")
    last = text.strip().splitlines()[-1]
    specials = re.findall(r"\('(<\|[a-z]+\|>)', (\d+)\)", last)
    expect(
        sorted(s for s, _ in specials) == ["<|endoftext|>", "<|unk|>"],
        f"the last entries are not the two special tokens: {last}",
    )
    ids = sorted(int(i) for _, i in specials)
    expect(ids == [size - 2, size - 1], f"the special tokens do not get the last two ids of {size:.0f}: {last}")


def tok_round_trip_sentence(nb):
    cell = code_cell(nb, "sentence = '")
    sentence = re.search(r"^sentence = '(.*)'$", cell.source, re.M).group(1)
    decoded = output(nb, "sentence = '").strip().splitlines()[-1]
    expect("<|unk|>" not in decoded, f"a word was lost: {decoded}")
    expect("".join(decoded.split()) == "".join(sentence.split()), f"not the same words:\n{decoded}\n{sentence}")
    # The lesson says the only difference is the space after the opening quotation mark.
    expect(
        decoded.startswith('" The') and decoded.replace('" The', '"The', 1) == sentence,
        f"the text says the sentence comes back as '\" The last ...', differing only there; it came back as\n{decoded}",
    )


def tok_unknown_words(nb):
    decoded = output(nb, "documents = [").strip().splitlines()[-1]
    expect("<|unk|>" in decoded and "<|endoftext|>" in decoded, f"no <|unk|> or <|endoftext|> in: {decoded}")
    expect("coffee" not in decoded, f"'coffee' is not in the story and should be <|unk|>: {decoded}")


def tok_accents_two_bytes(nb):
    text = output(nb, 'word = "naïve café"')
    chars = literal(text, r"characters: (\[.*\])$", "the characters")
    n_bytes = number(text, r"^(\d+) bytes", "the byte count")
    accented = sum(1 for c in chars if ord(c) > 127)
    expect(
        accented == 2 and n_bytes == len(chars) + accented,
        f"{len(chars)} characters, {accented} of them accented, gave {n_bytes:.0f} bytes: not one extra byte per "
        "accented letter",
    )


def tok_first_and_longest_merges(nb):
    text = output(nb, "merges learned")
    for piece in ("b'e '", "b' t'"):
        expect(piece in text, f"{piece} is not among the first merges printed:\n{_excerpt(text)}")
    longest = literal(text, r"^longest tokens: (\[.*\])$", "the longest tokens")
    expect("of the " in longest, f"'of the ' is not among the longest tokens: {longest}")
    expect(any(re.search(r"\w \w", t) for t in longest), f"no longest token spans two words: {longest}")


def tok_phrase_shrinks(nb):
    lines = output(nb, "bpe_encode_steps(phrase, merges)").strip().splitlines()
    lengths = [len(ast.literal_eval(re.search(r"(\[.*\])$", line).group(1))) for line in lines]
    expect(
        len(lengths) > 2 and all(b < a for a, b in zip(lengths, lengths[1:], strict=False)),
        f"the phrase does not shrink at every merge: lengths {lengths}",
    )


def tok_round_trips_any_text(nb):
    text = output(nb, 'euro_sign = "€"')
    oks = re.findall(r"round trip ok: (\w+)", text)
    expect(oks == ["True"] * 3, f"round trips: {oks}")
    japanese = re.search(r"^'トークン 🙂': (\d+) bytes -> (\d+) tokens", text, re.M)
    expect(
        japanese and japanese.group(1) == japanese.group(2),
        f"the Japanese and emoji are not one token per byte:\n{text}",
    )
    expect(re.search(r"-> '\ufffd' \(half a character\)", text), f"half a character is not shown as U+FFFD:\n{text}")


def tok_diminishing_returns(nb):
    table = rows(
        output(nb, "compression_table(curve_text, sizes)"),
        rf"^vocab\s+(\d+): {FLOAT} tokens per character",
        "compression table",
        at_least=4,
    )
    sizes, ratios = [int(s) for s, _ in table], [float(r) for _, r in table]
    expect(sizes[0] == 256 and close(ratios[0], 1.0, 1e-3), f"raw bytes should give 1.0 token per character: {table}")
    expect(all(b < a for a, b in zip(ratios, ratios[1:], strict=False)), f"bigger vocabularies not shorter: {table}")
    # Tokens per character saved by each added vocabulary entry, between consecutive sizes.
    gains = [(r0 - r1) / (s1 - s0) for s0, r0, s1, r1 in zip(sizes, ratios, sizes[1:], ratios[1:], strict=False)]
    expect(
        all(b < a for a, b in zip(gains, gains[1:], strict=False)),
        f"the saving per added token does not fall: {[f'{g:.5f}' for g in gains]}",
    )


def tok_gpt2_ids(nb):
    text = output(nb, "gpt2_ids = enc.encode(example")
    expect(number(text, r"^(\d+) ids;", "vocabulary size") == 50_257, f"GPT-2 should have 50,257 ids:\n{text}")
    ids = literal(text, r"^(\[[\d, ]+\])$", "the ids")
    expect(50256 in ids, f"<|endoftext|> should be id 50256: {ids}")


def tok_gpt2_additions(nb):
    text = output(nb, "bytes_to_unicode()")
    pieces = literal(text, r"^(\[.*\])$", "the pre-split pieces")
    for piece in (" world", " 2024", "!!", "'s"):
        expect(piece in pieces, f"pre-splitting should give the piece {piece!r}: {pieces}")
    table = literal(text, r"^(\{.*\})$", "the byte table")
    expect(table.get("' '") == "Ġ" and table.get("'\\n'") == "Ċ", f"space/newline not drawn as Ġ/Ċ: {table}")
    expect("'Ġworld'" in text, f"' world' is not stored as 'Ġworld':\n{text}")
    expect(
        re.search(r"^ValueError:.*<\|endoftext\|>", text, re.M), f"tiktoken did not refuse the special token:\n{text}"
    )


def tok_same_as_tiktoken(nb):
    text = output(nb, "identical to tiktoken")
    expect("identical to tiktoken: True" in text, f"our GPT-2 tokenizer differs from tiktoken:\n{_excerpt(text)}")


def tok_gpt2_compression(nb):
    text = output(nb, "ours_per_char")
    gpt2 = number(text, rf"^GPT-2:\s+{FLOAT} tokens per character", "GPT-2's tokens per character")
    size = number(text, r"^our (\d+)-token BPE", "our vocabulary size")
    ours = number(text, rf"-token BPE: {FLOAT} tokens per character", "our tokens per character")
    expect(0.2 <= gpt2 <= 0.3, f"GPT-2 needs {gpt2} tokens per character, not 'about one for every four'")
    expect(80 <= 50_257 / size <= 125, f"50,257 / {size:.0f} is not 'about 100 times larger'")
    expect(ours > gpt2, f"our BPE ({ours}) is not longer than GPT-2's ({gpt2})")


def tok_window_example(nb):
    inputs, targets = tensors(output(nb, "ref.sliding_window_pairs(story_ids"))[:2]
    expect(
        inputs[0] == [40, 367, 2885, 1464] and targets[0] == [367, 2885, 1464, 1807],
        f"the text's example window is input [40, 367, 2885, 1464], target [367, 2885, 1464, 1807]; the "
        f"notebook shows {inputs[0]} and {targets[0]}",
    )
    for x, y in zip(inputs, targets, strict=True):
        expect(x[1:] == y[:-1], f"target {y} is not input {x} moved by one")


def tok_dataloader(nb):
    text = output(nb, "ref.create_dataloader(text")
    expect(re.search(r"x \(8, 32\), y \(8, 32\)", text), f"batches are not (B, T) = (8, 32):\n{text}")
    expect("True — the targets are the inputs shifted by one" in text, f"targets not shifted:\n{_excerpt(text)}")


TOKENIZATION = [
    Claim("The Verdict: about 20,000 characters", tok_story_length),
    Claim("The result still contains spaces and empty strings", tok_split_keeps_separators),
    Claim(
        "Stripping and dropping the empty ones leaves words and punctuation; ref.split_words does exactly this",
        tok_split_words,
    ),
    Claim("build_vocab ... then appends two special tokens <|unk|> and <|endoftext|>", tok_special_tokens_last),
    Claim("Encoding and decoding gives back every word ... comes back as '\" The last ...'", tok_round_trip_sentence),
    Claim("words the story never uses come back as <|unk|>", tok_unknown_words),
    Claim("accented letters take two bytes", tok_accents_two_bytes),
    Claim(
        "The first merges attach spaces to common letters ('e ', ' t'); some longest tokens span several words "
        "('of the ')",
        tok_first_and_longest_merges,
    ),
    Claim("Watch a phrase from the story shrink, one merge at a time", tok_phrase_shrinks),
    Claim(
        "Encoding then decoding gives back the original text, for any text; Japanese and emoji stay one token per "
        "byte; half a character shows the replacement character",
        tok_round_trips_any_text,
    ),
    Claim("1.0 for raw bytes; the first merges help most, later ones each save less", tok_diminishing_returns),
    Claim("50,257 ids ... <|endoftext|> = 50256", tok_gpt2_ids),
    Claim(
        "pre-split pieces; a space becomes Ġ, a newline Ċ; ' world' is stored as 'Ġworld'; tiktoken refuses "
        "<|endoftext|> unless allowed",
        tok_gpt2_additions,
    ),
    Claim("GPT2Tokenizer gives exactly tiktoken's ids", tok_same_as_tiktoken),
    Claim(
        "GPT-2 uses a vocabulary 100 times larger ... about one token for every four characters", tok_gpt2_compression
    ),
    Claim(
        "input [40, 367, 2885, 1464] / target [367, 2885, 1464, 1807]; each column pairs a context with the token "
        "it should predict",
        tok_window_example,
    ),
    Claim("Each batch is (inputs, targets) of shape (B, T); the targets are the inputs shifted by one", tok_dataloader),
]

# ------------------------------------------------------------------------------------------------------------
# 02_embeddings
# ------------------------------------------------------------------------------------------------------------


def emb_one_hot_distances(nb):
    distances = tensors(output(nb, "torch.cdist(one_hot, one_hot)"))[-1]
    for i, row in enumerate(distances):
        for j, d in enumerate(row):
            expect(close(d, 0.0 if i == j else math.sqrt(2), 1e-3), f"distance {i}-{j} is {d}, not √2: {distances}")


def emb_lookup_shape(nb):
    text = output(nb, "vectors = embedding(ids)")
    expect("torch.Size([2, 3, 3])" in text and "same as indexing the rows: True" in text, f"lookup:\n{text}")


def emb_one_hot_product(nb):
    text = output(nb, "linear.weight.copy_(embedding.weight.T)")
    expect(
        "one-hot @ weight equals the lookup: True" in text and "a linear layer on one-hot inputs too: True" in text,
        f"one-hot product:\n{text}",
    )


def emb_gradient_counts(nb):
    text = output(nb, "embedding(ids).sum().backward()")
    grad = tensors(text)[0]
    uses = literal(text, r"uses of each id: (\[.*\])", "uses")
    expect(uses == [1, 1, 1, 0, 0, 3], f"the text says token 5 is used 3 times and tokens 3, 4 not at all: {uses}")
    for token, (row, count) in enumerate(zip(grad, uses, strict=True)):
        expect(all(close(g, count, 1e-6) for g in row), f"row {token} of the gradient is {row}, not {count} everywhere")


def emb_timing_table(nb):
    text = output(nb, "lookup_s = time.perf_counter() - start")
    lookup = number(text, rf"^lookup:\s+{FLOAT} ms", "lookup time")
    product = number(text, rf"^product:\s+{FLOAT} ms", "product time")
    expect(lookup > 0 and product > 0, f"timings not printed:\n{text}")
    expect(number(text, r"one-hot matrix of (\d+) MB", "size of the one-hot matrix") == 26, f"not 26 MB:\n{text}")
    expect("same result: True" in text, f"lookup and product differ:\n{text}")


def emb_corpus_size(nb):
    text = output(nb, "ref.tiny_shakespeare_sentences(")
    sentences = number(text, rf"^{FLOAT} sentences", "sentences")
    words = number(text, rf"sentences, {FLOAT} words", "words")
    expect(
        12_000 <= sentences <= 13_000 and 180_000 <= words <= 200_000,
        f"{sentences:,.0f} sentences and {words:,.0f} words, not 'about 12,500 and 190,000'",
    )


def emb_settings(nb):
    text = output(nb, "ref.train_word2vec(sentences")
    expect(
        re.search(r"trained in [\d.]+ s: .*at least 5 occurrences, 50 numbers each", text),
        f"the text says 50 numbers per word and words with at least 5 occurrences:\n{text}",
    )


def emb_lengths_differ(nb):
    lengths = [float(v) for v in re.findall(r"length ([\d.]+)", output(nb, 'get_vecattr(word, "count")'))]
    expect(len(lengths) >= 4 and max(lengths) >= 1.5 * min(lengths), f"lengths {lengths} do not 'differ a lot'")


def emb_love_hate(nb):
    text = output(nb, '("love", "hate")')
    sims = {(a, b): float(s) for a, b, s in rows(text, rf"^\s*(\w+) ~ (\w+)\s+{FLOAT}$", "similarities", 7)}
    love = sims[("love", "hate")]
    expect(love >= 0.5, f"love ~ hate is {love}, not close")
    for pair in [("king", "night"), ("the", "king")]:
        expect(love > sims[pair], f"love ~ hate ({love}) is not above the unrelated pair {pair} ({sims[pair]})")


def _neighbours(nb) -> dict[str, tuple[list[str], str]]:
    text = output(nb, "def neighbours(word: str")
    found = rows(text, r"^\s*(\w+): (.*?)\s+\(gensim agrees: (\w+)\)$", "neighbour lists", 6)
    return {word: (listed.split(", "), agrees) for word, listed, agrees in found}


def emb_gensim_agrees(nb):
    disagree = [word for word, (_, agrees) in _neighbours(nb).items() if agrees != "True"]
    expect(not disagree, f"gensim disagrees for {disagree}")


def emb_neighbour_lists(nb):
    lists = _neighbours(nb)
    named = {
        "king": ["henry", "edward", "richard"],
        "father": ["brother", "son"],
        "night": ["day", "morning"],
        "thou": ["art", "wilt", "dost"],
    }
    for word, expected in named.items():
        expect(word in lists, f"no neighbours printed for {word!r}")
        missing = [w for w in expected if w not in lists[word][0]]
        expect(not missing, f"the text names {missing} among the neighbours of {word!r}; printed: {lists[word][0]}")


def emb_analogies(nb):
    text = output(nb, "questions = [")
    answers = {
        (a, b, c): got.split(", ")
        for a, b, c, _, got in rows(text, r"^(\w+) : (\w+) = (\w+) : (\w+)\s+-> (.*)$", "analogies", 5)
    }
    king = answers.get(("man", "king", "woman"))
    expect(
        king and king[0] != "queen" and king[0] in {"henry", "edward", "richard"},
        f"man : king = woman : ? should give another king's name, got {king}",
    )
    first, asked = (number(text, p, "summary") for p in (r"first in (\d+) of", r"first in \d+ of (\d+)"))
    expect(1 <= first <= asked / 2, f"'some work, many do not': first in {first:.0f} of {asked:.0f}")


def emb_offline(nb):
    text = output(nb, "TRY_PRETRAINED = True")
    expect(re.search(r"^GloVe: [\d,]+ words", text, re.M) or "offline" in text, f"neither loaded nor said why:\n{text}")


def emb_gpt_input(nb):
    text = output(nb, "position_embedding = nn.Embedding")
    expect(re.search(r"input of the model:\s+\(8, 4, 256\)", text), f"the input is not (B, T, C):\n{text}")
    tokens = number(text, rf"parameters: {FLOAT} in the token table", "token table")
    positions = number(text, rf"{FLOAT} in the position table", "position table")
    expect(tokens > 100 * positions, f"the token table ({tokens:,.0f}) does not dominate ({positions:,.0f})")


def emb_pca_groups(nb):
    text = output(nb, "word_vectors_scatter(vectors[rows]")
    pattern = rf"^(\w+)\s+first direction\s+{FLOAT} to\s+{FLOAT}\s+second\s+{FLOAT} to\s+{FLOAT}$"
    box = {g: [float(v) for v in vs] for g, *vs in rows(text, pattern, "PCA ranges", 4)}

    def apart(low_a, high_a, low_b, high_b):  # the two ranges do not overlap
        return high_a < low_b or high_b < low_a

    people = (min(box["family"][0], box["rank"][0]), max(box["family"][1], box["rank"][1]))
    others = (min(box["body"][0], box["time"][0]), max(box["body"][1], box["time"][1]))
    expect(apart(*people, *others), f"first direction: people {people} overlap body parts and times {others}")
    expect(
        apart(*box["body"][2:], *box["time"][2:]),
        f"second direction: body {box['body'][2:]} overlaps time {box['time'][2:]}",
    )
    shift = [f - r for f, r in zip(box["family"][2:], box["rank"][2:], strict=True)]
    expect(
        shift[0] * shift[1] > 0,
        f"second direction: family {box['family'][2:]} and rank {box['rank'][2:]} are not even shifted apart",
    )


EMBEDDINGS = [
    Claim("any two one-hot vectors are orthogonal and exactly √2 apart", emb_one_hot_distances),
    Claim("nn.Embedding returns (..., C): for every id, that row of the matrix", emb_lookup_shape),
    Claim("The same numbers come out of a matrix product ... a linear layer without bias", emb_one_hot_product),
    Claim(
        "Token 5 occurs three times and its row gets 3 in every component; tokens 3 and 4 ... get zeros",
        emb_gradient_counts,
    ),
    Claim(
        "the product took 20 to 90 times as long ... your timings will differ; the 26 MB one-hot matrix will not "
        "(only the table and the size are checked)",
        emb_timing_table,
    ),
    Claim("Tiny Shakespeare: about 12,500 sentences and 190,000 words", emb_corpus_size),
    Claim("50 numbers per word ... only words that occur at least 5 times", emb_settings),
    Claim("the lengths of word vectors differ a lot", emb_lengths_differ),
    Claim("Love and hate are close", emb_love_hate),
    Claim("gensim has the same search built in, and it agrees", emb_gensim_agrees),
    Claim(
        "the kings are Henry, Edward and Richard, a father sits with brothers and sons, the night with day and "
        "morning, thou with art, wilt, dost",
        emb_neighbour_lists,
    ),
    Claim("Some analogies work, many do not — man : king = woman : ? gives another king's name", emb_analogies),
    Claim("Offline, the cell says so and the lesson goes on", emb_offline),
    Claim(
        "token embeddings plus position embeddings, (B, T, C); the token table dominates the parameter count",
        emb_gpt_input,
    ),
    Claim(
        "the first direction separates people from body parts and times, the second body parts from times, and "
        "(less cleanly) family from rank",
        emb_pca_groups,
    ),
]

# ------------------------------------------------------------------------------------------------------------
# 03_position_encoding
# ------------------------------------------------------------------------------------------------------------


def pos_equivariance(nb):
    text = output(nb, "dog_bites_man = attend(")
    expect(
        "'dog' gets the same output in both sentences: True" in text
        and "the second output is the first one reordered: True" in text,
        f"not equivariant:\n{text}",
    )
    error = number(output(nb, 'print(f"attention alone: {'), rf"attention alone: {FLOAT}", "error")
    expect(error < 1e-5, f"'the difference is rounding error', but it is {error}")


def pos_clock_hands(nb):
    pairs = rows(
        output(nb, "one turn every"),
        rf"^pair (\d+): .*?\s{FLOAT} rad per position, one turn every\s+{FLOAT}",
        "clock hands",
        8,
    )
    speeds, turns = [float(s) for _, s, _ in pairs], [float(t) for _, _, t in pairs]
    expect(close(speeds[0], 1.0, 1e-4) and close(turns[0], 2 * math.pi, 0.06), f"first hand: {pairs[0]}")
    expect(all(b > a for a, b in zip(turns, turns[1:], strict=False)), f"hands do not get slower: {turns}")
    expect(close(turns[-1], 19_869, 1), f"the text says the last hand (d = 16) turns every 19,869 positions: {turns}")


def pos_heatmap_columns(nb):
    text = output(nb, "position_encoding_heatmap(pe, title=")
    low, high = (number(text, p, "channel 0") for p in (rf"channel 0 .*?: {FLOAT} to", rf"channel 0 .*? to {FLOAT};"))
    sin = number(text, rf"sin at most {FLOAT}", "slowest sin")
    cos = number(text, rf"cos at least {FLOAT}", "slowest cos")
    expect(low < -0.95 and high > 0.95, f"channel 0 should swing between −1 and 1: {low} to {high}")
    expect(sin < 0.05 and cos > 0.99, f"the last columns should hardly change (sin ≈ 0, cos ≈ 1): {sin}, {cos}")


def pos_bounded(nb):
    text = output(nb, "row lengths between")
    low, high = number(text, rf"values between {FLOAT}", "min"), number(text, rf"values between \S+ and {FLOAT}", "max")
    expect(low >= -1.0005 and high <= 1.0005, f"values outside [−1, 1]: {low} to {high}")
    shortest, longest, root = (
        number(text, p, "lengths")
        for p in (rf"row lengths between {FLOAT}", rf"row lengths between \S+ and {FLOAT}", rf"sqrt\(d/2\) = {FLOAT}")
    )
    expect(
        close(shortest, root, 1e-3) and close(longest, root, 1e-3),
        f"row lengths {shortest}..{longest}, √(d/2) = {root}",
    )


def pos_distinct(nb):
    smallest = number(output(nb, "distances.fill_diagonal_"), rf"positions: {FLOAT}", "smallest distance")
    expect(smallest > 0.1, f"the closest rows are {smallest} apart: not far from rounding error")


def pos_offset_matrix(nb):
    error = number(output(nb, "M = offset_matrix(k, 64)"), rf"over all p: {FLOAT}", "rotation error")
    expect(error < 1e-5, f"PE[p + k] differs from M_k PE[p] by {error}")


def pos_offset_curves(nb):
    text = output(nb, "mean_curve = ref.offset_dot_products")
    at_zero = number(text, rf"offset 0: {FLOAT}", "offset 0")
    lowest = number(text, rf"lowest: {FLOAT}", "lowest")
    at_end = number(text, rf"offset 60: {FLOAT}", "offset 60")
    gap = number(text, rf"between the curves: {FLOAT}", "gap")
    asymmetry = number(text, rf"\|f\(k\) - f\(-k\)\|: {FLOAT}", "asymmetry")
    expect(close(at_zero, 32, 0.01), f"largest at offset 0 should be d/2 = 32, got {at_zero}")
    expect(1 < lowest < at_zero, f"falls off but 'not to zero': lowest {lowest}")
    expect(
        at_end > lowest + 0.5,
        f"'not smoothly': the curve should rise again after its lowest point ({lowest}), but offset 60 gives {at_end}",
    )
    expect(
        gap < 1e-3 and asymmetry < 1e-3,
        f"curves apart by {gap}, asymmetry {asymmetry}: not on top of each other or not symmetric",
    )


def pos_buffer(nb):
    text = output(nb, "module = ref.PositionEncoding(d_model=16, max_len=10)")
    for shown in ("state dict: ['pe']   parameters: []", "pe follows the module: torch.float64", "ValueError: "):
        expect(shown in text, f"expected {shown!r} in:\n{text}")


def pos_positions_break_symmetry(nb):
    text = output(nb, "positions added, then attention")
    alone = number(text, rf"attention alone:\s+{FLOAT}", "without positions")
    added = number(text, rf"positions added, then attention:\s+{FLOAT}", "with positions")
    expect(added > 1e-2 and added > 1000 * alone, f"positions do not break the symmetry: {alone} vs {added}")
    expect("'dog' gets the same output in both sentences: False" in text, f"'dog' still gets the same output:\n{text}")


def pos_learned(nb):
    text = output(nb, "learned = ref.LearnedPositionEmbedding")
    expect(number(text, rf"trainable parameters: {FLOAT}", "parameters") == 6_400, f"not 100 x 64 parameters:\n{text}")
    text = output(nb, "learned(torch.zeros(1, 101, 64))")
    expect(
        re.search(r"^learned table: .*max_len", text, re.M) and "101 positions: (101, 64)" in text,
        f"the learned table should refuse 101 positions and the formula give them:\n{text}",
    )


def pos_rope(nb):
    expect("lengths kept: True" in output(nb, "lengths kept"), "RoPE changed the lengths")
    text = output(nb, "def diagonal_spread(")
    rotary = number(text, rf"RoPE:\s+spread along the diagonals {FLOAT}", "RoPE spread")
    added = number(text, rf"sinusoidal, added:\s+spread along the diagonals {FLOAT}", "additive spread")
    expect(rotary < 1e-4 and added > 0.1, f"RoPE spread {rotary} (should be rounding), additive {added} (should not)")


def pos_layouts(nb):
    text = output(nb, "interleave = torch.stack(")
    expect(literal(text, r"channel order: (\[.*\])", "order") == [0, 4, 1, 5, 2, 6, 3, 7], f"channel order:\n{text}")
    expect(
        re.search(r"same layout:\s+False", text) and re.search(r"after reordering:\s+True", text),
        f"the two layouts should differ, and agree after reordering:\n{text}",
    )


POSITION = [
    Claim("'dog' gets the same output in both sentences ... The difference is rounding error", pos_equivariance),
    Claim(
        "The first hand turns by one radian per position and goes round every 2π ≈ 6.3 positions; each following "
        "hand is slower; for d = 16, the last turns every 19,869 positions",
        pos_clock_hands,
    ),
    Claim(
        "The left columns flip between −1 and 1; the last columns hardly change over 100 positions (sin ≈ 0, cos ≈ 1)",
        pos_heatmap_columns,
    ),
    Claim("Every value lies in [−1, 1], every row has the same length √(d/2)", pos_bounded),
    Claim("The two closest rows ... are still far apart compared with rounding error", pos_distinct),
    Claim("PE[p + k] = M_k PE[p] for every p", pos_offset_matrix),
    Claim(
        "largest at offset 0 (d/2 = 32), symmetric, falls off — not smoothly and not to zero; the curves from "
        "three positions lie on top of each other",
        pos_offset_curves,
    ),
    Claim(
        "the table is in the state dict but not among the parameters, follows the module, a too-long input is refused",
        pos_buffer,
    ),
    Claim(
        "Adding the positions before attention breaks the permutation symmetry, and dog gets a different output",
        pos_positions_break_symmetry,
    ),
    Claim(
        "100 positions x 64 parameters; learned positions cannot be run on a longer input, the formula can", pos_learned
    ),
    Claim("Rotations keep lengths; the RoPE matrix is constant along its diagonals, the additive one is not", pos_rope),
    Claim("reorder them as [0, D/2, 1, D/2 + 1, …] and the two agree", pos_layouts),
]

# ------------------------------------------------------------------------------------------------------------
# 04_attention
# ------------------------------------------------------------------------------------------------------------


def att_journey_weights(nb):
    found = rows(output(nb, "weights = [e / sum(exps)"), rf"^weight of (\w+)\s+{FLOAT}$", "weights", 6)
    ranked = [token for token, _ in sorted(found, key=lambda item: float(item[1]), reverse=True)]
    expect(set(ranked[:3]) == {"journey", "step", "starts"}, f"the three largest weights are {ranked[:3]}")
    expect(set(ranked[-2:]) == {"Your", "with"}, f"the two smallest weights are {ranked[-2:]}")


def att_rows_sum_to_one(nb):
    text = output(nb, "all_weights = torch.softmax(all_scores")
    expect(all(close(s, 1, 1e-3) for s in tensors(text)[0]), f"rows do not sum to 1:\n{text}")
    expect("row 'journey' as computed by hand? True" in text, f"vectorised row differs:\n{text}")
    by_hand = literal(output(nb, "context vector of 'journey'"), r"journey': (\[.*\])", "by hand")
    again = tensors(output(nb, "ref.simple_self_attention(x)[1]"))[0]
    expect(all(close(a, b, 2e-3) for a, b in zip(by_hand, again, strict=True)), f"{again} is not {by_hand} again")


def _table(nb, marker, columns, what):
    pattern = r"^\s*(\d+)" + r"\s*\|?\s+([\d.]+)" * columns + r"\s*$"
    return [[float(v) for v in row] for row in rows(output(nb, marker), pattern, what, 5)]


def att_variance(nb):
    table = _table(nb, "var(q·k / sqrt(d_k))", 2, "variance table")
    for d_k, raw, scaled in table:
        expect(close(raw / d_k, 1, 0.15), f"var(q·k) = {raw} at d_k = {d_k:.0f}: not about d_k")
        expect(close(scaled, 1, 0.15), f"scaled variance {scaled} at d_k = {d_k:.0f}: not near 1")


def att_saturation(nb):
    table = _table(nb, "softmax_statistics(raw / math.sqrt(d_k))", 4, "softmax table")
    top_raw, top_scaled, grad_raw, grad_scaled = ([row[i] for row in table] for i in (1, 2, 3, 4))
    expect(
        all(b > a for a, b in zip(top_raw, top_raw[1:], strict=False)) and top_raw[-1] > 0.9,
        f"unscaled rows should turn one-hot as d_k grows: {top_raw}",
    )
    expect(
        all(b < a for a, b in zip(grad_raw, grad_raw[1:], strict=False)) and grad_raw[-1] < grad_raw[0] / 4,
        f"the unscaled gradient should almost vanish: {grad_raw}",
    )
    for name, values in (("largest weight", top_scaled), ("gradient", grad_scaled)):
        expect(max(values) <= 1.2 * min(values), f"scaled {name} should keep its size: {values}")


def att_matches_pytorch(nb):
    text = output(nb, "theirs = F.scaled_dot_product_attention")
    expect(number(text, rf"largest difference from PyTorch: {FLOAT}", "difference") < 1e-5, f"differs:\n{text}")
    expect(tensors(text)[0] == [0.0] * 6, f"masked key 'with' should get weight exactly 0:\n{text}")


def att_two_ways(nb):
    text = output(nb, "renormalised = zeroed")
    weights, zeroed = tensors(text)[:2]
    for i, row in enumerate(weights):
        expect(all(w == 0 for w in row[i + 1 :]) and close(sum(row), 1, 5e-3), f"row {i} of the causal weights: {row}")
    expect(number(text, rf"between the two ways: {FLOAT}", "difference") < 1e-6, f"the two ways differ:\n{text}")
    expect(
        all(s < 0.999 for s in zeroed[:-1]) and close(zeroed[-1], 1, 1e-3),
        f"zeroing without renormalising should leave rows below 1: {zeroed}",
    )


def att_causal_mask(nb):
    mask = tensors(output(nb, "print(ref.causal_mask(4))"))[0]
    expected = [[j <= i for j in range(4)] for i in range(4)]
    expect(mask == expected, f"causal mask is not True on and below the diagonal: {mask}")


def att_padding(nb):
    text = output(nb, "largest weight on a <pad> key")
    expect(number(text, rf"on a <pad> key: {FLOAT}", "pad weight") == 0, f"<pad> columns are not all 0:\n{text}")
    real = tensors(text.split("per row:")[-1])[0]
    expect(len(real) == 6 and all(close(s, 1, 1e-3) for s in real), f"rows should attend to the real tokens: {real}")


def att_padding_and_causal(nb):
    both = tensors(output(nb, "both = ref.causal_mask(T) & key_padding"))[0]
    expected = [[int(j <= i and j < 2) for j in range(6)] for i in range(6)]
    expect(both == expected, f"'both in the past and real' should be {expected}, got {both}")


def att_dropout(nb):
    dropped, training, evaluation = tensors(output(nb, "dropping.train()"))[:3]
    expect(
        dropped[0][0] in (0.0, 2.0) and all(w <= 2.0005 for row in dropped for w in row),
        f"surviving weights should be doubled: first row {dropped[0]}",
    )
    expect(any(not close(s, 1, 1e-3) for s in training), f"training rows still sum to 1: {training}")
    expect(all(close(s, 1, 1e-3) for s in evaluation), f"evaluation rows do not sum to 1: {evaluation}")


def att_causal_module(nb):
    text = output(nb, "causal_attention = ref.CausalSelfAttention")
    expect("state dict: ['W_query.weight', 'W_key.weight', 'W_value.weight']" in text, f"extra state:\n{text}")
    expect("output for 4 tokens: (1, 4, 2)" in text and "ValueError:" in text, f"T handling:\n{text}")


def att_cross_shapes(nb):
    text = output(nb, "cross = ref.CrossAttention(")
    expect("output (1, 3, 4) weights (1, 3, 6)" in text, f"not one row per decoder token:\n{text}")
    expect(output(nb, "swapped = cross.W_key(memory)").startswith("weights (1, 6, 3)"), "swapped roles: wrong shape")


def att_shakespeare_counts(nb):
    text = output(nb, "shakespeare_counts = Counter(")
    counts = {w: int(n) for w, n in rows(text, r"^(\w+)\s+appears\s+(\d+) times", "counts", 5)}
    expect(counts["cows"] == 0 and counts["huts"] == 0 and counts["village"] == 1, f"counts: {counts}")


def _village(nb):
    text = output(nb, "mixed = ref.simple_self_attention(vectors)")
    return {
        label: (
            number(text, rf"^{label}\s+cosine to village: {FLOAT}", label),
            number(text, rf"^{label}\s+cosine to village: \S+\s+to city: {FLOAT}", label),
        )
        for label in ("attention mix", "plain average")
    }


def att_village(nb):
    village, city = _village(nb)["attention mix"]
    expect(village > city + 0.3, f"the mix is not far closer to village ({village}) than to city ({city})")


def att_plain_average(nb):
    (mix_v, mix_c), (avg_v, avg_c) = _village(nb)["attention mix"], _village(nb)["plain average"]
    expect(
        close(mix_v, avg_v, 0.1) and close(mix_c, avg_c, 0.1),
        f"plain average ({avg_v}, {avg_c}) is not close to the mix ({mix_v}, {mix_c})",
    )


def att_and_moves(nb):
    text = output(nb, "phrase_weights = torch.softmax")
    before_v, before_c, after_v, after_c = (
        float(v)
        for v in rows(
            text,
            rf"^and\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s+"
            rf"{FLOAT}$",
            "'and'",
        )[0]
    )
    expect(close(before_v, before_c, 0.15), f"'and' alone should be of both worlds: {before_v} vs {before_c}")
    expect(
        after_v > before_v and after_v - after_c > before_v - before_c + 0.05,
        f"'and' should move toward village: before {before_v}/{before_c}, after {after_v}/{after_c}",
    )


ATTENTION = [
    Claim(
        "journey gave most weight to itself and to step and starts, and little to Your and with", att_journey_weights
    ),
    Claim("every query's weights sum to 1; the vectorised row is the one computed by hand", att_rows_sum_to_one),
    Claim("its variance is d_k ... Divided by √d_k, the scores keep a variance near 1", att_variance),
    Claim(
        "the softmax saturates to an almost one-hot row and its gradient almost vanishes; scaled, the weights stay "
        "spread out and the gradient keeps its size",
        att_saturation,
    ),
    Claim(
        "The reference agrees with F.scaled_dot_product_attention; masked keys get weight exactly 0",
        att_matches_pytorch,
    ),
    Claim(
        "the two ways give the same weights; zeroing after the softmax leaves rows that sum to less than 1",
        att_two_ways,
    ),
    Claim("causal mask: True on and below the diagonal", att_causal_mask),
    Claim("The <pad> columns are all 0. The <pad> rows still attend to the real tokens", att_padding),
    Claim("a key must be both in the past and real", att_padding_and_causal),
    Claim(
        "In training the surviving weights are doubled (p = 0.5) and rows no longer sum to 1; in evaluation they do",
        att_dropout,
    ),
    Claim("nothing else in the state dict (no persistent mask buffer); T > context_length raises", att_causal_module),
    Claim(
        "cross-attention weights (Tq, Tk), one row per decoder token; swapped roles give the encoder's length",
        att_cross_shapes,
    ),
    Claim("cows and huts never occur and village once", att_shakespeare_counts),
    Claim("the attention mix of the phrase is far closer to village than to city", att_village),
    Claim("the plain average of the five vectors is close to the attention mix", att_plain_average),
    Claim("and: alone a word of both worlds, its context vector moves toward village", att_and_moves),
]

# ------------------------------------------------------------------------------------------------------------
# 05_multi_head_attention
# ------------------------------------------------------------------------------------------------------------


def mha_wrapper(nb):
    text = output(nb, "wrapper = ref.MultiHeadAttentionWrapper(")
    expect(literal(text, r"heads: (\[.*\])", "heads") == ["CausalSelfAttention(8 -> 4)"] * 2, f"heads:\n{text}")
    expect("output (2, 6, 8) weights (2, 2, 6, 6) = (B, H, T, T)" in text, f"shapes:\n{text}")


def mha_bare_view(nb):
    right, bare = tensors(output(nb, "bare = tiny.view(1, H, 2, D)"))[:2]
    expect(right == [[0, 1], [10, 11]], f"the right split gives head 0 channels 0-1 of both tokens, got {right}")
    expect(bare == [[0, 1], [2, 3]], f"the bare view gives head 0 channels 0-3 of token 0, got {bare}")


def _small(nb, marker, pattern, what):
    value = number(output(nb, marker), pattern, what)
    expect(value < 1e-5, f"{what}: {value} is not float32 rounding")


def mha_versions_agree(nb):
    _small(nb, "BatchedMultiHeadAttention.from_wrapper", rf"from the wrapper: {FLOAT}", "batched vs wrapper")
    text = output(nb, "fused = ref.MultiHeadAttention.from_batched")
    expect("rows 0..7 of qkv.weight are W_query? True" in text, f"qkv layout:\n{text}")
    _small(nb, "fused = ref.MultiHeadAttention.from_batched", rf"from the wrapper: {FLOAT}", "fused vs wrapper")
    _small(nb, "use_sdpa=True", rf"from the wrapper: {FLOAT}", "SDPA vs wrapper")
    _small(nb, "use_sdpa=True", rf"PyTorch's kernel: {FLOAT}", "lesson 04 vs kernel")


def mha_torch_module(nb):
    text = output(nb, "theirs = ref.to_torch_mha(ours)")
    expect("same weights in both: True" in text, f"weights not copied:\n{text}")
    _small(nb, "theirs = ref.to_torch_mha(ours)", rf"output difference:\s+{FLOAT}", "outputs")
    _small(nb, "theirs = ref.to_torch_mha(ours)", rf"weights difference:\s+{FLOAT}", "weights")


def mha_parameters(nb):
    table = rows(
        output(nb, '"nn.MultiheadAttention": ref.count_parameters'),
        r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$",
        "parameter table",
        6,
    )
    expected = 4 * 768**2 + 4 * 768
    for heads, d_head, ours, theirs in table:
        expect(
            int(heads) * int(d_head) == 768 and int(ours) == int(theirs) == expected,
            f"with {heads} heads: {ours} / {theirs} parameters, expected {expected:,} whatever the heads",
        )
    text = output(nb, "per_layer = ref.multihead_parameter_count(768)")
    expect(f"{expected:,} parameters" in text and "equals the module's count: True" in text, f"count:\n{text}")


def mha_benchmark(nb):
    text = output(nb, "median_ms.round(2)")
    _small(nb, "median_ms.round(2)", rf"from the list of heads: {FLOAT}", "benchmark outputs")
    seq_lens = [int(t) for t in literal(text, r"'seq_lens': (\([\d, ]+\))", "settings")]
    names = ["wrapper of heads", "batched heads", "fused QKV", "fused QKV + SDPA", "nn.MultiheadAttention"]
    speedups = output(nb, 'values="speedup_vs_wrapper"')
    for table, what in ((text, "median times"), (speedups, "speed-ups")):
        expect(all(name in table for name in names), f"{what}: not every version is in the table:\n{table}")
        for t in seq_lens:
            values = [float(v) for line in re.findall(rf"^{t}\s+(.+?)\s*$", table, re.M) for v in line.split()]
            expect(len(values) == len(names) and all(v > 0 for v in values), f"{what} at T = {t}: {values}")
            expect(what != "speed-ups" or values[0] == 1.0, f"the list of heads is the reference (1.0): {values}")


MULTIHEAD = [
    Claim("H heads, each a CausalSelfAttention with head size D = d_out / H; weights (B, H, T, T)", mha_wrapper),
    Claim("With the bare view, head 0 gets channels 0–3 of token 0 and no channel of token 1", mha_bare_view),
    Claim("the batched, fused and SDPA versions compute the same function as the list of heads", mha_versions_agree),
    Claim(
        "ref.to_torch_mha copies our weights into a PyTorch module; the two then agree, outputs and weights",
        mha_torch_module,
    ),
    Claim("4·d_model² + 4·d_model parameters, whatever the number of heads", mha_parameters),
    Claim(
        "All versions compute the same function; a table of medians and speed-ups for every version and length "
        "(timings themselves are not asserted)",
        mha_benchmark,
    ),
]

# ------------------------------------------------------------------------------------------------------------

CLAIMS: dict[str, list[Claim]] = {
    "00_welcome": WELCOME,
    "01_tokenization": TOKENIZATION,
    "02_embeddings": EMBEDDINGS,
    "03_position_encoding": POSITION,
    "04_attention": ATTENTION,
    "05_multi_head_attention": MULTIHEAD,
}


def check_claims(lesson: str, nb: NotebookNode) -> None:
    """Run every claim of `lesson` on the executed notebook `nb`; one AssertionError lists all that fail."""
    expect(
        lesson in CLAIMS,
        f"{lesson} has no entry in tests/lesson_claims.py CLAIMS (an empty list if it makes "
        "no claims about computed results)",
    )
    failures = []
    for claim in CLAIMS[lesson]:
        try:
            claim.check(nb)
        except AssertionError as error:
            failures.append(f"- {claim.text}\n    {error}")
    if failures:
        raise AssertionError(
            f"{lesson}: {len(failures)} of {len(CLAIMS[lesson])} claims are not shown by the "
            "executed notebook:\n" + "\n".join(failures)
        )
