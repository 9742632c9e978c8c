"""The prefix-tree scoring plan: order tries, subtree batches, prefilled KV caches, prefetching.

Everything here runs on the host (numpy and plain Python) except :func:`tree_mask` and
:func:`filled_cache`, which build a batch's attention mask and KV cache on the device. A
:class:`Planner` turns a call's requests into a stream of :class:`Unit` s (a group of prefixes
whose KV caches are held at once, and the subtree batches that read them). It needs no torch, so
on CUDA it runs in a planning process (:func:`plan_in_process`) while the device runs the
previous units: a thread would not help, as the main thread's kernel launches and the planner's
Python would take turns on the interpreter lock.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Batch",
    "Unit",
    "Tree",
    "build_trees",
    "prepare_batch",
    "tree_mask",
    "layer_windows",
    "filled_cache",
    "Encoded",
    "encode_requests",
    "trie_size",
    "token_counts",
    "TokenCounts",
    "Planner",
    "bucket",
    "plan_in_process",
    "planning_pool",
]


@dataclass
class Tree:
    """A token trie over continuations of one prefix (or a subtree of it).

    Node ``k`` attends to the whole (cached) prefix and to its own ancestors, at position
    ``len(prefix) + depth``. Its log-prob is read from the hidden state of its parent, or of the
    last prefix token for a first token (``parent == -1``).
    """

    prefix: tuple[int, ...]
    tokens: list[int]
    parents: list[int]  # parent node index, -1 = the prefix
    depths: list[int]
    members: list[int]  # request indices
    paths: list[list[int]]  # node indices of each member's continuation
    spans: list[int] = field(default_factory=list)
    """Nodes are in depth-first pre-order, so node ``j``'s descendants are the nodes
    ``j+1 .. spans[j]-1``: node ``i`` attends to node ``j`` iff ``j <= i < spans[j]``."""

    def mask(self) -> np.ndarray:
        """[nodes, nodes] boolean: node i may attend to node j (ancestors and itself)."""
        idx = np.arange(len(self.tokens))
        return (idx[None, :] <= idx[:, None]) & (idx[:, None] < np.asarray(self.spans)[None, :])

    def path_matrix(self) -> np.ndarray:
        depth = max((len(x) for x in self.paths), default=0)
        out = np.full((len(self.paths), max(depth, 1)), -1, dtype=np.int64)
        for r, path in enumerate(self.paths):
            out[r, : len(path)] = path
        return out


def build_trees(
    prefix: tuple[int, ...], conts: list[tuple[int, list[int]]], max_nodes: int
) -> tuple[list[Tree], int]:
    """Split the token trie of ``conts`` (request index, tokens) into subtrees to run.

    The trie is cut at branch points: a subtree larger than ``max_nodes`` is replaced by the
    subtrees of its children, each carrying the short trunk above it. Only trunk tokens at branch
    points are run twice. Returns the subtrees and the size of the whole trie (the minimum).

    The continuations are taken in sorted order, so each adds the nodes after its longest common
    prefix with the previous one, numbered in depth-first pre-order: a node's descendants are
    the next ``size - 1`` nodes, and a subtree is a slice.
    """
    order = sorted(range(len(conts)), key=lambda i: conts[i][1])
    tokens: list[int] = []
    parents: list[int] = []
    depths: list[int] = []
    path: list[int] = []  # node ids along the previous continuation
    prev: list[int] = []
    ends: list[tuple[int, list[int]]] = []  # (request, node ids along its continuation)
    for i in order:
        member, seq = conts[i]
        n, lcp, m = len(seq), 0, min(len(seq), len(prev))
        while lcp < m and seq[lcp] == prev[lcp]:
            lcp += 1
        if lcp < n:  # (sorted: lcp == n means the same continuation again)
            start = len(tokens)
            tokens.extend(seq[lcp:])
            parents.append(path[lcp - 1] if lcp else -1)
            parents.extend(range(start, start + n - lcp - 1))
            depths.extend(range(lcp, n))
            del path[lcp:]
            path.extend(range(start, start + n - lcp))
        ends.append((member, path[:n]))
        prev = seq
    total = len(tokens)
    size = [1] * total
    for k in range(total - 1, -1, -1):
        if parents[k] >= 0:
            size[parents[k]] += size[k]

    def children(node: int) -> list[int]:
        out, j = [], node + 1
        while j < node + size[node]:
            out.append(j)
            j += size[j]
        return out

    # (trunk, first node, end) in pre-order: the trunk's nodes, then the whole subtrees of
    # consecutive siblings (children of the trunk's last node) that are nodes first .. end - 1
    units: list[tuple[list[int], int, int]] = []

    def emit(nodes: list[int], trunk: list[int]) -> None:
        """Run the subtrees of the sibling ``nodes`` below ``trunk``: consecutive ones packed
        together while they fit in ``max_nodes`` with the trunk; one too large alone is cut at
        its own children (its node joins the trunk)."""
        group: list[int] = []
        used = len(trunk)
        for node in nodes:
            if group and used + size[node] > max_nodes:
                units.append((trunk, group[0], node))
                group, used = [], len(trunk)
            if len(trunk) + size[node] > max_nodes and size[node] > 1:
                emit(children(node), trunk + [node])
                continue
            group.append(node)
            used += size[node]
        if group:
            units.append((trunk, group[0], group[-1] + size[group[-1]]))

    roots, root = [], 0
    while root < total:
        roots.append(root)
        root += size[root]
    emit(roots, [])
    dep_a = np.asarray(depths, dtype=np.int64)
    par_a, size_a = np.asarray(parents, dtype=np.int64), np.asarray(size, dtype=np.int64)
    trees = []
    for trunk, r, end in units:
        nt, sz = len(trunk), end - r
        rest = slice(r, end)
        local_par = np.concatenate([np.arange(-1, nt - 1), par_a[rest] - r + nt])
        # the packed subtrees' roots hang from the trunk's last node (-1: none)
        local_par[nt:][par_a[rest] < r] = nt - 1
        spans = np.concatenate([np.full(nt, nt + sz), np.arange(nt, nt + sz) + size_a[rest]])
        trees.append(
            Tree(
                prefix,
                tokens=[tokens[k] for k in trunk] + tokens[r : r + sz],
                parents=local_par.tolist(),
                depths=np.concatenate([dep_a[trunk], dep_a[rest]]).tolist(),
                members=[],
                paths=[],
                spans=spans.tolist(),
            )
        )
    starts = [r for _, r, _ in units]
    empty = Tree(prefix, [], [], [], [], [])
    for member, ids in ends:
        if not ids:
            empty.members.append(member)
            empty.paths.append([])
            continue
        last = ids[-1]
        u = bisect.bisect_right(starts, last) - 1
        trunk, r, end = units[u] if u >= 0 else ([], -1, -1)
        if last >= end:  # a trunk node: its first unit is the next one
            u += 1
            trunk, r, end = units[u]
            local = list(range(len(ids)))
        else:
            nt = len(trunk)
            local = list(range(nt)) + [k - r + nt for k in ids[nt:]]
        trees[u].members.append(member)
        trees[u].paths.append(local)
    return [t for t in trees if t.members] + ([empty] if empty.members else []), total


@dataclass
class Batch:
    """Host arrays of one forward pass over subtree rows (see :func:`prepare_batch`)."""

    slots: np.ndarray
    """[rows] the held-prefix slot each row reads."""
    ids: np.ndarray
    """[rows, width] node tokens (0-padded)."""
    pos: np.ndarray
    """[rows, width] positions: prefix length + depth."""
    spans: np.ndarray
    """[rows, width] the trees' :attr:`Tree.spans` (padding position ``p``: ``p + 1``, itself)."""
    lengths: np.ndarray
    """[rows] real nodes of each row."""
    prefix_lengths: np.ndarray
    """[rows] prefix length of each row (its first cached positions)."""
    src: np.ndarray
    """[nodes] row of the state predicting each node: parent in this batch, or prefix's last."""
    targets: np.ndarray
    """[nodes] each node's token."""
    index: np.ndarray
    """[members, depth] node indices of each member's path (``nodes`` = a zero)."""
    members: list[int]
    """Request index of each member."""
    prefix_width: int
    width: int
    nodes: int


@dataclass
class Unit:
    """A group of prefixes whose KV caches are held at once, and the batches that use them."""

    prefixes: list[tuple[int, ...]]
    batches: list[Batch] = field(default_factory=list)
    zeros: list[int] = field(default_factory=list)
    """Requests with an empty continuation (log p = 0)."""
    skipped: int = 0
    """Requests too long for the model (left as NaN), for the progress count."""
    meta: list[tuple[int, int, int]] = field(default_factory=list)
    """(request index, scored tokens, boundary characters) of the chunk's requests (first unit
    of a chunk)."""
    minimum: int = 0
    """The chunk's minimum token count: each prefix once plus its trie (first unit)."""


def prepare_batch(rows: list[tuple[Tree, int]]) -> Batch:
    """The host arrays of one forward pass over subtree ``rows`` (tree, held-prefix slot)."""
    n, width = len(rows), max(len(t.tokens) for t, _ in rows)
    pw = max(len(t.prefix) for t, _ in rows)
    ids = np.zeros((n, width), dtype=np.int64)
    pos = np.zeros((n, width), dtype=np.int64)
    spans = np.broadcast_to(np.arange(1, width + 1, dtype=np.int64), (n, width)).copy()
    src: list[int] = []
    depth = max(max(len(x) for x in t.paths) for t, _ in rows)
    members: list[int] = []
    paths: list[np.ndarray] = []
    total = sum(len(t.tokens) for t, _ in rows)
    offset = 0
    for r, (t, _) in enumerate(rows):
        k, p = len(t.tokens), len(t.prefix)
        ids[r, :k] = t.tokens
        pos[r, :k] = np.asarray(t.depths) + p
        spans[r, :k] = t.spans
        # the state predicting node k: its parent's row in this batch, or the prefix's last
        src.extend(r * width + q if q >= 0 else n * width + r for q in t.parents)
        pm = t.path_matrix()
        paths.append(np.where(pm >= 0, pm + offset, total))  # `total` -> a zero
        members.extend(t.members)
        offset += k
    index = np.full((len(members), depth), total, dtype=np.int64)
    row = 0
    for pm in paths:
        index[row : row + pm.shape[0], : pm.shape[1]] = pm
        row += pm.shape[0]
    return Batch(
        slots=np.asarray([slot for _, slot in rows], dtype=np.int64),
        ids=ids,
        pos=pos,
        spans=spans,
        lengths=np.asarray([len(t.tokens) for t, _ in rows], dtype=np.int64),
        prefix_lengths=np.asarray([len(t.prefix) for t, _ in rows], dtype=np.int64),
        src=np.asarray(src, dtype=np.int64),
        targets=np.concatenate([np.asarray(t.tokens, dtype=np.int64) for t, _ in rows]),
        index=index,
        members=members,
        prefix_width=pw,
        width=width,
        nodes=total,
    )


@dataclass
class Encoded:
    """A tokenised request: the prefix tokens (with BOS), the scored tokens, and the prefix
    characters that share the first scored token (0 when the boundary is a token boundary)."""

    prefix: tuple[int, ...]
    cont: list[int]
    boundary_chars: int
    too_long: bool = False
    """Certainly longer than the model's context, found without tokenising all of it (see
    :func:`encode_requests`); ``prefix`` and ``cont`` are then empty."""


def _end(offset: tuple[int, int]) -> int:
    return offset[1]


def _split_offsets(offsets: Sequence[tuple[int, int]], cut: int) -> tuple[int, int]:
    """(index of the first token ending after character ``cut``, characters before ``cut``
    that it covers); token ends never decrease."""
    split = bisect.bisect_right(offsets, cut, key=_end)
    return split, (max(0, cut - offsets[split][0]) if split < len(offsets) else 0)


def _split_encoding(enc: Any, cut: int) -> tuple[list[int], int, int]:
    """(ids, split, boundary characters) of a ``tokenizers`` encoding, as
    :func:`_split_offsets` computes them from all offsets, but from the token holding character
    ``cut`` alone where there is one (the offsets are copied only when there is not: an empty
    continuation, or a character that trimmed offsets leave outside every token)."""
    token = enc.char_to_token(cut)
    if token is None:
        return enc.ids, *_split_offsets(enc.offsets, cut)
    return enc.ids, token, max(0, cut - enc.token_to_chars(token)[0])


def _token_ids(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    if hasattr(tokenizer, "encode_batch"):
        return [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    return list(tokenizer(texts, add_special_tokens=False)["input_ids"])


_PROBE_CHARS = 16
"""Characters per context token tokenised to prove a text too long (about 4 x English's)."""
_PROBE_MARGIN = 64
"""Tokens a cut text may gain over its place in the whole (the cut word, BOS)."""


def _too_long(tokenizer: Any, requests: Sequence[Any], max_length: int | None) -> set[int]:
    """Indices of requests certainly longer than ``max_length`` tokens, found by tokenising at
    most ``_PROBE_CHARS x max_length`` characters of each (once per long prefix): a 20 MB
    question under 24 option orders took minutes to tokenise in full only to be set aside.
    Only texts longer than ``max_length`` characters are probed, and only a probe of more
    than ``max_length + _PROBE_MARGIN`` tokens counts, so a text that fits is never set aside;
    one that does not fit may still be missed here and is then tokenised and left as NaN."""
    if max_length is None:
        return set()
    cap, limit = _PROBE_CHARS * max_length, max_length + _PROBE_MARGIN
    prefixes = sorted({r.prefix for r in requests if len(r.prefix) > max_length})
    counts = _token_ids(tokenizer, [p[:cap] for p in prefixes]) if prefixes else []
    long_prefixes = {p for p, ids in zip(prefixes, counts) if len(ids) > limit}
    out = {i for i, r in enumerate(requests) if r.prefix in long_prefixes}
    rest = [
        i
        for i, r in enumerate(requests)
        if i not in out and len(r.prefix) + len(r.continuation) > max_length
    ]
    if rest:
        texts = [(requests[i].prefix + requests[i].continuation)[:cap] for i in rest]
        out.update(i for i, ids in zip(rest, _token_ids(tokenizer, texts)) if len(ids) > limit)
    return out


def encode_requests(
    tokenizer: Any, bos_id: int | None, requests: Sequence[Any], max_length: int | None = None
) -> list[Encoded]:
    """Tokenise prefix+continuation as one text; split at the prefix's character offset.

    A token that straddles the boundary belongs to the continuation (its prefix characters
    are reported in ``boundary_chars``), so every order of an item scores the same span
    rule and no token is searched for by value. ``tokenizer``: a ``tokenizers.Tokenizer``
    (its own batch call) or a transformers tokenizer. Requests certainly longer than
    ``max_length`` are not tokenised in full (``too_long``)."""
    if not requests:
        return []
    skip = _too_long(tokenizer, requests, max_length)
    todo = [r for i, r in enumerate(requests) if i not in skip]
    texts = [r.prefix + r.continuation for r in todo]
    cuts = [len(r.prefix) for r in todo]
    if not texts:
        splits: list[tuple[list[int], int, int]] = []
    elif hasattr(tokenizer, "encode_batch"):
        # the fast tokenizer's own batch call: what the transformers wrapper returns for
        # add_special_tokens=False; the split comes from the encoding's own char-to-token
        # map (one call) rather than from a Python copy of all its offsets
        encs = tokenizer.encode_batch(texts, add_special_tokens=False)
        splits = [_split_encoding(e, cut) for e, cut in zip(encs, cuts)]
    else:
        enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        splits = [
            (ids, *_split_offsets(offsets, cut))
            for ids, offsets, cut in zip(enc["input_ids"], enc["offset_mapping"], cuts)
        ]
    bos = [bos_id] if bos_id is not None else []
    done = iter(splits)
    out = []
    for i in range(len(requests)):
        if i in skip:
            out.append(Encoded((), [], 0, too_long=True))
            continue
        ids, split, boundary = next(done)
        prefix = bos + list(ids[:split])
        if not prefix:
            from ..errors import ConfigError

            raise ConfigError("empty prefix and no BOS token: set -M bos=TOKEN")
        out.append(Encoded(tuple(prefix), list(ids[split:]), boundary))
    return out


def trie_size(seqs: Sequence[Sequence[int]]) -> int:
    """Nodes of the token trie of ``seqs``: the fewest tokens that score them all once the
    prefix they follow has run (the size :func:`build_trees` returns).

    >>> trie_size([[1, 2, 3], [1, 2, 4], [1, 5], [1, 2, 3]])
    5
    """
    total = 0
    prev: tuple[int, ...] = ()
    for seq in sorted(tuple(s) for s in seqs):
        lcp, m = 0, min(len(seq), len(prev))
        while lcp < m and seq[lcp] == prev[lcp]:
            lcp += 1
        total += len(seq) - lcp
        prev = seq
    return total


@dataclass(frozen=True)
class TokenCounts:
    """What scoring a set of requests costs in tokens run through the model."""

    reference: int
    """Each request's prefix and continuation in full, one sequence per request (the published
    code's way)."""
    minimum: int
    """Each distinct prefix once plus the token trie of its continuations: the fewest the
    prefix-tree engine must run (its efficiency counts these)."""
    too_long: int
    """Requests longer than the context, left out of both counts (the run leaves them as NaN)."""


def token_counts(
    tokenizer: Any, bos_id: int | None, requests: Sequence[Any], max_length: int | None = None
) -> TokenCounts:
    """:class:`TokenCounts` of ``requests``, tokenised as :func:`encode_requests` tokenises
    them for scoring (BOS included)."""
    reference = too_long = 0
    groups: dict[tuple[int, ...], list[list[int]]] = {}
    for e in encode_requests(tokenizer, bos_id, requests, max_length):
        if e.too_long or (max_length is not None and len(e.prefix) + len(e.cont) > max_length):
            too_long += 1
            continue
        reference += len(e.prefix) + len(e.cont)
        groups.setdefault(e.prefix, []).append(e.cont)
    minimum = sum(len(p) + trie_size(c) for p, c in groups.items())
    return TokenCounts(reference, minimum, too_long)


def bucket(
    sizes: list[tuple[int, int]],
    budget: int,
    max_pad: float = 0.1,
    extra: dict[int, int] | None = None,
) -> list[list[int]]:
    """Batches of (index, length), sorted by length: rows x (longest + largest ``extra``)
    <= budget, and no row padded by more than ``max_pad`` of the batch's shortest (plus 16
    tokens). ``extra`` adds per-row memory that is not padded to a common width (e.g. a
    share of the row's prefix KV copy) to the budget only, not to the padding rule.

    >>> bucket([(0, 10), (1, 100), (2, 12), (3, 11)], budget=64)
    [[0, 3, 2], [1]]
    """
    batches: list[list[int]] = []
    first = widest = 0
    for i, length in sorted(sizes, key=lambda x: x[1]):
        more = extra.get(i, 0) if extra else 0
        fits = batches and (len(batches[-1]) + 1) * (length + max(widest, more)) <= budget
        if fits and length <= first * (1 + max_pad) + 16:
            batches[-1].append(i)
            widest = max(widest, more)
        else:
            batches.append([i])
            first, widest = length, more
    return batches


@dataclass
class Planner:
    """Everything that turns score requests into :class:`Unit` s, without torch (picklable, so
    it can run in a planning process)."""

    tokenizer: Any
    """A ``tokenizers.Tokenizer`` (its own batch call), or a transformers tokenizer."""
    bos_id: int | None
    max_length: int | None
    """The model's context (longer requests are left as NaN); None: unbounded."""
    max_tree_nodes: int
    max_batch_tokens: int
    pad_tolerance: float
    chunk_tokens: int
    """Plan in chunks of about this many tokens (0: all at once)."""
    key_cost: float = 0.0
    """The work of attending to one key, as a share of running one token through the model
    (0: subtrees of ``max_tree_nodes`` always). When set, each question's trie is cut into
    subtrees of 1, 2 or 4 x ``max_tree_nodes`` (at most ``max_batch_tokens``), whichever costs
    least: (tokens run) + ``key_cost`` x (each row's tokens x the keys they attend to). Larger
    subtrees repeat fewer trunk tokens and attend to more keys (:meth:`trees`)."""

    def encode(self, requests: Sequence[Any]) -> list[Encoded]:
        """:func:`encode_requests` with this planner's tokenizer, BOS and context."""
        return encode_requests(self.tokenizer, self.bos_id, requests, self.max_length)

    def chunks(self, requests: Sequence[Any]) -> Iterator[list[int]]:
        """Request indices in planning chunks of about ``chunk_tokens`` tokens (all at once when
        it is 0); the requests of one prefix text stay in one chunk."""
        if not self.chunk_tokens:
            yield list(range(len(requests)))
            return
        by_prefix: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            by_prefix.setdefault(r.prefix, []).append(i)
        chunk: list[int] = []
        size = 0
        for prefix, idx in by_prefix.items():
            chunk.extend(idx)
            size += (len(prefix) + sum(len(requests[i].continuation) for i in idx)) // 4
            if size >= self.chunk_tokens:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk

    def trees(
        self, prefix: tuple[int, ...], conts: list[tuple[int, list[int]]]
    ) -> tuple[list[Tree], int]:
        """:func:`build_trees` at the subtree size that costs least (see :attr:`key_cost`).

        A five-option question's 120 orders make a trie of about 6,000 tokens; cut into
        subtrees of 256 its trunks are repeated so often that 39% more tokens run than the
        trie holds (20 CMB items, SmolLM2's tokenizer), and at 512 10%, while each token
        attends to about 575 keys instead of 320."""
        best: tuple[float, list[Tree], int] | None = None
        size = self.max_tree_nodes
        for scale in (1, 2, 4) if self.key_cost else (1,):
            nodes = min(size * scale, max(self.max_batch_tokens, size))
            trees, total = build_trees(prefix, conts, max_nodes=nodes)
            cost = sum(
                len(t.tokens) * (1 + self.key_cost * (len(prefix) + len(t.tokens))) for t in trees
            )
            if best is None or cost < best[0]:
                best = (cost, trees, total)
            if len([t for t in trees if t.tokens]) <= 1 or nodes >= self.max_batch_tokens:
                break  # the whole trie is one subtree already (or no wider rows fit)
        assert best is not None
        return best[1], best[2]

    def plan(self, requests: Sequence[Any], index: Sequence[int]) -> list[Unit]:
        """The units of one chunk (``requests``, whose indices in the call are ``index``).

        The chunk is tokenised in one call; its prefixes run once in groups whose KV caches are
        held together (bounded by 8 x the batch budget), and the subtrees of a group are bucketed
        by their token count into batches under the budget (a row's copy of its prefix KV counts
        a quarter of the prefix length, in the budget only). The first unit carries each
        request's scored-token count and boundary, and the chunk's minimum token count."""
        encoded = self.encode(requests)
        groups: dict[tuple[int, ...], list[int]] = {}
        conts: dict[int, list[int]] = {}
        meta = []
        skipped = minimum = 0
        for i, e in zip(index, encoded):
            meta.append((i, len(e.cont), e.boundary_chars))
            if e.too_long:
                skipped += 1
                continue
            conts[i] = e.cont
            groups.setdefault(e.prefix, []).append(i)
        trees = {}
        for prefix, members in groups.items():
            ok = [
                i
                for i in members
                if self.max_length is None or len(prefix) + len(conts[i]) <= self.max_length
            ]
            skipped += len(members) - len(ok)
            if ok:
                trees[prefix], trie_nodes = self.trees(prefix, [(i, conts[i]) for i in ok])
                minimum += len(prefix) + trie_nodes
        prefixes = list(trees)
        held_groups = bucket(
            [(j, len(p)) for j, p in enumerate(prefixes)], 8 * self.max_batch_tokens, 1e9
        )
        units = []
        for group in held_groups:
            unit = Unit([prefixes[j] for j in group])
            rows = []
            for slot, j in enumerate(group):
                for t in trees[prefixes[j]]:
                    if t.tokens:
                        rows.append((t, slot))
                    else:  # empty continuations: log p = 0
                        unit.zeros.extend(t.members)
            sizes = [(r, len(t.tokens)) for r, (t, _) in enumerate(rows)]
            kv_share = {r: len(t.prefix) // 4 for r, (t, _) in enumerate(rows)}
            for batch in bucket(sizes, self.max_batch_tokens, self.pad_tolerance, kv_share):
                unit.batches.append(prepare_batch([rows[r] for r in batch]))
            units.append(unit)
        if not units:
            units.append(Unit([]))
        units[0].meta, units[0].skipped, units[0].minimum = meta, skipped, minimum
        return units


_WORKER_TOKENIZER: Any = None


def _worker_init(tokenizer: Any) -> None:
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = tokenizer


def _worker_plan(settings: dict[str, Any], requests: list[Any], index: list[int]) -> list[Unit]:
    return Planner(tokenizer=_WORKER_TOKENIZER, **settings).plan(requests, index)


def plan_in_process(pool: Any, planner: Planner, requests: Sequence[Any]) -> Iterator[Unit]:
    """The units of ``requests``, planned chunk by chunk in ``pool`` (a one-process executor
    whose worker holds the planner's tokenizer, see :func:`planning_pool`), all chunks
    submitted at once and yielded in order as they arrive."""
    settings = {k: v for k, v in planner.__dict__.items() if k != "tokenizer"}
    futures = [
        pool.submit(_worker_plan, settings, [requests[i] for i in chunk], chunk)
        for chunk in planner.chunks(requests)
    ]
    try:
        for future in futures:
            yield from future.result()
    finally:
        for future in futures:
            future.cancel()


def planning_pool(tokenizer: Any) -> Any:
    """A one-process pool for :func:`plan_in_process`; the tokenizer is sent to it once."""
    from ..workers import SpawnPool

    return SpawnPool(1, initializer=_worker_init, initargs=(tokenizer,))


def layer_windows(config: Any) -> dict[str, int | None] | None:
    """The attention window of each kind of decoder layer in a transformers ``config``: None
    for full attention, the window for sliding-window attention (a query at position ``q``
    sees keys at positions ``k`` with ``q - k < window``, as transformers' masks).

    Returns None when some layer is of another kind (chunked attention, linear attention,
    recurrent state, shared KV), which tree attention cannot run. Models that name their layer
    kinds (``layer_types``: Gemma 2/3, Qwen2, ...) take one mask per kind; a model without them
    but with a ``sliding_window`` (Mistral, Phi-3) applies the window in every layer.

    >>> from transformers import Gemma3TextConfig, LlamaConfig, MistralConfig
    >>> layer_windows(Gemma3TextConfig(sliding_window=512, num_hidden_layers=6))
    {'full_attention': None, 'sliding_attention': 512}
    >>> layer_windows(MistralConfig(sliding_window=4096)), layer_windows(LlamaConfig())
    ({'sliding_attention': 4096}, {'full_attention': None})
    """
    cfg = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    window = getattr(cfg, "sliding_window", None)
    kinds = getattr(cfg, "layer_types", None)
    if kinds is None:
        if getattr(cfg, "attention_chunk_size", None) or getattr(cfg, "kv_sharing_modes", None):
            return None
        kinds = ["sliding_attention" if window else "full_attention"]
    out: dict[str, int | None] = {}
    for kind in sorted(set(kinds)):
        if kind == "full_attention":
            out[kind] = None
        elif kind == "sliding_attention" and window:
            out[kind] = int(window)
        else:
            return None
    return out


def tree_mask(
    batch: Batch,
    spans: Any,
    lengths: Any,
    prefix_lengths: Any,
    positions: Any = None,
    windows: dict[str, int | None] | None = None,
) -> Any:
    """The [rows, 1, width, prefix width + width] boolean attention mask of ``batch``, built
    where ``spans``, ``lengths`` and ``prefix_lengths`` (its arrays as tensors) live.

    A real node attends to its row's prefix (not the padding behind it) and to its ancestors and
    itself (:attr:`Tree.spans`); a padding position attends to itself only. Building it on the
    device uploads ``rows x width`` integers instead of the ``rows x width x (prefix + width)``
    mask.

    With ``windows`` (:func:`layer_windows`) and ``positions`` (``batch.pos`` as a tensor), a
    sliding-window kind's mask also drops keys ``window`` or more positions behind the query
    (prefix key ``j`` is at position ``j``, a node at its own); with two or more kinds the
    result is a dict of masks by kind, as such models take it."""
    return _attention_mask(
        batch.width, batch.prefix_width, spans, lengths, prefix_lengths, positions, windows
    )


def chain_mask(lengths: Any, width: int, windows: dict[str, int | None] | None = None) -> Any:
    """The causal mask of right-padded token rows of ``lengths`` (a tensor, where the mask is
    built) padded to ``width``, as :func:`tree_mask` builds it for rows of chains with no
    prefix: a real token attends to the real tokens up to itself, a padding position to itself
    only.

    >>> import torch
    >>> chain_mask(torch.tensor([2]), 3)[0, 0].int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    >>> chain_mask(torch.tensor([3]), 3, {"sliding_attention": 2})[0, 0].int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 1, 1]]
    """
    import torch

    cols = torch.arange(width, device=lengths.device)
    real = cols[None, :] < lengths[:, None]
    spans = torch.where(real, lengths[:, None], cols[None, :] + 1)
    positions = cols[None, :].expand(len(lengths), -1)
    return _attention_mask(width, 0, spans, lengths, lengths, positions, windows)


def _attention_mask(
    width: int,
    prefix_width: int,
    spans: Any,
    lengths: Any,
    prefix_lengths: Any,
    positions: Any,
    windows: dict[str, int | None] | None,
) -> Any:
    import torch

    dev = spans.device
    cols = torch.arange(width, device=dev)
    i, j = cols[None, :, None], cols[None, None, :]
    tree = (j <= i) & (i < spans[:, None, :])
    real = cols[None, :] < lengths[:, None]
    pcols = torch.arange(prefix_width, device=dev)
    pre = (pcols[None, None, :] < prefix_lengths[:, None, None]) & real[:, :, None]
    full = torch.cat([pre, tree], dim=-1)[:, None]
    if not windows:
        return full
    masks = {}
    for kind, window in windows.items():
        if window is None:
            masks[kind] = full
            continue
        keys = torch.cat([pcols[None, :].expand(len(positions), -1), positions], dim=-1)
        near = positions[:, :, None] - keys[:, None, :] < window
        masks[kind] = full & near[:, None]
    return masks if len(masks) > 1 else next(iter(masks.values()))


def filled_cache(
    held_keys: list[Any], held_values: list[Any], slots: Any, pw: int, width: int
) -> Any:
    """A transformers ``DynamicCache`` whose layers hold each row's prefix keys/values.

    Each layer gets one buffer of ``pw + width`` positions: the prefix part is gathered straight
    into it and the forward pass writes the new keys/values behind it, so the prefix is copied
    once (``DynamicCache.update`` would copy it again on every concatenation). Sliding-window
    layers get a full buffer too (their own cache layer would keep only the window's last keys,
    out of line with the mask): the window is in the mask (:func:`tree_mask`).
    """
    import torch
    from transformers import DynamicCache

    kv = DynamicCache()
    layers: list[Any] = []
    for hk, hv in zip(held_keys, held_values):
        k = hk.new_empty((len(slots), hk.shape[1], pw + width, hk.shape[3]))
        v = hv.new_empty((len(slots), hv.shape[1], pw + width, hv.shape[3]))
        torch.index_select(hk[:, :, :pw], 0, slots, out=k[:, :, :pw])
        torch.index_select(hv[:, :, :pw], 0, slots, out=v[:, :, :pw])
        layers.append(_prefilled_layer_class()(k, v, pw))
    kv.layers = layers
    return kv


@functools.cache
def _prefilled_layer_class() -> Any:
    """The cache layer class (defined on first use: transformers is imported lazily)."""
    from transformers.cache_utils import DynamicLayer

    class PrefilledLayer(DynamicLayer):  # type: ignore[misc]
        """Keys/values buffer whose first ``pw`` positions hold the prefix."""

        def __init__(self, keys: Any, values: Any, pw: int) -> None:
            super().__init__()
            self.keys, self.values, self.pw = keys, values, pw
            self.dtype, self.device = keys.dtype, keys.device
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            keys: Any = self.keys
            values: Any = self.values
            end = self.pw + key_states.shape[-2]
            keys[:, :, self.pw : end].copy_(key_states)
            values[:, :, self.pw : end].copy_(value_states)
            return keys[:, :, :end], values[:, :, :end]

        def get_seq_length(self) -> int:
            return int(self.pw)

    return PrefilledLayer
