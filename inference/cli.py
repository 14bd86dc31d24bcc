"""`python -m inference seed|run|status|retention|db`: the pipeline's steps without Airflow."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys

from inference.config import settings_from_env
from inference.errors import ConfigError, InferenceError, InvalidOptions
from inference.options import OPTIONS
from inference.settings_spec import logical_date
from inference.window import last_complete_window, window_for_date

EXIT_FAILED, EXIT_USAGE = 1, 2


def _day(text: str) -> dt.date:
    try:
        return logical_date("date", text)
    except InvalidOptions as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _option_value(spec):
    """argparse `type` of a run option's flag: a bad value is refused at once, with the option's message."""

    def parse(text: str):
        try:
            return spec.from_text(text)
        except InvalidOptions as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _add_run_options(run: argparse.ArgumentParser) -> None:
    """One flag per run option that declares one (inference.options.RunOptions)."""
    for name, spec in OPTIONS.items():
        if spec.flag is None:
            continue
        if spec.kind == "bool":
            run.add_argument(spec.flag, dest=name, action="store_true", help=spec.help)
        else:
            action = "append" if spec.kind == "ids" else "store"
            metavar = "ID" if spec.kind == "ids" else "N"
            run.add_argument(
                spec.flag, dest=name, action=action, type=_option_value(spec), metavar=metavar, help=spec.help
            )


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m inference", description=__doc__)
    p.add_argument("--db", help="SQLAlchemy URL of the tickets database (default: TICKETS_DB_URL or .data/tickets.db)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    seed = sub.add_parser("seed", help="create a deterministic synthetic backlog in the demo `tickets` table")
    seed.add_argument("--tickets", type=_positive, default=2000, help="how many tickets (default 2000)")
    seed.add_argument("--days", type=_positive, default=1, help="spread over this many nightly windows (default 1)")
    seed.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    seed.add_argument("--date", type=_day, help="logical date of the last window (default: the last complete one)")
    seed.add_argument("--start-id", type=_positive, default=1, help="first ticket ID (default 1)")

    run = sub.add_parser("run", help="run the whole pipeline for one nightly window")
    run.add_argument(
        "--date", type=_day, help="logical date D: window [D 02:00, D+1 02:00) UTC (default: last complete)"
    )
    run.add_argument("--run-id", help="run ID (default: cli__<date>__<UTC timestamp>)")
    _add_run_options(run)

    bench = sub.add_parser(
        "bench", help="throughput against peers, write rates, load, memory, overhead (BENCHMARKS.md)"
    )
    from inference.bench.cli_args import add_arguments as add_bench_arguments

    add_bench_arguments(bench)

    ev = sub.add_parser("eval", help="category accuracy on a labelled set (default: the held-out evaluation set)")
    ev.add_argument(
        "--set", default="eval", help="eval, dev (cross-validated) or a labelled JSON Lines or CSV/TSV file"
    )
    ev.add_argument("--label-column", default="label", help="the label's key or column in --set FILE (default: label)")
    ev.add_argument("--body-column", default="body", help="the body's key or column in --set FILE (default: body)")
    ev.add_argument(
        "--subject-column",
        help="the subject's key or column in --set FILE (default: subject, if there); none: no subject",
    )
    ev.add_argument(
        "--group-column",
        help="also break accuracy down by this key or column of --set FILE (a queue, a public set's intent)",
    )
    ev.add_argument(
        "--lang-column",
        help="the ticket's language in --set FILE, for the per-language table (default: lang, else language, if there)",
    )
    ev.add_argument(
        "--label-map",
        help="read the file's labels as the head's: 'Payments=billing,Login=account_access,Other=-' "
        "(-: leave those tickets out) or a JSON file of {their label: head label or null}",
    )
    ev.add_argument("--json", action="store_true", help="machine-readable output")
    ev.add_argument("--summaries", action="store_true", help="also the summary shares (greeting, quote, agreement)")

    from inference.fit_categories import add_parser as add_fit_categories

    add_fit_categories(sub)

    status = sub.add_parser("status", help="recent runs and open failures")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--limit", type=_positive, default=10, help="how many runs (default 10)")

    keep = sub.add_parser(
        "retention",
        help="mark abandoned runs failed and delete the bookkeeping of old runs (also done by every run's finish)",
    )
    keep.add_argument(
        "--days",
        type=int,
        help="keep runs planned within this many days (default: INFERENCE_RETENTION_DAYS; 0 keeps all)",
    )
    keep.add_argument("--abandoned-after-hours", type=_positive, help="default: INFERENCE_ABANDONED_AFTER_HOURS")
    keep.add_argument("--dry-run", action="store_true", help="count what would be deleted; change nothing")

    report = sub.add_parser("report", help="a run's report: counts, step times, throughput, batch sizes, drift, cost")
    report.add_argument("run_id", nargs="?", metavar="RUN_ID", help="the run (default: the latest)")
    report.add_argument("--format", choices=("text", "md", "html", "json"), default="text", help="default text")
    report.add_argument("--output", "-o", help="write it to this file instead of stdout")

    db = sub.add_parser("db", help="schema revision of the inference tables: upgrade, current, downgrade")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="migrate to this code's revision (or REVISION); back the database up first")
    up.add_argument("revision", nargs="?", default="head", help="target revision (default: head)")
    db_sub.add_parser("current", help="the revision the database is at, and the one this code needs")
    down = db_sub.add_parser("downgrade", help="migrate down to REVISION (to run an older release)")
    down.add_argument("revision", help="target revision, e.g. 0001 (base: drop every table, needs --drop-tables)")
    down.add_argument("--drop-tables", action="store_true", help="allow `base`: drops the tables and their data")

    from inference.batchapi.cli import add_parser as add_batch_file

    add_batch_file(sub, _day)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        settings = settings_from_env(db_url=args.db)
        commands = {"seed": _seed, "run": _run, "status": _status, "bench": _bench, "eval": _eval, "db": _db}
        commands["retention"] = _retention
        commands["batch-file"] = _batch_file
        commands["fit-categories"] = _fit_categories
        commands["report"] = _report_command
        if args.command == "run" and sys.stderr.isatty():
            from inference.pipeline.progress import use_terminal_bar

            use_terminal_bar()  # progress lines become one bar redrawn in place
        return commands[args.command](settings, args)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except InferenceError as exc:  # SchemaOutdated, DatabaseUnavailable, ...: the message and what to do
        return _print_error(exc)
    except Exception as exc:  # noqa: BLE001 - a database refusing or full: one line, never a row or a traceback
        from inference.store.db import database_error

        ours = database_error(exc)
        if ours is not None:
            return _print_error(ours)
        if isinstance(exc, RuntimeError | LookupError):
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        raise


def _print_error(exc: InferenceError) -> int:
    print(f"error: {exc}" + (f"\nto fix it: {exc.remedy}" if exc.remedy else ""), file=sys.stderr)
    return EXIT_FAILED


def _batch_file(settings, args) -> int:
    from inference.batchapi.cli import main as batch_file

    return batch_file(settings, args)


def _default_day() -> dt.date:
    return last_complete_window(dt.datetime.now(dt.UTC)).start.date()


def _seed(settings, args) -> int:
    from inference.seed import seed_backlog
    from inference.store.db import make_engine

    last = args.date or _default_day()
    windows = [window_for_date(last - dt.timedelta(days=k)) for k in reversed(range(args.days))]
    engine = make_engine(settings.db_url)
    try:
        n = seed_backlog(engine, args.tickets, windows, seed=args.seed, start_id=args.start_id)
    finally:
        engine.dispose()
    print(json.dumps({"seeded": n, "from": windows[0].start.isoformat(), "to": windows[-1].end.isoformat()}))
    return 0


def _run(settings, args) -> int:
    from inference.errors import RunFailed
    from inference.options import parse_options
    from inference.pipeline import run_window

    day = args.date or _default_day()
    run_id = args.run_id or f"cli__{day.isoformat()}__{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S%f}"
    options = parse_options({name: getattr(args, name) for name, spec in OPTIONS.items() if spec.flag})
    try:
        summary = run_window(settings, run_id, window_for_date(day), options)
    except RunFailed as exc:
        print(json.dumps(exc.summary, sort_keys=True))
        return EXIT_FAILED
    print(json.dumps(summary, sort_keys=True))
    return 0


def _status(settings, args) -> int:
    from inference.status import collect, render

    report = collect(settings, args.limit)
    print(json.dumps(report, sort_keys=True) if args.json else render(report))
    return 0


def _report_command(settings, args) -> int:
    from pathlib import Path

    from inference.report import build, render
    from inference.store.db import check_connection, make_engine

    engine = make_engine(settings.db_url)
    try:
        check_connection(engine)
        report = build(
            engine,
            args.run_id,
            price_per_device_hour=settings.device_hour_price,
            max_batch_size=settings.max_batch_size,
        )
    finally:
        engine.dispose()
    text = render(report, args.format)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    return 0


def _bench(settings, args) -> int:
    from inference.bench.runner import render, run

    print(render(run(settings, args)))
    return 0


def _eval(settings, args) -> int:
    from inference.evaluate import evaluate, render
    from inference.label_map import parse
    from inference.labelled_files import Columns

    columns = Columns.from_flags(
        args.label_column, args.body_column, args.subject_column, args.group_column, args.lang_column
    )
    label_map = parse(args.label_map)
    report = evaluate(settings, args.set, summaries=args.summaries, columns=columns, label_map=label_map)
    print(json.dumps(report, sort_keys=True) if args.json else render(report))
    return 0


def _retention(settings, args) -> int:
    from inference.store import migrate
    from inference.store.db import check_connection, make_engine
    from inference.store.retention import Housekeeping, abandon_dead_runs, apply_retention

    days = settings.retention_days if args.days is None else args.days
    if days < 0:
        raise ConfigError(f"--days must be 0 or more, got {days}")
    hours = args.abandoned_after_hours or settings.abandoned_after_hours
    engine = make_engine(settings.db_url)
    try:
        check_connection(engine)
        migrate.check_current(engine)
        dead = Housekeeping() if args.dry_run else abandon_dead_runs(engine, after_hours=hours)
        done = apply_retention(engine, days=days, dry_run=args.dry_run)
        done.abandoned, done.staging_removed, done.items_replanned = (
            dead.abandoned,
            dead.staging_removed,
            dead.items_replanned,
        )
    finally:
        engine.dispose()
    print(json.dumps({"retention_days": days, "dry_run": args.dry_run, **done.as_dict()}, sort_keys=True))
    return 0


def _fit_categories(settings, args) -> int:
    from inference.fit_categories import main as fit_categories

    return fit_categories(settings, args)


def _db(settings, args) -> int:
    from inference.store import migrate
    from inference.store.db import check_connection, make_engine

    engine = make_engine(settings.db_url)
    try:
        check_connection(engine)
        if args.db_command == "upgrade":
            before = migrate.state(engine).current
            after = migrate.upgrade(engine, args.revision)
            print(f"schema revision: {before or 'none'} -> {after or 'none'}")
        elif args.db_command == "downgrade":
            before = migrate.state(engine).current
            after = migrate.downgrade(engine, args.revision, drop_tables=args.drop_tables)
            print(f"schema revision: {before or 'none'} -> {after or 'none'}")
        else:
            found = migrate.state(engine)
            problem = found.problem()
            print(f"database: {found.current or 'none recorded'}")
            print(f"code:     {found.head} (knows {', '.join(migrate.revisions())})")
            print("up to date" if problem is None else f"not usable as it is: {problem}")
    finally:
        engine.dispose()
    return 0
