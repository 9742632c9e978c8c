"""Two processes writing one file at once (two leaderboards to one --out, `report` and
`reanalyse` on one run folder): each write lands whole, neither fails, and a reader never sees
half a file or none."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

WRITER = """
import sys, time
from pathlib import Path
from contamscope.paths import write_text_atomic
path, text, until = Path(sys.argv[1]), sys.argv[2] * 20000, float(sys.argv[3])
n, errors = 0, []
while time.time() < until:
    try:
        write_text_atomic(path, text)
        n += 1
    except Exception as exc:
        errors.append(str(exc))
print(n, len(errors), errors[:2])
"""


def test_two_writers_of_one_file_never_fail_and_a_reader_sees_whole_files(
    tmp_path: Path,
) -> None:
    """With one temporary name (NAME.tmp) the writers removed each other's: "cannot write it
    (No such file or directory)" or "(File exists)", and a reader saw empty or half-written
    files (concurrency QA)."""
    target = tmp_path / "board.html"
    target.write_text("A" * 20000)
    until = time.time() + 3.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(target), letter, str(until)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for letter in ("A", "B")
    ]
    reads = bad = 0
    while any(p.poll() is None for p in procs):
        text = target.read_text()
        reads += 1
        if text not in ("A" * 20000, "B" * 20000):
            bad += 1
    outs = [p.communicate() for p in procs]
    for out, err in outs:
        written, errors, first = out.split(" ", 2)
        assert int(written) > 0 and int(errors) == 0, (first, err[-500:])
    assert reads > 0 and bad == 0, f"{bad} of {reads} reads saw a partial file"
    assert [p.name for p in tmp_path.iterdir()] == ["board.html"]  # no temporary file left


def test_a_file_name_near_the_byte_limit_is_written(tmp_path: Path) -> None:
    """The temporary name was cut at 200 characters, not bytes: an --out of 77 Chinese
    characters (236 bytes) was "File name too long" (review QA)."""
    from contamscope.paths import write_text_atomic

    for name in ("报" * 77 + ".html", "a" * 250 + ".md"):
        assert len(name.encode()) <= 255
        path = write_text_atomic(tmp_path / name, "whole\n")
        assert path.read_text() == "whole\n"
    assert len(list(tmp_path.iterdir())) == 2  # no temporary file left
