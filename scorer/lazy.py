"""The compiled and special-function packages the scorer loads on first use, not on import.

Every process that imports the server (a served site, a worker, a command line, each test's
subprocess) imported `numba` (for the rank sets' compiled loops) and `scipy.sparse` and
`scipy.special` (for the bootstrap's p-values and counts) although most never compute a
statistic: 0.87 s of CPU of the app's 4.5 s (2026-12-02, 2-core EPYC). Here they load with the
first call that needs them; the functions are the packages' own.
"""

from __future__ import annotations

import functools


@functools.cache
def special():
    """`scipy.special` (`ndtr`, `ndtri`)."""
    import scipy.special  # on first use: 0.4 s of CPU a process that computes no p-value skips

    return scipy.special


@functools.cache
def sparse():
    """`scipy.sparse`."""
    import scipy.sparse  # on first use, as `special` above

    return scipy.sparse


class _Compiled:
    """A function numba compiles on its first call (see `njit`)."""

    def __init__(self, fn, options: dict) -> None:
        functools.update_wrapper(self, fn)
        self.py_func = fn  # as numba's dispatchers expose it
        self._options = options
        self._compiled = None

    def dispatcher(self):
        """numba's dispatcher of the function, made now if it is not yet."""
        if self._compiled is None:
            import numba  # on first call: numba and llvmlite, 0.4 s of CPU a process

            self._compiled = numba.njit(**self._options)(self.py_func)
        return self._compiled

    @property
    def signatures(self) -> list:
        return self.dispatcher().signatures

    def __call__(self, *args):
        return (self._compiled or self.dispatcher())(*args)


def njit(**options):
    """`numba.njit(**options)`, applied when the function is first called: numba and LLVM load
    then (0.4 s of CPU), and `cache=True` reads the compiled code from numba's cache as before."""
    return lambda fn: _Compiled(fn, options)
