"""`python -m inference batch-file export|import`: the Batch API files for an offline night.

    export   plan the window's run (--date) or take a planned one (--run-id), write its request files
    import   read result files (vLLM `run-batch` output, or a provider's output/error files), load the
             replies like any other output; failures wait for the next `export` (a retry round)

The request files hold ticket text: they are written 0600; keep them on the GPU box and delete them
(and the result files) once imported.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

EXPORT_HELP = "write a run's request files (one JSON line per ticket) for an offline batch runner"
IMPORT_HELP = "import result files of an exported run: match by custom_id, validate, upsert"


def add_parser(sub, day_type) -> None:
    files = sub.add_parser("batch-file", help="Batch API files offline: export requests, import results")
    verbs = files.add_subparsers(dest="batch_command", required=True)
    export = verbs.add_parser("export", help=EXPORT_HELP)
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--run-id", help="a run planned before (its waiting tickets, or its pending retries)")
    which.add_argument("--date", type=day_type, help="plan the run of this logical date's window first")
    export.add_argument("--out", required=True, type=Path, help="directory for the request files (created)")
    export.add_argument("--model", required=True, help="the model name the batch runner serves")
    export.add_argument("--prompt-file", help="the summary prompt, from a UTF-8 file (default: built in)")
    export.add_argument("--max-tokens", type=positive, default=120, help="output tokens per summary (default 120)")
    export.add_argument("--max-chars", type=positive, default=12_000, help="ticket text cut here (default 12000)")
    export.add_argument("--extra-body", help="extra request parameters as JSON, e.g. '{\"temperature\": 0}'")
    export.add_argument("--max-requests", type=positive, default=50_000, help="requests per file (default 50000)")
    export.add_argument("--max-bytes", type=positive, default=190_000_000, help="bytes per file (default 190000000)")
    imp = verbs.add_parser("import", help=IMPORT_HELP)
    imp.add_argument("--run-id", required=True, help="the run the files were exported for")
    imp.add_argument("files", nargs="+", type=Path, help="result files (JSON Lines), in any order")
    imp.add_argument(
        "--finish", action="store_true", help="then reconcile the run (finish_run), as the DAG's last step"
    )


def main(settings, args) -> int:
    from inference.batchapi.offline import export_requests, import_results
    from inference.batchapi.settings import BatchSettings, parse_extra_body, read_prompt
    from inference.batchapi.submit import BatchContext
    from inference.errors import ConfigError
    from inference.pipeline.runtime import Runtime

    if tuple(settings.heads) != ("summary",):
        raise ConfigError(
            "batch-file exports summary requests only: set INFERENCE_HEADS=summary (the DAG and `run` combine "
            "the Batch API's summaries with the local model's other outputs)"
        )
    if args.batch_command == "export":
        run_id = args.run_id or _plan(settings, args.date)
        batch = BatchSettings(
            model=args.model,
            **({"prompt": read_prompt(args.prompt_file)} if args.prompt_file else {}),
            max_tokens=args.max_tokens,
            max_chars=args.max_chars,
            extra_body=parse_extra_body(args.extra_body) if args.extra_body else {},
            max_requests=args.max_requests,
            max_bytes=args.max_bytes,
        )
    else:
        run_id, batch = args.run_id, BatchSettings(model="offline")  # the model is in the files already
    with Runtime(settings) as rt:
        ctx = BatchContext(rt.engine, rt.source, batch, settings.max_attempts)
        if args.batch_command == "export":
            paths = export_requests(ctx, run_id, args.out)
            print(json.dumps({"run_id": run_id, "files": [str(p) for p in paths]}))
            return 0
        summary = import_results(ctx, run_id, args.files).as_dict()
    from inference.errors import RunFailed
    from inference.pipeline import finish_run, load_results

    summary["load"] = load_results(settings, run_id).as_dict()
    if args.finish:
        try:
            summary["finish"] = finish_run(settings, run_id)
        except RunFailed as exc:
            summary["finish"] = exc.summary
            print(json.dumps(summary, sort_keys=True, default=str))
            return 1
    print(json.dumps(summary, sort_keys=True, default=str))
    return 0


def _plan(settings, day: dt.date) -> str:
    from inference.pipeline import plan_run
    from inference.window import window_for_date

    run_id = f"batchfile__{day.isoformat()}__{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S%f}"
    plan_run(settings, run_id, window_for_date(day))
    return run_id


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)
