"""Dental scan data: Teeth3DS I/O and checks, FDI classes, canonical pose, augmentation, grid sampling,
the dataset with its cache and ``collate``, and procedural (synthetic) jaws.

Only numpy/scipy/plyfile are imported here; torch is imported by :func:`collate` when called.
"""
from __future__ import annotations

from .augment import DEFAULT_AUGMENT, Augment, mirror, random_rotation
from .dataset import ItemOptions, Teeth3DSDataset, collate, find_scans, preprocess, read_split
from .errors import ScanFormatError
from .fdi import (CLASS_NAMES, IGNORE_INDEX, LOWER_FDI, UPPER_FDI, class_colors, class_to_fdi, fdi_name,
                  fdi_to_class, mirror_class, mirror_fdi)
from .grid_sampling import cap_points, grid_sample
from .mesh import (apply_transform, read_mesh, read_obj, read_ply, read_stl, vertex_normals, write_obj,
                   write_ply, write_stl)
from .pose import alignment_errors, canonical_pose
from .scan import Scan, load_scan, save_scan
from .teeth3ds import LabelFile, instances_from_labels, read_labels, save_labels



def __getattr__(name: str):  # noqa: ANN202 - lazy, so `python -m pointmamba.data.synthetic` runs cleanly
    if name in ("synthetic_jaw", "write_dataset"):
        from . import synthetic

        return getattr(synthetic, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CLASS_NAMES", "DEFAULT_AUGMENT", "IGNORE_INDEX", "LOWER_FDI", "UPPER_FDI", "Augment", "ItemOptions", "LabelFile", "Scan",
    "ScanFormatError", "Teeth3DSDataset", "alignment_errors", "apply_transform", "canonical_pose", "cap_points",
    "class_colors", "class_to_fdi", "collate", "fdi_name", "fdi_to_class", "find_scans", "grid_sample",
    "instances_from_labels", "load_scan", "mirror", "mirror_class", "mirror_fdi", "preprocess", "random_rotation",
    "read_labels", "read_mesh", "read_obj", "read_ply", "read_split", "read_stl", "save_labels", "save_scan",
    "synthetic_jaw", "vertex_normals", "write_dataset", "write_obj", "write_ply", "write_stl",
]
