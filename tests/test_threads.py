"""Grad mode, the profiler and the random generator per thread and per asyncio task.

Threads are ordered with ``threading.Event`` (never sleeps): each test holds one thread
inside its block while the other works, which is exactly the overlap that used to leak."""

from __future__ import annotations

import asyncio
import json
import threading

import numpy as np

import workbench as wb
from workbench._oprecord import HOOK
from workbench.profiler import current_profile

TIMEOUT = 30


class Background:
    """Run ``fn(inside, release)`` in a thread: it sets ``inside`` once inside its block and
    waits for ``release`` before leaving it."""

    def __init__(self, fn):
        self.inside, self.release, self.error = threading.Event(), threading.Event(), None
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(fn,))

    def _run(self, fn):
        try:
            self.result = fn(self.inside, self.release)
        except BaseException as e:  # noqa: BLE001  (re-raised in the test's thread)
            self.error = e
            self.inside.set()

    def __enter__(self):
        self.thread.start()
        assert self.inside.wait(TIMEOUT)
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


def _hold_no_grad(inside, release):
    with wb.no_grad():
        inside.set()
        assert release.wait(TIMEOUT)
        return wb.is_grad_enabled()


def test_another_threads_no_grad_does_not_stop_this_threads_graph():
    with Background(_hold_no_grad) as bg:
        assert wb.is_grad_enabled()
        loss = (wb.Var(wb.randn(3)) * 2).sum()
        assert loss.grad_fn is not None
        grads = loss.backward()
        assert len(grads) > 0
    assert bg.result is False  # and the other thread was really inside no_grad


def test_overlapping_no_grad_blocks_in_two_threads_restore_grad_mode():
    first_in, second_in = threading.Event(), threading.Event()
    first_out = threading.Event()
    seen = {}

    def first():
        with wb.no_grad():
            first_in.set()
            assert second_in.wait(TIMEOUT)
        first_out.set()
        seen["first"] = wb.is_grad_enabled()

    def second():
        assert first_in.wait(TIMEOUT)
        with wb.no_grad():
            second_in.set()
            assert first_out.wait(TIMEOUT)  # the first thread leaves while we are inside
            seen["second inside"] = wb.is_grad_enabled()
        seen["second"] = wb.is_grad_enabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert seen == {"first": True, "second inside": False, "second": True}
    assert wb.is_grad_enabled()
    x = wb.Var(wb.ones(2))
    assert (x * 3).requires_grad


def test_a_new_thread_starts_with_grad_enabled_even_under_no_grad():
    seen = []
    with wb.no_grad():
        t = threading.Thread(target=lambda: seen.append(wb.is_grad_enabled()))
        t.start()
        t.join(TIMEOUT)
    assert seen == [True]


def test_asyncio_tasks_have_their_own_grad_mode():
    async def main():
        inside, release = asyncio.Event(), asyncio.Event()

        async def inference():
            with wb.no_grad():
                inside.set()
                await release.wait()
                return (wb.Var(wb.ones(2)) * 2).requires_grad

        async def training():
            await inside.wait()
            out = (wb.Var(wb.ones(2)) * 2).requires_grad
            release.set()
            return out

        return await asyncio.gather(inference(), training())

    assert asyncio.run(main()) == [False, True]


# -- the profiler -------------------------------------------------------------------------------
def _work(n: int = 3):
    x = wb.ones(4)
    for _ in range(n):
        x = x.exp()
    return x


def _busy_thread(n_ops: int):
    """Runs ``n_ops`` exps while the test's block is open."""

    def fn(inside, release):
        _work(n_ops)
        inside.set()
        assert release.wait(TIMEOUT)
        _work(n_ops)

    return fn


def test_a_profile_records_only_its_own_threads_ops():
    with wb.profile() as p:
        with Background(_busy_thread(50)):
            _work(3)
    exps = [e for e in p.events if e.name == "exp"]
    assert len(exps) == 3
    assert {e.thread for e in p.events} == {threading.get_ident()}
    assert all(0 <= e.self_ns <= e.duration_ns for e in p.events)


def test_overlapping_profiles_in_two_threads_end_cleanly():
    def profiled(inside, release):
        with wb.profile() as mine:
            _work(5)
            inside.set()
            assert release.wait(TIMEOUT)
        return mine

    with wb.profile() as outer_main:
        bg = Background(profiled)
        bg.__enter__()
        _work(2)
    bg.__exit__(None, None, None)  # the thread's profile ends after the main one
    assert HOOK.active is None and current_profile() is None
    with wb.profile() as later:
        _work(1)
    _work(4)  # no profile: recorded nowhere
    assert [e.name for e in outer_main.events].count("exp") == 2
    assert [e.name for e in bg.result.events].count("exp") == 5
    assert [e.name for e in later.events].count("exp") == 1


def test_all_threads_profile_tags_events_with_threads_and_gives_each_a_track(tmp_path):
    with wb.profile(all_threads=True) as p:
        with Background(_busy_thread(4)) as bg:
            _work(2)
    worker = bg.thread.ident
    main = threading.get_ident()
    by_thread = {t: [e.name for e in p.events if e.thread == t] for t in (main, worker)}
    assert by_thread[main].count("exp") == 2
    assert by_thread[worker].count("exp") == 4 + 4
    assert p.threads[worker] == bg.thread.name
    trace = json.loads(p.export_chrome_trace(tmp_path / "t.json").read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in trace if e["ph"] == "M"}
    assert sorted(names.values()) == sorted([threading.current_thread().name, bg.thread.name])
    tracks = {e["tid"] for e in trace if e["ph"] == "X"}
    assert tracks == set(names)
    assert all(e["args"]["device"] == "cpu" for e in trace if e["ph"] == "X")


def test_a_threads_own_profile_wins_over_an_all_threads_one():
    def own(inside, release):
        with wb.profile() as mine:
            _work(3)
            inside.set()
            assert release.wait(TIMEOUT)
        return mine

    with wb.profile(all_threads=True) as everything:
        with Background(own) as bg:
            _work(1)
    assert [e.name for e in everything.events].count("exp") == 1
    assert [e.name for e in bg.result.events].count("exp") == 3


def test_asyncio_tasks_profile_separately():
    async def main():
        a_in, b_in, a_done = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def a():
            with wb.profile() as p:
                a_in.set()
                await b_in.wait()  # b's profile is open while a works
                _work(2)
                a_done.set()
            return p

        async def b():
            await a_in.wait()
            with wb.profile() as p:
                b_in.set()
                await a_done.wait()
                _work(5)
            return p

        return await asyncio.gather(a(), b())

    pa, pb = asyncio.run(main())
    assert [e.name for e in pa.events].count("exp") == 2
    assert [e.name for e in pb.events].count("exp") == 5


# -- the random generator -----------------------------------------------------------------------
def _reference_normal(seed: int, n: int) -> np.ndarray:
    return np.random.Generator(np.random.PCG64(seed)).standard_normal(n).astype(np.float32)


def test_a_generator_entered_per_thread_gives_each_thread_its_own_stream():
    def draw(inside, release):
        with wb.Generator(7):
            first = wb.randn(4).numpy()
            inside.set()
            assert release.wait(TIMEOUT)
            return np.concatenate([first, wb.randn(4).numpy()])

    with wb.Generator(3):
        with Background(draw) as bg:
            mine = np.concatenate([wb.randn(4).numpy(), wb.randn(4).numpy()])
    np.testing.assert_array_equal(mine, _reference_normal(3, 8))
    np.testing.assert_array_equal(bg.result, _reference_normal(7, 8))


def test_manual_seed_is_process_wide_and_generator_blocks_do_not_consume_it():
    wb.manual_seed(11)
    with wb.Generator(5):
        wb.rand(10)
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join(TIMEOUT)
    np.testing.assert_array_equal(wb.randn(6).numpy(), _reference_normal(11, 6))


def test_generator_blocks_reach_ops_outside_creation():
    """dropout draws from the context's generator too (its mask: uniform >= p, kept scaled)."""
    with wb.Generator(0):
        out = wb.nn.functional.dropout(wb.ones(64), 0.5).numpy()
    keep = np.random.Generator(np.random.PCG64(0)).random(64, dtype=np.float32) >= 0.5
    np.testing.assert_array_equal(out, np.where(keep, 2.0, 0.0).astype(np.float32))
