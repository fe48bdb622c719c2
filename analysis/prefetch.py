"""A hint to the CPU, inside compiled kernels, to start loading a cache line now.

The passes over 100 million references that look each one up in a table of tens of
millions of entries (factorizing the keys, linking each reference to the previous one)
wait on memory, one cache miss at a time. Asking for the entry a few references ahead
lets those misses overlap: the loop is the same, and so is every result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_I32 = ir.IntType(32)
_BYTE_POINTER = ir.IntType(8).as_pointer()
# the intrinsic's name carries its pointer type: opaque ("p0") since LLVM 15, i8* before
_NAME = "llvm.prefetch.p0" if binding.llvm_version_info >= (15,) else "llvm.prefetch.p0i8"


@intrinsic
def _prefetch(typingctx, array, index):  # pragma: no cover (compiled)
    """prefetch(array, i): load array[i]'s cache line for a read (LLVM's llvm.prefetch,
    kept in every cache level). Only a hint: an index out of bounds is never touched."""
    if not isinstance(array, types.Array) or array.ndim != 1:
        return None
    if not isinstance(index, types.Integer):
        return None
    signature = types.void(array, index)

    def codegen(context, builder, sig, args):
        array_type = sig.args[0]
        values = context.make_array(array_type)(context, builder, args[0])
        # (the address only: get_item_pointer does no bounds check and reads nothing)
        pointer = cgutils.get_item_pointer(context, builder, array_type, values, [args[1]])
        hint = ir.FunctionType(ir.VoidType(), [_BYTE_POINTER, _I32, _I32, _I32])
        function = cgutils.get_or_insert_function(builder.module, hint, _NAME)
        # read (0), keep in every cache level (3), data, not instructions (1)
        builder.call(function, [builder.bitcast(pointer, _BYTE_POINTER), _I32(0), _I32(3),
                                _I32(1)])  # fmt: skip
        return context.get_dummy_value()

    return signature, codegen


# as the kernels call it (numba types the intrinsic's own signature)
prefetch = cast(Callable[[np.ndarray, int | np.integer], None], _prefetch)
