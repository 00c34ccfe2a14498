"""Parallel file I/O: ``.npy`` through MPI-IO, HDF5 (h5py) and Zarr v3.

Every rank reads and writes only its own part of an array; nothing is
gathered.  h5py and zarr are optional and imported when first used.

Functions: `save`/`load` (``.npy``), `from_hdf5`/`to_hdf5`, `from_zarr`/`to_zarr`;
the writers are also methods: ``obj.save(path)``, ``obj.to_hdf5(path, dataset)``,
``obj.to_zarr(path)``.
"""

from __future__ import annotations

from .._d2o import distributed_data_object as _D2O
from ._hdf5 import from_hdf5, to_hdf5
from ._npy import load, save
from ._zarr import from_zarr, to_zarr

__all__ = ["save", "load", "from_hdf5", "to_hdf5", "from_zarr", "to_zarr"]


def _install() -> None:
    def _save(self, alias, path=None, overwrite=None, overwriting=None, overwriteQ=None):
        """Collective: write to the ``.npy`` file ``alias`` (see `d2o.save`; existing files
        are kept unless ``overwrite``), or, as the original D2O did, as HDF5 dataset
        ``alias`` of the file ``path`` (replaced unless ``overwriteQ=False``, then an
        existing dataset is a ValueError)."""
        flags = [f for f in (overwrite, overwriting, overwriteQ) if f is not None]
        if path is None:
            return save(alias, self, overwrite=any(flags))
        try:
            return to_hdf5(self, path, alias, overwrite=all(flags))
        except FileExistsError as exc:  # agreed on every rank; the original API's type
            raise ValueError(str(exc)) from None

    def _to_hdf5(self, path, dataset, **kwargs):
        """Collective: write as an HDF5 dataset (see `d2o.to_hdf5`)."""
        return to_hdf5(self, path, dataset, **kwargs)

    def _to_zarr(self, path, **kwargs):
        """Collective: write as a Zarr v3 array (see `d2o.to_zarr`)."""
        return to_zarr(self, path, **kwargs)

    _D2O.save = _save
    _D2O._hdf5_reader = staticmethod(from_hdf5)
    _D2O.to_hdf5 = _to_hdf5
    _D2O.to_zarr = _to_zarr


_install()
