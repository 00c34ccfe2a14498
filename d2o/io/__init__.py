"""Parallel file I/O: ``.npy`` through MPI-IO, HDF5 (h5py) and Zarr v3.

Every rank reads and writes only its own part of an array; nothing is
gathered.  h5py and zarr are optional and imported when first used.

Functions: `save`/`load` (``.npy``), `savetxt` (text, every rank its rows),
`from_hdf5`/`to_hdf5`, `from_zarr`/`to_zarr`; ``savez`` (``.npz``: every rank writes its
bytes of each member) is the engine of ``d2o.numpy.savez``/``savez_compressed``, which
have numpy's signature.  The writers are also methods of `d2o.distributed_data_object`:
``obj.save(path)``, ``obj.to_hdf5(path, dataset)``, ``obj.to_zarr(path)``.
"""

from __future__ import annotations

from ._hdf5 import from_hdf5, to_hdf5
from ._npy import load, save
from ._npz import savez as savez
from ._text import savetxt
from ._zarr import from_zarr, to_zarr

# (savez is not exported: d2o.numpy.savez is its public face, with numpy's signature)
__all__ = ["save", "load", "savetxt", "from_hdf5", "to_hdf5", "from_zarr", "to_zarr"]
