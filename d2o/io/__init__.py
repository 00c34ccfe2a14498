"""Parallel file I/O: ``.npy`` through MPI-IO, HDF5 (h5py) and Zarr v3.

Every rank reads and writes only its own part of an array; nothing is
gathered.  h5py and zarr are optional and imported when first used.

Functions: `save`/`load` (``.npy``), `savetxt` (text, every rank its rows), `savez`
(``.npz``: every rank writes its bytes of each member), `from_hdf5`/`to_hdf5`, `from_zarr`/`to_zarr`;
the writers are also methods of `d2o.distributed_data_object`: ``obj.save(path)``,
``obj.to_hdf5(path, dataset)``, ``obj.to_zarr(path)``.
"""

from __future__ import annotations

from ._hdf5 import from_hdf5, to_hdf5
from ._npy import load, save
from ._npz import savez
from ._text import savetxt
from ._zarr import from_zarr, to_zarr

__all__ = ["save", "load", "savetxt", "savez", "from_hdf5", "to_hdf5", "from_zarr", "to_zarr"]
