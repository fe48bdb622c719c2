"""The glossary: the words the pages use, each with metrics.md's own definition.

The console reads its committed copy, docs/metrics.md (tests/console/test_glossary.py keeps
it byte for byte equal to ../shared/docs/metrics.md wherever that is next to the repo), so
a clone elsewhere runs without ../shared. Every bolded term of metrics.md is a definition:
its text is the paragraph or list item it is bolded in. The few words the pages use that
metrics.md defines in prose, unbolded, are PROSE_TERMS: each a quoted passage that must
occur in metrics.md (a changed contract fails loudly here), never a definition of ours.

Plain text in, dataclasses out: no Django, no engine; console.templatetags.terms shows them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

METRICS_PATH = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"
SUMMARY_CHARS = 240  # a hover title longer than this is cut at a word, with "…"

_BOLD = re.compile(r"\*\*(.+?)\*\*")
# a sentence ends at . ! or ? before a space and a capital, a code span, bold or a bracket
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s+(?=[A-Z`*(\[])")


class UnknownTerm(LookupError):
    """A page asked for a word the glossary does not define (a typo, or a term to add)."""


class GlossaryError(ValueError):
    """metrics.md no longer holds a passage PROSE_TERMS quotes."""


@dataclass(frozen=True)
class Block:
    """A paragraph or list item of metrics.md, its lines joined by spaces (markdown kept:
    `code` and **bold**); a paragraph ending in ":" carries the list that follows it."""

    section: str  # "4. Working set and cache size"
    text: str
    items: tuple[str, ...] = ()
    is_item: bool = False


@dataclass(frozen=True)
class Term:
    name: str  # as metrics.md writes it, e.g. "Useful working set (W)"
    slug: str  # the glossary page's anchor
    summary: str  # one line, plain text: the sentence or passage that defines it
    blocks: tuple[Block, ...]  # the full definition, as metrics.md has it
    also: tuple[str, ...] = ()  # the other names the pages use for it

    @property
    def heading(self) -> str:
        return self.name[:1].upper() + self.name[1:]

    @property
    def section(self) -> str:
        return self.blocks[0].section


@dataclass(frozen=True)
class Passage:
    """A term metrics.md defines in prose: (section number, quoted passage) pairs, the
    first of which is its one-line summary."""

    name: str
    quotes: tuple[tuple[int, str], ...]


PROSE_TERMS = (
    Passage("slot", ((4, "A block slot holds `B` tokens; its size is `B * kv_bytes_per_token` "
                         "(section 5), whatever the number of tokens actually in it."),)),
    Passage("ceiling", (
        (3, "Infinite-cache hit ratio = the same with W = infinity: the ceiling that no cache "
            "size or policy can pass."),
        (4, "the ceiling is then the hit ratio within window L instead of the infinite-cache "
            "one."),
        (8, "the fleet ceiling is its value at `C = ∞`."),
    )),
    Passage("sharing scope", ((2, "`scope_salt` is empty for sharing scope `global`, the tenant "
                                  "for `tenant`, tenant+user for `user` (the same idea as "
                                  "vLLM's `cache_salt`)."),)),
    Passage("target", ((4, "Recommended RAM: the smallest capacity whose hit ratio reaches "
                           "`target` [0.9] of that ceiling"),)),
    Passage("headroom", ((4, "Recommended RAM: the smallest capacity whose hit ratio reaches "
                             "`target` [0.9] of that ceiling, times `(1 + headroom)` [0.1] for "
                             "metadata and fragmentation"),)),
    Passage("host budget", ((4, "checked against the host budget: host RAM minus reserves for "
                                "the OS, page cache, tokenizers, request buffers and the "
                                "serving process (each an input)."),)),
    Passage("block size", ((2, "With block size `B` tokens [256, LMCache's chunk size; 16 is "
                               "vLLM's block size], a prompt of `n` tokens has `m = floor(n / "
                               "B)` full blocks"),)),
    Passage("KV bytes per token", (
        (5, "kv_bytes_per_token = layers * kv_heads * head_dim * 2 * bytes_per_element"),
        (5, "The 2 is K and V. `kv_heads` is the number of key/value heads (GQA), not "
            "attention heads."),
    )),
    Passage("SHARDS", ((4, "The curve is token hit ratio vs capacity in bytes (`C * "
                           "slot_bytes`); it must be exact (Mattson's one-pass stack "
                           "algorithm) up to at least 10 million references, and may use "
                           "spatially sampled keys (SHARDS) beyond, saying so and its "
                           "sampling rate on the page."),)),
    Passage("replica", ((8, "A route is served by `replicas` N [1] identical instances."),)),
    Passage("router", ((8, "The router assigns requests to replicas in arrival order (ties: "
                           "file order):"),)),
    Passage("GPU prefix cache", ((8, "Each replica has its own GPU prefix cache of "
                                     "`gpu_cache_bytes` G [0] and its own host-RAM tier of `C` "
                                     "bytes (the size being planned) — both per replica, "
                                     "totals across its TP ranks."),)),
    Passage("pooled store", ((8, "`pooled` (one shared store: Mooncake Store, LMCache remote "
                                 "or P2P, Dynamo KVBM's G4): requests are dealt round robin "
                                 "for their GPU tier, and all replicas share one host store of "
                                 "`N × C` over the whole stream."),)),
)  # fmt: skip

# the pages' other words for a term (page word -> the term's key)
ALIASES = {
    "hit ratio": "token hit ratio",
    "scope": "sharing scope",
    "lifetime": "block lifetime",
    "fleet ceiling": "ceiling",
    "hit-ratio curve": "lru miss-ratio curve",
    "store threshold": "admission",
    "hot segment": "hot",
    "per tensor-parallel rank": "per tp rank",
    "session": "sessions",
}


def term_key(name: str) -> str:
    """How a term is looked up: lower case, without the window "(W)" some names carry or
    the full stop of a run-in heading ("Sessions.")."""
    key = " ".join(name.lower().split()).rstrip(".")
    return key.removesuffix(" (w)")


def _slug(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", key).strip("-")


def plain(markdown: str) -> str:
    """A passage without its markdown marks (for a hover title); the lines of a formula,
    code spans side by side, are separated by "; "."""
    text = markdown.replace("**", "").replace("` `", "; ").replace("`", "")
    return " ".join(text.split())


def _one_line(markdown: str) -> str:
    text = plain(markdown).rstrip(";:,")
    if len(text) <= SUMMARY_CHARS:
        return text
    return text[: SUMMARY_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def blocks(markdown: str) -> list[Block]:
    """metrics.md's paragraphs and list items, each with its section. A code block joins
    the paragraph it completes as code spans ("Block `j` has the **prefix key**" and its
    formula), with the lower-case paragraph that goes on after it; a paragraph ending in
    ":" also carries the list items after it (the items stay blocks of their own)."""
    return _with_lists(_joined(_raw_blocks(markdown)))


def _raw_blocks(markdown: str) -> list[tuple[str, str, str]]:
    """(section, text, kind) per paragraph ("p"), list item ("item") or code block."""
    raw: list[tuple[str, str, str]] = []
    section, lines, kind = "", [], "p"
    for line in [*markdown.splitlines(), ""]:
        stripped, starts_item = line.strip(), line.startswith("- ")
        if lines and (not stripped or line.startswith("#") or starts_item):
            raw.append((section, " ".join(lines), kind))
            lines = []
        if line.startswith("## "):
            section = stripped.removeprefix("## ")
        elif stripped and not line.startswith("#"):  # the page's title is no block
            if not lines:
                kind = "item" if starts_item else "code" if line.startswith("    ") else "p"
            lines.append(f"`{stripped}`" if kind == "code" else stripped.removeprefix("- "))
    return raw


def _joined(raw: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Code blocks and the paragraph after them joined to the sentence they complete."""
    joined: list[tuple[str, str, str]] = []
    carries_code = False
    for section, text, kind in raw:
        before = joined[-1] if joined else None
        goes_on = before is not None and before[0] == section and before[2] == "p"
        if goes_on and kind == "code" and not before[1].endswith("."):
            joined[-1], carries_code = (section, f"{before[1]} {text}", "p"), True
        elif goes_on and carries_code and kind == "p" and text[:1].islower():
            joined[-1], carries_code = (section, f"{before[1]} {text}", "p"), False
        else:
            joined.append((section, text, kind))
            carries_code = False
    return joined


def _with_lists(raw: list[tuple[str, str, str]]) -> list[Block]:
    found = []
    for i, (section, text, kind) in enumerate(raw):
        items: list[str] = []
        if kind == "p" and text.endswith(":"):
            for after_section, after_text, after_kind in raw[i + 1 :]:
                if after_kind != "item" or after_section != section:
                    break
                items.append(after_text)
        found.append(Block(section, text, tuple(items), kind == "item"))
    return found


def _sentence_with(block: Block, marked: str) -> str:
    """The sentence of `block` that holds `marked`; a lead-in ending in ":" with its list."""
    sentence = next(s for s in _SENTENCE_END.split(block.text) if marked in s)
    if sentence.endswith(":") and block.items:
        sentence = " ".join([sentence, *block.items])
    return sentence


def bold_terms(found: list[Block]) -> list[Term]:
    """Every bolded term, defined by the block it is bolded in (the first, if bolded twice)."""
    terms: dict[str, Term] = {}
    for block in found:
        for match in _BOLD.finditer(block.text):
            name = match.group(1).strip().rstrip(".")
            key = term_key(name)
            if key not in terms:
                summary = _one_line(_sentence_with(block, match.group(0)))
                terms[key] = Term(name, _slug(key), summary, (block,))
    return list(terms.values())


def _normal(text: str) -> str:
    return " ".join(text.replace("**", "").split())


def prose_terms(found: list[Block], passages=PROSE_TERMS) -> list[Term]:
    """The terms metrics.md defines in prose, each by the blocks its quotes come from."""
    terms = []
    for passage in passages:
        held: list[Block] = []
        for number, quote in passage.quotes:
            block = next(
                (b for b in found if b.section.startswith(f"{number}.")
                 and _normal(quote) in _normal(b.text)),
                None,
            )  # fmt: skip
            if block is None:
                raise GlossaryError(
                    f"metrics.md section {number} no longer says what the glossary quotes "
                    f"for {passage.name!r}: {quote!r}"
                )
            if block not in held:
                held.append(block)
        summary = _one_line(passage.quotes[0][1])
        terms.append(Term(passage.name, _slug(term_key(passage.name)), summary, tuple(held)))
    return terms


@dataclass(frozen=True)
class Glossary:
    terms: tuple[Term, ...]  # alphabetical
    by_key: dict[str, Term] = field(repr=False, compare=False)
    aliases: dict[str, str] = field(repr=False, compare=False)

    def lookup(self, name: str) -> Term:
        key = term_key(name)
        term = self.by_key.get(self.aliases.get(key, key))
        if term is None:
            raise UnknownTerm(
                f"No glossary term {name!r}: metrics.md bolds no such term, and "
                "console.glossary's PROSE_TERMS and ALIASES do not name it."
            )
        return term


def parse(markdown: str, passages=PROSE_TERMS, aliases=ALIASES) -> Glossary:
    found = blocks(markdown)
    terms = {term_key(t.name): t for t in bold_terms(found)}
    for term in prose_terms(found, passages):
        terms.setdefault(term_key(term.name), term)  # metrics.md's bold wins
    also: dict[str, list[str]] = {}
    for word, key in aliases.items():
        if key in terms:
            also.setdefault(key, []).append(word)
    for key, words in also.items():
        terms[key] = replace(terms[key], also=tuple(words))
    ordered = tuple(sorted(terms.values(), key=lambda t: t.name.casefold()))
    return Glossary(ordered, terms, dict(aliases))


@cache
def glossary() -> Glossary:
    """The console's glossary, read from its copy of metrics.md once per process."""
    return parse(METRICS_PATH.read_text(encoding="utf-8"))
