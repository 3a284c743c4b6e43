"""Schedules, pure: what a schedule says (``spec``), when it ticks (``ticks``) and what
a tick does to the runs it started (``overlap``). No I/O and no clock: the durable
layer's scheduler reads the store and the clock and asks these modules what to do."""

from .overlap import Decision, decide
from .spec import POLICIES, ScheduleSpec, parse_duration, parse_moment
from .ticks import Plan, jitter_offset, next_ticks, plan, tick_id

__all__ = ["POLICIES", "Decision", "Plan", "ScheduleSpec", "decide", "jitter_offset",
           "next_ticks", "parse_duration", "parse_moment", "plan", "tick_id"]
