"""What an ingest tells the user about a log as a whole: its notes (blank lines, a span
of years, requests out of order, texts tokenized in pieces) and its refusals (nothing
usable; a trace made at another block size). One pass and a merge of parts word them
alike, from here."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from analysis.errors import UnusableInput
from analysis.readers import TraceFit
from analysis.timestamps import MAX_PLAUSIBLE_SPAN_US
from analysis.tokens import PIECE_CHARS

# how notes begin that a merge of parts words again for the whole log: the span, and a
# trace's block-size advice (TraceFit.advice)
SPAN_NOTE = "the requests span "
FIT_NOTE = "hash_ids contradict input_length on "
OUT_OF_ORDER = "out of time order"
BLANK_NOTE = re.compile(r"^([\d,]+) blank lines were ignored$")


def blank_lines_note(count: int, where: str = "") -> str:
    return f"{count:,} blank lines{where} were ignored"


def out_of_order_note(moved: int) -> str:
    return f"{moved} requests were {OUT_OF_ORDER}; they were sorted by timestamp"


def inexact_texts_note(count: int, tokenizer_file: str = "") -> str:
    """Texts cut where the tokenizer might not split: for tiktoken only inside a run
    without a space; a tokenizer.json (named) may also refuse the spaces."""
    if not tokenizer_file:
        return (f"{count:,} texts hold a run of more than {PIECE_CHARS:,} "
                "characters without a space; they were tokenized in pieces, so their token "
                "counts may differ from tiktoken's by a token or two per piece")  # fmt: skip
    return (f"{count:,} texts longer than {2 * PIECE_CHARS:,} characters were tokenized in "
            f"pieces cut where {tokenizer_file} does not split them on its own, so their "
            "token counts may differ from tokenizing them whole by a token or two per "
            "piece")  # fmt: skip


def span_note(t: np.ndarray, lines: np.ndarray, files: np.ndarray, names: list[str]) -> str:
    """A note when the requests span more than a year ("" if not): a few lines with a
    wrong unit, a wrong clock or a placeholder (0, year 9999) stretch every time-based
    figure."""
    if t.size < 2:
        return ""
    first, last = int(t.argmin()), int(t.argmax())
    span = int(t[last] - t[first])
    if span <= MAX_PLAUSIBLE_SPAN_US:
        return ""

    def where(i: int) -> str:
        return (f"{names[int(files[i])]} " if len(names) > 1 else "") + f"line {int(lines[i])}"

    return (f"{SPAN_NOTE}{span / 86_400e6:,.0f} days (the earliest on {where(first)}, the "
            f"latest on {where(last)}): timestamps this far apart usually mean a wrong unit, "
            "clock or placeholder (such as 0); check them")  # fmt: skip


def made_at_another_size(
    names: Sequence[str],
    block_tokens: int,
    requests: int,
    errors: list[dict],
    skipped_lines: int,
    fit: TraceFit,
) -> UnusableInput:
    """The refusal of a trace whose contradicting lines all fit one other block size
    (fit.advice() names it): it was made at that size, and the lines that also fit this
    one are a biased sample of it (a trace's short prompts); no analysis at this size
    means anything, so none is made. The input is not lost: the advice says which size
    reads it."""
    kept = f"{requests:,} request{'s' if requests != 1 else ''}"
    reason = (f"{', '.join(names)} was made at another block size than {block_tokens} tokens: "
              f"an analysis of the {kept} that also fit {block_tokens} would be biased; "
              f"{fit.advice()}")  # fmt: skip
    return UnusableInput(reason, errors, skipped_lines, fit=fit, requests=requests)


def with_advice(reason: str, fit: TraceFit | None) -> str:
    """A refusal's reason, and a trace's block-size advice when there is one."""
    advice = fit.advice() if fit is not None else ""
    return reason + (f"; {advice}" if advice else "")
