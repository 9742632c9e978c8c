"""The command line under unusual shells and files: an ASCII-only stdout, closed standard
streams, ``--out /dev/stdout``, names that are not UTF-8, folders that cannot be listed, narrow
terminals (locale QA)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run_cli
from toy_rows import word_rows

from contamscope.backends.base import ScoreResult
from contamscope.data import load_benchmark
from contamscope.errors import DataError
from contamscope.store import ScoreCache


def _bench(folder: Path, name: str = "bench.csv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join(word_rows(4)) + "\n", encoding="utf-8")
    return path


def _cli(
    *args: str, cwd: Path, shell_tail: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """``contamscope ARGS`` run by bash, with ``shell_tail`` (a redirection) after it."""
    words = " ".join(f"'{a}'" for a in args)
    return subprocess.run(
        ["bash", "-c", f"'{sys.executable}' -m contamscope {words} {shell_tail}"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, COLUMNS="200", **env),
        timeout=300,
    )


def test_an_ascii_stdout_escapes_chinese_names(tmp_path: Path) -> None:
    """Under PYTHONIOENCODING=ascii a Chinese file name was a UnicodeEncodeError's traceback
    after the work was done."""
    _bench(tmp_path / "中文", "农学.csv")
    res = _cli("inspect", "--benchmark", "中文/农学.csv", cwd=tmp_path, PYTHONIOENCODING="ascii")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "\\u4e2d\\u6587" in res.stdout


def test_closed_standard_streams_are_no_traceback(tmp_path: Path) -> None:
    res = _cli("formats", cwd=tmp_path, shell_tail=">&-")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    cache = ScoreCache(tmp_path / "c" / "scores.sqlite")
    cache.put_many("hf:./m|float32", [("k", ScoreResult(-1.0, 1))])
    cache.close()
    res = _cli("cache", "clear", "--cache-dir", "c", cwd=tmp_path, shell_tail="<&-")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().endswith("aborted")


def test_an_out_that_is_a_device_or_pipe_is_refused_and_kept(tmp_path: Path) -> None:
    """A file renamed over ``--out /dev/stdout`` replaced the link (as root /dev/stdout became a
    regular file), and one over a device node made it a file; written through instead, a closed
    stdout's number reused by another file got the report. Refused, nothing replaced."""
    from contamscope.errors import StoreError
    from contamscope.paths import write_text_atomic

    link = tmp_path / "board.md"
    link.symlink_to("/proc/self/fd/1")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, what in [
        (Path("/dev/stdout"), "a device or process name"),
        (Path("/dev/fd/63"), "a device or process name"),  # a shell's >(...)
        (Path("/dev/null"), "a device or process name"),
        (fifo, "a named pipe"),
    ]:
        with pytest.raises(StoreError, match=rf"^--out {path}: is {what}.*not a file"):
            write_text_atomic(path, "the board\n")
    assert Path("/dev/stdout").is_symlink() and fifo.exists() and link.is_symlink()
    target = tmp_path / "target.md"
    target.write_text("old\n")
    other = tmp_path / "other.md"
    other.symlink_to(target)  # a link to a regular file is replaced, as documented
    write_text_atomic(other, "new\n")
    assert not other.is_symlink() and target.read_text() == "old\n"


def test_a_file_name_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """A name from a GBK archive (ids are made of it) was a UnicodeEncodeError's traceback."""
    folder = tmp_path / "gbk"
    _bench(folder, "good.csv")
    bad = os.fsdecode(os.fsencode(str(folder)) + b"/\xd6\xd0\xce\xc4.csv")
    Path(bad).write_bytes((folder / "good.csv").read_bytes())
    with pytest.raises(DataError, match=r"\\xd6\\xd0\\xce\\xc4\.csv: the file's name is not UTF-8"):
        load_benchmark(bad)
    res = run_cli("inspect", "--benchmark", "gbk", cwd=tmp_path)
    assert res.returncode == 3 and "Traceback" not in res.stderr, res.stderr
    assert "the file's name is not UTF-8" in res.stderr


def test_a_folder_that_cannot_be_listed_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "locked"
    _bench(folder)
    listing = Path.iterdir

    def refuse(self: Path) -> object:
        if self == folder:
            raise PermissionError(13, "Permission denied", str(self))
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", refuse)
    with pytest.raises(DataError, match=r"locked: cannot read it \(Permission denied\)$"):
        load_benchmark(str(folder))


def test_standard_input_is_named_as_not_read(tmp_path: Path) -> None:
    res = run_cli("inspect", "--benchmark", "-", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "error: --benchmark -: standard input is not read (save the data to a file and give "
        "its name)"
    )


def test_tables_fold_rather_than_cut_numbers() -> None:
    """At 40 columns a p-value of 1.000 read "1.0…"."""
    from rich.console import Console

    from contamscope.cli.common import Table

    cells = ["statistic", "observed", "95% CI", "p-value"]
    row = ["Algorithm 1: the original order is the max", "12.5% (3)", "[2.7%, 32.4%]", "0.0123"]
    table = Table(*cells)
    table.add_row(*row)
    grid = Table.grid(padding=(0, 2))  # (columns made by add_row: a run's header lines)
    grid.add_row("model", "hf:/tmp/qa-models/tiny-llama-with-a-long-name")
    with open(os.devnull, "w") as sink:
        console = Console(width=30, record=True, file=sink)
        console.print(table)
        console.print(grid)
    text = console.export_text()
    digits = sorted(ch for ch in text if ch.isdigit())
    assert "…" not in text and digits == sorted(ch for ch in "".join(cells + row) if ch.isdigit())
    assert "tiny-llama-with-a-long-name" in "".join(text.split())


def test_a_rewritten_file_keeps_its_permissions_and_a_dangling_link_is_named(
    tmp_path: Path,
) -> None:
    from contamscope.errors import StoreError
    from contamscope.paths import make_folder, replace_text

    path = tmp_path / "summary.json"
    replace_text(path, "{}\n")
    path.chmod(0o640)
    replace_text(path, '{"a": 1}\n')
    assert path.stat().st_mode & 0o777 == 0o640 and path.read_text() == '{"a": 1}\n'
    link = tmp_path / "out"
    link.symlink_to("nowhere")
    with pytest.raises(StoreError, match=r"out: is a link to nowhere, which does not exist$"):
        make_folder(link)
    with pytest.raises(StoreError, match=r"out/sub: is under \S+out, which is a link to nowhere"):
        make_folder(link / "sub")


def test_a_report_to_a_device_is_one_line_and_the_run_folders_own_link_is_replaced(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """``report RUN --out /dev/stdout``: one line, exit 2. The run folder's own report.html
    linked to /dev/null was written through (the report lost, its path printed): replaced."""
    _bench(tmp_path)
    args = ["permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", "bench.csv"]
    res = run_cli(*args, "--out", "run", "--device", "cpu", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = run_cli("report", "run", "--out", "/dev/stdout", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("error: --out /dev/stdout: is a device")
    assert res.stdout == ""
    (tmp_path / "run" / "report.html").unlink(missing_ok=True)
    (tmp_path / "run" / "report.html").symlink_to(os.devnull)
    # (a HOME matplotlib cannot write: it said so in two lines before every report)
    res = _cli("report", "run", cwd=tmp_path, HOME="/proc/no-home", MPLCONFIGDIR="",
               XDG_CONFIG_HOME="", XDG_CACHE_HOME="")  # fmt: skip
    assert res.returncode == 0 and res.stderr == "", res.stderr
    page = tmp_path / "run" / "report.html"
    assert not page.is_symlink() and page.read_text().startswith("<!DOCTYPE html>")
