"""Teeth3DS-layout dataset with cached preprocessing, and ``collate`` into a :class:`PointBatch`.

Preprocessing (parse OBJ + JSON, vertex normals, canonical pose) is done once per file and kept in an
on-disk ``.npz`` cache keyed by the mesh and label files' path, mtime and size (optionally also in
memory), so later epochs never parse OBJ text. Per item, in this order: align (optional), centre,
augment (optional), grid sample, point cap. Randomness comes from a generator seeded with
``(seed, epoch, index)``: runs are reproducible and resumable (call :meth:`set_epoch` each epoch).
"""
from __future__ import annotations

import hashlib
import io
import math
import os
import re
import warnings
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..utils.atomic_file import atomic_write
from .augment import Augment
from .errors import ScanFormatError
from .fdi import IGNORE_INDEX, JAWS, check_jaw, check_num_classes, fdi_to_class
from .grid_sampling import GRID_MODES, cap_points, grid_sample
from .mesh import MESH_SUFFIXES, apply_transform, vertex_normals
from .missing_teeth import MissingTeeth, arch_is_complete
from .pose import canonical_pose
from .scan import Scan, jaw_from_name, load_scan
from .scan_files import walk_tree

CACHE_VERSION = 2
"""Bump when the cached content changes; old cache files are then ignored."""

def default_cache_dir() -> Path:
    """``$POINTMAMBA_CACHE`` or ``~/.cache/pointmamba``, plus ``/preprocess``."""
    base = os.environ.get("POINTMAMBA_CACHE") or Path.home() / ".cache" / "pointmamba"
    return Path(base) / "preprocess"


_SCAN_NAME = re.compile(r".+_(upper|lower)")


def find_scans(root: str | PathLike | Sequence[str | PathLike]) -> dict[str, Path]:
    """All meshes under ``root`` (one folder or a list of folders) named ``<ID>_<jaw>.<obj|ply|stl>`` (any
    depth, symlinked folders followed, hidden folders skipped; other names such as ``<ID>_upper_pred.ply``
    are not scans), as ``{"<ID>_<jaw>": path}`` sorted by name. Two files with one name (an .obj and a
    .ply, or one scan in two roots) are an error naming both."""
    roots = [Path(root)] if isinstance(root, (str, PathLike)) else [Path(r) for r in root]
    found: dict[str, Path] = {}
    for top in roots:
        for dirpath, filenames in walk_tree(top):  # the folder rule predict follows too (symlinks, loops)
            for fn in filenames:
                p = dirpath / fn
                if p.suffix.lower() not in MESH_SUFFIXES or fn.startswith(".") or not _SCAN_NAME.fullmatch(p.stem):
                    continue
                if p.stem in found:
                    if found[p.stem].resolve() == p.resolve():  # one file reached twice (a linked folder)
                        continue
                    raise ScanFormatError(p, "name", f"two scans named {p.stem!r}: {found[p.stem]} and {p} "
                                                     "(scan names must be unique across data roots)")
                found[p.stem] = p
    return dict(sorted(found.items()))


def data_roots(root: str | PathLike | Sequence[str | PathLike]) -> list[Path]:
    """``data.root`` as a list of folders (it is one folder or a list of them)."""
    roots = [root] if isinstance(root, (str, PathLike)) else list(root)
    return [Path(r).expanduser() for r in roots]


def split_path(root: str | PathLike | Sequence[str | PathLike], split: str,
               split_dir: str | PathLike | None = None) -> Path:
    """The split file of ``split``: ``<split_dir or root>/<split>.txt`` (the one rule every caller uses);
    with several roots, the first one holds the split files unless ``split_dir`` says otherwise."""
    return Path(split_dir or data_roots(root)[0]).expanduser() / f"{split}.txt"


def read_split(path: str | PathLike) -> list[str]:
    """Names in a split file: one ``<ID>_<jaw>`` or ``<ID>`` per line; blank lines and ``#`` comments
    are skipped."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: split file not found")
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def _file_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_mtime_ns}|{st.st_size}"


@dataclass(frozen=True)
class ItemOptions:
    """What each scan of a :class:`Teeth3DSDataset` becomes as a model input (:func:`make_item`), checked
    here: a bad value is a ``ValueError`` naming its field.

    ``num_classes`` 17 or 33 (see :mod:`pointmamba.data.fdi`); ``grid_size`` in mm (None/0: every vertex);
    ``max_points`` caps the rows (None: no cap); ``align`` applies :func:`canonical_pose`; ``augment`` an
    :class:`Augment` or its config dict (None: off); ``missing_teeth`` a :class:`MissingTeeth` or its config
    (None: off; only arches whose labels are identities get it); ``jaw_feature`` / ``coord_feature`` the
    input channels (see :func:`make_item`); ``position_label_weight`` the loss weight of a position-labelled
    scan whose arch misses a tooth (item key ``weight``); ``mode`` "train" (a random point per voxel) or
    "test" (deterministic), None: the dataset decides by its split; ``seed``: item i of epoch e is drawn
    from ``(seed, e, i)``."""

    num_classes: int = 17
    grid_size: float | None = 0.2
    max_points: int | None = None
    align: bool = True
    augment: Augment | Mapping[str, Any] | None = None
    missing_teeth: MissingTeeth | Mapping[str, Any] | None = None
    jaw_feature: bool = False
    coord_feature: bool = True
    position_label_weight: float = 1.0
    mode: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        def built(name: str, kind: type, config: Any) -> Any:
            if config is None or isinstance(config, kind):
                return config
            try:
                return kind(config)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"ItemOptions.{name}: {exc}") from exc

        try:
            check_num_classes(self.num_classes)
        except ValueError as exc:
            raise ValueError(f"ItemOptions.{exc}") from exc
        put("num_classes", int(self.num_classes))
        if self.grid_size is not None and not self.grid_size >= 0:
            raise ValueError(f"ItemOptions.grid_size must be >= 0 or None, got {self.grid_size}")
        put("grid_size", float(self.grid_size) if self.grid_size else None)
        if self.max_points is not None and not (int(self.max_points) == self.max_points and self.max_points > 0):
            raise ValueError(f"ItemOptions.max_points must be a positive integer or None, got {self.max_points!r}")
        put("augment", built("augment", Augment, self.augment or None))
        put("missing_teeth", built("missing_teeth", MissingTeeth, self.missing_teeth))
        for name in ("align", "jaw_feature", "coord_feature"):
            put(name, bool(getattr(self, name)))
        if not (math.isfinite(self.position_label_weight) and self.position_label_weight >= 0):
            raise ValueError(f"ItemOptions.position_label_weight must be >= 0, got {self.position_label_weight!r}")
        put("position_label_weight", float(self.position_label_weight))
        if self.mode is not None and self.mode not in GRID_MODES:
            raise ValueError(f"ItemOptions.mode must be one of {GRID_MODES} or None, got {self.mode!r}")
        put("seed", int(self.seed))


def _item_option(name: str) -> property:
    """The dataset's ``name``: its :class:`ItemOptions`' field."""
    return property(lambda self: getattr(self.items, name), doc=f"``items.{name}`` (see :class:`ItemOptions`)")


class Teeth3DSDataset:
    """Jaw scans under ``root`` in Teeth3DS layout (``<ID>/<ID>_<jaw>.obj`` + ``.json``; any folder depth).
    ``root`` is one folder or a list of them (scan names unique across them).

    Which scans: ``names`` (a list of ``<ID>_<jaw>`` or ``<ID>``), else ``split_file``, else
    ``root/<split>.txt``; ``split="all"`` (or None) takes every scan found; ``exclude`` (names as in
    ``names``) are then left out. ``jaw`` keeps one jaw.

    What each scan becomes: ``items`` (an :class:`ItemOptions`; its ``mode`` None: "train" when the scans
    come from ``split="train"`` (``root/train.txt``), else "test"). Its fields are also the dataset's
    attributes (``ds.num_classes``, ``ds.augment``, ...).

    Labels: scans under ``position_label_roots`` (some of the data roots) are labelled by position along
    the arch, not by identity (see ``../shared/data/README.md``); those whose arch misses a tooth weigh
    ``items.position_label_weight`` in the loss, and only complete ones are given to ``items.missing_teeth``.

    Storage: ``cache_dir`` None: :func:`default_cache_dir`, False: no disk cache; ``in_memory`` also keeps
    preprocessed scans in memory.

    ``ds[i]`` is a dict: ``coord`` (N, 3) float32 (aligned, centred, augmented), ``feat`` (N, 6) float32
    (coord and vertex normal), ``segment`` (N,) int64 class ids (-100 = no label), ``index`` (N,) int64
    the vertex each row was taken from, ``vertex_row`` (V,) int64 the row standing for every vertex, ``vertex_segment`` (V,) int64, ``name``, ``jaw``, ``num_vertices``,
    ``transform`` (4x4: original vertices -> coord frame before augmentation), ``grid_size`` and
    ``weight`` (the scan's loss weight).
    """

    num_classes = _item_option("num_classes")
    grid_size = _item_option("grid_size")
    max_points = _item_option("max_points")
    align = _item_option("align")
    augment = _item_option("augment")
    missing_teeth = _item_option("missing_teeth")
    jaw_feature = _item_option("jaw_feature")
    coord_feature = _item_option("coord_feature")
    position_label_weight = _item_option("position_label_weight")
    mode = _item_option("mode")
    seed = _item_option("seed")

    def __init__(
        self,
        root: str | PathLike | Sequence[str | PathLike],
        split: str | None = "train",
        split_file: str | PathLike | None = None,
        names: Sequence[str] | None = None,
        jaw: str | None = None,
        exclude: Sequence[str] | None = None,
        items: ItemOptions | None = None,
        position_label_roots: Sequence[str | PathLike] = (),
        cache_dir: str | PathLike | None | bool = None,
        in_memory: bool = False,
    ) -> None:
        self.roots = data_roots(root)
        self.root = self.roots[0]  # where split files live by default
        for r in self.roots:
            if not r.is_dir():
                raise FileNotFoundError(f"{r}: dataset root not found")
        self.jaw = check_jaw(jaw, allow_none=True)
        items = items or ItemOptions()
        from_train_split = split == "train" and names is None and split_file is None
        self.items = replace(items, mode=items.mode or ("train" if from_train_split else "test"))
        if cache_dir is None or cache_dir is True:
            cache_dir = default_cache_dir()
        self.cache_dir = Path(cache_dir) if cache_dir is not False else None
        self.in_memory = in_memory
        self._memory: dict[str, dict[str, np.ndarray]] = {}
        self.epoch = 0
        self.names, self.paths = self._select(split, split_file, names, exclude)
        self.identity_labels = self._identity_labels(position_label_roots)
        # the data root each scan came from, by its folder name (results are reported per source)
        self.sources = [next((r.name for r in self.roots if p.is_relative_to(r)), self.roots[0].name)
                        for p in self.paths]

    def _select(self, split: str | None, split_file: str | PathLike | None, names: Sequence[str] | None,
                exclude: Sequence[str] | None) -> tuple[list[str], list[Path]]:
        """The names and mesh paths of the scans picked (see the class doc); errors name the list to blame."""
        where_all = ", ".join(map(str, self.roots))
        found = find_scans(self.roots)
        source: str | Path
        if names is not None:
            entries, source = list(names), "names"
        elif split_file is not None:
            entries, source = read_split(split_file), Path(split_file)
        elif split in (None, "all"):
            entries, source = list(found), "all scans found"
        else:
            source = split_path(self.roots, split)
            if not source.is_file():
                raise FileNotFoundError(f"{source}: split file not found (pass split='all', split_file= or "
                                        "names=, or write one <ID>_<jaw> or <ID> per line)")
            entries = read_split(source)
        where = source if isinstance(source, Path) else self.root  # the file (or folder) to blame
        field = "split" if isinstance(source, Path) else source
        picked: list[str] = []
        for entry in entries:
            for s in _resolve_name(entry, found, where, field, where_all):
                if self.jaw is not None and jaw_from_name(s) != self.jaw:
                    continue
                if s in picked:
                    raise ScanFormatError(where, field, f"scan {s!r} listed twice")
                picked.append(s)
        dropped = {s for entry in (exclude or ()) for s in _resolve_name(entry, found, "config",
                                                                         "data.train_exclude", where_all)}
        picked = [s for s in picked if s not in dropped]
        if not picked:
            raise ValueError(f"Teeth3DSDataset: no scans selected under {where_all} ({source}, jaw={self.jaw})")
        return picked, [found[s] for s in picked]

    def _identity_labels(self, position_label_roots: Sequence[str | PathLike]) -> list[bool]:
        """Per scan, whether its root labels teeth by identity (not one of ``position_label_roots``, each of
        which must be a data root)."""
        resolved = [r.resolve() for r in self.roots]
        position_roots = []
        for r in position_label_roots:
            if Path(r).expanduser().resolve() not in resolved:
                where_all = ", ".join(map(str, self.roots))
                raise ValueError(f"data.position_label_roots: {r} is not one of the data roots ({where_all})")
            position_roots.append(self.roots[resolved.index(Path(r).expanduser().resolve())])
        return [not any(p.is_relative_to(r) for r in position_roots) for p in self.paths]

    # ------------------------------------------------------------------ epochs and length
    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose augmentation and sampling randomness ``__getitem__`` uses."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.names)

    def rng(self, index: int) -> np.random.Generator:
        """The generator for item ``index`` in the current epoch."""
        return np.random.default_rng([self.seed, self.epoch, index])

    # ------------------------------------------------------------------ preprocessing + cache
    def _cache_path(self, mesh: Path) -> Path | None:
        if self.cache_dir is None:
            return None
        label = mesh.with_suffix(".json")
        key = f"v{CACHE_VERSION}|{_file_key(mesh)}|{_file_key(label) if label.is_file() else 'unlabelled'}"
        digest = hashlib.sha1(key.encode()).hexdigest()[:20]
        return self.cache_dir / f"{mesh.stem}-{digest}.npz"

    def preprocessed(self, index: int) -> dict[str, np.ndarray]:
        """The cached per-scan arrays: ``vertices`` (float32, file frame minus ``origin``, float64),
        ``normals`` (float32, file frame), ``transform``
        (canonical pose), ``labels`` (FDI, int16; absent when unlabelled), ``jaw``, ``id_patient``."""
        name, mesh = self.names[index], self.paths[index]
        if name in self._memory:
            return self._memory[name]
        cache = self._cache_path(mesh)
        data = None
        if cache is not None and cache.is_file():
            try:
                with np.load(cache, allow_pickle=False) as z:
                    data = {k: z[k] for k in z.files}
            except Exception as exc:  # a broken cache file is rebuilt, not trusted
                warnings.warn(f"{cache}: unreadable cache file ({exc}); rebuilding it")
        if data is None:
            data = preprocess(mesh)
            if cache is not None:
                buf = io.BytesIO()
                np.savez(buf, **data)
                atomic_write(cache, buf.getvalue())
        if self.in_memory:
            self._memory[name] = data
        return data

    def prepare(self, progress: bool = True) -> None:
        """Fill the cache for every scan now (with a progress bar)."""
        from tqdm import tqdm

        for i in tqdm(range(len(self)), desc="preprocess", **({} if progress else {"disable": True})):  # as below
            self.preprocessed(i)

    # ------------------------------------------------------------------ items
    def labels_are_identities(self, index: int) -> bool:
        """Whether scan ``index``'s labels name each tooth by what it is: an identity-labelled root, or
        a complete arch (positions 1..7 on both sides) from a position-labelled one."""
        if self.identity_labels[index]:
            return True
        d = self.preprocessed(index)
        return "labels" in d and arch_is_complete(d["labels"], str(d["jaw"]) or None)

    def identity_arches(self, progress: bool = True, desc: str = "arches"
                        ) -> Iterator[tuple[int, np.ndarray, np.ndarray, str]]:
        """(index, vertices in the canonical frame (float64), FDI labels, jaw) of every labelled scan whose
        labels are identities (:meth:`labels_are_identities`), with a progress bar."""
        from tqdm import tqdm

        # no disable= where the bar is wanted: an explicit value would override the tools' --no-progress
        # (TQDM_DISABLE sets tqdm's defaults only)
        for i in tqdm(range(len(self)), desc=desc, **({} if progress else {"disable": True})):
            if not self.labels_are_identities(i):
                continue
            d = self.preprocessed(i)
            if "labels" not in d:
                continue
            yield i, self.aligned_vertices(i), d["labels"].astype(np.int64), str(d["jaw"])

    def aligned_vertices(self, index: int) -> np.ndarray:
        """Scan ``index``'s vertices (file order, float64) in the canonical frame, before augmentation."""
        return _aligned(self.preprocessed(index))

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.item(index, self.rng(index))

    def item(self, index: int, rng: np.random.Generator) -> dict[str, Any]:
        """Item ``index`` drawn with ``rng`` (``ds[i]`` is ``ds.item(i, ds.rng(i))``)."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} scans")
        identities = self.labels_are_identities(index)
        item = make_item(self.preprocessed(index), self.names[index], self.num_classes, self.grid_size,
                         self.align, self.mode, rng, self.augment, self.max_points,
                         jaw_feature=self.jaw_feature, missing_teeth=self.missing_teeth if identities else None,
                         coord_feature=self.coord_feature)
        item["weight"] = 1.0 if identities else self.position_label_weight
        return item


def _resolve_name(entry: str, found: Mapping[str, Path], where: Any, field: str, roots: str) -> list[str]:
    """The scan names an entry of a split (``<ID>_<jaw>``, ``<ID>`` or a mesh file name) stands for."""
    stem = Path(entry).stem if Path(entry).suffix.lower() in MESH_SUFFIXES else entry
    if stem in found:
        return [stem]
    stems = [f"{stem}_{j}" for j in JAWS if f"{stem}_{j}" in found]
    if not stems:
        raise ScanFormatError(where, field, f"no scan {entry!r} under {roots} (expected "
                                            f"<ID>_<jaw>.obj, e.g. {entry}/{entry}_upper.obj)")
    return stems


def make_item(d: Mapping[str, np.ndarray], name: str, num_classes: int, grid_size: float | None,
              align: bool = True, mode: str = "test", rng: np.random.Generator | None = None,
              augment: Augment | None = None, max_points: int | None = None,
              jaw_feature: bool = False, missing_teeth: MissingTeeth | None = None,
              coord_feature: bool = True) -> dict[str, Any]:
    """One model input from preprocessed arrays (see :func:`preprocess`): align (optional), centre,
    remove teeth (optional, needs labels), augment (optional), grid sample, point cap. The dataset and
    whole-scan inference both use it, so a user's scan is prepared exactly like the eval split.

    ``jaw_feature`` appends a constant channel, +1 for an upper and -1 for a lower jaw: the 17-class
    scheme gives 11 and 31 one class, and lower teeth are narrower, so without it the network must guess
    the jaw from shape to know where each tooth position lies. ``coord_feature`` false leaves the centred
    coordinates out of the features (``coord`` still carries them, for the grid and the serialization)."""
    jaw = str(d["jaw"]) or None
    coord = d["vertices"].astype(np.float64) + d.get("origin", 0.0)  # float64 before rotating and centring
    normal = d["normals"].astype(np.float64)
    transform = np.eye(4)
    if align:
        transform = d["transform"].astype(np.float64)
        coord = apply_transform(coord, transform)
        normal = apply_transform(normal, transform, direction=True)
    centre = coord.mean(0)
    coord = coord - centre
    transform[:3, 3] -= centre
    labels = d["labels"].astype(np.int64) if "labels" in d else None
    if missing_teeth is not None and labels is not None:
        # its own generator, drawn from rng only here: runs without it keep their random stream
        coord, normal, labels = missing_teeth(coord, normal, labels, np.random.default_rng(rng.integers(2**63)))
    if augment is not None:
        coord, normal, labels = augment(coord, normal, labels, rng)
    index_rows, inverse = grid_sample(coord, grid_size, mode, rng)
    index_rows, inverse = cap_points(coord, index_rows, inverse, max_points, mode, rng)
    if labels is not None:
        vertex_segment = fdi_to_class(labels, jaw, num_classes)
    else:
        vertex_segment = np.full(len(coord), IGNORE_INDEX, dtype=np.int64)
    c = coord[index_rows].astype(np.float32)
    feats = ([c] if coord_feature else []) + [normal[index_rows].astype(np.float32)]
    if jaw_feature:
        if jaw not in JAWS:
            raise ValueError(f"{name}: jaw unknown, but the model takes the jaw as input: name the file "
                             "*_upper / *_lower or pass --jaw upper|lower")
        feats.append(np.full((len(c), 1), 1.0 if jaw == "upper" else -1.0, dtype=np.float32))
    return {
        "coord": c,
        "feat": np.concatenate(feats, 1),
        "segment": vertex_segment[index_rows],
        "index": index_rows,
        "vertex_row": inverse,
        "vertex_segment": vertex_segment,
        "name": name,
        "jaw": jaw,
        "num_vertices": len(coord),
        "transform": transform,
        "grid_size": grid_size,
    }


def _aligned(data: dict[str, np.ndarray]) -> np.ndarray:
    """A preprocessed scan's vertices (float64) in the canonical frame."""
    from .mesh import apply_transform

    return apply_transform(data["vertices"].astype(np.float64) + data["origin"], data["transform"])


def preprocess(mesh: str | PathLike) -> dict[str, np.ndarray]:
    """Parse one scan (and its label JSON) and compute normals and the canonical pose."""
    return preprocess_scan(load_scan(mesh))


def preprocess_scan(scan: Scan) -> dict[str, np.ndarray]:
    """Vertices, normals and canonical pose of a loaded scan (labels when it has them), as cached."""
    # centred in float64 before the float32 cast: far from the origin float32 keeps no sub-mm (at 1 km,
    # steps of 0.06 mm changed 8 % of the labels); ``origin`` restores the file frame
    origin = scan.vertices.mean(0)
    out = {
        "vertices": (scan.vertices - origin).astype(np.float32),
        "origin": origin,
        "normals": vertex_normals(scan.vertices, scan.faces).astype(np.float32),
        "transform": canonical_pose(scan.vertices, scan.faces),
        "jaw": np.array(scan.jaw or ""),
        "id_patient": np.array(scan.id_patient or ""),
    }
    if scan.labels is not None:
        out["labels"] = scan.labels.astype(np.int16)
    return out


def collate(samples: Sequence[Mapping[str, Any]], grid_size: float | None = None):  # -> PointBatch
    """Pack dataset items into a :class:`~pointmamba.point.batch.PointBatch`.

    Extras: ``segment`` (N,) int64, ``name`` / ``jaw`` (lists), ``vertex_row`` (V_total,) int64 global row
    (already offset into the packed rows) for every original vertex (the grid-sampling map; not the curve
    order's ``PointBatch.inverse``), ``vertex_offset`` (B,) cumulative
    vertex counts, ``vertex_segment`` (V_total,) int64, ``transform`` (B, 4, 4) float64 and ``scan_weight``
    (B,) float32 (the items' loss weights, 1 where they have none). So per-vertex predictions of the whole batch are ``logits.argmax(1)[vertex_row]``, split by ``vertex_offset``.
    ``grid_size`` defaults to the items' own.
    """
    import torch

    from ..point.batch import PointBatch

    if len(samples) == 0:
        raise ValueError("collate: empty list of samples")
    if grid_size is None:
        grid_size = samples[0].get("grid_size")
    rows = np.cumsum([0] + [len(s["coord"]) for s in samples])
    vertex_row = np.concatenate([np.asarray(s["vertex_row"], dtype=np.int64) + r for s, r in zip(samples, rows[:-1])])
    num_vertices = [int(s["num_vertices"]) for s in samples]
    return PointBatch.from_list(
        [torch.from_numpy(np.ascontiguousarray(s["coord"], dtype=np.float32)) for s in samples],
        [torch.from_numpy(np.ascontiguousarray(s["feat"], dtype=np.float32)) for s in samples],
        grid_size=grid_size or None,
        segment=torch.from_numpy(np.concatenate([np.asarray(s["segment"], dtype=np.int64) for s in samples])),
        name=[str(s["name"]) for s in samples],
        jaw=[s["jaw"] for s in samples],
        vertex_row=torch.from_numpy(vertex_row),
        vertex_offset=torch.from_numpy(np.cumsum(num_vertices).astype(np.int64)),
        vertex_segment=torch.from_numpy(np.concatenate([np.asarray(s["vertex_segment"], dtype=np.int64)
                                                        for s in samples])),
        transform=torch.from_numpy(np.stack([np.asarray(s["transform"], dtype=np.float64) for s in samples])),
        scan_weight=torch.tensor([float(s.get("weight", 1.0)) for s in samples], dtype=torch.float32),
    )
