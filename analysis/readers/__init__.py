"""Log readers: a log's lines (plain or gzip, whole or a byte range) to one request record
per usable line (or gateway CSV row): chat bodies, or pre-hashed traces (Mooncake's
line-wise and column-wise, Bailian's line-wise)."""

from typing import TYPE_CHECKING

from analysis.lazy import lazy_exports

if TYPE_CHECKING:
    from analysis.readers.bailian import BailianReader as BailianReader
    from analysis.readers.chat import ChatReader as ChatReader
    from analysis.readers.columns import (
        TraceColumns as TraceColumns,
        read_trace as read_trace,
    )
    from analysis.readers.decode import (
        MAX_MESSAGES as MAX_MESSAGES,
        PRECHECK_BYTES as PRECHECK_BYTES,
        decode_line as decode_line,
        detect_format as detect_format,
        precheck_line as precheck_line,
    )
    from analysis.readers.fields import MAX_TOKENS as MAX_TOKENS
    from analysis.readers.gateway_csv import (
        REQUEST_COLUMN as REQUEST_COLUMN,
        gateway_rows as gateway_rows,
    )
    from analysis.readers.inflate import (
        GZIP_MAGIC as GZIP_MAGIC,
        InflateGuard as InflateGuard,
        InflateLimit as InflateLimit,
        ReadLimits as ReadLimits,
        open_gzip as open_gzip,
    )
    from analysis.readers.lines import (
        BlankLineLimit as BlankLineLimit,
        ByteRange as ByteRange,
        LogFile as LogFile,
        split_lines as split_lines,
    )
    from analysis.readers.messages import INSTRUCTION_ROLES as INSTRUCTION_ROLES
    from analysis.readers.records import (
        ChatRequest as ChatRequest,
        Message as Message,
        Reader as Reader,
        Request as Request,
        TraceRequest as TraceRequest,
    )
    from analysis.readers.render import (
        TOOLS_POSITIONS as TOOLS_POSITIONS,
        TOOLS_ROLE as TOOLS_ROLE,
        place_tools as place_tools,
    )
    from analysis.readers.sniff import sniff_format as sniff_format
    from analysis.readers.trace_rules import (
        MAX_PROMPT_TOKENS as MAX_PROMPT_TOKENS,
        blocks_fit as blocks_fit,
        max_blocks as max_blocks,
    )
    from analysis.readers.traces import (
        BAILIAN_BLOCK_TOKENS as BAILIAN_BLOCK_TOKENS,
        TRACE_BLOCK_SIZES as TRACE_BLOCK_SIZES,
        TRACE_BLOCK_TOKENS as TRACE_BLOCK_TOKENS,
        MooncakeReader as MooncakeReader,
        TraceFit as TraceFit,
        trace_block_sizes as trace_block_sizes,
    )

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "analysis.readers.bailian": ("BailianReader",),
        "analysis.readers.chat": ("ChatReader",),
        "analysis.readers.columns": (
            "TraceColumns",
            "read_trace",
        ),
        "analysis.readers.decode": (
            "MAX_MESSAGES",
            "PRECHECK_BYTES",
            "decode_line",
            "detect_format",
            "precheck_line",
        ),
        "analysis.readers.fields": ("MAX_TOKENS",),
        "analysis.readers.gateway_csv": (
            "REQUEST_COLUMN",
            "gateway_rows",
        ),
        "analysis.readers.inflate": (
            "GZIP_MAGIC",
            "InflateGuard",
            "InflateLimit",
            "ReadLimits",
            "open_gzip",
        ),
        "analysis.readers.lines": (
            "BlankLineLimit",
            "ByteRange",
            "LogFile",
            "split_lines",
        ),
        "analysis.readers.messages": ("INSTRUCTION_ROLES",),
        "analysis.readers.records": (
            "ChatRequest",
            "Message",
            "Reader",
            "Request",
            "TraceRequest",
        ),
        "analysis.readers.render": (
            "TOOLS_POSITIONS",
            "TOOLS_ROLE",
            "place_tools",
        ),
        "analysis.readers.sniff": ("sniff_format",),
        "analysis.readers.trace_rules": (
            "MAX_PROMPT_TOKENS",
            "blocks_fit",
            "max_blocks",
        ),
        "analysis.readers.traces": (
            "BAILIAN_BLOCK_TOKENS",
            "TRACE_BLOCK_SIZES",
            "TRACE_BLOCK_TOKENS",
            "MooncakeReader",
            "TraceFit",
            "trace_block_sizes",
        ),
    },
)
