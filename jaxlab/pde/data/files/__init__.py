"""The field's PDE data files, read lazily from disk into the same loader as generated data.

Layouts: DPOT's (one HDF5 file with ``data`` (N, X, Y, T[, C]), or a scatter-storage folder of
``data_{i}.hdf5``), PDEBench's 2-D compressible NS and per-sample-group files, and The Well's
format (read with h5py: its own package needs torch). A master table in DPOT's style names the
sets (``jaxlab.pde.data.files.master``); :func:`open_set` turns an entry into a
:class:`~jaxlab.pde.data.PDEDataset` whose trajectories are read on indexing, so
:func:`~jaxlab.pde.data.mixture_batch` reads only the rows a process needs::

  table = load_master("<data dir>/master.json")
  sets = [open_set(entry, "<data dir>") for entry in table.values()]
  batch = mixture_batch(sets, [1.0] * len(sets), seed=0, step=k, global_batch_size=64, rows=my_rows,
                        t_in=10, t_out=1, resolution=128)   # 64^2 and 128^2 sets resampled to 128^2

Needs h5py (the ``pde`` extra).
"""

from jaxlab.pde.data.files.configured import ENV_VAR, FileSet, file_sets
from jaxlab.pde.data.files.dpot import DPOTFile, DPOTScatter
from jaxlab.pde.data.files.fingerprint import data_fingerprint
from jaxlab.pde.data.files.master import (DPOT_FIELDS, FORMATS, MasterEntry, check_entry, load_master,
                                          load_table)
from jaxlab.pde.data.files.open import open_records, open_set
from jaxlab.pde.data.files.pdebench import CFD_FIELDS, PDEBenchCFD, PDEBenchGroups
from jaxlab.pde.data.files.records import Records, Split, TrajectoryArray, verify_records
from jaxlab.pde.data.files.the_well import TheWell

__all__ = [
    "CFD_FIELDS", "DPOTFile", "DPOTScatter", "DPOT_FIELDS", "ENV_VAR", "FORMATS", "FileSet", "MasterEntry",
    "PDEBenchCFD", "PDEBenchGroups", "Records", "Split", "TheWell", "TrajectoryArray", "check_entry",
    "data_fingerprint", "file_sets", "load_master", "load_table", "open_records", "open_set", "verify_records",
]
