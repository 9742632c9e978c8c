"""The single-file HTML page: sections, figures, and a searchable, sortable, paginated table.

Everything is inline (CSS, SVG figures, table data as JSON, a small script): the file works from a
``file://`` URL with no network. Large tables stay fast because only one page of rows is in the
DOM at a time; the data sits in a ``<script type="application/json">`` block.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any, Literal

__all__ = [
    "Column",
    "Section",
    "Table",
    "clip",
    "esc",
    "fmt_ci",
    "fmt_p",
    "fmt_pct",
    "in_lang",
    "page",
    "provenance",
    "text_lang",
]

ColumnKind = Literal["text", "num", "int", "pct", "p", "bool", "pair"]


def esc(x: Any) -> str:
    return escape(str(x))


def fmt_pct(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def fmt_p_text(p: float | None) -> str:
    """A p-value as the pages write it, as plain text (a plot's title)."""
    if p is None:
        return "–"
    return "<1e-300" if p == 0 else (f"{p:.2e}" if p < 1e-3 else f"{p:.3f}")


def fmt_p(p: float | None) -> str:
    """:func:`fmt_p_text` for HTML (its '<' wrote a bare tag opener into the page)."""
    return esc(fmt_p_text(p))


def fmt_ci(pair: Sequence[float] | None, pct: bool = True, signed: bool = False) -> str:
    if not pair:
        return "–"
    if pct:
        return f"[{fmt_pct(pair[0], signed)}, {fmt_pct(pair[1], signed)}]"
    return f"[{pair[0]:+.2f}, {pair[1]:+.2f}]"  # nats: .3g wrote [-2.09, 2.3]


@dataclass(frozen=True)
class Column:
    """One column of a :class:`Table`."""

    key: str
    """Identifier (used in ids and CSV headers)."""
    label: str
    """Header text."""
    kind: ColumnKind = "text"
    """How values are shown and sorted: text, num, int, pct (0-1 shown as %), p (p-value), bool,
    pair (``[sort_value, text]``: sorted by the number, shown as the text)."""
    help: str = ""
    """Tooltip on the header: what the column means."""
    clip: int = 0
    """A text column's cells show at most this many characters (0: all). The table's data keeps
    the whole text: the search and a cell's tooltip see all of it."""


@dataclass
class Table:
    """A client-side table: search box, click-to-sort headers, pages of ``page_size`` rows."""

    id: str
    """Unique id within the page."""
    columns: list[Column]
    """Columns, in display order."""
    rows: list[list[Any]]
    """One list of values per row, aligned with ``columns`` (None shows as a dash)."""
    page_size: int = 50
    """Rows per page."""
    sort: tuple[int, bool] | None = None
    """Initial sort: (column index, ascending)."""
    group: int | None = None
    """Rows stay grouped by this column's value, groups in the order they first appear; a
    click sorts within each group (numbers of different methods are never ranked together)."""
    caption: str = ""
    """Text above the table (plain text)."""

    def html(self) -> str:
        head = "".join(
            f'<th data-col="{i}" title="{esc(c.help)}" class="k-{c.kind}" tabindex="0" '
            f'aria-sort="none">{esc(c.label)}</th>'
            for i, c in enumerate(self.columns)
        )
        data = {
            "columns": [
                {
                    "key": c.key,
                    "kind": c.kind,
                    "label": c.label,
                    **({"clip": c.clip} if c.clip else {}),
                }
                for c in self.columns
            ],
            "rows": [[_clean(v) for v in r] for r in self.rows],
            "pageSize": self.page_size,
            "sort": list(self.sort) if self.sort else None,
            "group": self.group,
        }
        cap = f'<p class="caption">{esc(self.caption)}</p>' if self.caption else ""
        return (
            f'{cap}<div class="tbl" data-table="{esc(self.id)}">'
            f'<div class="tbl-bar"><input type="search" placeholder="search…" '
            f'aria-label="search the table"> <span class="tbl-count" aria-live="polite"></span>'
            f'</div><div class="scroll"><table><thead><tr>{head}</tr></thead><tbody></tbody>'
            f'</table></div><div class="pager"><button data-go="-1">‹ prev</button> '
            f'<span class="tbl-page" aria-live="polite"></span> <button data-go="1">next ›</button>'
            "</div>"
            f"<noscript>the table needs JavaScript; its data is in the run folders' "
            "items.jsonl and summary.json (a leaderboard's also in contamscope leaderboard "
            "--format csv)</noscript>"
            f'</div><script type="application/json" id="data-{esc(self.id)}">'
            f"{_json_for_script(data)}</script>"
        )


_KANA = re.compile("[\u3040-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7af\u1100-\u11ff]")
_HAN = re.compile("[\u4e00-\u9fff\u3400-\u4dbf]")


def text_lang(text: Any) -> str | None:
    """The language tag of an item's text where it is not English: ``ja`` with kana, ``ko``
    with Hangul, ``zh`` with Chinese characters, else None. Browsers pick CJK glyphs and
    screen readers pick a voice by it (the page itself is English). The item table does the
    same in JavaScript (``langOf``).

    >>> text_lang("下列有关鳃弓的描述，错误的是"), text_lang("Which is correct?"), text_lang(None)
    ('zh', None, None)
    """
    if not isinstance(text, str):
        return None
    if _KANA.search(text):
        return "ja"
    if _HANGUL.search(text):
        return "ko"
    return "zh" if _HAN.search(text) else None


def in_lang(text: Any, tag: str = "span") -> str:
    """``text`` (escaped) in a ``tag`` element, with a ``lang`` attribute where it is CJK (a
    ``span`` without one is left out: the text alone)."""
    lang = text_lang(text)
    if not lang and tag == "span":
        return esc(text)
    attr = f' lang="{lang}"' if lang else ""
    return f"<{tag}{attr}>{esc(text)}</{tag}>"


def clip(text: Any, limit: int, *, tail: int = 0) -> str:
    """``text`` with its whitespace collapsed, cut to at most ``limit`` characters at a word
    boundary where one is near the end, with an ellipsis when cut ("" for None). ``tail``:
    keep that many of the last characters too (a reading passage's question is at its end).

    >>> clip("How  much\\npaint is needed for the wall?", 20)
    'How much paint is…'
    >>> clip("A long passage about paint. " * 3 + "How much is needed?", 40, tail=20)
    'A long passage… How much is needed?'
    """
    t = " ".join(str(text).split()) if text is not None else ""
    if len(t) <= limit:
        return t
    if tail:
        end = t[-tail:]
        space = end.find(" ")
        if 0 <= space < 20:  # start the tail at a word
            end = end[space + 1 :]
        return clip(t[: len(t) - len(end)], limit - len(end) - 1) + " " + end
    cut = t[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit - 20:  # no word boundary near the end (e.g. Chinese): cut anywhere
        cut = cut[:space]
    return cut.rstrip() + "…"


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _json_for_script(obj: Any) -> str:
    """JSON that cannot end its <script> element early nor open a comment in it: every ``<``
    is written ``\\u003c`` (still valid JSON; ``<\\!--`` was not, and emptied the table).

    >>> _json_for_script(["a </script> <!-- b"])
    '["a \\\\u003c/script> \\\\u003c!-- b"]'
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")


_SVG_WIDTH = re.compile(r'<svg[^>]*?\swidth="([0-9.]+)pt"')


def _figure(svg: str) -> str:
    """A figure of the grid. One wider than a grid cell (a leaderboard's bar chart over many
    models) takes the whole row, at most at its own size: shrunk into a cell, its text was
    about 7 px high."""
    m = _SVG_WIDTH.search(svg[:2000])
    if m is None or float(m.group(1)) <= 480:  # the usual 6.4-inch figures fit a cell
        return f'<figure class="plot">{svg}</figure>'
    return f'<figure class="plot wide" style="max-width:{float(m.group(1)) * 4 / 3:.0f}px">{svg}</figure>'


@dataclass
class Section:
    """A titled part of the report."""

    id: str
    """Anchor id (letters, digits, dashes)."""
    title: str
    """Heading and navigation entry."""
    body: str
    """Inner HTML (already escaped where it holds user text)."""
    figures: list[str] = field(default_factory=list)
    """Inline SVG figures shown after ``body``."""
    after: str = ""
    """HTML shown after the figures (e.g. a table)."""

    def html(self) -> str:
        figs = "".join(_figure(f) for f in self.figures)
        grid = f'<div class="figs">{figs}</div>' if figs else ""
        return (
            f'<section id="{esc(self.id)}"><h2>{esc(self.title)}</h2>'
            f"{self.body}{grid}{self.after}</section>"
        )


_PROVENANCE = ("contamscope_version", "git_commit", "created", "timings")
"""Parts of every summary a Provenance section shows after the method's own."""


def provenance(
    run: Any,
    parts: Sequence[str],
    what: str,
    lists: Sequence[tuple[str, Sequence[Any]]] = (),
    also: str = "",
) -> Section:
    """A report's Provenance section: where ``run`` (a RunData) is, with its model and
    benchmark (``also``: more of that line, HTML), the summary's ``parts`` and the version,
    commit, date and timings (``what`` says which), and each non-empty list as (title, lines;
    the first 200), folded."""
    kept = {k: run.summary.get(k) for k in (*parts, *_PROVENANCE)}
    body = (
        f"<p class='note'>Run folder <code>{esc(run.path)}</code>; model "
        f"<code>{esc(run.model)}</code>; benchmark <code>{esc(run.benchmark)}</code>{also}.</p>"
        f"<details><summary>{esc(what)} (summary.json)</summary>"
        f"<pre>{esc(json.dumps(kept, indent=2, ensure_ascii=False, default=str))}</pre></details>"
    )
    for title, lines in lists:
        if lines:
            items = "".join(f"<li>{esc(x)}</li>" for x in list(lines)[:200])
            body += f"<details><summary>{esc(title)}</summary><ul>{items}</ul></details>"
    return Section("provenance", "Provenance", body)


def page(
    title: str,
    subtitle: str,
    sections: Sequence[Section],
    footer: str,
    tab_title: str | None = None,
) -> str:
    """The whole document; ``tab_title`` (default ``title``) is its ``<title>``."""
    nav = " · ".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in sections)
    body = "".join(s.html() for s in sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # no external resource of any kind may load: the report must work offline
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(tab_title or title)}</title><style>{_CSS}</style></head><body>"
        f'<header><h1>{esc(title)}</h1><p class="sub">{subtitle}</p><nav>{nav}</nav></header>'
        f"<main>{body}</main><footer>{footer}</footer><script>{_JS}</script></body></html>\n"
    )


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1a1a1a;background:#fff}
header{padding:18px 28px 8px;border-bottom:1px solid #ddd;background:#f7f7f9}
h1{font-size:22px;margin:0 0 4px;overflow-wrap:anywhere}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #eee}
.sub{margin:0 0 6px;color:#444;overflow-wrap:anywhere}nav{font-size:13px}nav a{color:#0060a0}
main{padding:0 28px 28px;max-width:1400px}footer{padding:12px 28px;color:#666;font-size:12px;border-top:1px solid #ddd}
.verdict{padding:10px 14px;border-radius:6px;font-weight:600;margin:14px 0}
.verdict.signal{background:#fde8dc;border-left:6px solid #D55E00}
.verdict.clean{background:#e0f1ea;border-left:6px solid #009E73}
.verdict.none{background:#eee;border-left:6px solid #888}
.verdict.caution{background:#fff3d6;border-left:6px solid #E69F00}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{padding:4px 8px;border-bottom:1px solid #e5e5e5;text-align:left;vertical-align:top}
th{background:#f2f2f5;position:sticky;top:0}
.tbl th{cursor:pointer;user-select:none;white-space:nowrap}
.tbl th.asc::after{content:" ▲"}.tbl th.desc::after{content:" ▼"}
td.k-num,td.k-int,td.k-pct,td.k-p,td.k-pair,th.k-num,th.k-int,th.k-pct,th.k-p,th.k-pair{text-align:right;font-variant-numeric:tabular-nums}
.stats td:not(:first-child){text-align:right;font-variant-numeric:tabular-nums}
tr.flag td{background:#fde8dc}
.tbl-bar input{padding:4px 8px;width:280px;font-size:14px}.tbl-count{color:#555;font-size:13px}
.pager{margin:6px 0}.pager button{font-size:13px}
.figs{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(480px,100%),1fr));gap:14px}
.scroll{overflow-x:auto;max-width:100%}
main table:not(.tbl table){display:block;overflow-x:auto;max-width:100%}
@media (max-width:600px){header,main,footer{padding-left:10px;padding-right:10px}.tbl-bar input{width:100%;box-sizing:border-box}}
figure.plot{margin:0}figure.plot.wide{grid-column:1/-1;overflow-x:auto}figure.plot.wide svg.fig{min-width:640px}svg.fig{width:100%;height:auto}
figcaption{font-size:12px;color:#444;max-width:640px;overflow-wrap:anywhere}
.caption,.note{color:#444;font-size:13px;max-width:1000px;overflow-wrap:anywhere}
td.q{max-width:520px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
details{margin:8px 0}summary{overflow-wrap:anywhere}pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}
.yes{color:#b34100;font-weight:600}
@media print{.scroll,main table:not(.tbl table),pre{overflow:visible}main table:not(.tbl table){display:table}
table{width:100%}th,td{overflow-wrap:anywhere}th{position:static}.tbl th{white-space:normal}
td.q{white-space:normal;max-width:none}pre{white-space:pre-wrap;overflow-wrap:anywhere}
figure.plot.wide svg.fig{min-width:0}.tbl-bar input,.pager,nav{display:none}}
"""

_JS = r"""
(function(){
function fmt(v,k){
  if(v===null||v===undefined)return "–";
  if(k==="pair")return v[1];
  if(k==="pct")return fixed(100*v,1)+"%";
  if(k==="p")return v===0?"<1e-300":(v<1e-3?expo(v,2):fixed(v,3));
  if(k==="num")return (Math.abs(v)>=1e5||Math.abs(v)<5e-4&&v!==0)?expo(v,3):(Math.abs(v)>=1000?fixed(v,1):fixed(v,3));
  if(k==="bool")return v?"yes":"no";
  return String(v);
}
function fixed(v,d){  // v.toFixed(d) as Python writes it: an exact half rounds to even
  // (toFixed rounds it up: an exact test's p = 13/16 = 0.8125 showed 0.813 here, 0.812 in
  // the terminal); 30 more digits show whether the double is exactly a half
  var s=Math.abs(v).toFixed(d+30),cut=s.length-30;
  if(s.slice(cut)!=="5"+"0".repeat(29))return v.toFixed(d);
  var low=s.slice(0,cut).replace(/\.$/,"");
  if(parseInt(low.slice(-1),10)%2===1)return v.toFixed(d);  // odd: up, as toFixed does
  return (v<0?"-":"")+low;
}
function expo(v,d){  // 4.883e+04, as Python writes it (JavaScript: 4.883e+4)
  return v.toExponential(d).replace(/e([+-])(\d)$/,"e$10$2");
}
function langOf(s){  // as text_lang in html.py: CJK item text gets its language tag
  if(/[\u3040-\u30ff]/.test(s))return "ja";
  if(/[\uac00-\ud7af\u1100-\u11ff]/.test(s))return "ko";
  return /[\u4e00-\u9fff\u3400-\u4dbf]/.test(s)?"zh":"";
}
function cmp(a,b){
  if(Array.isArray(a))a=a[0];if(Array.isArray(b))b=b[0];
  if(a===b)return 0;if(a===null||a===undefined)return 1;if(b===null||b===undefined)return -1;
  if(typeof a==="number"&&typeof b==="number")return a-b;
  if(typeof a==="boolean")return (a?1:0)-(b?1:0);
  return String(a).localeCompare(String(b),undefined,{numeric:true});  // test-2 < test-10
}
document.querySelectorAll(".tbl").forEach(function(box){
  var id=box.getAttribute("data-table");
  var d=JSON.parse(document.getElementById("data-"+id).textContent);
  var cols=d.columns,all=d.rows,page=0,size=d.pageSize;
  // search both what is shown ("yes", "20.0%") and the stored value (a clipped column's
  // whole text: its cell shows the start, Column.clip)
  var text=all.map(function(r){return r.map(function(v,j){
    if(v===null||v===undefined)return "–";
    var raw=Array.isArray(v)?"":String(v);return fmt(v,cols[j].kind)+" "+raw;
  }).join(" ").toLowerCase()});
  var idx=all.map(function(_,i){return i}),view=idx.slice();
  var grank=all.map(function(){return 0});
  if(d.group!==null&&d.group!==undefined){  // a row's group: the rank of its first appearance
    var seen={};all.forEach(function(r,i){var k=String(r[d.group]);
      if(!(k in seen))seen[k]=Object.keys(seen).length;grank[i]=seen[k]});
  }
  var ths=box.querySelectorAll("th"),tbody=box.querySelector("tbody");
  var input=box.querySelector("input"),count=box.querySelector(".tbl-count"),pg=box.querySelector(".tbl-page");
  var sortCol=null,asc=true;
  var printing=false,prev=box.querySelector('[data-go="-1"]'),next=box.querySelector('[data-go="1"]');
  function draw(){
    var pages=Math.max(1,Math.ceil(view.length/size));if(page>=pages)page=pages-1;if(page<0)page=0;
    // printed, a table has every row of its view (paper has no pager)
    var html=[],rows=printing?view:view.slice(page*size,page*size+size);
    for(var i=0;i<rows.length;i++){
      var r=all[rows[i]],tds=[];
      for(var j=0;j<cols.length;j++){
        var k=cols[j].kind,v=r[j],s=fmt(v,k),cls="k-"+k+(cols[j].key==="question"?" q":"")+(k==="bool"&&v?" yes":"");
        var lg=k==="text"?langOf(s):"";
        // a text may be cut (the column's clip, its width): its tooltip is the whole text; a
        // number's says whose and what it is (in a wide pivot the row and header are far away)
        var tip=k==="text"||j===0?s:fmt(r[0],cols[0].kind)+" · "+cols[j].label;
        var shown=cols[j].clip&&s.length>cols[j].clip?s.slice(0,cols[j].clip-1).replace(/[\ud800-\udbff]?\s*$/,"")+"…":s;
        tds.push('<td class="'+cls+'"'+(lg?' lang="'+lg+'"':"")+' title="'+esc(tip)+'">'+esc(shown)+"</td>");
      }
      html.push("<tr>"+tds.join("")+"</tr>");
    }
    tbody.innerHTML=html.join("");
    count.textContent=view.length+" of "+all.length+" rows";
    pg.textContent="page "+(page+1)+" of "+pages;
    prev.disabled=page===0;next.disabled=page>=pages-1;
  }
  function esc(s){return s.replace(/&/g,"&amp;").replace(/</g,"&lt;").replace(/"/g,"&quot;")}
  function filter(){
    var q=input.value.trim().toLowerCase();
    view=q?idx.filter(function(i){return text[i].indexOf(q)>=0}):idx.slice();
    if(sortCol!==null)order();page=0;draw();
  }
  function order(){
    var c=sortCol,s=asc?1:-1;
    view.sort(function(a,b){
      if(grank[a]!==grank[b])return grank[a]-grank[b];
      var x=all[a][c],y=all[b][c],nx=x===null||x===undefined,ny=y===null||y===undefined;
      if(nx||ny)return (nx-ny)||a-b;  // empty cells last in either direction
      return s*cmp(x,y)||a-b;
    });
  }
  function setSort(c,a){
    sortCol=c;asc=a;
    ths.forEach(function(t){t.classList.remove("asc","desc");t.setAttribute("aria-sort","none")});
    ths[c].classList.add(asc?"asc":"desc");ths[c].setAttribute("aria-sort",asc?"ascending":"descending");
    order();page=0;draw();
  }
  ths.forEach(function(th){
    function go(){var c=+th.getAttribute("data-col");setSort(c,sortCol===c?!asc:true)}
    th.addEventListener("click",go);
    th.addEventListener("keydown",function(e){  // keyboard users sort too (Tab, Enter/Space)
      if(e.key==="Enter"||e.key===" "){e.preventDefault();go()}
    });
  });
  box.querySelectorAll("button").forEach(function(b){b.addEventListener("click",function(){
    page+= +b.getAttribute("data-go");draw();
  })});
  input.addEventListener("input",filter);
  window.addEventListener("beforeprint",function(){printing=true;draw()});
  window.addEventListener("afterprint",function(){printing=false;draw()});
  if(d.sort)setSort(d.sort[0],d.sort[1]);else draw();
});
window.__reportReady=true;window.__reportReadyAt=performance.now();
})();
"""
