"""Shared command-line plumbing for the tools: config arguments, friendly error exits and the opening of
the tools that evaluate a checkpoint on a split."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from pointmamba.utils.atomic_file import DiskFullError
from pointmamba.utils.cpu_runtime import tune_cpu_runtime
from pointmamba.utils.printable import printable

tune_cpu_runtime()  # before anything imports torch (see pointmamba/utils/cpu_runtime.py)

if TYPE_CHECKING:  # torch is imported inside the functions: --help stays fast
    import torch

USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, DiskFullError)


def add_config_args(parser: argparse.ArgumentParser, required: bool = True, positional: bool = False) -> None:
    """``--config FILE`` and ``--set KEY=VALUE ...``; with ``positional`` the config is the first argument
    (as MMSegmentation's and Pointcept's tools take it) and ``--config`` stays as an alias
    (:func:`parse_args` joins the two into ``args.config``)."""
    if positional:
        parser.add_argument("config", nargs="?", help="YAML config (see configs/); --config FILE says the same")
        parser.add_argument("--config", dest="config_flag", metavar="FILE", help=argparse.SUPPRESS)
        parser.set_defaults(config_required=required)
    else:
        parser.add_argument("--config", required=required, help="YAML config (see configs/)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="override config keys, e.g. --set train.epochs=5 model.relpos.preset=naive")


def add_average_with_arg(parser: argparse.ArgumentParser, whose: str = "--checkpoint's") -> None:
    """``--average-with CKPT ...``: networks whose probabilities inference averages with the first's."""
    parser.add_argument("--average-with", nargs="+", default=[], metavar="CKPT",
                        help=f"more checkpoints whose probabilities are averaged with {whose} at inference (each "
                             "network built from its own stored config)")


def add_study_args(parser: argparse.ArgumentParser) -> None:
    """What a study of a checkpoint on a split takes (removal_check, dropped_teeth_check): ``--checkpoint``,
    ``--average-with``, ``--split`` and the required ``--out``."""
    parser.add_argument("--checkpoint", help="checkpoint (default: the shipped model)")
    add_average_with_arg(parser)
    parser.add_argument("--split", default="val", choices=("train", "val", "test"))
    parser.add_argument("--out", required=True, help="output directory")


def infer_overrides(items: list[str]) -> dict[str, Any]:
    """The ``infer`` switches a ``--set infer.KEY=VALUE ...`` list sets, checked against their defaults
    (types and ranges: a NaN smoothing weight hung the graph cut); ValueError for any other key (a
    checkpoint's model comes from the checkpoint)."""
    from pointmamba.config import merge, parse_override, resolve_infer

    user: dict[str, Any] = {}
    for item in items:
        user = merge(user, parse_override(item))
    if set(user) - {"infer"}:
        raise ValueError(f"--set takes infer.* keys only here (the model comes from the checkpoint), got {sorted(user)}")
    resolve_infer(user.get("infer"), "--set")
    return dict(user.get("infer", {}))


@dataclass
class EvalRun:
    """A trained network ready to evaluate on one split (see :func:`open_eval_run`)."""

    cfg: dict[str, Any]  # --config with --set, as load_trained returns it
    device: torch.device
    checkpoint: Path  # resolved: the shipped model where --checkpoint was not given
    average_with: list[str]
    split: str
    out: Path  # checked, not yet created: a tool makes it once it has something to write
    model: Any
    dataset: Any

    def labelled_scans(self, desc: str) -> Iterator[Any]:
        """Each scan of the split, loaded, with a progress bar named ``desc``; ValueError naming the file for
        a scan without labels (a study scores against them)."""
        from tqdm import tqdm

        from pointmamba.data import load_scan

        for path in tqdm(self.dataset.paths, desc=desc):
            scan = load_scan(path)
            if scan.labels is None:
                raise ValueError(f"{path}: no label file beside the mesh: this study scores against the labels")
            yield scan

    def provenance(self, **before_infer: Any) -> dict[str, Any]:
        """The keys a result JSON opens with (which networks, split and inference switches produced it);
        ``before_infer`` (removal_check's ``mode``) goes between ``split`` and ``infer``, where it always
        stood, so the files keep their key order."""
        return {"checkpoint": str(self.checkpoint), "average_with": [str(p) for p in self.average_with],
                "split": self.split, **before_infer, "infer": self.cfg.get("infer")}


def open_study(doc: str | None) -> "EvalRun":
    """The opening of a study tool that takes only the config and study arguments (partial_scans,
    dropped_teeth_check): its command line (``doc`` the help text) parsed and the run opened."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    add_study_args(parser)
    return open_eval_run(parse_args(parser))


def open_eval_run(args: argparse.Namespace, default_out: str | None = None) -> EvalRun:
    """The opening of the tools that evaluate a checkpoint on a split (test, removal_check): read ``--config`` with ``--set``, check ``--out``, pick the device, load
    ``--checkpoint`` (with ``--average-with``) and build the ``--split`` dataset (no augmentation).

    ``default_out`` None: ``--out`` is required and checked first of all. Else ``--out`` is optional,
    default :func:`default_out_dir`, and checked once the checkpoint is resolved.
    """
    from pointmamba.cli.output_files import check_out_dir
    from pointmamba.config import load_config
    from pointmamba.utils.device import resolve_device
    from pointmamba.inference.pipeline import load_trained
    from pointmamba.checkpoints.shipped import resolve_checkpoint
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(args.config, args.overrides)
    if default_out is None:
        out = Path(args.out)
        check_out_dir(out)  # a file, an unwritable place: one line now, not a traceback after the model loads
    device = resolve_device(cfg["train"]["device"])
    checkpoint = resolve_checkpoint(args.checkpoint)
    if default_out is not None:  # the default is named after the checkpoint: known only now
        out = Path(args.out) if args.out else default_out_dir(checkpoint, default_out)
        check_out_dir(out)
    model, cfg = load_trained(checkpoint, device, config=cfg, average_with=args.average_with)
    dataset = build_dataset(cfg, args.split, train=False)
    return EvalRun(cfg=cfg, device=device, checkpoint=checkpoint, average_with=args.average_with,
                   split=args.split, out=out, model=model, dataset=dataset)


def default_out_dir(checkpoint: Path, name: str) -> Path:
    """``work_dirs/<run>/<name>`` in the current folder, never inside the installed package: ``<run>`` is
    the checkpoint's folder (a training run's work dir: ``work_dirs/cpe/best.pth`` -> ``work_dirs/cpe/<name>``),
    or the file's own stem where it lies in the package (the shipped model) or has no folder."""
    package = Path(__file__).resolve().parents[1]
    folder = checkpoint.resolve().parent
    run = checkpoint.stem if folder.is_relative_to(package) or not checkpoint.parent.name else checkpoint.parent.name
    return Path("work_dirs") / run / name


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None,
               backends: bool = True) -> argparse.Namespace:
    """``parser.parse_args`` plus ``--verbose`` and ``--no-progress`` (every tool has both); configures
    pointmamba's logging (DEBUG with --verbose, else WARNING) and prints which backend each op uses on CPU
    (and CUDA) to stderr (``backends``: tools that run no network leave it out). ``--no-progress`` sets
    ``TQDM_DISABLE=1``, which turns off every progress bar that does not set its own ``disable`` (and those
    of subprocesses); a tool whose bars do (training's ``train.progress``) also reads ``args.no_progress``."""
    parser.add_argument("--verbose", action="store_true", help="show debug log lines (e.g. each op's backend choice)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (logs, CI)")
    args = parser.parse_args(argv)
    if hasattr(args, "config_flag"):  # a positional config with its --config alias
        if args.config and args.config_flag and args.config != args.config_flag:
            parser.error(f"two configs given: {args.config} and --config {args.config_flag}")
        args.config = args.config or args.config_flag
        if args.config_required and not args.config:
            parser.error("a config is required: CONFIG (or --config CONFIG)")
    if args.no_progress:
        os.environ["TQDM_DISABLE"] = "1"
    logger = logging.getLogger("pointmamba")
    if not any(getattr(h, "_pointmamba_tools", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler._pointmamba_tools = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    if backends:
        from pointmamba.ops import backend_report

        print(backend_report(), file=sys.stderr, flush=True)
    return args


def step_printer(name: str, enabled: bool = True) -> Callable[[str], None] | None:
    """A ``progress`` callback that prints each step of a long job as it starts, with the time since the
    first (``name: graph cut (63.7 s)``), to stderr; None when not ``enabled``."""
    if not enabled:
        return None
    start = time.perf_counter()

    def step(what: str) -> None:
        from tqdm import tqdm  # beside a progress bar over several scans, not through it

        tqdm.write(f"{printable(name)}: {what} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)

    return step


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
    return f"warning: {printable(message)}\n"


def run_main(main: Callable[[], Any]) -> None:
    """Run ``main``; user errors (bad config, missing files, corrupt checkpoint, a full disk) exit 2 with one
    clear line; warnings (a scan that looks cut short, say) print as one ``warning:`` line naming the file.
    Both are printed with control characters escaped (:func:`~pointmamba.utils.printable.printable`)."""
    if not os.environ.get("POINTMAMBA_DEBUG"):
        warnings.formatwarning = _one_line_warning
    try:
        main()
    except USER_ERRORS as exc:
        if os.environ.get("POINTMAMBA_DEBUG"):
            raise
        print(f"error: {printable(exc)}", file=sys.stderr)
        print("(set POINTMAMBA_DEBUG=1 for the full traceback)", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


def write_study(out: Path, json_name: str, payload: dict[str, Any], table: str, rows_file: str) -> None:
    """The last step of a study tool (removal_check, dropped_teeth_check): DIR/``json_name`` (``payload``),
    DIR/summary.md (the markdown ``table``), the table printed and every file it wrote named (``rows_file``,
    its per-case CSV, written before)."""
    from pointmamba.utils import finite_json
    from pointmamba.utils.atomic_file import atomic_write

    atomic_write(out / json_name, finite_json.dumps(payload, indent=2).encode())
    atomic_write(out / "summary.md", table.encode())
    print(table)
    print(f"written: {out / rows_file}, {json_name}, summary.md")
