"""libc functions Python's ``os`` does not wrap (renameat2, statx), through ctypes.

Looked up on first use: ctypes costs a few ms that a command needing none of them
never pays. The process's own symbols are tried first (``dlopen(NULL)``: the
interpreter is linked with libc), so no ``ldconfig`` runs; ``find_library`` is the
fallback for an interpreter that is not.
"""

from __future__ import annotations

import functools


@functools.cache
def _libraries() -> tuple:
    import ctypes
    import ctypes.util

    found = []
    for name in (None, ctypes.util.find_library("c") or "libc.so.6"):
        try:
            found.append(ctypes.CDLL(name, use_errno=True))
        except OSError:
            continue
        if name is None and hasattr(found[-1], "statx") and hasattr(found[-1], "renameat2"):
            break  # everything asked for is there: no library lookup
    return tuple(found)


@functools.cache
def libc_function(name: str, argtypes: tuple, restype):
    """libc's ``name`` with its argument and result types set (errno kept for
    ``ctypes.get_errno``), or None where there is no such function."""
    for lib in _libraries():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes = list(argtypes)
            fn.restype = restype
            return fn
    return None
