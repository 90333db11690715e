"""Datasets and loaders from a config: Teeth3DS-layout directories, the synthetic demo set, splits."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator

from torch.utils.data import DataLoader, DistributedSampler

from .distributed import DistInfo


def _has_scans(root: Path) -> bool:
    from ..data.dataset import find_scans

    return root.is_dir() and bool(find_scans(root))


def ensure_data(cfg: dict[str, Any], log: Any = print) -> list[Path]:
    """Resolve ``data.root`` (one folder or a list); generate the synthetic set there when asked and
    absent; clear error otherwise."""
    from ..data.dataset import data_roots

    d = cfg["data"]
    roots = data_roots(d["root"])
    if len(roots) == 1 and not _has_scans(roots[0]) and d["synthetic_count"] > 0:
        from ..data.synthetic import write_dataset

        log(f"generating {d['synthetic_count']} synthetic patients ({d['synthetic_vertices']} vertices per jaw) in {roots[0]}")
        write_dataset(roots[0], count=d["synthetic_count"], n_vertices=d["synthetic_vertices"], seed=cfg["seed"])
    for root in roots:
        if not root.is_dir():
            raise FileNotFoundError(
                f"data.root {str(root)!r} does not exist: put a Teeth3DS-layout data set there "
                f"(<ID>/<ID>_<jaw>.obj + .json, see data/README.md) or pass --set data.root=DIR"
            )
        if not _has_scans(root):
            raise FileNotFoundError(f"data.root {str(root)!r} holds no <ID>/<ID>_<jaw>.obj scans (see data/README.md)")
    return roots


def build_dataset(cfg: dict[str, Any], split: str, train: bool) -> Any:
    """The Teeth3DS dataset for ``split`` in {train, val, test}: explicit name list, else the split file
    ``<split_dir>/<name>.txt``; a split named ``all`` takes every scan under the root."""
    from ..config import input_features, resolve_augment, resolve_missing_teeth
    from ..data import Teeth3DSDataset
    from ..data.dataset import ItemOptions, data_roots, split_path

    d = cfg["data"]
    root = data_roots(d["root"])
    names = d[f"{split}_names"]
    split_name = d[f"{split}_split"]
    split_file = None
    if names is None and split_name != "all":
        split_file = split_path(root, split_name, d["split_dir"])
        if not split_file.is_file():
            raise FileNotFoundError(
                f"split list {str(split_file)!r} not found for data.{split}_split={split_name!r}: write one "
                f"<ID> or <ID>_<jaw> per line, or pass --set data.{split}_names=[...] or data.split_dir=DIR"
            )
    items = ItemOptions(
        num_classes=d["num_classes"],
        grid_size=d["grid_size"],
        max_points=d["max_points"] if train else None,
        align=d["align"],
        augment=resolve_augment(d["augment"]) if train else None,
        missing_teeth=resolve_missing_teeth(d["missing_teeth"]) if train else None,
        **input_features(d),
        position_label_weight=d["position_label_weight"],
        mode="train" if train else "test",  # train: a random point per voxel; test: deterministic
        seed=cfg["seed"],
    )
    return Teeth3DSDataset(
        root,
        split=split_name,
        split_file=split_file,
        names=names,
        jaw=d["jaw"],
        exclude=d["train_exclude"] if split == "train" else None,
        items=items,
        position_label_roots=d["position_label_roots"],
        cache_dir=d["cache_dir"],
    )


def build_loader(dataset: Any, cfg: dict[str, Any], train: bool, dist: DistInfo) -> DataLoader:
    """Loader with an epoch-seeded sampler (DistributedSampler also in one process, for a fixed order)."""
    from ..data import collate

    sampler = DistributedSampler(
        dataset,
        num_replicas=dist.world_size if train else 1,
        rank=dist.rank if train else 0,
        shuffle=train,
        seed=cfg["seed"],
        drop_last=False,
    )
    return DataLoader(
        dataset,
        batch_size=cfg["train"]["batch_size"] if train else 1,
        sampler=sampler,
        num_workers=cfg["data"]["num_workers"],
        collate_fn=collate,
        # workers start again each epoch on purpose: each holds a copy of the dataset, and persistent ones
        # would miss set_epoch, which seeds the epoch's augmentation (runs bit for bit, resumable)
        persistent_workers=False,
    )


def prefetch(batches: Iterable[Any], depth: int = 1) -> Iterator[Any]:
    """``batches`` in order, the next ``depth`` loaded by a background thread while the caller works on the
    current one: with ``data.num_workers: 0`` a training step no longer waits for reading, augmenting and
    collating its batch (about 30 ms of a 1.3 s step for two cached 8k-vertex jaws). Items are the
    loader's own (each augmented from its (seed, epoch, index) generator), so runs stay bit-identical.
    Stopping early (``break``) stops the thread; an error in loading is raised here, in order."""
    import queue
    import threading

    done = object()
    slots: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def fill() -> None:
        try:
            for batch in batches:
                if not put((batch, None)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put((None, exc))
            return
        put((done, None))

    thread = threading.Thread(target=fill, name="pointmamba-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            batch, error = slots.get()
            if error is not None:
                raise error
            if batch is done:
                return
            yield batch
    finally:
        stop.set()
        thread.join()


def corrections_overrides(cfg: dict[str, Any], folder: str | Path) -> tuple[list[str], str]:
    """Config overrides that fine-tune on a reviewer's corrections ``folder`` (``tools/train.py
    --corrections``), and a line saying what the run trains on.

    The corrected scans (:func:`pointmamba.data.corrections.find_corrections`, each checked now) and the
    scans the config would train on (its ``train_names``, split and ``train_exclude``; ``train_names: []``:
    none), replayed against forgetting, are staged under ``<cache>/corrections/`` as the run's data roots
    (a corrected scan replaces a training scan of its name; position-labelled roots stay so). Each corrected
    scan is drawn ``ceil(replay / corrected)`` times an epoch (``data.scan_repeats``) so that the corrections
    and the replay weigh about the same.
    """
    import json
    import math

    from ..data.corrections import find_corrections, stage_corrections, staging_folder
    from ..data.dataset import data_roots, default_cache_dir

    d = cfg["data"]
    corrections = find_corrections(folder)
    names = [c.name for c in corrections]
    roots = data_roots(d["root"])
    taken = [r.name for r in roots]  # a staged root is named after its data root (results per source)
    groups = {r: r.name if taken.count(r.name) == 1 else f"{r.name}_{k}" for k, r in enumerate(roots)}
    replay: list[tuple[str, Path]] = []
    replaced: list[str] = []
    if d["train_names"] != []:
        train_set = build_dataset(cfg, "train", train=True)
        for name, path in zip(train_set.names, train_set.paths):
            if name in names:
                replaced.append(name)
            else:
                replay.append((groups[next(r for r in roots if path.is_relative_to(r))], path))
    cache = Path(d["cache_dir"]) if d["cache_dir"] else default_cache_dir()
    staged = stage_corrections(corrections, staging_folder(folder, cache), replay)
    labelled_by_position = {Path(p).expanduser().resolve() for p in d["position_label_roots"]}
    position = [str(s) for s in staged[1:]
                if any(s.name == g and r.resolve() in labelled_by_position for r, g in groups.items())]
    times = max(1, math.ceil(len(replay) / len(names)))
    repeats = {**d["scan_repeats"], **{n: times for n in names}}
    replay_names = [p.stem for _, p in replay]
    overrides = [f"data.root={json.dumps([str(r) for r in staged])}", f"data.position_label_roots={json.dumps(position)}",
                 f"data.train_names={json.dumps(replay_names + names)}", "data.train_exclude=null",
                 f"data.scan_repeats={json.dumps(repeats)}"]
    summary = (f"fine-tuning on {len(names)} corrected scan(s) from {folder} (each drawn {times}x an epoch): "
               f"{', '.join(names)}; replay of {len(replay)} training scan(s) against forgetting"
               + (f" (the corrected labels replace the training set's own of {', '.join(replaced)})" if replaced else ""))
    return overrides, summary
