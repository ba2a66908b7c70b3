"""Digest batching, timeouts and acks with an explicit clock."""

from __future__ import annotations

from p4lite.switch.p4runtime.digest import DigestBuffer, DigestConfig


def test_unconfigured_digest_is_not_streamed():
    buf = DigestBuffer()
    assert buf.add(1, (1,), 0) == []


def test_list_size_and_timeout_batching():
    buf = DigestBuffer()
    buf.configure(1, DigestConfig(max_timeout_ns=1000, max_list_size=3, ack_timeout_ns=10**9))
    assert buf.add(1, (1,), 0) == [] and buf.add(1, (2,), 10) == []
    [full] = buf.add(1, (3,), 20)
    assert full.values == [(1,), (2,), (3,)]
    buf.add(1, (4,), 100)
    assert buf.poll(500) == []
    [late] = buf.poll(1100)
    assert late.values == [(4,)] and late.list_id == full.list_id + 1


def test_duplicates_suppressed_until_ack_or_ack_timeout():
    buf = DigestBuffer()
    buf.configure(1, DigestConfig(max_timeout_ns=0, max_list_size=1, ack_timeout_ns=1000))
    [first] = buf.add(1, (7,), 0)
    assert buf.add(1, (7,), 10) == []
    assert buf.ack(1, first.list_id) and not buf.ack(1, first.list_id)
    [again] = buf.add(1, (7,), 20)
    assert buf.add(1, (7,), 30) == []
    buf.poll(2000)  # ack timeout passed: the value may be reported again
    assert buf.add(1, (7,), 2001) != []
    assert again.list_id != first.list_id
