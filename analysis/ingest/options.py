"""What an ingest is asked for: the hash key, the format, the block sizes, the limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.readers import BAILIAN_BLOCK_TOKENS, TOOLS_POSITIONS, TRACE_BLOCK_TOKENS, ReadLimits

# a log's format (what its reader reads) -> tokens per block when none is asked for
DEFAULT_BLOCK_TOKENS = {"chat": 256, "csv": 256, "mooncake": TRACE_BLOCK_TOKENS,
                        "bailian": BAILIAN_BLOCK_TOKENS}  # fmt: skip
# and the kind of block stream it makes: chat bodies, or a pre-hashed trace
STREAM_KIND = {"chat": "chat", "csv": "chat", "mooncake": "mooncake", "bailian": "mooncake"}
FORMATS = ("auto", *DEFAULT_BLOCK_TOKENS)

# A plain log this big or bigger is read in parts by worker processes (processes.py);
# below, whole by one: the parts' merge and the texts they share (tokenized once per part)
# cost more than a second core wins back on a small log.
SPLIT_BYTES = 64 << 20


@dataclass(frozen=True)
class IngestOptions:
    hash_key: bytes
    format: str = "auto"
    block_tokens: int | None = None  # None: 256 for chat, 512 for traces
    # more block sizes to key in the same pass (chat logs): token ids are never kept, so
    # every size an analysis may want must be chosen at ingest
    extra_block_tokens: tuple[int, ...] = ()
    encoding: str = "cl100k_base"
    tiktoken_dir: str | None = None
    # a Hugging Face tokenizer.json, used instead of the tiktoken encoding (None: tiktoken)
    tokenizer_file: str | None = None
    tokenizer_name: str | None = None  # its name as the user knows it (None: the file's)
    # where a request's tool definitions go in its prompt (metrics.md section 7)
    tools_position: str = "auto"
    previews: bool = False  # keep the first characters of each segment's text
    max_listed_errors: int = 1000
    # past this many bad lines the ingest stops (None: no budget)
    max_bad_lines: int | None = 10_000
    limits: ReadLimits = field(default_factory=ReadLimits)
    # pre-hashed traces: a last block holding fewer than B tokens is cached (Mooncake's
    # convention, metrics.md) or, False, an uncached tail like a chat prompt's (vLLM's);
    # kvscope's own replay exports are read back exactly with False
    trace_partial_cached: bool = True

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, not {self.format!r}")
        if self.tools_position not in TOOLS_POSITIONS:
            raise ValueError(f"tools_position must be one of {TOOLS_POSITIONS}, "
                             f"not {self.tools_position!r}")  # fmt: skip


def block_sizes(log_format: str, options: IngestOptions) -> tuple[int, ...]:
    """The block sizes to key a log of this format at, the first the main one."""
    default = DEFAULT_BLOCK_TOKENS[log_format]
    first = options.block_tokens if options.block_tokens is not None else default
    source_format = STREAM_KIND[log_format]
    if source_format == "mooncake" and default in options.extra_block_tokens:
        # a trace has one block size: with several chosen, its own when it is among them
        first = default
    sizes: tuple[int, ...] = (first,)
    if source_format == "chat":
        sizes += tuple(b for b in dict.fromkeys(options.extra_block_tokens) if b not in sizes)
    return sizes
