"""Distributed FFTs with numpy.fft's interface: ``d2o.fft.fftn(x)``, ``d2o.fft.rfft(x)``, ...

The transforms are `d2o.ops.fft`'s (slab transposes plus local FFTs, never a gather);
this module is their public name.
"""

from .ops.fft import *  # noqa: F403
from .ops.fft import __all__  # noqa: F401
