"""The line that launched a computation, found in the recorder's code snippets: the
recorder's real output for a function and for a module's code, and what has no mark."""

from __future__ import annotations

from distributed.client import SourceCode

from daskscope.analysis.code import code_frames
from daskscope.collector.snapshot import frame_text

FUNCTION = "def job(x):\n    y = x + 1\n    return y.compute()\n"
MODULE = "\n".join([f"a{i} = {i}" for i in range(1, 40)] + ["result = total.compute()", "z = 1"])


def test_the_call_in_a_function_and_in_a_long_module() -> None:
    # As Dask sends them: lineno_relative is the call's 0-based offset in the code
    inner = SourceCode(FUNCTION, lineno_frame=12, lineno_relative=2, filename="/w/job.py")
    outer = SourceCode(MODULE, lineno_frame=40, lineno_relative=39, filename="/w/main.py")
    snippets = [frame_text(outer), frame_text(inner)]  # outermost first, as Dask lists them
    frames = code_frames(snippets)
    assert [f["filename"] for f in frames] == ["/w/job.py", "/w/main.py"]  # innermost first
    assert [f["call_text"] for f in frames] == ["return y.compute()", "result = total.compute()"]
    for f in frames:
        assert snippets[f["snippet"]].splitlines()[f["call_line"] - 1].strip() == f["call_text"]


def test_no_header_or_a_cut_snippet_has_no_mark() -> None:
    cut = frame_text(SourceCode(FUNCTION, 12, 2, "/w/job.py")).rsplit("\n", 1)[0]
    frames = code_frames(["x.compute()", cut])
    assert [(f["line"], f["call_line"]) for f in frames] == [(12, None), (None, None)]
    assert code_frames([]) == [] and code_frames(None) == []
