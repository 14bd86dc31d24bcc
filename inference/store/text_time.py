"""Source timestamps written as text: ISO-8601 (`YYYY-MM-DD[ HH:MM[:SS[.fff]]][Z|+HH:MM]`, as SQLite and most
applications write it) and the shapes help desks, mail systems and spreadsheets export beyond it: RFC 2822 ("Mon,
30 Nov 2026 05:00:00 +0000"), numeric dates with slashes, dots or dashes ("30/11/2026 17:05", "11/30/2026 5:05 PM",
"30.11.2026 17:05", "2026/11/30 17:05:00"), month names ("Nov 30, 2026 5:05 PM", "30-Nov-2026 17:05:00", "30
November 2026") in English and as German, French, Spanish, Italian, Dutch and Portuguese exports write them ("30.
Nov. 2026 17:05 Uhr", "lundi 30 novembre 2026 à 17h05", "30 de noviembre de 2026", "30 dicembre 2026 alle 17:05",
"30 mrt. 2026", "30 de março de 2026"), the clock before the year as C's asctime, Unix `date` and Java's
Date.toString write it ("Mon Nov 30 17:05:00 UTC 2026"), and ISO-8601's basic format as LDAP, iCalendar and SAP
exports write it ("20261130T050000Z", "20261130050000", "20261130").

Strict on purpose: a value is read only when it has exactly one reading. The year has four digits (two-digit
years are refused: which century?), the time is optional (midnight), seconds and a fraction are optional,
AM/PM only with hours 1 to 12, and the zone, if any, is an offset (+0100, +01:00, -05), Z, UTC, GMT, UT or
one of the North American zones RFC 2822 itself defines (EST, EDT, CST, CDT, MST, MDT, PST, PDT); other zone
abbreviations mean different offsets in different countries (IST, CST in China) and are refused. An IANA
zone name ("Europe/Berlin", bare or in brackets) makes the value a local time there; after an offset, as Java
writes it ("2026-11-30T05:00+01:00[Europe/Berlin]"), the offset decides. A value without a zone is a local
time in TICKETS_SOURCE_TIMEZONE (default UTC), as for every other naive timestamp.

Day or month first. A numeric date with the year last ("05/11/2026") reads day-first or month-first. Where
one number is above 12 the value itself tells ("30/11/2026" is day-first); otherwise the column's order is
needed: TICKETS_SOURCE_DATE_ORDER=dmy or mdy. Dotted dates ("05.11.2026") are day-first, as everywhere that
writes them. A column whose values contradict each other (some only day-first, some only month-first) is
refused at start, as is a column with values that could be either while the order is unset.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
import zoneinfo

DATE_ORDERS = ("dmy", "mdy")  # TICKETS_SOURCE_DATE_ORDER

# Month names and their usual abbreviations in English, German, French, Spanish, Italian, Dutch and Portuguese,
# accents folded ("märz" is "marz", "février" "fevrier"): no name or abbreviation means two months
_MONTH_NAMES = (  # January to December
    ("jan", "january", "januar", "janner", "janv", "janvier", "ene", "enero", "gen", "gennaio")
    + ("januari", "janeiro"),
    ("feb", "february", "februar", "fev", "fevr", "fevrier", "febrero", "febbraio", "februari", "fevereiro"),
    ("mar", "march", "marz", "maerz", "mars", "marzo", "mrt", "maart", "marco"),
    ("apr", "april", "avr", "avril", "abr", "abril", "aprile"),
    ("may", "mai", "mayo", "mag", "maggio", "mei", "maio"),
    ("jun", "june", "juni", "juin", "junio", "giu", "giugno", "junho"),
    ("jul", "july", "juli", "juil", "juillet", "julio", "lug", "luglio", "julho"),
    ("aug", "august", "aout", "ago", "agosto", "augustus"),
    ("sep", "sept", "september", "septembre", "septiembre", "setiembre", "set", "settembre", "setembro"),
    ("oct", "october", "okt", "oktober", "octobre", "octubre", "ott", "ottobre", "out", "outubro"),
    ("nov", "november", "novembre", "noviembre", "novembro"),
    ("dec", "december", "dez", "dezember", "decembre", "dic", "diciembre", "dicembre", "dezembro"),
)
_MONTHS = {name: number for number, names in enumerate(_MONTH_NAMES, start=1) for name in names}
_NAMED_ZONES = {  # hours from UTC: the zones RFC 2822 defines, and the names of UTC itself
    "z": 0,
    "ut": 0,
    "utc": 0,
    "gmt": 0,
    "est": -5,
    "edt": -4,
    "cst": -6,
    "cdt": -5,
    "mst": -7,
    "mdt": -6,
    "pst": -8,
    "pdt": -7,
}
_WEEKDAY = (  # English; German, French, Spanish, Italian, Dutch, Portuguese (accents folded); then ".", ","
    r"(?:(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|nesday|sday|urday)?"
    r"|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonnabend|sonntag|mo|di|mi|do|fr|sa|so"
    r"|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche|lun|mar|mer|jeu|ven|sam|dim"
    r"|lunes|martes|miercoles|jueves|viernes|sabado|domingo|mie|jue|vie|sab|dom"
    r"|lunedi|martedi|mercoledi|giovedi|venerdi|domenica|gio"
    r"|maandag|dinsdag|woensdag|donderdag|vrijdag|zaterdag|zondag|ma|wo|vr|za|zo"
    r"|(?:segunda|terca|quarta|quinta|sexta)(?:-feira)?|seg|ter|qua|qui|sex)\.?,?\s*"
)
_MONTH = r"[a-z]{3,10}"
_ORDINAL = r"(?:st|nd|rd|th|er)?\.?"  # 30th, 1er (French), 30. (German)
_OF = r"(?:de\s+)?"  # "30 de noviembre de 2026" (Spanish, Portuguese)
_DATE = (
    r"(?:(?P<ymd_y>\d{4})(?P<ymd_s>[-/.])(?P<ymd_m>\d{1,2})(?P=ymd_s)(?P<ymd_d>\d{1,2})"  # 2026-11-30, 2026/11/30
    r"|(?P<num_a>\d{1,2})(?P<num_s>[-/.])(?P<num_b>\d{1,2})(?P=num_s)(?P<num_y>\d{4})"  # 30/11/2026, 11/30/2026
    rf"|(?P<dmon_d>\d{{1,2}}){_ORDINAL}[\s-]+{_OF}(?P<dmon_m>{_MONTH})\.?,?[\s-]+{_OF}(?P<dmon_y>\d{{4}})"  # 30 Nov 2026
    rf"|(?P<mon_m>{_MONTH})\.?[\s-]+(?P<mon_d>\d{{1,2}}){_ORDINAL},?[\s-]+(?P<mon_y>\d{{4}}))"  # Nov 30, 2026
)
_CLOCK = r"(?P<hour>\d{1,2})[:h](?P<minute>\d{2})(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d+))?)?"  # 17:05, 17h05
_AT = r"(?:at|um|a|as|a\s+las|alle|om|kl\.?)\s+"  # "at", and (accents folded) um, à, às, a las, alle, om, kl.
_TIME = rf"(?:(?:\s*[T,]\s*|\s+(?:{_AT})?){_CLOCK}(?:\s*(?P<half>[ap])\.?m\.?(?![a-z])|\s*uhr)?)?"
_IANA = r"[a-z]+(?:/[a-z0-9_+-]+)+"  # Europe/Berlin, America/Argentina/Buenos_Aires
_ZONE = (
    r"(?:\s*(?:(?P<sign>[+-])(?P<zh>\d{2}):?(?P<zm>\d{2})?"
    rf"|(?P<name>{'|'.join(_NAMED_ZONES)})"
    r"(?:\s*(?P<nsign>[+-])(?P<nzh>\d{1,2})(?::?(?P<nzm>\d{2}))?)?"
    rf"|\[?(?P<iana>{_IANA})\]?)"
    # after an offset, a comment as mail writes it ("+0000 (UTC)") or the zone's name as Java writes it
    # ("+01:00[Europe/Berlin]"): the offset decides
    rf"(?:\s*\([a-z ]{{1,40}}\)|\[{_IANA}\])?)?"
)
_TEXT_TIME = re.compile(rf"\s*(?:{_WEEKDAY})?{_DATE}{_TIME}{_ZONE}\s*", re.IGNORECASE)
# the clock before the year, as C's asctime, Unix `date` and Java's Date.toString write it:
# "Mon Nov 30 05:00:00 2026", "Mon Nov 30 05:00:00 UTC 2026"
_CLOCK_FIRST = re.compile(
    rf"\s*(?:{_WEEKDAY})?(?P<mon_m>{_MONTH})\.?\s+(?P<mon_d>\d{{1,2}})\s+{_CLOCK}{_ZONE}\s+(?P<mon_y>\d{{4}})\s*",
    re.IGNORECASE,
)


# ISO-8601's basic format, as LDAP (GeneralizedTime), iCalendar and SAP exports write it: "20261130",
# "20261130T050000Z", "20261130050000", "202611300500+0100"
_BASIC = re.compile(
    r"\s*(?P<ymd_y>\d{4})(?P<ymd_m>\d{2})(?P<ymd_d>\d{2})"
    r"(?:T?(?P<hour>\d{2})(?P<minute>\d{2})(?:(?P<second>\d{2})(?:[.,](?P<fraction>\d+))?)?)?"
    r"(?:(?P<sign>[+-])(?P<zh>\d{2})(?P<zm>\d{2})?|(?P<name>z))?\s*",
    re.IGNORECASE,
)


def _fold(text: str) -> str:
    """Accents folded ("März" is "Marz", "à" is "a"), so that month and weekday names match as exports write
    them with or without; digits, signs and ASCII letters are left as they are."""
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _fields(text: str) -> dict[str, str | None] | None:
    """The named parts of a text timestamp in one of the shapes, or None."""
    text = _fold(text)
    m = _TEXT_TIME.fullmatch(text) or _CLOCK_FIRST.fullmatch(text) or _BASIC.fullmatch(text)
    return m.groupdict() if m else None


def _year_last(m: dict[str, str | None]) -> tuple[int, int, int] | None:
    """A numeric date with the year last and slashes or dashes: its two numbers and the year; else None."""
    if m.get("num_y") is None or m.get("num_s") == ".":
        return None
    return int(m.get("num_a")), int(m.get("num_b")), int(m.get("num_y"))


def _orders(a: int, b: int) -> tuple[str, ...]:
    """The date orders in which the numbers a/b are a day and a month."""
    return tuple(order for order, (day, month) in (("dmy", (a, b)), ("mdy", (b, a))) if 1 <= month <= 12 and day >= 1)


def parse_text_time(text: str, order: str | None = None) -> dt.datetime:
    """The datetime a text timestamp means (naive unless it carries a zone). `order`: dmy or mdy, for numeric
    dates with the year last that the text alone cannot tell. ValueError for anything without one reading."""
    m = _fields(text)
    if m is None:
        raise ValueError("not a readable timestamp")
    return _parse(m, order)


def reading(text: str, order: str | None = None) -> str:
    """How a column's value reads, for the start-of-run check: "unreadable"; "dmy" or "mdy" (a numeric date
    that reads only in that order, the order unset); "either" (it reads in both: the order must be set); or
    "read" (any other readable value)."""
    m = _fields(text)
    numbers = _year_last(m) if m else None
    wanted = order
    if numbers is not None and order is None:
        orders = _orders(numbers[0], numbers[1])
        if len(orders) == 2:
            return "either"
        wanted = orders[0] if orders else None
    try:
        if m is None:
            raise ValueError
        _parse(m, wanted)
    except (ValueError, OverflowError):
        return "unreadable"
    return wanted if numbers is not None and order is None else "read"


def _parse(m: dict[str, str | None], order: str | None) -> dt.datetime:
    year, month, day = _date(m, order)
    hour, minute, second, micro = _clock(m)
    return dt.datetime(year, month, day, hour, minute, second, micro, tzinfo=_zone(m))


def _date(m: dict[str, str | None], order: str | None) -> tuple[int, int, int]:
    if m.get("ymd_y") is not None:
        return int(m.get("ymd_y")), int(m.get("ymd_m")), int(m.get("ymd_d"))
    if m.get("num_y") is not None:
        a, b, year = int(m.get("num_a")), int(m.get("num_b")), int(m.get("num_y"))
        if m.get("num_s") == ".":  # day-first
            return year, b, a
        orders = _orders(a, b)
        if order is not None:
            orders = (order,) if order in orders else ()
        if len(orders) != 1:
            raise ValueError("day-first or month-first: the date order is needed" if orders else "not a date")
        return (year, b, a) if orders[0] == "dmy" else (year, a, b)
    name, day, year = (
        (m.get("dmon_m"), m.get("dmon_d"), m.get("dmon_y"))
        if m.get("dmon_m")
        else (m.get("mon_m"), m.get("mon_d"), m.get("mon_y"))
    )
    month = _MONTHS.get(name.lower())
    if month is None:
        raise ValueError("not a month name")
    return int(year), month, int(day)


def _clock(m: dict[str, str | None]) -> tuple[int, int, int, int]:
    if m.get("hour") is None:
        return 0, 0, 0, 0
    hour, minute, second = int(m.get("hour")), int(m.get("minute")), int(m.get("second") or 0)
    if m.get("half"):
        if not 1 <= hour <= 12:
            raise ValueError("AM/PM with an hour outside 1-12")
        hour = hour % 12 + (12 if m.get("half").lower() == "p" else 0)
    micro = int((m.get("fraction") or "0")[:6].ljust(6, "0"))
    return hour, minute, second, micro


def _zone(m: dict[str, str | None]) -> dt.tzinfo | None:
    if m.get("iana"):
        try:
            return zoneinfo.ZoneInfo(m["iana"])  # a local time there (its first occurrence at a DST change)
        except (ValueError, zoneinfo.ZoneInfoNotFoundError):
            raise ValueError("not a time zone name") from None
    if m.get("sign"):
        hours, minutes, sign = int(m.get("zh")), int(m.get("zm") or 0), m.get("sign")
    elif m.get("name"):
        base = _NAMED_ZONES[m.get("name").lower()]
        if not m.get("nsign"):
            return dt.timezone(dt.timedelta(hours=base))
        if base != 0 or m.get("name").lower() == "z":  # "UTC+1", "GMT-05:00"; never "EST+1" or "Z+1"
            raise ValueError("an offset after a named zone other than UTC")
        hours, minutes, sign = int(m.get("nzh")), int(m.get("nzm") or 0), m.get("nsign")
    else:
        return None
    if hours > 14 or minutes > 59:
        raise ValueError("an offset beyond 14 hours")
    offset = dt.timedelta(hours=hours, minutes=minutes)
    return dt.timezone(-offset if sign == "-" else offset)


TEXT_SHAPES = (  # for messages
    "ISO-8601 text, RFC 2822 text, a numeric date with slashes, dots or dashes and a four-digit year, or a "
    "month name (English, German, French, Spanish, Italian, Dutch or Portuguese), each with an optional time and zone, ISO-8601's basic format (20261130T050000Z), or a "
    "Unix time written as digits (README: Text timestamps in other shapes)"
)
