"""Log readers: a log's lines (plain or gzip, whole or a byte range) to one request record
per usable line (or gateway CSV row): chat bodies, or pre-hashed traces (Mooncake's
line-wise and column-wise, Bailian's line-wise)."""

from analysis.readers.bailian import BailianReader
from analysis.readers.chat import ChatReader
from analysis.readers.columns import TraceColumns, read_trace
from analysis.readers.decode import (
    MAX_MESSAGES,
    PRECHECK_BYTES,
    decode_line,
    detect_format,
    precheck_line,
)
from analysis.readers.fields import MAX_TOKENS
from analysis.readers.gateway_csv import REQUEST_COLUMN, gateway_rows
from analysis.readers.inflate import (
    GZIP_MAGIC,
    InflateGuard,
    InflateLimit,
    ReadLimits,
    open_gzip,
)
from analysis.readers.lines import BlankLineLimit, ByteRange, LogFile, split_lines
from analysis.readers.messages import INSTRUCTION_ROLES
from analysis.readers.records import ChatRequest, Message, Reader, Request, TraceRequest
from analysis.readers.render import TOOLS_POSITIONS, TOOLS_ROLE, place_tools
from analysis.readers.sniff import sniff_format
from analysis.readers.trace_rules import MAX_PROMPT_TOKENS, blocks_fit, max_blocks
from analysis.readers.traces import (
    BAILIAN_BLOCK_TOKENS,
    TRACE_BLOCK_SIZES,
    TRACE_BLOCK_TOKENS,
    MooncakeReader,
    TraceFit,
    trace_block_sizes,
)

__all__ = [
    "BAILIAN_BLOCK_TOKENS",
    "GZIP_MAGIC",
    "INSTRUCTION_ROLES",
    "MAX_MESSAGES",
    "MAX_PROMPT_TOKENS",
    "MAX_TOKENS",
    "PRECHECK_BYTES",
    "REQUEST_COLUMN",
    "TOOLS_POSITIONS",
    "TOOLS_ROLE",
    "TRACE_BLOCK_SIZES",
    "TRACE_BLOCK_TOKENS",
    "BailianReader",
    "BlankLineLimit",
    "ByteRange",
    "ChatReader",
    "ChatRequest",
    "InflateGuard",
    "InflateLimit",
    "LogFile",
    "Message",
    "MooncakeReader",
    "ReadLimits",
    "Reader",
    "Request",
    "TraceColumns",
    "TraceFit",
    "TraceRequest",
    "blocks_fit",
    "decode_line",
    "detect_format",
    "gateway_rows",
    "max_blocks",
    "open_gzip",
    "place_tools",
    "precheck_line",
    "read_trace",
    "sniff_format",
    "split_lines",
    "trace_block_sizes",
]
