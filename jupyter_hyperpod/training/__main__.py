"""`python -m jupyter_hyperpod.training <step> --config config.yaml [--set key=value ...]`.

Steps: download, dataprep, train, evaluate, merge (each reads the same YAML: the seed's
args-fine-tuning.yaml loads unchanged) and scaffold (writes a project to edit and submit).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from .config import ConfigError, load_config, parse_overrides

log = logging.getLogger("jupyter_hyperpod.training")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_hyperpod.training", description=__doc__.split("\n\n")[0]
    )
    steps = parser.add_subparsers(dest="step", required=True)
    for name, help_text in (
        ("download", "download the model (model_source) into model_id on the shared file system"),
        ("dataprep", "format the dataset (prompt + answer) and split it into train and test"),
        ("train", "fine-tune (QLoRA/LoRA, FSDP when distributed), resuming from checkpoints"),
        ("evaluate", "ROUGE of the fine-tuned model vs the base model on the test split"),
        ("merge", "merge the trained adapter into the base model"),
    ):
        step = steps.add_parser(name, help=help_text)
        step.add_argument("--config", "-c", help="YAML config (the seed's args-fine-tuning.yaml)")
        step.add_argument(
            "--set",
            dest="overrides",
            action="append",
            metavar="KEY=VALUE",
            help="override a config key (repeatable)",
        )
    check = steps.add_parser(
        "fsdp-check", help="4-bit layers' outputs with and without FSDP2 (bitsandbytes #1945)"
    )
    check.add_argument("--config", "-c", help="check this config's model (default: synthetic)")
    check.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE")
    check.add_argument(
        "--storage",
        default="float32,bfloat16",
        help="comma-separated 4-bit storage dtypes to compare (default: float32,bfloat16)",
    )
    check.add_argument(
        "--compute", default=None, help="synthetic layers' compute dtype (default: as training)"
    )
    scaffold = steps.add_parser("scaffold", help="write a fine-tuning project to edit and submit")
    scaffold.add_argument("directory")
    scaffold.add_argument("--model-id", default=None, help="hub id or local model directory")
    scaffold.add_argument("--dataset", default=None, help="dataset file or hub dataset id")
    scaffold.add_argument(
        "--dataset-config", default=None, help="the hub dataset's config name (e.g. en)"
    )
    scaffold.add_argument("--force", action="store_true", help="overwrite existing files")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .runtime import setup_logging

    setup_logging()
    try:
        if args.step == "scaffold":
            from .scaffold import scaffold_project

            written = scaffold_project(
                args.directory,
                model_id=args.model_id,
                dataset=args.dataset,
                dataset_config=args.dataset_config,
                force=args.force,
            )
            for path in written:
                print(path)
            return 0
        if args.step == "fsdp-check":
            from .fsdp_check import run

            checked = (
                load_config(args.config, parse_overrides(args.overrides)) if args.config else None
            )
            storages = [s.strip() for s in args.storage.split(",") if s.strip()]
            run(storages, checked, args.compute)
            return 0
        config = load_config(args.config, parse_overrides(args.overrides))
        if args.step == "download":
            from .download import download_model

            if not config.model_source:
                raise ConfigError("model_source is not set (the Hugging Face repo id to download)")
            download_model(config.model_source, config.model_id, revision=config.model_revision)
        elif args.step == "dataprep":
            from .dataprep import prepare

            print(json.dumps(prepare(config)))
        elif args.step == "train":
            from .train import train

            train(config)
        elif args.step == "evaluate":
            from .evaluate import evaluate

            evaluate(config)
        elif args.step == "merge":
            from .merge import merge_adapter

            merge_adapter(config)
    except ConfigError as error:
        log.error("configuration error: %s", error)
        return 2
    except Exception as error:
        from .download import DownloadError

        if isinstance(error, (DownloadError, FileNotFoundError, FileExistsError)):
            log.error("%s", error)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
