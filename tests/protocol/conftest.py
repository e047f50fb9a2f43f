"""Shared set-up for the protocol tests."""

from __future__ import annotations

from hypothesis import strategies as st
from kio.static.primitive import Records

# kio's dataclasses annotate record batches with its Records phantom type, for which
# kio registers no Hypothesis strategy; opaque bytes are all the codec needs.
st.register_type_strategy(Records, st.binary(max_size=64))
