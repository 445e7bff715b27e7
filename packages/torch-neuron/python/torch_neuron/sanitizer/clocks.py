"""Happens-before between the launches of a process's neuron streams: vector clocks.

Each stream counts its launches; a stream's clock says, for every stream, up to which
launch it has waited. Event records copy a clock, event waits merge one in, and the host
side (stream, event, device synchronisation) is one more clock that every later launch
merges: work the host waited for is ordered before everything it issues afterwards.
Torch-free, so the rules can be read and tested on their own.
"""
from __future__ import annotations

StreamKey = tuple[int, int]  # (device index, stream id)
Clock = dict[StreamKey, int]


def merge_into(dst: Clock, src: Clock) -> None:
    for k, v in src.items():
        if dst.get(k, 0) < v:
            dst[k] = v


class StreamClocks:
    def __init__(self) -> None:
        self._clocks: dict[StreamKey, Clock] = {}
        self._events: dict[int, Clock] = {}
        self._host: Clock = {}
        self._host_version = 0
        self._merged_host: dict[StreamKey, int] = {}

    def _clock(self, stream: StreamKey) -> Clock:
        clock = self._clocks.get(stream)
        if clock is None:
            clock = self._clocks[stream] = {stream: 0}
        if self._merged_host.get(stream) != self._host_version:
            merge_into(clock, self._host)
            self._merged_host[stream] = self._host_version
        return clock

    def launch(self, stream: StreamKey) -> int:
        """Sequence number of a new launch on ``stream``."""
        clock = self._clock(stream)
        clock[stream] += 1
        return clock[stream]

    def ordered(self, stream: StreamKey, seq: int, later: StreamKey) -> bool:
        """Whether launch ``seq`` of ``stream`` happens before the next launch on ``later``."""
        return stream == later or self._clock(later).get(stream, 0) >= seq

    def event_record(self, event: int, stream: StreamKey) -> None:
        self._events[event] = dict(self._clock(stream))

    def event_wait(self, event: int, stream: StreamKey) -> None:
        recorded = self._events.get(event)
        if recorded is not None:
            merge_into(self._clock(stream), recorded)

    def event_destroy(self, event: int) -> None:
        self._events.pop(event, None)

    def _host_waits(self, clock: Clock) -> None:
        merge_into(self._host, clock)
        self._host_version += 1

    def event_synchronize(self, event: int) -> None:
        recorded = self._events.get(event)
        if recorded is not None:
            self._host_waits(recorded)

    def stream_synchronize(self, stream: StreamKey) -> None:
        self._host_waits(self._clock(stream))

    def device_synchronize(self, device: int) -> None:
        for key in list(self._clocks):
            if key[0] == device:
                self._host_waits(self._clock(key))
