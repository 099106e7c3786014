"""Tests of course_lib.gpt2_bpe: the from-scratch GPT-2 tokenizer must give tiktoken's ids exactly."""

from __future__ import annotations

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiktoken_ext.openai_public import r50k_pat_str

from course_lib import data
from course_lib.data import data_path, gpt2_encoding, load_text
from course_lib.gpt2_bpe import GPT2_SPLIT_PATTERN, GPT2Tokenizer, MergeStep, bytes_to_unicode

EDGE_CASES = [
    "",
    " ",
    "   ",
    "\t\t",
    "\n",
    "\n\n\n",
    " \n \n ",
    "a  b   c    d",
    "trailing spaces   ",
    "trailing newline\n",
    "tabs\tand\t\tmore tabs \t",
    "\r\n",
    "windows\r\nline\r\nendings\r\n",
    "DON'T",
    "it's",
    "I'M SURE WE'LL",
    "we'll've'd",
    "'s",
    "''''",
    "rock 'n' roll",
    "0",
    "12345678901234567890",
    "3.14159 and 2,718 and 1e-10",
    "٣٤٥ and ½ and Ⅻ",  # Arabic-Indic digits, a vulgar fraction, a Roman numeral (all \p{N})
    "😀",
    "👨‍👩‍👧‍👦 family",  # zero-width-joiner sequence
    "👍🏽👍🏿",  # skin tones
    "🇫🇷🇯🇵🏴‍☠️",  # flags
    "日本語のテキストです。",
    "中文分词测试",
    "한국어",
    "مرحبا بالعالم",
    "שלום עולם",
    "e\u0301 cafe\u0301 n\u0303",  # combining accents
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
    "\x00",
    "a\x00b\x01\x1f\x7f",
    "\ufffd",
    "line\u2028separator\u2029paragraph",
    "non\u00a0breaking\u200bzero width",
    "\ufeffbyte order mark",
    "a" * 5000,
    "supercalifragilisticexpialidocious" * 40,
    "https://example.com/a?b=c&d=e#frag",
    "def f(x):\n    return x ** 2  # comment\n",
    "<|endoftext|>",
    "Hello <|endoftext|> world<|endoftext|>",
    "<|endoftext",
    "!!!??? ... ---",
    "\ud800 lone surrogate",  # no utf-8 form: tiktoken replaces it with U+FFFD
]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    """(from-scratch tokenizer, tiktoken encoding), both built offline through a temporary data cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(data.CACHE_ENV, str(tmp_path_factory.mktemp("gpt2-cache")))
        texts = {name: load_text(name) for name in ("tinyshakespeare.txt", "the-verdict.txt")}
        return GPT2Tokenizer.from_registry(), gpt2_encoding(), texts


@pytest.fixture(scope="module")
def ours(tokenizers):
    return tokenizers[0]


@pytest.fixture(scope="module")
def reference(tokenizers):
    return tokenizers[1]


@pytest.mark.parametrize("name", ["the-verdict.txt", "tinyshakespeare.txt"])
def test_identical_ids_on_whole_course_texts(tokenizers, name):
    ours, reference, texts = tokenizers
    text = texts[name]
    ids = ours.encode(text)
    assert ids == reference.encode(text)
    assert len(ids) == {"the-verdict.txt": 5_145, "tinyshakespeare.txt": 338_025}[name]
    assert ours.decode(ids) == text


@pytest.mark.parametrize("text", EDGE_CASES, ids=[repr(case[:20]) for case in EDGE_CASES])
def test_edge_cases_match_tiktoken(ours, reference, text):
    assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
    assert ours.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
    if "\ud800" not in text:
        assert ours.decode(ours.encode_ordinary(text)) == text


def test_known_ids(ours):
    assert ours.encode("Hello world") == [15496, 995]
    assert ours.encode("<|endoftext|>", allowed_special={"<|endoftext|>"}) == [50256]
    assert ours.n_vocab == 50257
    assert ours.pre_split("Hello world, it's 2024!") == ["Hello", " world", ",", " it", "'s", " 2024", "!"]


def test_special_token_rules_follow_tiktoken(ours, reference):
    text = "end of one document<|endoftext|>start of the next"
    with pytest.raises(ValueError):
        reference.encode(text)
    with pytest.raises(ValueError, match=r"special token '<\|endoftext\|>'.*allowed_special"):
        ours.encode(text)
    for kwargs in (
        {"allowed_special": {"<|endoftext|>"}},
        {"allowed_special": "all"},
        {"disallowed_special": ()},
    ):
        assert ours.encode(text, **kwargs) == reference.encode(text, **kwargs)
    assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
    assert 50256 not in ours.encode_ordinary(text)
    assert ours.encode(text, allowed_special="all").count(50256) == 1


def test_every_single_token_decodes_like_tiktoken(ours, reference):
    for index in range(ours.n_vocab):
        assert ours.decode_bytes([index]) == reference.decode_single_token_bytes(index), index


def test_partial_characters_decode_with_replacement(ours, reference):
    ids = ours.encode("🦙")
    assert len(ids) > 1  # the llama emoji needs several byte tokens
    assert ours.decode_bytes(ids) == "🦙".encode()
    assert ours.decode(ids[:1]) == reference.decode(ids[:1]) and "\ufffd" in ours.decode(ids[:1])


def test_bytes_to_unicode_table():
    table = bytes_to_unicode()
    assert list(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert all(char.isprintable() and not char.isspace() for char in table.values())
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("A")] == "A"
    assert table[0] == chr(256)


def test_encode_steps_show_the_merges(ours):
    steps = ours.encode_steps(" tokenization")
    assert steps and all(isinstance(step, MergeStep) for step in steps)
    final_ids = [ours.encoder[part] for part in steps[-1].parts]
    assert final_ids == ours.encode(" tokenization")
    assert "".join(steps[-1].parts) == "Ġtokenization"
    ranks = [step.rank for step in steps]
    assert ranks == sorted(set(ranks))  # a merge's pair never ranks before a merge it depends on
    for before, step in zip([None, *steps], steps, strict=False):
        assert "".join(step.pair) in step.parts
        if before is not None:
            assert len(step.parts) < len(before.parts)
    assert ours.encode_steps("a") == []


def test_cache_does_not_change_results(ours, reference, tokenizers):
    text = tokenizers[2]["the-verdict.txt"][:3000]
    warm = ours.encode(text)
    ours.clear_cache()
    assert ours._cache == {}
    assert ours.encode(text) == warm == reference.encode(text)
    assert ours._cache  # filled again


def test_from_files_matches_from_registry(ours):
    again = GPT2Tokenizer.from_files(data_path("encoder.json"), data_path("vocab.bpe"))
    assert again.merge_ranks == ours.merge_ranks and again.encoder == ours.encoder
    assert len(again.merge_ranks) == 50_000


def test_errors(ours, tmp_path):
    with pytest.raises(TypeError, match="text must be a str"):
        ours.encode(b"bytes")
    with pytest.raises(TypeError, match="text must be a str"):
        ours.encode_ordinary(None)
    with pytest.raises(ValueError, match="id 50257"):
        ours.decode([15496, 50257])
    with pytest.raises(ValueError, match="id -1"):
        ours.decode([-1])
    with pytest.raises(TypeError, match="item 1"):
        ours.decode([15496, "995"])
    with pytest.raises(TypeError, match="ids"):
        ours.decode("15496")
    with pytest.raises(ValueError, match="<|startoftext|>"):
        ours.encode("hi", allowed_special={"<|startoftext|>"})
    with pytest.raises(TypeError, match="allowed_special"):
        ours.encode("hi", allowed_special="<|endoftext|>")
    with pytest.raises(ValueError, match="one pre-split piece"):
        ours.encode_steps("Hello world")
    bad_merges = tmp_path / "vocab.bpe"
    bad_merges.write_text("#version: 0.2\nĠ t\nthree parts here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="three parts here"):
        GPT2Tokenizer.from_files(data_path("encoder.json"), bad_merges)


# ----------------------------------------------------------------------------------------------
# Properties on random text

# Text built from the characters the pre-split pattern cares about, plus anything unicode.
tricky_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(" \t\n\r'sStTdlLvVrReEmM0123456789.,!?-_😀é\u00a0\u2028\u0301")),
        st.characters(),
    ),
    max_size=60,
)
settings_ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings_
@given(st.one_of(tricky_text, st.text(max_size=200)))
def test_random_text_same_ids_as_tiktoken_and_round_trip(ours, reference, text):
    ids = ours.encode_ordinary(text)
    assert ids == reference.encode_ordinary(text)
    # lone surrogates have no utf-8 form; like tiktoken we encode them as U+FFFD, so only that changes
    expected = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert ours.decode(ids) == expected


@settings_
@given(tricky_text)
def test_pre_split_pattern_equals_tiktoken_pattern(ours, text):
    assert ours.pre_split(text) == regex.findall(r50k_pat_str, text)
    assert "".join(ours.pre_split(text)) == text
    assert regex.findall(GPT2_SPLIT_PATTERN, text) == ours.pre_split(text)
