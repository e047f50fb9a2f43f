"""``ServerConnection``: one client's connection to the broker, as a state machine with no I/O.

The broker's network shell (:mod:`sluice.server.network`) owns the socket, the event
loop and the handlers; everything else about a connection is plain state here, so it is
tested without sockets and the shell only carries bytes and decisions:

* **Bytes in.** The shell receives straight into :meth:`~ServerConnection.get_buffer` and
  reports the count to :meth:`~ServerConnection.buffer_updated` (the zero-copy interface
  of ``asyncio.BufferedProtocol``); the :class:`~sluice.protocol.frames.FrameDecoder`
  splits the frames, large ones into buffers of their own. A bad size prefix raises
  :class:`~sluice.protocol.errors.FrameSizeError` and closes the connection. Two decisions
  come back for the shell to apply: :attr:`~ServerConnection.reading_paused` (the frames
  not handled yet exceed ``max_queued_bytes``, and reading resumes once they are down to
  half of it; or the connection waits for memory, below) and
  :attr:`~ServerConnection.receive_rest` (the bytes of a large frame still to come, for
  the socket's receive low-water mark).
* **Memory.** Given the broker's :class:`~sluice.protocol.memory_pool.MemoryPool`
  (``queued.max.request.bytes``), the connection charges it every request from its
  first bytes until its answer is given (the frame's room while it arrives, see
  :class:`~sluice.protocol.frames.FrameDecoder`, then its size) and releases the
  charge then, or when the connection closes. While the pool is spent, a connection
  that holds some of it (and is not filling room already given to a large frame), or
  whose large frame was refused room, :attr:`~ServerConnection.waiting_for_memory`:
  reading is paused, and resumes when its own answers release what it holds or when
  the shell calls :meth:`~ServerConnection.memory_available` because the pool has
  memory again. A connection holding nothing still reads into its receive buffer, so
  small requests are served while large frames wait. Idle,
  :meth:`~ServerConnection.trim` lets go of the receive buffers.
* **Throttles.** :meth:`~ServerConnection.start_throttling` mutes the connection for a
  client quota throttle (Kafka's ``ThrottledChannel``): reading pauses and no request
  is handed out until every throttle begun has ended
  (:meth:`~ServerConnection.end_throttling`); answers already given still go out.
* **Read timeout.** :meth:`~ServerConnection.read_timed_out`, called periodically,
  says whether one frame has been arriving for longer than a bound (a peer that
  announces a frame and never finishes it); the clock stops while reading is paused
  because of the connection's own backlog.
* **Requests out.** :meth:`~ServerConnection.next_request` decodes the next frame that may
  be handled now. Like Kafka, a connection handles one request at a time, with one
  exception: Produce is pipelined. A Produce may start while up to ``max_pipelined - 1``
  earlier Produce requests wait for their answers (an acks=all append waiting for the
  high watermark), so the next batch is appended meanwhile; any other request waits
  until every earlier answer is written, and holds back everything behind it until its
  own is. Frames of the ``raw_api_keys`` (the controller's inter-broker requests, which
  kio has no schema for) come out undecoded, as a :class:`RawRequest`, and so does every
  frame while :attr:`~ServerConnection.sasl_tokens` is set (raw SASL tokens, which follow
  a SaslHandshake v0 and have no request header), with the API key :data:`SASL_TOKEN`.
  An ApiVersions request newer than the broker knows is answered here (KIP-511); any
  other malformed or unsupported request raises
  :class:`~sluice.protocol.errors.ProtocolError` and closes the connection.
* **Answers in.** The request just handed out is answered at once with
  :meth:`~ServerConnection.respond` (a kio response, an encoded one, or None for no
  answer), or later: :meth:`~ServerConnection.defer` returns a :class:`PendingAnswer`,
  and :meth:`~ServerConnection.answer` fills it in whenever the answer is known —
  typically from inside another request's call stack (an acks=all Produce completed by
  a follower's Fetch, a parked Fetch completed by a Produce). Answers are encoded when
  given.
* **Bytes out.** :meth:`~ServerConnection.data_to_send` returns the encoded answers that
  may be written now: strictly in request order, so an answer completed ahead of an
  earlier one waits for it, and a completed oldest answer releases every completed one
  behind it. An answer holding a file region (a Fetch's records, sent with
  ``sendfile``) is handed out last in its batch, and nothing more is until the shell
  reports it sent (:meth:`~ServerConnection.send_complete`).
* **Failure.** :meth:`~ServerConnection.close` ends the connection: no more requests or
  bytes; the answers still awaited are dropped and their handles returned, for the shell
  to cancel.

Each deferred answer carries a handle of the shell's choosing (its future), typed by
the ``H`` parameter. Per request nothing is allocated here beyond the frame, the decoded
request and its encoded answer (whose list of segments becomes the output as it is),
except one :class:`PendingAnswer` for an answer that has to wait for its turn.
"""

from __future__ import annotations

from collections import deque
from typing import Final, Generic, TypeAlias, TypeVar

from kio.static.protocol import ResponsePayload

from ._wire import BytesLike
from .codec import Request, decode_request, encode_response_segments
from .errors import FrameSizeError, ProtocolError, UnsupportedApiVersionsError
from .fetch import is_file_region
from .frames import DEFAULT_MAX_FRAME_SIZE, FrameDecoder
from .memory_pool import MemoryPool
from .produce_response import EncodedResponse
from .versions import VersionTable

__all__ = [
    "MAX_PIPELINED_PRODUCES",
    "MAX_QUEUED_BYTES",
    "SASL_TOKEN",
    "PendingAnswer",
    "RawRequest",
    "Response",
    "ServerConnection",
]

MAX_PIPELINED_PRODUCES: Final = 32
"""Produce requests of one connection that may wait for their answers at once."""
MAX_QUEUED_BYTES: Final = 1 << 22
"""Frames received but not handled yet, beyond which reading pauses."""

Response: TypeAlias = ResponsePayload | EncodedResponse
"""An answer as a handler gives it: kio's response dataclass, or one encoded already."""

SASL_TOKEN: Final = -1
"""The API key of a :class:`RawRequest` that is a raw SASL token (no request header)."""

H = TypeVar("H")

_PRODUCE: Final = 0
_RAW_MIN_FRAME: Final = 10  # api key, version, correlation id, client id length
_NOTHING: Final[list[BytesLike]] = []  # an answer that writes no bytes (acks=0)


class RawRequest:
    """A request the connection does not decode: its API key and its frame, copied."""

    __slots__ = ("api_key", "frame")

    def __init__(self, api_key: int, frame: bytes) -> None:
        self.api_key = api_key
        self.frame = frame

    def __repr__(self) -> str:
        return f"RawRequest(api_key={self.api_key}, {len(self.frame)} bytes)"


class PendingAnswer(Generic[H]):
    """A request handed out whose answer is not written yet. ``segments`` is None until
    the answer is given; ``handle`` is the shell's (its future), until then."""

    __slots__ = ("charge", "correlation_id", "handle", "pipelined", "segments")

    def __init__(
        self,
        correlation_id: int,
        pipelined: bool,
        handle: H | None,
        segments: list[BytesLike] | None,
        charge: int = 0,
    ) -> None:
        self.correlation_id = correlation_id
        self.pipelined = pipelined
        self.handle = handle
        self.segments = segments
        self.charge = charge  # bytes of the memory pool held until the answer is given


class ServerConnection(Generic[H]):
    """The receive framing, request order and answer order of one client connection."""

    __slots__ = ("_backlogged", "_closed", "_decoder", "_has_file", "_held", "_in_hand",
                 "_in_hand_charge", "_in_hand_id", "_in_hand_pipelined", "_in_hand_size",
                 "_max_pipelined", "_max_queued", "_output", "_partial_count", "_partial_since",
                 "_pending", "_pool", "_raw_api_keys", "_sending", "_taken", "_throttles",
                 "_versions",
                 "sasl_tokens")  # fmt: skip

    def __init__(
        self,
        versions: VersionTable,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        *,
        raw_api_keys: frozenset[int] = frozenset(),
        max_pipelined: int = MAX_PIPELINED_PRODUCES,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        pool: MemoryPool | None = None,
    ) -> None:
        """``pool``: the broker's memory pool, charged for the requests (None: nothing
        is counted and reading never waits for memory)."""
        if max_pipelined < 1:
            raise ValueError("max_pipelined must be at least 1")
        self._versions = versions
        self._decoder = FrameDecoder(max_frame_size, pool=pool)
        self._pool = pool
        self._held = 0  # pool bytes of the requests handed out and not answered
        self._raw_api_keys = raw_api_keys
        self._max_pipelined = max_pipelined
        self._max_queued = max_queued_bytes
        # Requests handed out whose answers are not written yet, oldest first.
        self._pending: deque[PendingAnswer[H]] = deque()
        self._in_hand = False  # a request handed out, neither answered nor deferred yet
        self._in_hand_id = 0  # its correlation id
        self._in_hand_pipelined = False
        self._in_hand_charge = 0
        self._in_hand_size = 0  # its frame's size
        self._output: list[BytesLike] | None = None  # answers ready to be written
        self._has_file = False  # _output holds a file region
        self._sending = False  # the shell is sending a file region handed out
        self._closed = False
        self._backlogged = False  # frames not handled yet exceeded max_queued_bytes
        self._throttles = 0  # quota throttles in force: the connection is muted
        # The read timeout: when a frame was first seen partly received, and which one.
        self._partial_since: float | None = None
        self._partial_count = 0
        self._taken = 0  # frames taken from the decoder (handed out or answered here)
        self.sasl_tokens = False
        """The next frames are raw SASL tokens (after a SaslHandshake v0), handed out as
        :class:`RawRequest` with the key :data:`SASL_TOKEN` and answered with
        :meth:`respond_framed` (a size-prefixed challenge) or not at all."""

    # -- state -------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def sending(self) -> bool:
        """Answers with a file region were handed out and are not reported sent yet."""
        return self._sending

    @property
    def in_flight(self) -> int:
        """Requests handed out whose answers are not handed out yet."""
        return len(self._pending) + self._in_hand

    @property
    def idle(self) -> bool:
        """Nothing is owed: every request handed out is answered and its bytes sent."""
        return not (self._pending or self._in_hand or self._sending or self._output)

    @property
    def has_frames(self) -> bool:
        """Complete frames are waiting (for :meth:`next_request`, perhaps for their turn)."""
        return self._decoder.first_frame() is not None

    @property
    def frames_received(self) -> int:
        """Frames completed since the connection began (taken or not)."""
        return self._decoder.frames_received

    @property
    def frames_taken(self) -> int:
        """Frames taken in arrival order: the request handed out last was frame number
        ``frames_taken`` (counting from 1) of :attr:`frames_received`."""
        return self._taken

    @property
    def max_frame_size(self) -> int:
        """The largest frame accepted; a change applies from the next frame (a SASL
        listener bounds frames before authentication: ``sasl.server.max.receive.size``)."""
        return self._decoder.max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, size: int) -> None:
        self._decoder.max_frame_size = size

    @property
    def receive_rest(self) -> int:
        """Bytes of the large frame being received still to come (0: none is)."""
        return self._decoder.frame_rest

    @property
    def reading_paused(self) -> bool:
        """Whether reading should be paused now (the shell applies it when it changes):
        too many frames wait to be handled, or the connection waits for memory."""
        return self._backlogged or self._throttles > 0 or self.waiting_for_memory

    @property
    def throttled(self) -> bool:
        """A quota throttle is in force: nothing is read or handed out until it ends."""
        return self._throttles > 0

    def start_throttling(self) -> None:
        """Mute the connection for a quota throttle (Kafka's ``ThrottledChannel``): reading
        pauses and no request is handed out until :meth:`end_throttling`."""
        self._throttles += 1

    def end_throttling(self) -> None:
        """A throttle began by :meth:`start_throttling` ended."""
        if self._throttles > 0:
            self._throttles -= 1

    @property
    def waiting_for_memory(self) -> bool:
        """Reading must wait until the memory pool has memory again: room for a large
        frame was refused, or the pool is spent and the connection holds some of it
        (requests not answered, frames queued) and its next read is not into room
        already given. A connection that holds none may read into its receive buffer
        even then: its small requests are served while large frames wait."""
        decoder = self._decoder
        if decoder.waiting_for_memory:
            return True
        pool = self._pool
        return (
            pool is not None and pool.out_of_memory and not decoder.room and not self._closed
            and self._held + decoder.charged > 0
        )  # fmt: skip

    @property
    def held_bytes(self) -> int:
        """Bytes of the memory pool this connection holds: the requests handed out and not
        answered, the frames queued and the room of the frame being received."""
        return self._held + self._decoder.charged

    @property
    def request_size(self) -> int:
        """The frame size (without its size prefix) of the request handed out last."""
        return self._in_hand_size

    # -- bytes in ----------------------------------------------------------------------
    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next received bytes go (never empty)."""
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were received into the last :meth:`get_buffer`.

        :raises FrameSizeError: a negative or oversized size prefix; the connection is closed.
        """
        if self._closed:
            return
        decoder = self._decoder
        try:
            decoder.buffer_updated(nbytes)
        except FrameSizeError:
            self.close()
            raise
        if decoder.queued_bytes > self._max_queued:
            self._backlogged = True

    # -- memory and time ----------------------------------------------------------------
    def memory_available(self) -> bool:
        """The memory pool has memory again: take the room refused, if any. Returns
        whether the connection got what it waited for (False: it still waits)."""
        if self._closed:
            return True
        self._decoder.retry_memory()
        return not self.waiting_for_memory

    def trim(self) -> int:
        """The connection is idle: let go of its receive buffers not in use. Returns the
        bytes let go."""
        return self._decoder.trim()

    def read_timed_out(self, now: float, timeout: float) -> bool:
        """Called periodically (``now`` in seconds, any origin): whether the frame being
        received now was already being received ``timeout`` seconds ago, as first seen by
        an earlier call. Time while reading is paused for the connection's own backlog
        does not count."""
        decoder = self._decoder
        if self._closed or self._backlogged or self._throttles or not decoder.buffered:
            self._partial_since = None
            return False
        received = decoder.frames_received
        if self._partial_since is None or received != self._partial_count:
            self._partial_since, self._partial_count = now, received
            return False
        return now - self._partial_since >= timeout

    # -- requests out ------------------------------------------------------------------
    def next_request(self) -> Request | RawRequest | None:
        """The next request to handle now, in arrival order; None if there is none yet (no
        complete frame, or it must wait for earlier answers; or the connection is closed).
        Answer it with :meth:`respond` or :meth:`defer` before asking for the next one.

        :raises ProtocolError: a malformed request, or an API or version not accepted;
            the connection is closed.
        """
        decoder = self._decoder
        while True:
            if self._closed or self._sending or self._throttles:
                return None
            if self._in_hand:
                raise RuntimeError("the request handed out last is not answered or deferred")
            frame = decoder.first_frame()
            if frame is None:
                return None
            pipelined = len(frame) >= 2 and frame[0] == 0 and frame[1] == _PRODUCE
            pending = self._pending
            if pending and not (
                pipelined and pending[-1].pipelined and len(pending) < self._max_pipelined
            ):
                return None
            decoder.next_frame()
            self._taken += 1
            if self._backlogged and decoder.queued_bytes <= self._max_queued // 2:
                self._backlogged = False
            self._in_hand_size = size = len(frame)
            charge = size if self._pool is not None else 0
            if self.sasl_tokens:
                self._in_hand, self._in_hand_pipelined, self._in_hand_id = True, False, 0
                self._in_hand_charge = charge
                self._held += charge
                return RawRequest(SASL_TOKEN, bytes(frame))
            if self._raw_api_keys and len(frame) >= _RAW_MIN_FRAME:
                api_key = int.from_bytes(frame[0:2], "big", signed=True)
                if api_key in self._raw_api_keys:
                    self._in_hand, self._in_hand_pipelined = True, False
                    self._in_hand_id = int.from_bytes(frame[4:8], "big", signed=True)
                    self._in_hand_charge = charge
                    self._held += charge
                    return RawRequest(api_key, bytes(frame))
            try:
                request = decode_request(frame, self._versions)
            except UnsupportedApiVersionsError as exc:  # answered here; nothing is ahead
                self._release(charge)
                self._emit([exc.response])
                continue
            except ProtocolError:
                self._release(charge)
                self.close()
                raise
            self._in_hand = True
            self._in_hand_id = request.header.correlation_id
            self._in_hand_pipelined = pipelined
            self._in_hand_charge = charge
            self._held += charge
            return request

    # -- answers in --------------------------------------------------------------------
    def respond(self, response: Response | None) -> None:
        """Answer the request handed out last, now (None: it has no answer, as an acks=0
        Produce). It is written when every earlier answer is."""
        self._release(self._take_in_hand())
        if response is not None:
            self._queue(encode_response_segments(self._in_hand_id, response))

    def respond_framed(self, data: bytes) -> None:
        """Answer the request handed out last with a response already framed."""
        self._release(self._take_in_hand())
        self._queue([data])

    def defer(self, handle: H) -> PendingAnswer[H]:
        """The request handed out last is answered later, through the returned
        :class:`PendingAnswer`; ``handle`` is returned by :meth:`close` if it never is."""
        charge = self._take_in_hand()
        pending = PendingAnswer(self._in_hand_id, self._in_hand_pipelined, handle, None, charge)
        self._pending.append(pending)
        return pending

    def answer(self, pending: PendingAnswer[H], response: Response | None) -> None:
        """Give a deferred answer (None: none); ignored once the connection is closed."""
        if self._closed or pending.segments is not None:
            return
        pending.segments = (
            _NOTHING if response is None
            else encode_response_segments(pending.correlation_id, response)
        )  # fmt: skip
        pending.handle = None
        self._answered(pending)

    def answer_framed(self, pending: PendingAnswer[H], data: bytes) -> None:
        """Give a deferred answer already framed; ignored once the connection is closed."""
        if self._closed or pending.segments is not None:
            return
        pending.segments = [data]
        pending.handle = None
        self._answered(pending)

    # -- bytes out ---------------------------------------------------------------------
    def data_to_send(self) -> list[BytesLike] | None:
        """The answers that may be written now, in request order, as segments for
        ``writelines`` (None: nothing yet). If they hold a file region, :attr:`sending`
        is True until :meth:`send_complete`: they go out with ``sendfile``, and nothing
        is handed out meanwhile."""
        out = self._output
        if out is None or self._sending:
            return None
        self._output = None
        if self._has_file:
            self._has_file = False
            self._sending = True
        return out

    def send_complete(self) -> None:
        """The answers with a file region handed out last are sent."""
        self._sending = False

    # -- failure -----------------------------------------------------------------------
    def close(self) -> list[H]:
        """End the connection: nothing more is handed out. Returns the handles of the
        answers still awaited (the shell cancels them)."""
        if self._closed:
            return []
        self._closed = True
        handles = [p.handle for p in self._pending if p.handle is not None]
        self._pending.clear()
        self._output = None
        self._has_file = self._sending = self._in_hand = False
        self._backlogged = False
        self._release(self._held)
        self._decoder.clear()
        return handles

    # -- ordering ----------------------------------------------------------------------
    def _take_in_hand(self) -> int:
        """The request in hand is answered or deferred; returns its charge."""
        if not self._in_hand:
            raise RuntimeError("no request is waiting for its answer")
        self._in_hand = False
        return self._in_hand_charge

    def _release(self, charge: int) -> None:
        """A request's answer is given: its bytes go back to the pool."""
        if charge:
            self._held -= charge
            assert self._pool is not None
            self._pool.release(charge)

    def _answered(self, pending: PendingAnswer[H]) -> None:
        charge, pending.charge = pending.charge, 0
        self._release(charge)
        self._flush_pending()

    def _queue(self, segments: list[BytesLike]) -> None:
        """The request handed out last is answered: written after the earlier answers."""
        if self._pending:  # a Produce answered at once behind others still waiting
            self._pending.append(
                PendingAnswer(self._in_hand_id, self._in_hand_pipelined, None, segments)
            )
        else:
            self._emit(segments)

    def _flush_pending(self) -> None:
        """Hand out the answered requests at the head of the line."""
        pending = self._pending
        while pending:
            segments = pending[0].segments
            if segments is None:
                return
            pending.popleft()
            if segments:
                self._emit(segments)

    def _emit(self, segments: list[BytesLike]) -> None:
        out = self._output
        if out is None:
            self._output = segments  # the encoder's list: taken over, not copied
        else:
            out.extend(segments)
        if len(segments) > 1 and not self._has_file:  # a region follows its answer's header
            self._has_file = any(is_file_region(segment) for segment in segments)
