"""One pipeline step in a fresh interpreter, with the stand-in encoder; prints one JSON line with its memory.

python -m tests.support.memory_child STEP DB_URL RUN_ID [TABLE]
STEP: plan_run, infer_shard (shard 0), load_results. The window is 2026-11-30's.

`baseline_mib` is the resident memory once everything is imported and set up, just before the step;
`peak_mib` the high-water mark (VmHWM) after it, reset just before the step where the kernel allows
(/proc/self/clear_refs), so `growth_mib` is what the step itself added at its worst moment.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import sys


def _status(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def main(argv: list[str]) -> None:
    step, url, run_id = argv[:3]
    table = argv[3] if len(argv) > 3 else "tickets"

    from inference.config import Settings, SourceColumns
    from inference.engine.standin import StandInEncoder
    from inference.pipeline import infer_shard, load_results, plan_run
    from inference.predictor import build_predictor
    from inference.window import window_for_date

    settings = Settings(
        db_url=url,
        device="cpu",
        heads=("embedding",),
        model_version="standin@memory",
        cache_dir="",
        source=SourceColumns(table=table),
    )
    predictor = build_predictor(settings, StandInEncoder(), settings.model_version)
    window = window_for_date(dt.date(2026, 11, 30))
    gc.collect()
    baseline = _status("VmRSS")
    reset = _reset_peak()
    if step == "plan_run":
        result = {"shards": len(plan_run(settings, run_id, window))}
    elif step == "infer_shard":
        result = infer_shard(settings, run_id, 0, predictor=predictor).as_dict()
    elif step == "load_results":
        result = load_results(settings, run_id).as_dict()
    else:
        raise SystemExit(f"unknown step {step}")
    peak = _status("VmHWM")
    out = {
        "step": step,
        "baseline_mib": round(baseline, 1),
        "peak_mib": round(peak, 1),
        "growth_mib": round(peak - baseline, 1),
        "peak_reset": reset,
        "result": {k: v for k, v in result.items() if isinstance(v, int | float | str)},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
