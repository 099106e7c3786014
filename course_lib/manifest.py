"""The course's facts, written once: for each lesson its id, title, modules, data files, exercises and shortcuts.

Release (the set-up cell's data list), the data prefetch, the from-scratch guard, trusted grading, the README's
lesson table and the tests all read this file. Adding a lesson means adding its `Lesson` here, then its
notebook, reference module and grader module (see `notebooks/AUTHORING.md`).

This module is plain data: it imports nothing from the course, so anything may import it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["LESSONS", "STANDARD_IMPORTS", "Exercise", "Lesson", "lesson"]

# Preamble of every sandbox in which a graded answer runs: what the lessons import before their exercises.
# An answer cell may use these names, `ref` (the lesson's reference module, as the lessons bind it) and the other
# exercises of its lesson (bound to the course's references); everything else it imports or defines itself.
STANDARD_IMPORTS = """\
import math
import re
import torch
from torch import Tensor, nn
import torch.nn.functional as F
"""

_TOKENIZER_LIBRARIES = ("module:tiktoken", "module:tokenizers")


@dataclass(frozen=True)
class Exercise:
    """One graded exercise: its answer cell's `grade_id`, the course's reference of each name it defines, and what
    the answer must not use. Names and signatures are fixed per exercise (docs/ARCHITECTURE.md, Exercise contract)."""

    name: str  # the answer cell's grade_id; test cells are `test_<name>` and `test_<name>_hidden`
    defines: tuple[str, ...] = ()  # names the answer cell defines; default (name,)
    # Forbidden besides the course's reference: dotted paths, or "module:x" for all of package x.
    shortcuts: tuple[str, ...] = ()
    # Where the course's reference of each name in `names` is defined, as dotted paths in the same order
    # ("course_lib.generate.top_p_filter"); left empty, its lesson fills in `<lesson.references>.<name>`.
    references: tuple[str, ...] = ()
    # Names of earlier exercises (of this lesson or an earlier one) whose classes the answer is built from, as the
    # lesson asks: lesson 06's `TransformerBlock` holds a `MultiHeadAttention` and a `FeedForward`. The course's
    # reference is built from the course's; a banner of the learner's classes says which of theirs then run.
    builds_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.references and len(self.references) != len(self.names):
            raise ValueError(f"exercise {self.name!r}: one reference per name in {self.names}, got {self.references}")

    @property
    def names(self) -> tuple[str, ...]:
        return self.defines or (self.name,)

    @property
    def paths(self) -> dict[str, str]:
        """Each name the answer defines -> the dotted path of the course's reference of that name."""
        return dict(zip(self.names, self.references, strict=True))


@dataclass(frozen=True)
class Lesson:
    """One lesson: the nbgrader assignment id, and everything the course's tools need to know about it."""

    id: str  # nbgrader assignment id = folder and notebook name
    title: str
    modules: tuple[str, ...]  # course_lib modules the lesson teaches or uses (README table)
    references: str  # the teaching module the lesson binds as `ref`, and where its exercises' references are by default
    grader: str  # the course_lib.grading module whose check_<name> functions the test cells call
    data: tuple[str, ...] = ()  # data files (names in data/registry.json) the set-up cell makes sure are there
    colab_packages: tuple[str, ...] = ()  # pip packages the set-up cell installs on Colab when they are missing
    exercises: tuple[Exercise, ...] = ()
    preamble: str = STANDARD_IMPORTS  # followed by `from course_lib import <references> as ref`
    # Earlier lessons whose saved answers this lesson runs (`course_lib.lesson.your_code`); on Colab its set-up cell
    # offers to mount Google Drive, where the learner's copies of those lessons are.
    your_lessons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        filled = tuple(
            e if e.references else replace(e, references=tuple(f"{self.references}.{n}" for n in e.names))
            for e in self.exercises
        )
        object.__setattr__(self, "exercises", filled)  # frozen: set once, here

    @property
    def sandbox_preamble(self) -> str:
        """What a graded answer's sandbox runs before the answer: the usual imports and `ref`, the references."""
        package, _, module = self.references.rpartition(".")
        return f"{self.preamble}from {package} import {module} as ref\n"


def _exercises(*names: str, **shortcuts: tuple[str, ...]) -> tuple[Exercise, ...]:
    return tuple(Exercise(name, shortcuts=shortcuts.get(name, ())) for name in names)


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        "00_welcome",
        "How this course works",
        modules=("welcome", "lesson", "data"),
        references="course_lib.welcome",
        grader="course_lib.grading.welcome",
        data=("the-verdict.txt", "tinyshakespeare.txt", "encoder.json", "vocab.bpe"),
        exercises=_exercises(
            "count_characters",
            "next_token_pairs",
            "normalize_rows",
            "pairwise_distances",
            "gradient_descent",
            pairwise_distances=("torch.cdist",),
            gradient_descent=("torch.optim.SGD",),  # the step is the exercise: written by hand, not an optimizer
        ),
    ),
    Lesson(
        "01_tokenization",
        "From text to token ids",
        modules=("tokenization", "gpt2_bpe", "text_viz", "data"),
        references="course_lib.tokenization",
        grader="course_lib.grading.tokenization",
        data=("the-verdict.txt", "encoder.json", "vocab.bpe"),
        exercises=_exercises(
            "SimpleTokenizer",
            "get_pair_counts",
            "merge_pair",
            "train_bpe",
            "bpe_encode",
            "bpe_decode",
            "sliding_window_pairs",
            SimpleTokenizer=_TOKENIZER_LIBRARIES,
            merge_pair=("course_lib.tokenization.apply_merge",),  # the same merge under its teaching name
            train_bpe=_TOKENIZER_LIBRARIES,
            bpe_encode=_TOKENIZER_LIBRARIES,
            bpe_decode=_TOKENIZER_LIBRARIES,
        ),
    ),
    Lesson(
        "02_embeddings",
        "Embeddings",
        modules=("embeddings", "plotting"),
        references="course_lib.embeddings",
        grader="course_lib.grading.embeddings",
        data=("tinyshakespeare.txt", "encoder.json", "vocab.bpe"),
        exercises=_exercises("one_hot_embed", "cosine_similarity", "most_similar"),
    ),
    Lesson(
        "03_position_encoding",
        "Position",
        modules=("position", "plotting"),
        references="course_lib.position",
        grader="course_lib.grading.position",
        exercises=_exercises("sinusoidal_position_encoding", "PositionEncoding", "apply_rope"),
    ),
    Lesson(
        "04_attention",
        "Attention",
        modules=("attention", "attention_toys", "loss_plots", "plotting", "embeddings"),
        references="course_lib.attention",
        grader="course_lib.grading.attention",
        data=("tinyshakespeare.txt",),
        exercises=_exercises(
            "simple_self_attention",
            "scaled_dot_product_attention",
            "causal_mask",
            "SelfAttention",
            "CausalSelfAttention",
            "CrossAttention",
            "train_step",
            scaled_dot_product_attention=(
                "torch.nn.functional.scaled_dot_product_attention",
                "torch.nn.MultiheadAttention",
            ),
            causal_mask=("torch.nn.Transformer.generate_square_subsequent_mask",),
        ),
    ),
    Lesson(
        "05_multi_head_attention",
        "Multi-head attention",
        modules=("multihead", "attention", "attention_toys", "loss_plots", "plotting"),
        references="course_lib.multihead",
        grader="course_lib.grading.multihead",
        data=(),
        exercises=(
            Exercise("split_merge_heads", defines=("split_heads", "merge_heads")),
            Exercise(
                "MultiHeadAttention",
                shortcuts=("torch.nn.MultiheadAttention", "torch.nn.functional.multi_head_attention_forward"),
            ),
            Exercise("multihead_parameter_count"),
        ),
    ),
    Lesson(
        "06_transformer_blocks",
        "Blocks",
        modules=("blocks", "multihead_cross", "torch_layers", "deep_stacks", "multihead"),
        references="course_lib.blocks",
        grader="course_lib.grading.blocks",
        data=(),
        # The block and the encoder layer are built on lesson 05's MultiHeadAttention: in the notebook the learner's
        # own where it passed its checks (course_lib.lesson.your_code), in a graded answer's sandbox the course's.
        preamble=STANDARD_IMPORTS + "from course_lib.multihead import MultiHeadAttention\n",
        exercises=(
            *_exercises(
                "layer_norm",
                "FeedForward",
                layer_norm=("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.nn.LayerNorm"),
            ),
            Exercise(
                "TransformerBlock",
                shortcuts=("torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer"),
                builds_on=("MultiHeadAttention", "FeedForward"),
            ),
            Exercise(
                "EncoderLayer",
                shortcuts=("torch.nn.TransformerEncoderLayer", "torch.nn.TransformerEncoder", "torch.nn.Transformer"),
                builds_on=("MultiHeadAttention",),
            ),
        ),
        your_lessons=("05_multi_head_attention",),
    ),
    Lesson(
        "07_encoder_decoder",
        "The original transformer",
        modules=("encoder_decoder", "reversal_task", "blocks", "loss_plots", "plotting"),
        references="course_lib.encoder_decoder",
        grader="course_lib.grading.encoder_decoder",
        # The model is assembled from lesson 06's layers and lesson 03's positions: in the learner's kernel their own
        # EncoderLayer and PositionEncoding where they passed their checks (course_lib.lesson.your_code), the
        # course's DecoderLayer (lesson 06 has no decoder-layer exercise); in a graded answer's sandbox the course's.
        preamble=STANDARD_IMPORTS
        + "from course_lib.blocks import DecoderLayer, EncoderLayer\n"
        + "from course_lib.position import PositionEncoding\n",
        exercises=(
            Exercise(
                "EncoderDecoderTransformer",
                # PyTorch's own stacks, and the course's lesson 06 stacks: the loops over the layers are the exercise.
                shortcuts=(
                    "torch.nn.Transformer",
                    "torch.nn.TransformerEncoder",
                    "torch.nn.TransformerDecoder",
                    "course_lib.blocks.Encoder",
                    "course_lib.blocks.Decoder",
                ),
                builds_on=("EncoderLayer", "PositionEncoding"),
            ),
            *_exercises("shift_right", "masked_cross_entropy", "greedy_step"),
        ),
        # Your PositionEncoding (03) and EncoderLayer (06, on your 05 MultiHeadAttention) build your model.
        your_lessons=("03_position_encoding", "05_multi_head_attention", "06_transformer_blocks"),
    ),
    Lesson(
        "08_statquest_decoder",
        "A tiny decoder-only model",
        modules=("statquest", "statquest_model", "position", "attention", "plotting"),
        references="course_lib.statquest",
        grader="course_lib.grading.statquest",
        exercises=_exercises(
            "statquest_dataset",
            "decoder_only_forward",
            "greedy_generate",
            # Not course_lib.statquest_model.DecoderOnlyTransformer: naming it makes the grader import Lightning
            # before it forks each sandbox, and the forked sandboxes then die (seen under nbgrader autograde).
            decoder_only_forward=(
                "course_lib.statquest.Attention",
                "torch.nn.functional.scaled_dot_product_attention",
                "torch.nn.MultiheadAttention",
            ),
        ),
    ),
    Lesson(
        "09_char_gpt",
        "Shakespeare, one character at a time",
        modules=("char_lm", "gpt", "char_ladder", "blocks", "loss_plots", "plotting"),
        references="course_lib.char_lm",
        grader="course_lib.grading.char_lm",
        data=("tinyshakespeare.txt",),
        exercises=(
            *_exercises(
                "build_char_vocab",
                "get_batch",
                "BigramLanguageModel",
                "sample_next_token",
                # Lesson 10's sampler of the same name (with top_p) and its top-k step would do this exercise's work.
                sample_next_token=("course_lib.generate.sample_next_token", "course_lib.generate.top_k_filter"),
            ),
            # Built from the lesson's TransformerBlock (the learner's lesson 06 class in their kernel; the course's
            # when graded, which the preamble imports). Every other decoder of the course runs the reference's
            # forward pass (a GPT subclass), so the reference itself covers them; GPT2 is named as well.
            Exercise(
                "GPT",
                references=("course_lib.gpt.GPT",),
                shortcuts=("course_lib.gpt2.GPT2",),
                builds_on=("TransformerBlock",),
            ),
        ),
        preamble=STANDARD_IMPORTS + "from course_lib.blocks import TransformerBlock\n",
        your_lessons=("05_multi_head_attention", "06_transformer_blocks"),
    ),
    Lesson(
        "10_gpt2",
        "GPT-2",
        modules=("gpt2", "gpt2_weights", "gpt", "generate", "train", "char_lm", "loss_plots", "plotting"),
        # `ref` is the model's module; two of the four references live where they are used (generation, the
        # training loop of lesson 11), and each exercise names where its reference is defined.
        references="course_lib.gpt2",
        grader="course_lib.grading.gpt2",
        data=("tinyshakespeare.txt", "encoder.json", "vocab.bpe"),
        # `load_gpt2_weights` loads into lesson 09's GPT: a graded answer's sandbox has the course's, as the
        # lesson's kernel has yours.
        preamble=STANDARD_IMPORTS + "from course_lib.gpt import GPT\n",
        your_lessons=("05_multi_head_attention", "06_transformer_blocks", "09_char_gpt"),
        exercises=(
            Exercise(
                "gpt2_parameter_count",
                references=("course_lib.gpt2.gpt2_parameter_count",),
                shortcuts=("course_lib.gpt2.GPT2", "module:transformers"),  # build a model and count
            ),
            Exercise(
                "load_gpt2_weights",
                references=("course_lib.gpt2_weights.load_gpt2_weights",),
                shortcuts=(
                    # The course's other ways to load GPT-2's weights, and its name table: the mapping is the exercise.
                    "course_lib.gpt2_weights.from_hf_model",
                    "course_lib.gpt2_weights.from_pretrained",
                    "course_lib.gpt2_weights.weight_names",
                    "module:transformers",  # GPT2LMHeadModel and its loading code
                ),
            ),
            Exercise(
                "cosine_lr",
                references=("course_lib.train.cosine_lr",),
                shortcuts=(
                    "torch.optim.lr_scheduler.CosineAnnealingLR",
                    "torch.optim.lr_scheduler.CosineAnnealingWarmRestarts",
                    "torch.optim.lr_scheduler.LambdaLR",
                    "torch.optim.lr_scheduler.LinearLR",
                    "torch.optim.lr_scheduler.SequentialLR",
                    "torch.optim.lr_scheduler.OneCycleLR",
                    "module:transformers",  # get_cosine_schedule_with_warmup
                ),
            ),
            Exercise(
                "top_p_filter",
                references=("course_lib.generate.top_p_filter",),
                shortcuts=("module:transformers",),  # TopPLogitsWarper
            ),
            Exercise(
                "attend_with_cache",
                references=("course_lib.multihead.attend_with_cache",),
                shortcuts=(
                    "torch.nn.functional.scaled_dot_product_attention",
                    "torch.nn.MultiheadAttention",
                    "course_lib.gpt.KVCache",
                ),
            ),
            Exercise(
                "forward_with_cache",
                references=("course_lib.gpt.forward_with_cache",),
                # The course's classes take the cache in their forwards (the learner's do not): the answer runs the
                # parts, and calling the model, a block or its attention on the grader's course GPT would pass here
                # and fail on the learner's own GPT.
                shortcuts=(
                    "course_lib.gpt.GPT.forward",
                    "course_lib.blocks.TransformerBlock.forward",
                    "course_lib.multihead.MultiHeadAttention.forward",
                ),
            ),
        ),
    ),
    Lesson(
        "11_gpt2_training_gpu",
        "Training GPT-2 on a GPU",
        modules=(
            "train",
            "train_setup",
            "train_data",
            "checkpoint",
            "train_lightning",
            "train_cli",
            "gpt2",
            "loss_plots",
        ),
        # rank_batch is defined in train_data, next to the loader that uses it; course_lib.train, the lesson's
        # `ref`, re-exports it.
        references="course_lib.train",
        grader="course_lib.grading.train",
        data=("tinyshakespeare.txt", "encoder.json", "vocab.bpe"),
        colab_packages=("datasets",),  # FineWeb-Edu is streamed with it (section 2)
        # The run trains the learner's lesson 09 GPT, built on their lesson 05 and 06 classes, configured as GPT-2.
        your_lessons=("05_multi_head_attention", "06_transformer_blocks", "09_char_gpt"),
        exercises=(
            Exercise("grad_accum_steps"),
            Exercise("estimate_mfu"),
            Exercise("training_step"),
            Exercise("rank_batch", references=("course_lib.train_data.rank_batch",)),
        ),
    ),
    Lesson(
        "12_beyond_gpt2",
        "Beyond GPT-2",
        modules=("modern", "modern_gpt", "ladder", "optimizers", "llama_weights", "gpt", "position", "char_lm"),
        references="course_lib.modern",
        grader="course_lib.grading.modern",
        data=("tinyshakespeare.txt",),
        # rope_attention rotates with lesson 03's apply_rope: in the notebook the learner's own where it passed its
        # checks there (course_lib.lesson.your_code), in a graded answer's sandbox the course's.
        preamble=STANDARD_IMPORTS + "from course_lib.position import apply_rope\n",
        your_lessons=("03_position_encoding", "05_multi_head_attention", "06_transformer_blocks", "09_char_gpt"),
        exercises=(
            Exercise("rms_norm", shortcuts=("torch.nn.functional.rms_norm", "torch.rms_norm", "torch.nn.RMSNorm")),
            Exercise("rope_attention"),
            Exercise("SwiGLU"),
            Exercise("repeat_kv"),  # torch.repeat_interleave is allowed: it is one right way to write it
            # F.scaled_dot_product_attention is allowed; the ladder's switchable classes would do the work.
            Exercise(
                "ModernAttention",
                shortcuts=(
                    "course_lib.modern_gpt.SwitchAttention",
                    "course_lib.modern_gpt.SwitchBlock",
                    "course_lib.modern_gpt.ModernGPT",
                ),
                builds_on=("repeat_kv", "rms_norm"),
            ),
            Exercise(
                "ModernBlock",
                shortcuts=("course_lib.modern_gpt.SwitchBlock", "course_lib.modern_gpt.ModernGPT"),
                builds_on=("ModernAttention", "rms_norm", "SwiGLU"),
            ),
            Exercise(
                "newton_schulz",
                references=("course_lib.optimizers.newton_schulz",),
                shortcuts=(  # the point is the iteration: no decomposition computes the answer
                    "torch.linalg.svd",
                    "torch.linalg.svdvals",
                    "torch.svd",
                    "torch.linalg.qr",
                    "torch.qr",
                    "torch.linalg.eig",
                    "torch.linalg.eigh",
                    "torch.linalg.eigvalsh",
                    "torch.linalg.pinv",
                    "torch.linalg.matrix_power",
                    "course_lib.optimizers.Muon",
                ),
            ),
            Exercise(
                "load_llama_weights",
                references=("course_lib.llama_weights.load_llama_weights",),
                shortcuts=(
                    # The course's permutation and name table are the exercise; transformers' conversion code too.
                    "course_lib.llama_weights.rotate_half_to_pairs",
                    "course_lib.llama_weights.weight_names",
                    "module:transformers",
                ),
            ),
        ),
    ),
    Lesson(
        "13_what_attention_learned",
        "What a trained transformer learned",
        modules=("induction", "repeat_task", "gpt", "multihead", "char_lm", "gpt2_weights", "plotting"),
        references="course_lib.induction",
        grader="course_lib.grading.induction",
        data=("tinyshakespeare.txt",),
        # The attention-only model is built on your lesson 05 MultiHeadAttention; the heads are then looked for in
        # your lesson 09 GPT (on your lesson 06 blocks) and, online, in GPT-2 loaded by your lesson 10 loader.
        your_lessons=("05_multi_head_attention", "06_transformer_blocks", "09_char_gpt", "10_gpt2"),
        exercises=_exercises("prev_token_scores", "induction_scores", "ablate_head"),
    ),
)


def lesson(lesson_id: str) -> Lesson:
    """The lesson with this id; a clear error naming the known ones otherwise."""
    for entry in LESSONS:
        if entry.id == lesson_id:
            return entry
    raise KeyError(f"unknown lesson {lesson_id!r}; the manifest has {', '.join(e.id for e in LESSONS)}")
