"""Lesson 08 graders (course_lib.grading.statquest): every known mistake has a buggy answer whose message must
name it; the tests run through tests/grader_kit.py."""

from __future__ import annotations

import torch

from course_lib import statquest as ref
from course_lib import statquest_model
from course_lib.grading import statquest as grading
from course_lib.grading.statquest_generate import _GENERATE_CASES, generation_case
from tests.grader_kit import HIDDEN, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "08_statquest_decoder"
DATA = "statquest_dataset"
FORWARD = "decoder_only_forward"
GENERATE = "greedy_generate"

# Right answers, written independently of course_lib.
STATQUEST_DATASET = """
import torch

def statquest_dataset():
    ids = {"what": 0, "is": 1, "statquest": 2, "awesome": 3, "<EOS>": 4}
    rows = ["what is statquest <EOS> awesome <EOS>", "statquest is what <EOS> awesome <EOS>"]
    seqs = [[ids[w] for w in row.split()] for row in rows]
    inputs = torch.tensor([s[:-1] for s in seqs])
    labels = torch.tensor([s[1:] for s in seqs])
    return inputs, labels
"""

DECODER_ONLY_FORWARD = """
import math
import torch

def decoder_only_forward(params, token_ids):
    T = token_ids.shape[1]
    x = params["we.weight"][token_ids] + params["pe.pe"][:T]
    q = torch.einsum("btc,dc->btd", x, params["self_attention.W_q.weight"])
    k = torch.einsum("btc,dc->btd", x, params["self_attention.W_k.weight"])
    v = torch.einsum("btc,dc->btd", x, params["self_attention.W_v.weight"])
    scores = torch.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    h = x + weights @ v
    return h @ params["fc_layer.weight"].T + params["fc_layer.bias"]
"""

GREEDY_GENERATE = """
import torch

from course_lib.statquest import decoder_only_forward  # the lesson's other exercise, as the sandbox binds it

def greedy_generate(params, prompt_ids, eos_id, max_new_tokens):
    ids = list(prompt_ids)
    out = []
    for _ in range(max_new_tokens):
        logits = decoder_only_forward(params, torch.tensor([ids]))
        nxt = logits[0, -1].argmax().item()
        out.append(nxt)
        ids.append(nxt)
        if nxt == eos_id:
            break
    return out
"""

KIT = GraderKit(LESSON, grading, {DATA: STATQUEST_DATASET, FORWARD: DECODER_ONLY_FORWARD, GENERATE: GREEDY_GENERATE})

_LABELS = "    labels = torch.tensor([s[1:] for s in seqs])\n"
_MASK = '    scores = scores.masked_fill(future, float("-inf"))\n'
_NEXT = "        nxt = logits[0, -1].argmax().item()\n"

MISTAKES = [
    # statquest_dataset
    mistake(
        DATA,
        _LABELS,
        "    labels = torch.tensor([s[:-1] for s in seqs])\n",
        "labels are not shifted",
        id="data-labels-not-shifted",
    ),
    mistake(
        DATA,
        _LABELS,
        "    labels = torch.tensor([[4] + s[:-2] for s in seqs])\n",
        "shifted the wrong way",
        id="data-labels-shifted-right",
    ),
    mistake(DATA, "    return inputs, labels\n", "    return labels, inputs\n", "swapped", id="data-swapped"),
    mistake(
        DATA,
        '    rows = ["what is statquest <EOS> awesome <EOS>", "statquest is what <EOS> awesome <EOS>"]\n',
        '    rows = ["statquest is what <EOS> awesome <EOS>", "what is statquest <EOS> awesome <EOS>"]\n',
        "other order",
        id="data-rows-swapped",
    ),
    mistake(
        DATA,
        '    ids = {"what": 0, "is": 1, "statquest": 2, "awesome": 3, "<EOS>": 4}\n',
        '    ids = {"<EOS>": 0, "awesome": 1, "is": 2, "statquest": 3, "what": 4}\n',
        ("wrong ids", "what: 4"),
        id="data-wrong-ids",
    ),
    mistake(
        DATA,
        _LABELS,
        _LABELS + "    labels[:, :3] = -100\n",
        "prompt's positions were left out",
        id="data-prompt-not-in-labels",
    ),
    mistake(
        DATA, "    return inputs, labels\n", "    return inputs.float(), labels\n", "torch.long", id="data-float-ids"
    ),
    mistake(
        DATA,
        "    inputs = torch.tensor([s[:-1] for s in seqs])\n",
        "    inputs = torch.tensor([s[:-2] for s in seqs])\n",
        "has shape (2, 4)",
        id="data-short-inputs",
    ),
    mistake(
        DATA,
        "def statquest_dataset():\n",
        "_DATA = None\n\ndef statquest_dataset():\n    global _DATA\n    if _DATA is not None:\n        return _DATA\n",
        "next call returned the changed values",
        also=(("    return inputs, labels\n", "    _DATA = inputs, labels\n    return _DATA\n"),),
        id="data-cached-tensors",
    ),
    # decoder_only_forward
    mistake(
        FORWARD,
        _MASK,
        '    scores = scores.masked_fill(~future, float("-inf"))\n',
        ("NaN", "inverted"),
        id="forward-mask-inverted-inf",
    ),
    mistake(
        FORWARD,
        _MASK,
        "    scores = scores.masked_fill(~future, -1e9)\n",
        "the mask is inverted",
        id="forward-mask-inverted-large-negative",
    ),
    mistake(FORWARD, _MASK, "", "no causal mask", id="forward-no-mask"),
    mistake(
        FORWARD, _MASK, "    scores = scores.masked_fill(future, 0.0)\n", "set to 0, not -inf", id="forward-mask-zero"
    ),
    mistake(FORWARD, " / math.sqrt(q.shape[-1])", "", "not scaled", id="forward-unscaled"),
    mistake(FORWARD, " / math.sqrt(q.shape[-1])", " / q.shape[-1]", "divided by d_model", id="forward-scaled-by-d"),
    mistake(
        FORWARD,
        "torch.softmax(scores, dim=-1)",
        "torch.softmax(scores, dim=1)",
        "over the queries",
        id="forward-softmax-col-dim-1",
    ),
    mistake(
        FORWARD,
        "    h = x + weights @ v\n",
        "    h = weights @ v\n",
        "residual connection is missing",
        id="forward-no-residual",
    ),
    mistake(FORWARD, ' + params["pe.pe"][:T]', "", "position encoding was not added", id="forward-no-position"),
    mistake(
        FORWARD,
        '"btc,dc->btd", x, params["self_attention.W_q.weight"]',
        '"btc,cd->btd", x, params["self_attention.W_q.weight"]',
        "untransposed",
        id="forward-untransposed",
        also=(
            (
                '"btc,dc->btd", x, params["self_attention.W_k.weight"]',
                '"btc,cd->btd", x, params["self_attention.W_k.weight"]',
            ),
            (
                '"btc,dc->btd", x, params["self_attention.W_v.weight"]',
                '"btc,cd->btd", x, params["self_attention.W_v.weight"]',
            ),
        ),
    ),
    mistake(FORWARD, ' + params["fc_layer.bias"]', "", "bias is missing", id="forward-no-bias"),
    # greedy_generate
    mistake(
        GENERATE,
        _NEXT,
        "        nxt = logits[0, -1].argmax()\n",
        ("is a tensor", "int("),
        id="generate-appends-a-tensor",
    ),
    mistake(
        GENERATE, "        if nxt == eos_id:\n            break\n", "", "did not stop at <EOS>", id="generate-no-stop"
    ),
    mistake(
        GENERATE,
        "        out.append(nxt)\n        ids.append(nxt)\n        if nxt == eos_id:\n            break\n",
        "        if nxt == eos_id:\n            break\n        out.append(nxt)\n        ids.append(nxt)\n",
        "<EOS> itself is missing",
        id="generate-eos-dropped",
    ),
    mistake(GENERATE, "    return out\n", "    return ids\n", "prompt was returned too", id="generate-with-prompt"),
    mistake(GENERATE, _NEXT, "        nxt = logits[0, 0].argmax().item()\n", "first position", id="generate-first"),
    mistake(GENERATE, "torch.tensor([ids])", "torch.tensor([ids[-1:]])", "only the last id", id="generate-no-context"),
    mistake(
        GENERATE, "range(max_new_tokens)", "range(max_new_tokens - 1)", "one id too few", id="generate-budget-short"
    ),
    mistake(GENERATE, "    ids = list(prompt_ids)\n", "    ids = prompt_ids\n", "in place", id="generate-in-place"),
    mistake(
        GENERATE,
        "    return out\n",
        "    return torch.tensor(out)\n",
        "returned a tensor",
        id="generate-returns-a-tensor",
    ),
    wrong_answer(
        GENERATE,
        "def greedy_generate(params, prompt_ids, eos_id, max_new_tokens):\n    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="generate-unwritten-hidden",
    ),
]

BORROWED = [
    wrong_answer(
        DATA,
        "from course_lib import statquest as s\n\ndef statquest_dataset():\n    return s.statquest_dataset()\n",
        ("course_lib.statquest.statquest_dataset", "earns no points"),
        id="data-calling-the-reference",
    ),
    wrong_answer(
        FORWARD,
        "import math\nimport torch\nfrom course_lib import statquest as s\n\n"
        "def decoder_only_forward(params, token_ids):\n"
        "    C = params['we.weight'].shape[1]\n"
        "    attn = s.Attention(C)\n"
        "    attn.load_state_dict({k[15:]: v for k, v in params.items() if k.startswith('self_attention.')})\n"
        "    T = token_ids.shape[1]\n"
        "    x = params['we.weight'][token_ids] + params['pe.pe'][:T]\n"
        "    h = x + attn(x, x, x, torch.ones(T, T, dtype=torch.bool).tril())\n"
        "    return h @ params['fc_layer.weight'].T + params['fc_layer.bias']\n",
        ("course_lib.statquest.Attention", "earns no points"),
        id="forward-the-reference-attention",
    ),
    wrong_answer(
        GENERATE,
        "import course_lib.statquest as s\n\ndef greedy_generate(params, prompt_ids, eos_id, n):\n"
        "    return s.greedy_generate(params, prompt_ids, eos_id, n)\n",
        ("course_lib.statquest.greedy_generate", "earns no points"),
        id="generate-calling-the-reference",
    ),
]


def test_generation_cases_end_both_ways():
    """The visible cases include a run stopped by <EOS> and a run that ends on its budget, each >= 2 ids long, so
    'not stopping at <EOS>' and the off-by-one budgets are told apart from the right answer."""
    ends = set()
    for case in _GENERATE_CASES:
        params, prompt, eos_id, budget = generation_case(case)
        out = ref.greedy_generate(params, prompt, eos_id, budget)
        assert len(out) >= 2, (case, out)
        ends.add("eos" if out[-1] == eos_id and len(out) < budget else "budget" if len(out) == budget else "?")
    assert ends == {"eos", "budget"}


def test_reference_forward_is_the_models_forward():
    torch.manual_seed(0)
    model = statquest_model.DecoderOnlyTransformer(7, 4, 8)
    ids = torch.randint(0, 7, (3, 8))
    torch.testing.assert_close(ref.decoder_only_forward(model.state_dict(), ids), model(ids))


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 2
    mistakes = MISTAKES
    borrowed = BORROWED
