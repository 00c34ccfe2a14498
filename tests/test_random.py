"""Random numbers (`d2o.ops.random`): the same global array at any process count and layout.

The digests below were computed once without MPI; every process count (1, 2, 3, 4 and
none) must reproduce them, whatever the layout.  They also pin numpy's PCG64
stream and its ziggurat/Lemire algorithms: a numpy release changing those (numpy's
stream policy allows it) would change them.  The fixed-width draws (``random``,
``uniform``, ``choice`` with ``p``) are compared with numpy's own generator directly.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from _helpers import Checks, mesh_of

import d2o
from d2o.ops import bounded as _bounded
from d2o.ops import random as _random
from d2o.ops.creation import distributor_for
from d2o.ops.random import BLOCK, Generator, default_rng
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

SEED = 20240611

DIGESTS = {
    "random": "9ff58f14ef02c771",
    "standard_normal": "b3df4d772f609dea",
    "integers": "cde1aa8b244cd349",
    "normal": "c0b93bb929852f5b",
    "uniform": "2a88770ff8961cd4",
    "exponential": "66d8ba883a8dfdc5",
    "choice_p": "c65877689e53d219",
    "choice_a": "509860c4b40e5e0b",
    "random32": "d6f256c3a574cca0",
    "normal32": "ea5c4fb6e3991180",
}


def _draws(rng: Generator, layout=lambda ndim: None) -> dict:
    """The draws behind DIGESTS, in this order (the call numbers matter); ``layout(ndim)``
    gives the ``dist=`` of each."""
    d1, d2, d3 = layout(1), layout(2), layout(3)
    return {
        "random": rng.random((1000, 7), dist=d2),
        "standard_normal": rng.standard_normal((33, 5, 2), dist=d3),
        "integers": rng.integers(0, 100, 5000, endpoint=True, dist=d1),
        "normal": rng.normal(2.0, 3.0, (40, 300), dist=d2),
        "uniform": rng.uniform(-1.0, 4.0, (10, 501), dist=d2),
        "exponential": rng.exponential(2.5, 9000, dist=d1),
        "choice_p": rng.choice(5, (60, 70), p=[0.1, 0.2, 0.3, 0.25, 0.15], dist=d2),
        "choice_a": rng.choice(np.array([1.5, -2.0, 7.0]), 999, dist=d1),
        "random32": rng.random((3, 4100), dtype=np.float32, dist=d2),
        "normal32": rng.standard_normal((4100, 3), dtype=np.float32, dist=d2),
    }


DIGEST_LAYOUTS = {
    "default": lambda ndim: None,
    "fftw": lambda ndim: "fftw",
    "cyclic": lambda ndim: mesh_of("cyc2" if ndim >= 2 else "cyc3"),  # block-cyclic
    "columns": lambda ndim: d2o.layout(split=(ndim - 1,)),  # slabs along the last axis
}


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def _layouts(comm) -> dict:
    """Layouts of 2-d arrays, by name; each must give the same global values."""
    p = comm.size
    return {
        "default": None,
        "equal": "equal",
        "fftw": "fftw",
        "replicated": False,
        "cyc2": mesh_of("cyc2"),  # block-cyclic, blocks of 2 on both axes
        "mesh10": mesh_of("mesh10"),
        "columns": d2o.layout(mesh=(p,), split=(1,)),  # slabs along the second axis
        "cyclic_rows": d2o.layout(mesh=(p,), split=(0,), block=3),
    }


# -- 1. the same digests at every process count ------------------------------------------


@pytest.mark.parametrize("layout", sorted(DIGEST_LAYOUTS))
def test_digests_do_not_depend_on_the_process_count(comm, layout):
    draws = _draws(default_rng(SEED), DIGEST_LAYOUTS[layout])
    got = {k: _digest(v.get_full_data()) for k, v in draws.items()}
    wrong = {k: (got[k], DIGESTS[k]) for k in DIGESTS if got[k] != DIGESTS[k]}
    collective_assert(not wrong, f"at {comm.size} process(es): (got, expected) {wrong}")


def _reference(seed: int, call: int, shape: tuple, fill) -> np.ndarray:
    """The documented definition, block by block: numpy's Generator on the seed's PCG64
    jumped ``(2**32 * call + block + 1) * 2**64`` words ahead."""
    n = int(np.prod(shape))
    blocks = []
    for b in range(-(-n // BLOCK)):
        bits = np.random.PCG64(np.random.SeedSequence(seed))
        bits.advance(((call << 32) + b + 1) << 64)
        blocks.append(fill(np.random.Generator(bits), BLOCK))
    return np.concatenate(blocks)[:n].reshape(shape) if blocks else np.zeros(shape)


def _numpy_stream(seed: int, shape: tuple, dtype=np.float64) -> np.ndarray:
    """What numpy's own ``default_rng(seed).random`` draws first."""
    return np.random.default_rng(seed).random(shape, dtype=dtype)


FILLS = {  # kind: (d2o's draw, the expected global array of call number 3)
    "random": (
        lambda r, s, d: r.random(s, dist=d),
        lambda s: _numpy_stream(SEED, s),  # numpy's stream: the call number plays no part
    ),
    "random32": (
        lambda r, s, d: r.random(s, np.float32, dist=d),
        lambda s: _numpy_stream(SEED, s, np.float32),
    ),
    "normal": (
        lambda r, s, d: r.standard_normal(s, dist=d),
        lambda s: _reference(SEED, 3, s, lambda g, n: g.standard_normal(n)),
    ),
    "integers": (
        lambda r, s, d: r.integers(-5, 50, s, dist=d),
        lambda s: _reference(SEED, 3, s, lambda g, n: g.integers(-5, 50, n)),
    ),
}


@pytest.mark.parametrize("kind", sorted(FILLS))
@pytest.mark.parametrize("shape", [(3, 4097), (9, 1000), (2, 3, 2050)])
def test_pieces_follow_the_documented_streams(comm, kind, shape):
    """Every rank's piece, in every layout, is the documented definition cut to its box
    (column slabs and block-cyclic pieces start blocks, or the stream, in the middle)."""
    draw, reference = FILLS[kind]
    expected = reference(shape)
    check = Checks()
    for name, dist in _layouts(comm).items():
        rng = default_rng(SEED)
        rng.calls = 3  # the fourth call
        check.equal(draw(rng, shape, dist), expected, what=f"{kind} {name}")
    check.done()


FIXED_WIDTH_CALLS = [  # (method, args, keywords): singles leave half words held
    ("random", ((7, 5),), {}),
    ("random", (3,), {"dtype": np.float32}),
    ("uniform", (-1.0, 2.0, (4, 9)), {}),
    ("random", ((5, 3),), {"dtype": np.float32}),
    ("random", (6,), {}),
    ("random", (), {"dtype": np.float32}),
    ("random", ((2, 1),), {"dtype": np.float32}),
    ("choice", (5, (3, 11)), {"p": [0.1, 0.2, 0.3, 0.2, 0.2]}),
    ("random", ((33, 40),), {"dtype": np.float32}),
    ("random", (), {}),
    ("uniform", (2.0, 3.0, (0, 4)), {}),
    ("random", ((17, 4),), {}),
]


@pytest.mark.parametrize("seed", [0, SEED])
def test_fixed_width_draws_are_numpys_stream(comm, seed):
    """A sequence of fixed-width draws gives exactly what numpy's own ``default_rng``
    gives for the same calls, in every layout (a half word held by a draw of singles
    included); a variable-width draw in between leaves the stream where it was."""
    check = Checks()
    for name, dist in _layouts(comm).items():
        ours, theirs = default_rng(seed), np.random.default_rng(seed)
        for i, (method, args, kwargs) in enumerate(FIXED_WIDTH_CALLS):
            want = getattr(theirs, method)(*args, **kwargs)
            if np.ndim(want) < 2:  # scalars and 1-d draws: the default layout
                got = getattr(ours, method)(*args, **kwargs)
            else:
                got = getattr(ours, method)(*args, **kwargs, dist=dist)
            if np.ndim(want) == 0:
                check.true(float(got) == float(want), f"{name} call {i}: {got} != {want}")
            else:
                check.equal(got, want, what=f"{name} call {i}")
            if i == 4:
                ours.standard_normal((3, 7), dist=dist)  # does not move the stream
        check.done()


# -- 1b. bounded integers: the bulk kernel gives numpy's per-block values -----------------


def _integer_cases() -> list:
    """(low, high, dtype, endpoint) through every branch of numpy's bounded integers
    (`d2o.ops.bounded`): a range of 0 (no words), chunks taken whole (2**w - 1, bool),
    Lemire's method with and without rejections, rare, moderate (a few per block) and
    frequent (a range just above half the chunk: about half the chunks rejected), with
    ranges of a power of two; on 64-, 32-, 16-, 8- and 1-bit chunks; signed offsets
    that wrap."""
    cases = []
    ranges = [  # (low, high) before clipping to the dtype
        (0, 1), (0, 2), (0, 3), (0, 100), (-5, 50), (0, 128), (0, 129), (0, 255), (0, 256),
        (0, 1000), (0, 2**15 + 1), (0, 2**16), (0, 2**16 + 1), (0, 10**6), (0, 2**31 + 1),
        (0, 2**32 - 1), (0, 2**32), (0, 2**32 + 1), (0, 2**40), (-(2**40), 2**40 + 3),
        (0, 2**63 + 1), (0, 2**64 - 1), (None, None), (-1, None), (None, 1), (3, 3),
    ]  # fmt: skip
    for dt in (np.int64, np.uint64, np.int32, np.uint32, np.int16, np.uint16, np.int8, np.uint8):
        info = np.iinfo(dt)
        for low, high in ranges:
            lo = info.min if low is None else max(low, int(info.min))
            hi = info.max if high is None else min(high, int(info.max))
            for endpoint in (False, True):
                if (hi if endpoint else hi - 1) >= lo:
                    cases.append((lo, hi, dt, endpoint))
    cases += [(0, 2, bool, False), (0, 1, bool, True), (1, 1, bool, True), (0, 0, bool, True)]
    return sorted(set(cases), key=repr)


INTEGER_CASES = _integer_cases()
INTEGER_SIZES = (1, 5, BLOCK - 1, BLOCK, 2 * BLOCK + 1, 3 * BLOCK + 7)


def _per_block(low, high, dt, endpoint, size, call=3) -> np.ndarray:
    """numpy's own ``Generator.integers`` on every block (d2o's definition, and its
    per-block implementation before the bulk kernel)."""
    return _reference(SEED, call, (size,),
                      lambda g, n: g.integers(low, high, n, dtype=dt, endpoint=endpoint))  # fmt: skip


def _path_piece(path, low, high, dt, endpoint, size, dist=False) -> np.ndarray:
    """This rank's piece of call number 3 drawn by one path: ``True`` (the bulk kernel
    where it is faster, the public `integers`), ``"always"`` (the bulk kernel) or
    ``False`` (numpy's call per block)."""
    rng = default_rng(SEED)
    rng.calls = 3
    kind = _random._integers_kind(low, high, np.dtype(dt), endpoint, bulk=path)
    return rng._piece(kind, size, dist)[0]


@pytest.mark.parametrize("dt", ["int64", "uint64", "int32", "uint32", "int16", "uint16",
                                "int8", "uint8", "bool"])  # fmt: skip
def test_bulk_integers_are_numpys_per_block_values(comm, dt):
    """Bit for bit numpy's per-block values, for every branch of its algorithm and sizes
    that end blocks part way: the public `integers` (bulk where faster), the bulk kernel
    everywhere, and the per-block path (``bulk=False``)."""
    check = Checks()
    for low, high, t, endpoint in INTEGER_CASES:
        if np.dtype(t) != np.dtype(dt):
            continue
        for size in INTEGER_SIZES:
            want = _per_block(low, high, t, endpoint, size)
            what = f"integers({low}, {high}, {size}, {dt}, endpoint={endpoint})"
            rng = default_rng(SEED)
            rng.calls = 3
            got = rng.integers(low, high, size, dtype=t, endpoint=endpoint, dist=False)
            check.true(got.dtype == want.dtype, f"{what}: dtype {got.dtype}")
            check.equal(got, want, what=what)
            for path in ("always", False) if size in (5, 2 * BLOCK + 1) else ("always",):
                piece = _path_piece(path, low, high, t, endpoint, size)
                check.true(piece.dtype == want.dtype and np.array_equal(piece, want),
                           f"{what}: bulk={path!r}")  # fmt: skip
    check.done()


@pytest.mark.parametrize("case", [(0, 100, np.int64), (0, 10**6, np.int32), (-5, 1000, np.int16),
                                  (0, 100, np.uint8), (0, 2**63 + 1, np.uint64)], ids=repr)  # fmt: skip
def test_bulk_integers_of_many_blocks(comm, case):
    """Draws larger than one slice of the array operations (`d2o.ops.bounded._PASS`
    chunks) and than one batch of blocks (``_BATCH``), with and without rejections."""
    low, high, t = case
    size = 70 * BLOCK + 5
    want = _per_block(low, high, t, False, size)
    piece = _path_piece("always", low, high, t, False, size)
    collective_assert(np.array_equal(piece, want), f"{case}")


def test_bulk_integers_draw_more_where_a_block_runs_short(comm, monkeypatch):
    """A block whose first words hold too few accepted chunks draws more where it
    stopped (forced here by drawing a third of the words needed at first)."""

    def few(self, n):
        return 0 if n <= 0 or self.rng == 0 else max(1, -(-n // self.per_word) // 3)

    monkeypatch.setattr(_bounded.Bounded, "words", few)
    check = Checks()
    for low, high, t, endpoint in INTEGER_CASES[::3]:
        for size in (7, 2 * BLOCK + 1):
            piece = _path_piece("always", low, high, t, endpoint, size)
            check.true(np.array_equal(piece, _per_block(low, high, t, endpoint, size)),
                       f"integers({low}, {high}, {size}, {t}, endpoint={endpoint})")  # fmt: skip
    check.done()


def test_bulk_integers_without_the_direct_jump(comm, monkeypatch):
    """Where numpy's C layout does not allow writing the generator's state
    (`d2o.ops.bounded.LcgJump` gives None), ``advance`` places it: the same values."""
    monkeypatch.setattr(_bounded.LcgJump, "create", classmethod(lambda cls, bitgen: None))
    check = Checks()
    for low, high, t, endpoint in INTEGER_CASES[::5]:
        for path in ("always", False):
            size = 2 * BLOCK + 1
            piece = _path_piece(path, low, high, t, endpoint, size)
            check.true(np.array_equal(piece, _per_block(low, high, t, endpoint, size)),
                       f"integers({low}, {high}, {t}, endpoint={endpoint}), bulk={path!r}")  # fmt: skip
    z = default_rng(SEED).standard_normal((3, 5000), dist=False).get_full_data()
    check.true(_digest(z) == _digest(_reference(SEED, 0, (3, 5000), lambda g, n: g.standard_normal(n))),
               "standard_normal")  # fmt: skip
    check.done()


def test_the_direct_jump_is_used():
    """numpy's PCG64 has the C layout `d2o.ops.bounded.LcgJump` expects (else every block
    falls back to ``PCG64.advance``: the same values, slower; see the notes there)."""
    collective_assert(_bounded.LcgJump.create(np.random.PCG64(SEED)) is not None,
                      f"numpy {np.__version__}: PCG64's state cannot be written directly")  # fmt: skip


LAYOUT_INTEGER_CASES = [  # one per kind of chunk stream, rejections rare and frequent
    (0, 100, np.int64, True),
    (-(2**40), 2**40, np.int64, False),
    (0, 2**63 + 1, np.uint64, False),
    (0, 2**31 + 1, np.uint32, False),
    (0, 10**6, np.int32, False),
    (-300, 700, np.int16, True),
    (0, 100, np.uint8, False),
    (0, 2, bool, False),
]


@pytest.mark.parametrize("path", [True, "always"])
@pytest.mark.parametrize("case", LAYOUT_INTEGER_CASES, ids=repr)
def test_bulk_integers_in_every_layout(comm, case, path):
    """Pieces that start blocks part way (column slabs, block-cyclic) and ranks holding
    several runs of one block: the same values as numpy's per-block calls."""
    low, high, t, endpoint = case
    shape = (3, 4097)
    want = _per_block(low, high, t, endpoint, 3 * 4097).reshape(shape)
    check = Checks()
    for name, dist in _layouts(comm).items():
        piece = _path_piece(path, low, high, t, endpoint, shape, dist)
        d = distributor_for(dist, shape, np.dtype(t))
        part = want[d.local_slice]
        check.true(np.array_equal(piece, part), f"{case} {name}")
        if path is True:  # the public call too
            rng = default_rng(SEED)
            rng.calls = 3
            check.equal(rng.integers(low, high, shape, dtype=t, endpoint=endpoint, dist=dist),
                        want, what=f"{case} {name}")  # fmt: skip
    check.done()


# -- 2. the same values in every layout --------------------------------------------------


@pytest.mark.parametrize("what", ["random", "normal", "integers", "exponential", "choice"])
def test_every_layout_gives_the_same_array(comm, what):
    def draw(dist):
        rng = default_rng([SEED, 7])
        rng.random(3)  # a first call: the second one is compared
        if what == "random":
            return rng.random((37, 130), dist=dist)
        if what == "normal":
            return rng.normal(-1.0, 0.5, (37, 130), dist=dist)
        if what == "integers":
            return rng.integers(10, size=(37, 130), dtype=np.int16, dist=dist)
        if what == "exponential":
            return rng.exponential(size=(37, 130), dist=dist)
        return rng.choice(np.arange(10.0, 16.0), (37, 130), p=[0.5, 0, 0.1, 0.1, 0.1, 0.2],
                          dist=dist)  # fmt: skip

    expected = draw(False).get_full_data()  # replicated: every rank holds all of it
    check = Checks()
    for name, dist in _layouts(comm).items():
        check.equal(draw(dist), expected, what=name)
    check.done()


@pytest.mark.parametrize("shape", [(), (0,), (0, 5), (2,), (3, 1, 2)])
def test_small_and_empty_shapes(comm, shape):
    """Ranks holding nothing, 0-d arrays (``size=()``) and empty arrays."""
    expected = default_rng(SEED).standard_normal(shape, dist=False).get_full_data()
    for dist in (None, True, "fftw", False):
        x = default_rng(SEED).standard_normal(shape, dist=dist)
        collective_assert(x.shape == shape, f"shape {x.shape} for {shape}")
        assert_equal_to_numpy(x, expected)


def test_default_layout_is_slabs_along_the_first_axis(comm):
    x = default_rng(SEED).random((10, 3))
    collective_assert(x.distribution_strategy == "equal" and x.axis == 0, repr(x.distributor))
    y = default_rng(SEED).random((10, 3), dist=x)  # the layout of another array
    collective_assert(y.distributor is x.distributor, "dist=array takes its layout")
    assert_equal_to_numpy(y, x.get_full_data())


# -- 3. statistics -----------------------------------------------------------------------


def test_normal_statistics():
    rng = default_rng(SEED)
    z = rng.standard_normal(10**5)
    collective_assert(abs(float(z.mean())) < 0.02, f"mean {z.mean()}")
    collective_assert(abs(float(z.std()) - 1) < 0.02, f"std {z.std()}")
    x = rng.normal(3.0, 2.0, 10**5)
    collective_assert(abs(float(x.mean()) - 3) < 0.04, f"mean {x.mean()}")
    collective_assert(abs(float(x.std()) - 2) < 0.04, f"std {x.std()}")
    e = rng.exponential(2.0, 10**5)
    collective_assert(abs(float(e.mean()) - 2) < 0.04 and float(e.min()) >= 0, "exponential")


def test_bounds_and_dtypes():
    rng = default_rng(SEED)
    i = rng.integers(3, 7, 20000).get_full_data()
    collective_assert(i.dtype == np.int64 and i.min() == 3 and i.max() == 6, f"{i.min()} {i.max()}")
    j = rng.integers(3, 7, 20000, endpoint=True).get_full_data()
    collective_assert(j.min() == 3 and j.max() == 7, f"endpoint: {j.min()} {j.max()}")
    k = rng.integers(5, size=(40, 50), dtype=np.uint8).get_full_data()
    collective_assert(k.dtype == np.uint8 and k.max() == 4, f"{k.dtype} {k.max()}")
    b = rng.integers(2, size=1000, dtype=bool).get_full_data()
    collective_assert(b.dtype == bool and 400 < b.sum() < 600, f"bool {b.sum()}")
    u = rng.uniform(-2.0, 3.0, 20000).get_full_data()
    collective_assert(u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.05, "uniform")
    r = rng.random(20000).get_full_data()
    collective_assert(r.dtype == np.float64 and r.min() >= 0 and r.max() < 1, "random")
    for what in ("random", "standard_normal"):
        f = getattr(rng, what)((100, 101), dtype=np.float32).get_full_data()
        collective_assert(f.dtype == np.float32, f"{what}: {f.dtype}")
        collective_assert(abs(f.mean() - (0.5 if what == "random" else 0)) < 0.03, what)
    r32 = rng.random(10000, dtype=np.float32).get_full_data()
    collective_assert(r32.min() >= 0 and r32.max() < 1, "float32 range")


def test_choice_frequencies():
    rng = default_rng(SEED)
    c = rng.choice(4, 40000, p=[0.1, 0.0, 0.6, 0.3]).get_full_data()
    freq = np.bincount(c, minlength=4) / c.size
    collective_assert(np.allclose(freq, [0.1, 0.0, 0.6, 0.3], atol=0.01), f"{freq}")
    pool = np.array(["a", "b", "c"])
    s = rng.choice(pool, (30, 20)).get_full_data()
    collective_assert(s.dtype == pool.dtype and set(s.ravel()) == {"a", "b", "c"}, f"{s.dtype}")


# -- 4. streams: successive calls, seeds -------------------------------------------------


def test_calls_seeds_and_generators(comm):
    rng = default_rng(SEED)
    a, b = rng.random(500).get_full_data(), rng.random(500).get_full_data()
    collective_assert(not np.any(a == b), "successive calls must differ")
    collective_assert(rng.calls == 2, f"calls {rng.calls}")
    again = default_rng(SEED)
    assert_equal_to_numpy(again.random(500), a)
    assert_equal_to_numpy(again.random(500), b)
    other = default_rng(SEED + 1).random(500).get_full_data()
    collective_assert(not np.any(other == a), "another seed must give other numbers")
    ss = np.random.SeedSequence(SEED)
    assert_equal_to_numpy(default_rng(ss).random(500), a)  # int and SeedSequence agree
    collective_assert(default_rng(rng) is rng, "a d2o Generator is returned as it is")
    seq = default_rng([SEED, 1]).random(500).get_full_data()
    collective_assert(not np.any(seq == a), "a sequence seed is another seed")
    kids = rng.spawn(2)
    x, y = kids[0].random(50).get_full_data(), kids[1].random(50).get_full_data()
    collective_assert(not np.any(x == y), "spawned generators differ")
    # without a seed rank 0's entropy is broadcast: the same numbers on every rank
    fresh = default_rng().random(8, dist=False).get_local_data()
    collective_assert(all(np.array_equal(v, fresh) for v in comm.allgather(fresh)), "unseeded")


def test_blocks_are_independent_streams():
    """Element i depends on i // BLOCK and i % BLOCK only: a longer draw extends a
    shorter one, and no two blocks repeat each other."""
    long = default_rng(SEED).standard_normal(3 * BLOCK + 5).get_full_data()
    short = default_rng(SEED).standard_normal(BLOCK + 1).get_full_data()
    collective_assert(np.array_equal(long[: BLOCK + 1], short), "prefix")
    blocks = long[: 3 * BLOCK].reshape(3, BLOCK)
    collective_assert(not np.any(blocks[0] == blocks[1]), "blocks 0 and 1 share values")


def test_module_level_functions():
    _random.seed(SEED)
    a = _random.random(300).get_full_data()
    _random.seed(SEED)
    b = _random.random((300,), dist=False).get_full_data()
    collective_assert(np.array_equal(a, b), "seed() restarts the default generator")
    expected = _numpy_stream(SEED, 600)[300:]  # the second call: the stream goes on
    assert_equal_to_numpy(_random.random(300), expected)
    for f, args in [
        (_random.standard_normal, (4,)),
        (_random.normal, (1.0, 2.0, 4)),
        (_random.uniform, (0.0, 2.0, 4)),
        (_random.integers, (5, None, 4)),
        (_random.exponential, (1.0, 4)),
        (_random.choice, (5, 4)),
    ]:
        collective_assert(f(*args).shape == (4,), f.__name__)


# -- 5. bad input ------------------------------------------------------------------------


def test_bad_input_raises_everywhere():
    rng = default_rng(SEED)
    assert_raises_everywhere(ValueError, rng.normal, 0.0, -1.0, 5)
    assert_raises_everywhere(ValueError, rng.exponential, -2.0, 5)
    assert_raises_everywhere(ValueError, rng.integers, 5, 5, 3)
    assert_raises_everywhere(ValueError, rng.integers, 6, 5, 3, endpoint=True)
    assert_raises_everywhere(ValueError, rng.integers, 0, 300, 3, dtype=np.int8)
    assert_raises_everywhere(TypeError, rng.integers, 0, 3, 3, dtype=np.float64)
    assert_raises_everywhere(NotImplementedError, rng.choice, 5, 3, replace=False)
    assert_raises_everywhere(ValueError, rng.choice, 5, 3, p=[0.5, 0.5])
    assert_raises_everywhere(ValueError, rng.choice, 5, 3, p=[0.5, 0.5, 0.5, -0.5, 0])
    assert_raises_everywhere(ValueError, rng.choice, 0, 3)
    assert_raises_everywhere(ValueError, rng.random, -1)
    assert_raises_everywhere(ValueError, rng.standard_normal, (3, -2))
    assert_raises_everywhere(TypeError, rng.random, 3, np.int64)
    assert_raises_everywhere(TypeError, rng.standard_normal, 3, np.complex128)
    assert_raises_everywhere(OverflowError, rng.uniform, 0.0, np.inf, 3)
    assert_raises_everywhere(NotImplementedError, rng.normal, [0.0, 1.0], 1.0, 2)
    assert_raises_everywhere(ValueError, rng.random, 3, dist="nonsense")
    assert_raises_everywhere(TypeError, default_rng, 1.5)
    assert_raises_everywhere(TypeError, default_rng, np.random.default_rng(1))
    huge = default_rng(SEED)
    huge.calls = 1 << 32  # beyond the blocks' jump table: refused before drawing
    assert_raises_everywhere(OverflowError, huge.standard_normal, 3)
    # a call that raised did not use up a call number (the ranks stay in step)
    collective_assert(rng.calls == 0, f"calls {rng.calls}")


# -- 6. scalars --------------------------------------------------------------------------


def test_size_none_gives_the_same_scalar_everywhere(comm):
    rng = default_rng(SEED)
    values = [
        rng.random(),
        rng.standard_normal(),
        rng.normal(1.0, 2.0),
        rng.uniform(-1.0, 1.0),
        rng.exponential(3.0),
        rng.integers(10),
        rng.choice(7),
        rng.choice([1.5, 2.5], p=[0.2, 0.8]),
        rng.random(dtype=np.float32),
    ]
    kinds = [float, float, float, float, float, np.int64, int, np.float64, float]
    types = [type(v) for v in values]
    collective_assert(types == kinds, f"types {types}")
    everywhere = comm.allgather(values)
    collective_assert(all(v == values for v in everywhere), f"scalars differ: {everywhere}")
    # a scalar is element 0 of that call's array
    first = default_rng(SEED).random((3, 2), dist=False).get_local_data()
    collective_assert(values[0] == first[0, 0], f"{values[0]} != {first[0, 0]}")
    zero_d = default_rng(SEED).random(())
    collective_assert(zero_d.shape == () and float(zero_d.get_full_data()) == values[0], "0-d")
