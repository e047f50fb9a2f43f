"""The broker process's collector policy: startup heap frozen, later cycles still freed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from sluice.server.gc_policy import SERVING_THRESHOLDS


def test_tune_for_serving_freezes_startup_heap_and_still_frees_new_cycles() -> None:
    # In a child process: freezing the test runner's own heap would outlive this test.
    script = textwrap.dedent(
        """
        import gc, weakref
        from sluice.server.gc_policy import tune_for_serving

        class Node:
            pass

        tune_for_serving()
        frozen = gc.get_freeze_count()
        node = Node()
        node.self = node  # a cycle created after the freeze
        ref = weakref.ref(node)
        del node
        gc.collect()
        print(frozen, gc.get_threshold(), ref() is None)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split(maxsplit=1)
    assert int(out[0]) > 1000  # modules, classes and functions of the startup heap
    assert out[1].strip() == f"{SERVING_THRESHOLDS} True"
