"""Low-level readers: CSV records with their start lines, JSON Lines, whole-file JSON lists."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from contamscope.data.records import RowError
from contamscope.errors import DataError
from contamscope.wording import json_error

__all__ = [
    "TABLE_SUFFIXES",
    "csv_rows",
    "csv_table",
    "read_table",
    "table_delimiter",
    "table_suffix",
    "decode_text",
    "not_a_file",
    "jsonl_lines",
    "json_object",
    "load_json_list",
    "json_list_lines",
    "header_text",
]

_CSV_FIELD_LIMIT = 2**31 - 1
"""Long C-Eval / CMMLU texts exceed the csv module's default 128 KiB field limit."""


_UTF8_BOM = b"\xef\xbb\xbf"
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_PACKED = (
    (b"\x1f\x8b", "gzip-compressed file"),
    (b"PK\x03\x04", "zip archive (or an .xlsx workbook: save it as CSV)"),
    (b"BZh91AY&SY", "bzip2-compressed file"),
    (b"\xfd7zXZ\x00", "xz-compressed file"),
    (b"(\xb5/\xfd", "zstd-compressed file"),
)
"""Magic bytes of compressed files and archives: a file of such bytes is no data text."""


def not_a_file(path: Path) -> str:
    """Why ``path``, which is neither a regular file nor a folder, cannot be read as data: a
    pipe would block until something writes to it, and a device is no data file.

    >>> not_a_file(Path("/no/such/file.csv"))
    'no such file or folder'
    """
    from contamscope.paths import special_file

    try:
        kind = special_file(path.stat().st_mode)
    except FileNotFoundError:
        return "no such file or folder"
    except OSError as e:
        return f"cannot read ({e.strerror or e})"
    if kind == "a named pipe":
        return "a named pipe, not a file (save its data to a file first)"
    return f"{kind}, not a data file" if kind else "not a file or folder"


_WIDE_BOMS = (
    ((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"), "utf-32"),
    ((b"\xff\xfe", b"\xfe\xff"), "utf-16"),
)


_BAD_LINE = "\udcff"
"""Starts a JSON Lines line that was not UTF-8 (:func:`decode_text` with ``by_line``): strict
UTF-8 decoding never yields a lone surrogate, so no line of a file can start with one."""


def utf8_name(path: Path) -> None:
    """A one-line DataError where ``path`` is not UTF-8 (a name from a GBK or Shift-JIS zip
    archive, unpacked as its bytes): the items' ids are made from it, and it could be written
    to no JSON file (a traceback after loading; locale QA).

    >>> utf8_name(Path(b"/d/\\xd6\\xd0.csv".decode("utf-8", "surrogateescape")))
    Traceback (most recent call last):
    contamscope.errors.DataError: /d/\\xd6\\xd0.csv: the file's name is not UTF-8 (from an archive made on Chinese or Japanese Windows?); rename it
    """
    name = str(path)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise DataError(
            f"{shown}: the file's name is not UTF-8 (from an archive made on Chinese or "
            "Japanese Windows?); rename it"
        ) from None


def _decode_lines(raw: bytes) -> str | None:
    """UTF-8 ``raw`` decoded line by line, each line that is not UTF-8 replaced by
    :data:`_BAD_LINE` and the byte offset (within the line) of its first bad byte; None when
    more than half of the non-blank lines are bad (a file in another encoding altogether)."""
    out: list[str] = []
    bad = blank = 0
    for line in raw.split(b"\n"):
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            out.append(f"{_BAD_LINE}{e.start}{'w' if windows_1252(line) else ''}")
            bad += 1
        else:
            blank += not line.strip()
    return "\n".join(out) if 2 * bad <= len(out) - blank else None


def decode_text(path: Path, raw: bytes, *, by_line: bool = False) -> str:
    """A data file's bytes as text: UTF-8 (a leading BOM dropped), UTF-16 or UTF-32 with a
    byte-order mark (Excel's and Windows tools' 'Unicode' saves), else a one-line DataError
    naming the byte, or UTF-16 without a byte-order mark (which decodes as UTF-8 with a NUL
    between every two ASCII letters). A compressed file or archive is named as one.

    ``by_line`` (JSON Lines, one record a line): a line that is not UTF-8 is kept as a marker
    that :func:`json_object` reports as that row's problem, so the other rows are read (one
    stray byte refused the whole file: QA); a file of mostly such lines is refused whole.

    A file whose name is not UTF-8 (:func:`utf8_name`) is refused, whatever it holds."""
    utf8_name(path)
    for magic, kind in _PACKED:
        if raw.startswith(magic):
            raise DataError(f"{path}: a {kind}, not text; unpack it first and give the file")
    for boms, codec in _WIDE_BOMS:  # UTF-32's marks first: UTF-16 LE's is a prefix of one
        if raw.startswith(boms):
            try:
                return raw.decode(codec).lstrip("\ufeff")
            except UnicodeDecodeError as e:
                raise DataError(
                    f"{path}: not {codec.upper()} text after its byte-order mark (byte offset "
                    f"{e.start}); re-save as UTF-8"
                ) from None
    skip = len(_UTF8_BOM) if raw.startswith(_UTF8_BOM) else 0
    try:
        text = raw[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        lines = _decode_lines(raw[skip:]) if by_line else None
        if lines is None:
            at = e.start + skip  # the line too: a byte offset alone sent one to a hex editor (QA)
            line = raw.count(b"\n", 0, at) + 1
            hint = _encoding_hint(raw)
            if hint == _WINDOWS_1252 and path.suffix.lower() in (*TABLE_SUFFIXES, ".txt"):
                hint += ", Excel's plain 'CSV' (its 'CSV UTF-8' is UTF-8)"
            raise DataError(
                f"{path}: not UTF-8 text (line {line}, byte offset {at}){hint}; re-save as UTF-8"
            ) from None
        text = lines
    head = raw[:4096]
    if head and head.count(0) > len(head) // 4:
        raise DataError(
            f"{path}: looks like UTF-16 without a byte-order mark (NUL bytes between the "
            "characters); re-save as UTF-8"
        )
    return text


def _encoding_hint(raw: bytes) -> str:
    """What a file that is not UTF-8 looks like, said after the byte: UTF-16 without a
    byte-order mark (NULs between its ASCII characters, also among Chinese text), or GB18030
    (GBK, Chinese Windows' encoding: the whole file decodes as it, with Chinese characters),
    EUC-JP or EUC-KR (the same byte pairs, with kana or Hangul), Shift-JIS, Big5 or
    Windows-1252 (:func:`_two_byte_hint`); else nothing (Chinese QA).

    >>> _encoding_hint("题目,甲".encode("gb18030")), _encoding_hint("题目,x".encode("utf-16-le"))
    (': it reads as GB18030 (GBK), as Chinese Windows saves text', ': it looks like UTF-16 without a byte-order mark')
    >>> _encoding_hint("甲状腺的动脉,下列说法正确的是".encode("gbk"))  # (EUC-KR too: unspaced)
    ': it reads as GB18030 (GBK), as Chinese Windows saves text'
    >>> _encoding_hint('{"id": "q0", "question": "小明有0个苹果，又买了2个，共有几个？"}'.encode("gbk"))
    ': it reads as GB18030 (GBK), as Chinese Windows saves text'
    >>> _encoding_hint(b"caf\\xe9") == _encoding_hint("Qu'est-ce que ça?".encode("latin-1")) == _WINDOWS_1252
    True
    >>> _encoding_hint("首都は東京です".encode("euc_jp")), _encoding_hint("「수도는」 ① 서울(首都)".encode("euc_kr"))
    (': it reads as EUC-JP (Japanese)', ': it reads as EUC-KR (Korean)')
    >>> _encoding_hint("首都は東京です".encode("shift_jis")), _encoding_hint("下列說法正確的是".encode("big5"))
    (': it reads as Shift-JIS (Japanese)', ': it reads as Big5 (Traditional Chinese)')
    """
    head = raw[:4096]
    if head.count(0) * 8 >= len(head):
        return ": it looks like UTF-16 without a byte-order mark"
    try:
        wide = [c for c in raw.decode("gb18030")[:65536] if not c.isascii()]
    except UnicodeDecodeError:
        wide = []
    # GB2312's characters, both bytes 0xA1 or more: a Latin-1 "ça" decodes too, as 0xE7 0x61
    # (two different ones at least: "fiancÃ©e", UTF-8 saved again as Latin-1, is one twice)
    gb2312 = [c for c in wide if min(c.encode("gb18030")) >= 0xA1]
    if len(set(gb2312)) < 2 or 10 * len(gb2312) < 9 * len(wide):
        return _two_byte_hint(raw)
    # EUC-JP and EUC-KR use the same byte pairs (read as GB18030, Korean and Japanese files
    # were said to be Chinese; diff-review QA), and short Chinese text decodes as EUC-KR too,
    # as Hangul: Japanese is a tenth kana or more (of its letters), Korean half Hangul or more
    # with spaces between its words (Chinese has none; a space between two ASCII signs, as in
    # JSON's '": "', is no word's: a GBK JSONL file was said to be Korean; QA)
    for codec, name, script, share_needed in (
        ("euc_jp", "EUC-JP (Japanese)", "\u3040-\u30ff", 0.1),
        ("euc_kr", "EUC-KR (Korean)", "\uac00-\ud7af", 0.5),
    ):
        try:
            text = raw.decode(codec)[:65536]
        except UnicodeDecodeError:
            continue
        letters = sum(c.isalpha() and not c.isascii() for c in text)
        found = re.findall(f"[{script}]", text)
        words = len(re.findall(r"(?<=[^\x00-\x7f]) +(?=[^\x00-\x7f])", text))
        spaced = codec == "euc_jp" or words >= 0.05 * len(found)
        if len(set(found)) >= 3 and len(found) >= share_needed * max(1, letters) and spaced:
            return f": it reads as {name}"
    return ": it reads as GB18030 (GBK), as Chinese Windows saves text"


def _two_byte_hint(raw: bytes) -> str:
    """Shift-JIS (Japanese Windows) or Big5 (Taiwan and Hong Kong), which GB18030 does not read
    as its own: the whole file decodes, as kana (three different ones at least, and a tenth of
    its letters or more) for Shift-JIS, and for Big5 as characters nine in ten of which are of
    its frequent first level (lead bytes 0xA1-0xC6: punctuation and the 5,401 common
    characters), a quarter of them written with two bytes above ASCII, three different ones at
    least. A Latin-1 file decodes as Big5 too, its accented letters and signs before an ASCII
    letter read as characters: ``°C`` as 0xB0 0x43, a common one; but its non-ASCII characters
    seldom stand two in a row: it is then :func:`windows_1252`'s, if it reads as that. Else
    nothing.

    >>> _two_byte_hint("ça? Très bien".encode("latin-1")) == _two_byte_hint("20 °C, 5 µF".encode("latin-1")) == _WINDOWS_1252
    True
    """
    for codec, name in (
        ("shift_jis", "Shift-JIS (Japanese)"),
        ("big5", "Big5 (Traditional Chinese)"),
    ):
        try:
            wide = [c for c in raw.decode(codec)[:65536] if not c.isascii()]
        except UnicodeDecodeError:
            continue
        if codec == "shift_jis":
            kana = [c for c in wide if "\u3040" <= c <= "\u30ff"]
            letters = sum(c.isalpha() for c in wide)
            found = len(set(kana)) >= 3 and 10 * len(kana) >= letters
        else:
            pairs = [c.encode(codec) for c in wide]
            common = sum(0xA1 <= b[0] <= 0xC6 for b in pairs)
            high = [b for b in pairs if len(b) == 2 and b[1] >= 0xA1]
            found = len(set(high)) >= 3 and 4 * len(high) >= len(wide)
            found = found and 10 * common >= 9 * len(wide)
        if found:
            return f": it reads as {name}"
    return _WINDOWS_1252 if windows_1252(raw) else ""


_WINDOWS_1252 = ": it reads as Windows-1252 (Latin-1)"
"""The hint for :func:`windows_1252` text (``;`` in place of ``:`` inside a row's note)."""


def windows_1252(raw: bytes) -> bool:
    """Whether bytes that are not UTF-8 read as Windows-1252 (Latin-1 and its punctuation), as
    Excel's plain 'CSV' and Notepad's 'ANSI' save German, French, Spanish or Portuguese text:
    they decode as it, nine in ten of their characters past ASCII are its accented letters and
    signs (``é``, ``ß``, ``€``, curly quotes), in short runs between ASCII ones, a fifth of them
    or more a single character (``Größe`` and ``informação`` have two in a row; another
    encoding's characters are two bytes or more each, so none stands alone; Windows QA: "not
    UTF-8" named no likely encoding).

    >>> windows_1252("Qu'est-ce que ça? Straße, 5 €, «oui»".encode("cp1252"))
    True
    >>> windows_1252("Qual é a informação? Die Größe ist süß und schön.".encode("cp1252"))
    True
    >>> windows_1252("对,错,甲乙".encode("gbk"))  # (runs of two and four: no character alone)
    False
    >>> windows_1252("下列说法".encode("gbk")), windows_1252(b"\\x81\\x8d")
    (False, False)
    """
    try:
        text = raw[:65536].decode("cp1252")
    except UnicodeDecodeError:
        return False
    wide = [c for c in text if not c.isascii()]
    if not wide:
        return False
    runs = [len(r) for r in re.findall(r"[^\x00-\x7f]+", text)]
    latin = sum("\u00a0" <= c <= "\u00ff" or c in "€‚„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ" for c in wide)
    short = 5 * runs.count(1) >= len(runs) and 2 * sum(runs) <= 5 * len(runs)
    return 10 * latin >= 9 * len(wide) and short


TABLE_SUFFIXES = (".csv", ".tsv")
"""Extensions of delimited tables: ``.csv`` (comma, or tab when the first line says so) and
``.tsv`` (tab)."""


def table_suffix(path: Path, text: str | None = None) -> str:
    """``path``'s extension in lower case, with ``.tsv`` read as ``.csv`` (the same formats,
    split at tabs), and with ``text`` given, a ``.txt`` file whose first line splits at tabs
    too (a spreadsheet's "Text (Tab delimited)" or "Unicode Text" save). A folder's ``.txt``
    files are never benchmark files (READMEs, licences).

    >>> table_suffix(Path("anatomy_test.TSV")), table_suffix(Path("a.jsonl"))
    ('.csv', '.jsonl')
    >>> table_suffix(Path("a.txt"), "question\\tA\\tB\\n"), table_suffix(Path("a.txt"), "notes\\n")
    ('.csv', '.txt')
    """
    suffix = path.suffix.lower()
    if suffix == ".txt" and text is not None and table_delimiter(path, text) == "\t":
        return ".csv"
    return ".csv" if suffix in TABLE_SUFFIXES else suffix


def table_delimiter(path: Path, text: str) -> str:
    """The cell delimiter of a table file: a tab for ``.tsv``; otherwise a comma, unless its
    first records split at tabs into one number of cells (two or more) and at commas not, or
    into more cells at tabs than at commas (a spreadsheet's "Text (Tab delimited)" or
    "Unicode Text" save, whatever its name).

    >>> table_delimiter(Path("a.csv"), "question\\tA\\tB\\nq, with a comma\\t1\\t2\\n")
    '\\t'
    >>> table_delimiter(Path("a.csv"), '"q\\twith a tab",A,B\\n')
    ','
    >>> table_delimiter(Path("a.txt"), "q, a, b\\tx\\ty\\nq2\\tz\\tw\\n")  # as many commas as tabs
    '\\t'

    Excel's own spellings: a first line ``sep=;`` names the delimiter, and a table whose
    first line holds semicolons (and no tab) splits at them as :func:`_semicolons` decides
    (Excel's CSV where the decimal mark is a comma).

    >>> table_delimiter(Path("a.csv"), "sep=;\\nq;a\\n"), table_delimiter(Path("a.csv"), "q;A\\nx;1\\n")
    (';', ';')
    >>> table_delimiter(Path("a.csv"), "q;A;B\\nx;1\\n")  # uneven: a comma table of one column
    ','
    """
    if path.suffix.lower() == ".tsv":
        return "\t"
    sep = _SEP_LINE.match(text)
    if sep:
        return sep.group(1)
    line = next((ln for ln in io.StringIO(text) if ln.strip()), "")
    if "\t" not in line and ";" in line and _semicolons(text):  # Excel's CSV where the
        return ";"  # decimal mark is a comma
    if "\t" not in line:
        return ","
    by_comma, by_tab = _widths(text, ","), _widths(text, "\t")
    if not by_comma or not by_tab:
        return "\t" if by_tab else ","

    def even(w: list[int]) -> bool:
        return min(w) == max(w) >= 2

    if even(by_tab) != even(by_comma):
        return "\t" if even(by_tab) else ","
    return "\t" if by_tab[0] > by_comma[0] else ","


def _semicolons(text: str) -> bool:
    r"""Whether a table splits at semicolons ("Question;A;B;C;D;Answer"): its first records
    split at them evenly into two or more cells, and at commas not evenly or into fewer (a
    comma CSV of code options, "x == 1;", split evenly at both: read at semicolons, it was
    refused; diff-review QA). A decimal comma in some cells leaves the commas uneven.

    >>> _semicolons("q;A;B\nx;1,5;2\n"), _semicolons('"a; b",x == 1;,y;\n"c; d",z;,w;\n')
    (True, False)
    """
    by_semicolon = _widths(text, ";")
    if not _steady(by_semicolon):
        return False
    by_comma = _widths(text, ",")
    return not (by_comma and min(by_comma) == max(by_comma) >= by_semicolon[0])


def _steady(widths: list[int]) -> bool:
    """Whether a table's first records (their numbers of cells) have the header's width, two or
    more, in three of every four records: a table with one short row among twenty (a question
    whose last cells were never typed) is still a table (a semicolon CSV with one short row was
    read as a comma CSV of one column, and every row refused; Windows QA). One short row of
    two is not.

    >>> _steady([6, 6, 5, 6, 6]), _steady([3, 2]), _steady([1, 1, 1])
    (True, False, False)
    """
    if not widths or widths[0] < 2:
        return False
    return 4 * sum(w == widths[0] for w in widths) >= 3 * len(widths)


def _widths(text: str, delimiter: str) -> list[int]:
    """The numbers of cells of a table's first 20 records split at ``delimiter``."""
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        return [len(r) for r in itertools.islice((r for r in rows if any(r)), 20)]
    except csv.Error:
        return []


def csv_rows(text: str, delimiter: str = ",") -> Iterator[tuple[int, list[str] | RowError]]:
    """(start line, cells) per CSV record; blank and all-empty records are skipped.

    A record whose quoting breaks the csv module's strict rules (``"Say "hi" now",a,b``: text
    after a closing quote, which the module would glue on) is given as ``(line, RowError)``.
    A quote left open (``q,"a,b,c,d,A``) makes the csv module read every following line into
    one cell until the next quote, so good rows vanish into one bad one. Such a record (it
    spans lines; has another number of cells than the first record, or text right after its
    closing quote, or no closing quote; and the lines it took in hold clean records of the
    first record's width) is given as ``(line, RowError)``, and reading starts again on the
    line after it, so the rows it took in are kept.
    """
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    lines = io.StringIO(text, newline="").readlines()  # the lines exactly as csv reads them
    width: int | None = None
    first = 0  # 0-based index of the line reading starts at
    while True:
        reader = csv.reader(iter(lines[first:]), delimiter=delimiter)
        end = first
        restart = None
        for row in reader:
            start, end = end + 1, first + reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if width is None:
                width = len(row)
            elif (
                end > start
                and (len(row) != width or not _well_quoted(lines[start - 1 : end], delimiter))
                and _swallowed(lines[start:end], width, delimiter)
            ):
                yield (
                    start,
                    RowError(
                        f"a quote opened on this line runs on to line {end} ({len(row)} cells, the "
                        f"first row has {width}); the lines after it are read on their own"
                    ),
                )
                restart = start  # the next line, 0-based
                break
            elif any('"' in ln for ln in lines[start - 1 : end]) and not _well_quoted(
                lines[start - 1 : end], delimiter
            ):
                yield (
                    start,
                    RowError(
                        "text after a quoted cell's closing quote (inside a quoted cell a quote "
                        'is written twice: "")'
                    ),
                )
                continue
            elif any("\x00" in cell for cell in row):  # (kept silently in the question; QA)
                yield start, RowError("a NUL byte (\\x00) in a cell: a damaged or binary line")
                continue
            yield start, row
        if restart is None:
            return
        first = restart


CsvRecord = tuple[int, "list[str] | RowError"]


def csv_table(
    text: str, delimiter: str = ","
) -> tuple[tuple[int, list[str]] | None, Iterator[CsvRecord]]:
    """The first CSV record (a header, or a header-less file's first row; never a RowError,
    as it sets the width the others are checked against) and an iterator over the rest, as
    :func:`csv_rows` gives them."""
    rows = csv_rows(text, delimiter)
    first = next(rows, None)
    if first is None:
        return None, rows
    return (first[0], cast(list[str], first[1])), rows


def read_table(path: Path, text: str) -> tuple[tuple[int, list[str]] | None, Iterator[CsvRecord]]:
    """:func:`csv_table` of a ``.csv`` or ``.tsv`` file's text, split at its
    :func:`table_delimiter` (a first line ``sep=;``, as Excel writes it, names the delimiter
    and is no record)."""
    delimiter = table_delimiter(path, text)
    if _SEP_LINE.match(text):  # (a blank line in its place keeps the other lines' numbers)
        text = "\n" + text.split("\n", 1)[1] if "\n" in text else ""
    return csv_table(text, delimiter)


_SEP_LINE = re.compile(r"\ufeff?sep=([,;\t|])[ \t]*\r?(?:\n|\Z)", re.IGNORECASE)


def without_padding(
    first: tuple[int, list[str]], rows: Iterator[CsvRecord]
) -> tuple[tuple[int, list[str]], Iterator[CsvRecord]]:
    """A table's header and records without the empty columns after its last named one, as
    spreadsheets save them (",Question,A,B,C,D,Answer," was "not a CMMLU CSV"; Chinese QA):
    a record of the header's width loses those cells where they are empty (a record with text
    there, or of another width, is kept as it is, and its width is said wrong where it is).

    >>> first, rows = without_padding((1, ["q", "a", "", ""]), iter([(2, ["x", "1", "", ""])]))
    >>> first, list(rows)
    ((1, ['q', 'a']), [(2, ['x', '1'])])
    """
    cells = first[1]
    pad = len(cells) - len(list(itertools.dropwhile(lambda c: not c.strip(), reversed(cells))))
    if not pad or pad == len(cells):
        return first, rows

    def trimmed() -> Iterator[CsvRecord]:
        for line, row in rows:
            if (
                not isinstance(row, RowError)
                and len(row) == len(cells)
                and not any(c.strip() for c in row[len(cells) - pad :])
            ):
                row = row[: len(cells) - pad]
            yield line, row

    return (first[0], cells[: len(cells) - pad]), trimmed()


def _well_quoted(lines: list[str], delimiter: str) -> bool:
    """Whether one record's lines parse under the csv module's strict rules (a closing quote
    is followed by a delimiter or the line's end, and comes before the end of the data)."""
    try:
        for _ in csv.reader(iter(lines), delimiter=delimiter, strict=True):
            pass
    except csv.Error:
        return False
    return True


def _swallowed(lines: list[str], width: int, delimiter: str) -> bool:
    """Whether ``lines`` (those after a record's first line) hold a clean record of ``width``
    cells on their own (no stray quote in a cell): then the record took in rows, rather than
    being a multi-line question with a cell missing."""
    return any(
        len(row) == width and not any('"' in cell for cell in row)
        for row in csv.reader(iter(lines), delimiter=delimiter)
    )


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line, text) per non-blank line; split on ``\\n`` only (JSON may hold U+2028)."""
    for i, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield i, line.rstrip("\r")


_SURROGATE = "a lone surrogate escape (such as \\ud83d, half of an emoji), which is no character"


def _text_problem(value: Any) -> str | None:
    """Why ``value`` holds text no model can read, or None: JSON may escape half of a UTF-16
    pair ("\\ud83d"), which Python keeps as a lone surrogate and tokenizers refuse."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE
    return None


class _Repeated(dict):  # type: ignore[type-arg]
    """A JSON object that gave one key twice with different values (``key``)."""

    key: str = ""


class JsonFloat(float):
    """A JSON number with a fraction or exponent, with its ``text`` as the file wrote it: an
    option ``0.10`` is the text ``0.10`` (as a float it was ``0.1``, and ``1e2`` ``100.0``:
    the model read other options than the file's; input QA)."""

    text: str

    def __new__(cls, text: str) -> JsonFloat:
        out = super().__new__(cls, text)
        out.text = str(text)
        return out


def _loads(text: str) -> tuple[Any, bool]:
    """``json.loads`` of ``text``, and whether some object in it gives a key twice with
    different values: that object is a :class:`_Repeated` (plain ``json`` keeps the last
    value, silently: a second "answer" would be read)."""
    met = False

    def obj(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal met
        out: dict[str, Any] = dict(pairs)
        if len(out) == len(pairs):  # no key given twice
            return out
        out = {}
        repeated = ""
        for key, value in pairs:
            if key in out and out[key] != value and not repeated:
                repeated = key
            out[key] = value
        if not repeated:
            return out
        met = True
        marked = _Repeated(out)
        marked.key = repeated
        return marked

    return json.loads(text, object_pairs_hook=obj, parse_float=JsonFloat), met


def repeated_key(value: Any, path: str = "") -> str | None:
    """Where some object in ``value`` (parsed by this module) first gives a key twice with
    different values (``meta.src``: nested keys are named by their path), else None.

    >>> repeated_key(_loads('{"q": 1, "answer": "A", "o": {"x": 1}, "answer": "B"}')[0])
    'answer'
    >>> [repeated_key(_loads(t)[0]) for t in ('[{"a": {"b": 1, "b": 2}}]', '{"a": 1, "a": 1}')]
    ['[0].a.b', None]
    """
    if isinstance(value, _Repeated):
        return f"{path}.{value.key}" if path else value.key
    if isinstance(value, dict):
        inner = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        inner = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for where, v in inner:
        if (key := repeated_key(v, where)) is not None:
            return key
    return None


def _repeated_problem(key: str) -> str:
    return f"key {key!r} given twice with different values; keep one"


def json_object(line: str) -> dict[str, Any]:
    """Parse one JSON Lines record; anything but a JSON object of readable text is a row
    problem."""
    if line.startswith(_BAD_LINE):
        at, latin = line[1:].rstrip("w"), line.endswith("w")
        raise RowError(
            f"not UTF-8 text (byte {int(at) + 1} of the line"
            f"{';' + _WINDOWS_1252[1:] if latin else ''}); re-save the file as UTF-8"
        )
    try:
        value, repeated = _loads(line)
    except json.JSONDecodeError as e:
        raise RowError(f"invalid JSON ({json_error(e, line=False)})") from None
    except RecursionError:
        raise RowError("invalid JSON (nested too deeply)") from None
    if not isinstance(value, dict):
        raise RowError(f"expected a JSON object, got {type(value).__name__}")
    problem = _text_problem(value)
    if problem:
        raise RowError(f"invalid text: {problem}")
    key = repeated_key(value) if repeated else None
    if key is not None:
        raise RowError(_repeated_problem(key))
    return value


def load_json_list(
    path: Path, text: str, lines_hint: str = "if it is JSON Lines use --format jsonl"
) -> list[Any]:
    """Parse a whole-file JSON list of records (file-level errors raise DataError);
    ``lines_hint``: what to say of a file that reads as JSON Lines. A record that gives a key
    twice with different values is a :class:`RowError` in its place (``sink.collect`` skips it
    as a row problem)."""
    try:
        value, repeated = _loads(text)
    except json.JSONDecodeError as e:
        hint = f"; {lines_hint}" if e.msg == "Extra data" else ""
        raise DataError(f"{path}: not JSON ({json_error(e)}){hint}") from None
    except RecursionError:
        raise DataError(f"{path}: not usable JSON (nested too deeply)") from None
    if not isinstance(value, list):
        raise DataError(
            f"{path}: expected a JSON list of question records, got {type(value).__name__}"
        )
    bad = [i for i, rec in enumerate(value, start=1) if _text_problem(rec)]
    if bad:
        raise DataError(
            f"{path}: record {bad[0]} of the list"
            + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
            + f" holds {_SURROGATE}; fix or remove it"
        )
    if not repeated:
        return value
    return [
        RowError(_repeated_problem(key)) if (key := repeated_key(rec)) is not None else rec
        for rec in value
    ]


def json_list_lines(text: str, records: list[Any]) -> list[int | None]:
    """The line each record of a JSON list (``records``, parsed from ``text`` by
    :func:`load_json_list`) starts on, so a skipped record is named by its ``file:line``.

    >>> json_list_lines('[\\n  {"a": 1},\\n  {"a": [\\n 2]}, {"a": 3}\\n]', [{}, {}, {}])
    [2, 3, 4]
    """
    decoder = json.JSONDecoder()

    def skip(pos: int) -> int:  # past JSON's white space
        found = _JSON_SPACE.match(text, pos)
        return found.end() if found else pos

    starts: list[int] = []
    try:
        pos = skip(0) + 1  # past the '['
        for _ in records:
            starts.append(pos := skip(pos))
            pos = skip(decoder.raw_decode(text, pos)[1]) + 1  # past the ','
    except ValueError:  # cannot be (the text parsed): no lines rather than wrong ones
        return [None] * len(records)
    lines: list[int | None] = []
    line, last = 1, 0
    for start in starts:
        line, last = line + text.count("\n", last, start), start
        lines.append(line)
    return lines


def header_text(row: list[str]) -> str:
    """A header row quoted for an error message, shortened to 80 characters."""
    text = ",".join(row)
    return repr(text if len(text) <= 80 else text[:77] + "...")
