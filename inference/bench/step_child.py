"""One pipeline step in a fresh process, for the benchmarks: prints one JSON line with the step's wall time,
the process's CPU time over the step (all its threads, and a writer process it waited for; not the database
server's), its summary (counts only), the process's peak RSS (VmHWM: this process did nothing but this step) and
the writer process's own (`writer_peak_rss_mib`, reported by the writer itself: INFERENCE_WRITER=process; else
None).

python -m inference.bench.step_child STEP --db URL --run-id R [--shard K] [--engine model|standin|instant]
    [--date YYYY-MM-DD] [--shards N] [--fail-every N] [--stage-only] [--serial]
STEP: plan_run, infer_shard, load_results, has_retries, retry_failed, finish_run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import threading
import time

from inference.bench.rss import children_cpu_seconds

ENGINES = ("model", "standin", "instant")


def predictor_for(settings, engine: str, fail_every: int = 0):
    """None (the step loads the real model itself), the stand-in encoder with the real heads, or instant."""
    if engine == "model":
        return None
    from inference.modelinfo import model_version

    version = model_version(settings)
    if engine == "standin":
        from inference.engine.standin import StandInEncoder
        from inference.predictor import build_predictor

        return build_predictor(settings, StandInEncoder(max_length=settings.max_seq_length), version)
    from inference.bench.instant import instant_predictor

    return instant_predictor(settings, version, fail_every)


class _Clock:
    def __init__(self) -> None:
        self.seconds, self.lock = 0.0, threading.Lock()
        self.writers: list = []  # WriteProcess instances of the step (INFERENCE_WRITER=process)


@contextlib.contextmanager
def _commit_clock():
    """Time spent in infer_step.commit (the write-behind thread's transactions: take the items, stage or load
    the chunk, settle, record failures and the chunk's metrics), summed over the shard. Benchmark only."""
    from inference.pipeline import infer_step

    clock, original = _Clock(), infer_step.commit

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            with clock.lock:  # the write-behind thread, and the main thread for items redone one at a time
                clock.seconds += time.perf_counter() - started

    infer_step.commit = timed
    from inference.pipeline import writer_process

    original_init = writer_process.WriteProcess.__init__

    def counted_init(self, job, on_written):  # INFERENCE_WRITER=process: the child times its transactions
        def on_written_timed(written):
            with clock.lock:
                clock.seconds += written.seconds
            on_written(written)

        original_init(self, job, on_written_timed)
        clock.writers.append(self)

    writer_process.WriteProcess.__init__ = counted_init
    try:
        yield clock
    finally:
        infer_step.commit = original
        writer_process.WriteProcess.__init__ = original_init


@contextlib.contextmanager
def _serial():
    """infer_shard reading, running and committing one chunk after another on one thread, no read-ahead, no
    write-behind (benchmark only, `--serial`): the chunk transactions' rate with nothing of the shard's beside
    them to compete for the cores and the GIL."""
    from inference.pipeline import infer_step
    from inference.pipeline.overlap import WriteInline

    saved = infer_step.prefetched, infer_step.WriteBehind
    infer_step.prefetched, infer_step.WriteBehind = (lambda pages, depth=2: pages), WriteInline
    try:
        yield
    finally:
        infer_step.prefetched, infer_step.WriteBehind = saved


def run(args) -> dict:
    from inference import pipeline
    from inference.config import settings_from_env
    from inference.errors import RunFailed
    from inference.options import RunOptions
    from inference.window import window_for_date

    settings = settings_from_env(db_url=args.db)
    started, cpu_started = time.perf_counter(), time.process_time()
    children_started = children_cpu_seconds()
    if args.step == "plan_run":
        options = RunOptions(shards=args.shards) if args.shards else None
        window = window_for_date(dt.date.fromisoformat(args.date))
        specs = pipeline.plan_run(settings, args.run_id, window, options)
        result = {"shards": len(specs), "tickets": sum(s.tickets for s in specs)}
    elif args.step == "infer_shard":
        predictor = predictor_for(settings, args.engine, args.fail_every)
        load = not args.stage_only  # as the DAG and the CLI run it: each chunk loaded as it commits
        with _commit_clock() as clock, _serial() if args.serial else contextlib.nullcontext():
            result = pipeline.infer_shard(settings, args.run_id, args.shard, predictor=predictor, load=load).as_dict()
        result["commit_seconds"] = round(clock.seconds, 3)
        peaks = [w.peak_rss_mib for w in clock.writers if w.peak_rss_mib is not None]
        result["writer_peak_rss_mib"] = max(peaks) if peaks else None
    elif args.step == "retry_failed":
        result = pipeline.retry_failed(settings, args.run_id, predictor=predictor_for(settings, args.engine)).as_dict()
    elif args.step == "load_results":
        result = pipeline.load_results(settings, args.run_id).as_dict()
    elif args.step == "has_retries":
        result = {"retries": pipeline.has_retries(settings, args.run_id)}
    elif args.step == "finish_run":
        try:
            summary = pipeline.finish_run(settings, args.run_id)
        except RunFailed as exc:
            summary = exc.summary
        keys = ("status", "backlog", "succeeded", "failed", "skipped", "housekeeping")
        result = {k: summary.get(k) for k in keys}
    else:
        raise SystemExit(f"unknown step {args.step}")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    cpu += children_cpu_seconds() - children_started  # a writer process (INFERENCE_WRITER=process), once joined
    return {
        "step": args.step,
        "shard": args.shard,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "result": result,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("step")
    p.add_argument("--db", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--shard", type=int, default=-1)
    p.add_argument("--engine", choices=ENGINES, default="model")
    p.add_argument("--date", default="2026-11-30")
    p.add_argument("--shards", type=int, default=0)
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--stage-only", action="store_true", help="infer_shard: leave the chunks staged for load_results")
    p.add_argument("--serial", action="store_true", help="infer_shard: one chunk after another on one thread")
    args = p.parse_args()
    out = run(args)
    from inference.bench.rss import peak_rss_mib

    out["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
