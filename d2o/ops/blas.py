"""Local BLAS/LAPACK kernels of the distributed LU (`d2o.ops.lu`), in place on strided views.

numpy's ``@`` has no ``beta``: ``C -= A @ B`` makes a temporary of ``C``'s size and a second
pass over ``C``.  Here ``gemm_sub`` calls BLAS ``?gemm`` with ``alpha = -1, beta = 1``
directly on the views (called through ``ctypes``: no copies, no temporaries), ``trsm_left`` solves with a triangle in place, and
``getrf`` factors a panel with LAPACK.  The library: the OpenBLAS numpy's wheels bundle
(already in memory; found by its file in ``numpy.libs``), else scipy's ``cython_blas``/
``cython_lapack`` function pointers.  A C-ordered block with unit column stride is the
Fortran-ordered transpose with leading dimension its row stride, so ``C - A B`` runs as
``C^T - B^T A^T``.  Without either library every kernel runs on numpy (row chunks of ``@``, substitution, a recursive panel LU).  Local: nothing
here communicates.
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any

import numpy as np

__all__ = ["gemm_sub", "trsm_left", "getrf", "have_blas"]

#: elements of the largest temporary of the numpy fallback of `gemm_sub`
_CHUNK = 1 << 21
_PREFIX = {"f": "s", "d": "d", "F": "c", "D": "z"}
#: ``[kernels]``: see `_load` (loaded on first use)
_KERNELS: list = []

_PTR = ctypes.c_void_p
_CHR = ctypes.c_char_p
#: the arguments of each kernel: "c" a character, "i" an integer, "p" a pointer
_SIGNATURES = {
    # transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc
    "gemm": "cciiipp" + "ipippi",
    # side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb
    "trsm": "cccciipp" + "ipi",
    # m, n, a, lda, ipiv, info
    "getrf": "iipipp",
}


def _numpy_openblas() -> tuple | None:
    """``(library, symbol format, integer type)`` of the OpenBLAS numpy's wheels bundle
    (``scipy_dgemm_64_``: 64-bit integers), already loaded by numpy: no second BLAS in
    memory; None where numpy was built otherwise."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    found = sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so*")))
    if not found:
        return None
    try:
        lib = ctypes.CDLL(found[0])
        lib.scipy_dgemm_64_  # noqa: B018 - the symbols this module names
    except (OSError, AttributeError):  # pragma: no cover
        return None
    return lib, "scipy_{}_64_", ctypes.c_int64


def _scipy_blas() -> tuple | None:
    """``(table of function pointers, None, c_int)`` of scipy's ``cython_blas`` and
    ``cython_lapack`` (32-bit integers), or None without scipy."""
    try:  # pragma: no cover - depends on the environment
        import scipy.linalg.cython_blas as cb
        import scipy.linalg.cython_lapack as cl
    except ImportError:  # pragma: no cover
        return None
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    caps = {**cb.__pyx_capi__, **cl.__pyx_capi__}
    table = {k: get_ptr(c, get_name(c)) for k, c in caps.items()}
    return table, None, ctypes.c_int


def _load() -> dict:
    """``{(prefix, name): ctypes function, "int": integer type}``: numpy's own OpenBLAS,
    else scipy's, else ``{}`` (numpy fallbacks); loaded on first use."""
    if not _KERNELS:
        table: dict = {}
        src = _numpy_openblas() or _scipy_blas()
        if src is not None:
            lib, fmt, cint = src
            kinds = {"c": _CHR, "i": ctypes.POINTER(cint), "p": _PTR}
            try:
                for p in _PREFIX.values():
                    for name, sig in _SIGNATURES.items():
                        proto = ctypes.CFUNCTYPE(None, *[kinds[c] for c in sig])
                        if fmt is None:
                            table[p, name] = proto(lib[p + name])
                        else:
                            table[p, name] = proto((fmt.format(p + name), lib))
                table["int"] = cint
            except (AttributeError, KeyError):  # pragma: no cover
                table = {}
        _KERNELS[:] = [table]
    return _KERNELS[0]


def have_blas() -> bool:
    """True where the in-place BLAS/LAPACK kernels are available (numpy's OpenBLAS or
    scipy), False where every kernel runs on numpy."""
    return bool(_load())


def _ld(x: np.ndarray) -> int | None:
    """The leading dimension of the C-ordered 2-d view ``x`` as a Fortran matrix (its row
    stride in elements), or None where BLAS cannot take it (a column stride != 1)."""
    item = x.itemsize
    rows, cols = x.shape
    if cols > 1 and x.strides[1] != item:
        return None
    if rows <= 1:
        return max(cols, 1)
    s = x.strides[0]
    if s % item or s // item < cols:
        return None
    return s // item


def _operand(x: np.ndarray) -> tuple | None:
    """``(trans, ld)`` of ``x``'s transpose as a BLAS operand: a C-ordered view is it as it
    stands (``N``), a Fortran-ordered one transposed (``T``); None where BLAS cannot."""
    ld = _ld(x)
    if ld is not None:
        return b"N", ld
    ld = _ld(x.T)
    return None if ld is None else (b"T", ld)


def _i(v: int) -> Any:
    return ctypes.byref(_KERNELS[0]["int"](v))


def gemm_sub(C: np.ndarray, A: np.ndarray, B: np.ndarray) -> None:
    """``C -= A @ B`` in place (2-d views of one dtype; ``C`` with unit column stride, ``A``
    and ``B`` C- or Fortran-ordered): BLAS ``?gemm`` on the views, else numpy ``@`` in row
    chunks."""
    m, n = C.shape
    k = A.shape[1]
    if m == 0 or n == 0 or k == 0:
        return
    kern = _load()
    ldc, opa, opb = _ld(C), _operand(A), _operand(B)
    p = _PREFIX.get(C.dtype.char)
    if kern and p and ldc and opa and opb and A.dtype == B.dtype == C.dtype:
        alpha, beta = np.array(-1, dtype=C.dtype), np.array(1, dtype=C.dtype)
        kern[p, "gemm"](opb[0], opa[0], _i(n), _i(m), _i(k), alpha.ctypes.data, B.ctypes.data,
                        _i(opb[1]), A.ctypes.data, _i(opa[1]), beta.ctypes.data,
                        C.ctypes.data, _i(ldc))  # fmt: skip
        return
    step = max(1, _CHUNK // n)
    for s in range(0, m, step):
        C[s : s + step] -= A[s : s + step] @ B


def trsm_left(T: np.ndarray, B: np.ndarray, lower: bool, unit: bool) -> None:
    """``B <- T^-1 B`` in place with the lower (or upper) triangle of the square ``T`` (C- or
    Fortran-ordered; ``B`` with unit column stride), unit diagonal if ``unit`` (a zero on it gives inf/NaN): BLAS ``?trsm``, else substitution."""
    w, k = B.shape
    if w == 0 or k == 0:
        return
    kern = _load()
    opt, ldb = _operand(T), _ld(B)
    p = _PREFIX.get(B.dtype.char)
    if kern and p and opt and ldb and T.dtype == B.dtype:
        one = np.array(1, dtype=B.dtype)
        # B^T <- B^T T^-T; a C-ordered T is T^T as a Fortran matrix, a Fortran-ordered one T
        uplo = (b"U" if lower else b"L") if opt[0] == b"N" else (b"L" if lower else b"U")
        trans = b"N" if opt[0] == b"N" else b"T"
        diag = b"U" if unit else b"N"
        kern[p, "trsm"](b"R", uplo, trans, diag, _i(k), _i(w), one.ctypes.data, T.ctypes.data,
                        _i(opt[1]), B.ctypes.data, _i(ldb))  # fmt: skip
        return
    order = range(w) if lower else range(w - 1, -1, -1)
    for i in order:
        rest = slice(0, i) if lower else slice(i + 1, w)
        B[i] -= T[i, rest] @ B[rest]
        if not unit:
            B[i] /= T[i, i]


def getrf(A: np.ndarray) -> np.ndarray:
    """LU with partial pivoting of the Fortran-ordered ``m x w`` panel ``A`` (``m >= w``) in
    place: LAPACK ``?getrf`` (a zero pivot is kept, not divided by), else a recursive LU
    on numpy.  Returns the pivots (row ``j`` swapped with ``piv[j]``, from 0)."""
    w = A.shape[1]
    kern = _load()
    p = _PREFIX.get(A.dtype.char)
    if kern and p and A.flags.f_contiguous and A.size:
        m = A.shape[0]
        ipiv = np.empty(min(m, w), dtype=kern["int"])
        info = np.zeros(1, dtype=kern["int"])
        kern[p, "getrf"](_i(m), _i(w), A.ctypes.data, _i(max(m, 1)), ipiv.ctypes.data,
                         info.ctypes.data)  # fmt: skip
        return ipiv.astype(np.intp) - 1
    piv = np.empty(w, dtype=np.intp)
    _rgetrf(A, 0, w, piv)
    return piv


def _rgetrf(A: np.ndarray, j0: int, j1: int, piv: np.ndarray) -> None:
    """Recursive LU with partial pivoting of columns ``j0:j1`` of a panel held whole on
    this rank (``A``'s row ``j`` is the panel's column ``j``'s diagonal row); swaps span
    the panel's width.  Halves meet in GEMMs; columns of 8 or fewer go one by one."""
    if j1 - j0 <= 8:
        cplx = A.dtype.kind == "c"
        for j in range(j0, j1):
            col = A[j:, j]
            mag = np.abs(col.real) + np.abs(col.imag) if cplx else np.abs(col)
            i = j + int(np.argmax(mag))
            piv[j] = i
            if i != j:
                A[[j, i]] = A[[i, j]]
            if A[j, j] != 0:
                A[j + 1 :, j] /= A[j, j]
            if j + 1 < j1:
                A[j + 1 :, j + 1 : j1] -= np.outer(A[j + 1 :, j], A[j, j + 1 : j1])
        return
    h = (j0 + j1) // 2
    _rgetrf(A, j0, h, piv)
    trsm_left(A[j0:h, j0:h], A[j0:h, h:j1], True, True)
    A[h:, h:j1] -= A[h:, j0:h] @ A[j0:h, h:j1]
    _rgetrf(A, h, j1, piv)
