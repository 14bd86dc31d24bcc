"""A labelled file's own labels read as the category head's (`python -m inference eval --label-map`).

A help desk's history is labelled with its own queues ("Payments", "Login problems", "Other"), and a public
set with its publisher's. To score the head on it, each label must be one of the head's or be left out:

- a label that is one of the head's is kept;
- `--label-map` names the others: "Payments=billing,Login problems=account_access,Other=-" (`-`: leave those
  tickets out), or a JSON file {"Payments": "billing", "Other": null};
- a label written differently but meaning the same ("Account Access", "BILLING", "feature-request") is read as
  that head label without being named;
- `*` names every other label at once ("*=-": leave out all the rest, as for a public set of which only some
  intents have a place in the taxonomy); the output counts what was left out, label by label;
- any other label is an error naming it, with the option to use: nothing is guessed or dropped silently.

`fit-categories --label-map` takes the same map to merge, rename or leave out a history's queues before it fits
a head ("Billing EU=billing,Billing US=billing,Spam=-"); there any label may be a target, and a label the map
does not name is kept as it is.

Labels are queue names, so messages and reports show them, except a label that may be ticket text (over 40
characters, or a column with a value per ticket, named by mistake): that is counted, never shown.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from inference.errors import ConfigError
from inference.labelled_files import looks_per_ticket

LEAVE_OUT = "-"
REST = "*"  # every label not otherwise read


@dataclass
class LabelReading:
    """How each label of a file was read: `to` maps it to a head label or None (left out)."""

    to: dict[str, str | None] = field(default_factory=dict)
    left_out: Counter = field(default_factory=Counter)  # label -> tickets left out
    tickets: Counter = field(default_factory=Counter)  # label -> tickets

    def notes(self) -> dict:
        """What was read as what, for reports, --json and a fitted head's record. A label that may be ticket
        text (`shown_label`, or every label when the column has a value per ticket) is counted, not named."""
        per_ticket = looks_per_ticket(list(self.tickets.elements()))
        moved = [k for k, v in sorted(self.to.items()) if v != k]
        shown = [k for k in moved if not per_ticket and shown_label(k) == k]
        hidden = [k for k in moved if k not in shown]
        out: dict = {
            "read_as": {k: self.to[k] for k in shown if self.to[k] is not None},
            "left_out": {k: self.left_out[k] for k in shown if self.to[k] is None},
        }
        if hidden:
            out["not_shown"] = {
                "labels": len(hidden),
                "tickets_read": sum(self.tickets[k] for k in hidden if self.to[k] is not None),
                "tickets_left_out": sum(self.tickets[k] for k in hidden if self.to[k] is None),
            }
        return out


def parse(spec: str | None) -> dict[str, str | None]:
    """--label-map: a JSON file of {their label: head label or null}, or "their=ours,other=-" inline."""
    if not spec:
        return {}
    path = Path(spec)
    if path.suffix.lower() == ".json" or ("=" not in spec and _is_file(path)):
        if not path.is_file():
            raise ConfigError(f"--label-map {spec}: no such file")
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ConfigError(f"--label-map {spec}: not a JSON object of their label -> head label") from None
        if not isinstance(data, dict) or not all(v is None or isinstance(v, str) for v in data.values()):
            raise ConfigError(f"--label-map {spec}: not a JSON object of their label -> head label (or null)")
        return {str(k).strip(): _target(v) for k, v in data.items()}
    out: dict[str, str | None] = {}
    for part in filter(str.strip, spec.split(",")):
        theirs, eq, ours = part.rpartition("=")
        if not eq or not theirs.strip() or not ours.strip():
            raise ConfigError(
                f"--label-map: {part.strip()!r} is not THEIR=OURS (e.g. 'Payments=billing,Other=-', or a JSON file)"
            )
        out[theirs.strip()] = _target(ours)
    return out


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # e.g. a name too long to be a file: an inline map
        return False


def _target(value: str | None) -> str | None:
    value = None if value is None else value.strip()
    return None if value in (None, "", LEAVE_OUT) else value


def _spelling(label: str) -> str:
    return re.sub(r"[\s\-/.]+", "_", label.strip().casefold()).strip("_")


def read(labels: list[str], head_labels: list[str], mapping: dict[str, str | None], source: str) -> LabelReading:
    """How to read each of `labels` (one per ticket) as a head label; refuses what it cannot read."""
    wrong = sorted(f"{k}={v}" for k, v in mapping.items() if v is not None and v not in head_labels)
    if wrong:
        raise ConfigError(
            f"--label-map: {', '.join(wrong)}: not labels of the category head ({', '.join(head_labels)}; "
            f"'{LEAVE_OUT}' leaves a label's tickets out)"
        )
    by_spelling: dict[str, list[str]] = {}
    for label in head_labels:
        by_spelling.setdefault(_spelling(label), []).append(label)
    reading = LabelReading()
    unknown: Counter = Counter()
    for label, n in Counter(labels).items():
        reading.tickets[label] = n
        if label.strip() in mapping:  # keys are stripped when parsed; a value may carry a stray space
            reading.to[label] = mapping[label.strip()]
        elif label in head_labels:
            reading.to[label] = label
        elif len(by_spelling.get(_spelling(label), [])) == 1:
            reading.to[label] = by_spelling[_spelling(label)][0]
        elif REST in mapping:
            reading.to[label] = mapping[REST]
        else:
            unknown[label] = n
            continue
        if reading.to[label] is None:
            reading.left_out[label] = n
    if unknown and looks_per_ticket(list(unknown.elements())):  # the text or id column named as the labels
        raise ConfigError(
            f"{source}: {len(unknown)} distinct labels among {sum(unknown.values())} tickets are not labels of the "
            "category head: is --label-column the column of labels? (its values are not shown: they may be text)"
        )
    if unknown:
        shown = ", ".join(f"{shown_label(label)} ({n})" for label, n in sorted(unknown.items()))
        raise ConfigError(
            f"{source}: labels {shown} are not labels of the category head ({', '.join(head_labels)}): name what "
            f"each is with --label-map 'THEIR=OURS,...' ('{LEAVE_OUT}' leaves its tickets out)"
        )
    return reading


def shown_label(label: str) -> str:
    """A label as an error may show it: queue names are short; a long one may be ticket text, so only its size."""
    return label if len(label) <= 40 and "\n" not in label else f"<a label of {len(label)} characters, not shown>"


def relabel(labels: list[str], mapping: dict[str, str | None]) -> LabelReading:
    """`fit-categories --label-map`: each label read through the map (None: left out); unnamed labels are kept."""
    reading = LabelReading()
    for label, n in Counter(labels).items():
        reading.tickets[label] = n
        key = label.strip()
        target = mapping[key] if key in mapping else mapping[REST] if REST in mapping else label
        reading.to[label] = target
        if target is None:
            reading.left_out[label] = n
    return reading


def describe(notes: dict) -> list[str]:
    """`LabelReading.notes()` as lines of a report (at most 12 labels a line)."""

    def listed(items: list[str], most: int = 12) -> str:
        more = f", and {len(items) - most} more (--json lists them)" if len(items) > most else ""
        return ", ".join(items[:most]) + more

    lines = []
    if notes.get("read_as"):
        lines.append("labels read as: " + listed([f"{k} -> {v}" for k, v in notes["read_as"].items()]))
    if notes.get("left_out"):
        left = notes["left_out"]
        shown = listed([f"{k} {n}" for k, n in left.items()])
        lines.append(f"left out: {sum(left.values())} tickets whose label maps to none ({shown})")
    if notes.get("not_shown"):
        hidden = notes["not_shown"]
        lines.append(
            f"not shown: {hidden['labels']} labels that may be ticket text (over 40 characters, or one per ticket: is "
            f"--label-column the column of labels?); {hidden['tickets_read']} of their tickets read, "
            f"{hidden['tickets_left_out']} left out"
        )
    return lines
