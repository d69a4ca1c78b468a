"""Where `ChatRepository.forget` cuts the summaries log, for every backend: before the first
forgotten message, from the start when a fact goes (a summary is made agreeing with the
facts), and before the first summary that says the words (`holds`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence


def summary_cut(
    seqs: Sequence[int],
    facts: Sequence[str],
    logged: Iterable[tuple[int, str]] = (),
    current: str = "",
    holds: Callable[[str], bool] | None = None,
) -> int | None:
    """The seq from which summaries go (the log keeps those with `covers_to` below it), or
    None when none goes. `logged`: the log's (covers_to, text), oldest first; `current`: the
    summary now, which goes whole when it holds the words and no logged one does."""
    cuts = [min(seqs)] if seqs else []
    if facts:
        cuts.append(1)
    if holds is not None:
        said = next((covers_to for covers_to, text in logged if holds(text)), None)
        if said is None and current and holds(current):
            said = 1
        if said is not None:
            cuts.append(max(1, said))
    return min(cuts) if cuts else None
